//! Bonfire's warmup algorithms: which regions to pre-load into a restarted
//! cache, chosen from the requests seen before the restart.
//!
//! * **Last-K**: the K most recently accessed regions.
//! * **First-K**: the K regions accessed first in the same period of the
//!   previous day (for a restart at the start of a day: the first regions of
//!   the previous day).
//! * **Top-K**: the K most frequently accessed regions.
//!
//! A region is `region_blocks` consecutive blocks (Bonfire compares 4 KB and
//! 1 MB); a chosen region is pre-loaded whole, and K is the warmup budget
//! divided by the region size. Each function returns blocks most important
//! first, so a budget cut or an LRU insertion order can follow it.

use std::fmt;
use std::str::FromStr;

use hearth_core::key_map;
use serde::Serialize;

use crate::WarmupError;

/// How a cache starts a period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Empty; warmed on demand.
    Cold,
    LastK,
    FirstK,
    TopK,
    /// Never restarted: the reference the others converge to.
    AlwaysWarm,
}

impl Method {
    pub const ALL: [Method; 5] = [Method::Cold, Method::LastK, Method::FirstK, Method::TopK, Method::AlwaysWarm];

    pub fn name(self) -> &'static str {
        match self {
            Method::Cold => "cold",
            Method::LastK => "last-k",
            Method::FirstK => "first-k",
            Method::TopK => "top-k",
            Method::AlwaysWarm => "always-warm",
        }
    }

    /// Whether the method pre-loads chosen regions (and so has a region size).
    pub fn preloads(self) -> bool {
        matches!(self, Method::LastK | Method::FirstK | Method::TopK)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = WarmupError;
    fn from_str(s: &str) -> Result<Method, WarmupError> {
        let lower = s.to_ascii_lowercase().replace('_', "-");
        Method::ALL.into_iter().find(|m| m.name() == lower).ok_or_else(|| {
            let names: Vec<_> = Method::ALL.iter().map(|m| m.name()).collect();
            WarmupError::UnknownMethod { name: s.to_string(), known: names.join(", ") }
        })
    }
}

/// Blocks to pre-load for `method` given the `history` (block numbers in
/// request order, oldest first) of the period before the restart, at most
/// `budget_blocks` blocks in whole regions of `region_blocks`. Most
/// important first. Cold and always-warm pre-load nothing.
pub fn select(method: Method, history: &[u64], region_blocks: u64, budget_blocks: u64) -> Vec<u64> {
    assert!(region_blocks > 0, "region size must be at least one block");
    let k = (budget_blocks / region_blocks) as usize;
    if k == 0 {
        return Vec::new();
    }
    let regions = match method {
        Method::Cold | Method::AlwaysWarm => return Vec::new(),
        Method::LastK => first_distinct(history.iter().rev(), region_blocks, k),
        Method::FirstK => first_distinct(history.iter(), region_blocks, k),
        Method::TopK => most_frequent(history, region_blocks, k),
    };
    regions.into_iter().flat_map(|r| r * region_blocks..(r + 1) * region_blocks).collect()
}

/// The first `k` distinct regions in iteration order.
fn first_distinct<'a>(blocks: impl Iterator<Item = &'a u64>, region_blocks: u64, k: usize) -> Vec<u64> {
    let mut seen = key_map::<()>(k.min(1 << 20));
    let mut out = Vec::with_capacity(k.min(1 << 20));
    for &b in blocks {
        let region = b / region_blocks;
        if seen.insert(region, ()).is_none() {
            out.push(region);
            if out.len() == k {
                break;
            }
        }
    }
    out
}

/// The `k` regions with the most accesses; ties go to the more recently
/// accessed region (it is likelier to be in an LRU cache too).
fn most_frequent(history: &[u64], region_blocks: u64, k: usize) -> Vec<u64> {
    // region -> (count, last position)
    let mut counts = key_map::<(u64, usize)>(history.len() / 4);
    for (i, &b) in history.iter().enumerate() {
        let e = counts.entry(b / region_blocks).or_insert((0, 0));
        e.0 += 1;
        e.1 = i;
    }
    let mut ranked: Vec<(u64, (u64, usize))> = counts.into_iter().collect();
    ranked.sort_unstable_by_key(|&(_, rank)| std::cmp::Reverse(rank));
    ranked.into_iter().take(k).map(|(region, _)| region).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Blocks of 4 per region: 0-3 region 0, 4-7 region 1, ...
    const HISTORY: [u64; 9] = [9, 0, 1, 5, 9, 2, 13, 0, 6];

    #[test]
    fn last_k_takes_the_newest_distinct_regions() {
        // Newest first: 6 (r1), 0 (r0), 13 (r3), ...
        assert_eq!(select(Method::LastK, &HISTORY, 1, 3), vec![6, 0, 13]);
        assert_eq!(select(Method::LastK, &HISTORY, 4, 8), vec![4, 5, 6, 7, 0, 1, 2, 3]);
    }

    #[test]
    fn first_k_takes_the_oldest_distinct_regions() {
        assert_eq!(select(Method::FirstK, &HISTORY, 1, 3), vec![9, 0, 1]);
        // Regions in first-access order: r2 (9), r0 (0), r1 (5); budget 9 blocks = 2 regions.
        assert_eq!(select(Method::FirstK, &HISTORY, 4, 9), vec![8, 9, 10, 11, 0, 1, 2, 3]);
    }

    #[test]
    fn top_k_ranks_by_count_then_recency() {
        // Blocks: 9 and 0 twice each; 0 was accessed later, so it ranks first.
        assert_eq!(select(Method::TopK, &HISTORY, 1, 2), vec![0, 9]);
        // Regions: r0 {0,1,2,0} = 4, r1 {5,6} = 2, r2 {9,9} = 2 (r1 newer), r3 = 1.
        assert_eq!(select(Method::TopK, &HISTORY, 4, 12), (0..12).collect::<Vec<_>>());
    }

    #[test]
    fn baselines_and_tiny_budgets_preload_nothing() {
        assert!(select(Method::Cold, &HISTORY, 1, 100).is_empty());
        assert!(select(Method::AlwaysWarm, &HISTORY, 1, 100).is_empty());
        assert!(select(Method::LastK, &HISTORY, 4, 3).is_empty());
        assert_eq!("First-K".parse::<Method>().unwrap(), Method::FirstK);
        assert!("hot".parse::<Method>().unwrap_err().to_string().contains("last-k"));
    }
}

//! Bonfire's trace analysis: how long after its previous access a block is
//! re-accessed, how far apart in distinct data, when in the day, and whether
//! re-accesses cluster spatially. It tells which warmup heuristic can work:
//! hourly re-accesses favour Last-K, daily ones First-K, and clustering
//! favours large regions.
//!
//! Categories of a re-access, by time since the block's previous access:
//! *hourly* (< 1 h), *daily* (23 h to 25 h) and *other*.

use hearth_core::{key_map, Access, Op, NEVER};
use serde::Serialize;

use crate::sim::TimedAccess;

const HOUR_NS: u64 = 3_600_000_000_000;
pub const CATEGORIES: [&str; 3] = ["hourly (<1h)", "daily (23-25h)", "other"];
/// Upper bounds of the reuse-distance groups, in bytes (the last is unbounded).
const GROUP_BOUNDS: [u64; 3] = [10 << 20, 100 << 20, 1 << 30];
pub const GROUPS: [&str; 4] = ["< 10 MiB", "10-100 MiB", "100 MiB-1 GiB", "> 1 GiB"];
/// Buckets of the per-region re-accessed fraction: [0,10%), ..., [90%,100%].
pub const FRACTION_BUCKETS: usize = 10;

#[derive(Clone, Debug, Serialize)]
pub struct ReaccessReport {
    pub accesses: u64,
    pub block_size: u32,
    pub region_bytes: u64,
    /// Time from the first to the last access.
    pub span_ns: u64,
    /// Re-accesses per category (see [`CATEGORIES`]).
    pub reaccesses: [u64; 3],
    /// Daily re-accesses by hour of day of the re-access (trace clock).
    pub daily_by_hour: [u64; 24],
    /// Per category, re-accesses per reuse-distance group (see [`GROUPS`]):
    /// distinct bytes accessed between the two uses.
    pub reuse_groups: [[u64; 4]; 3],
    /// Per category, regions by the fraction of their blocks re-accessed in
    /// that category (10 buckets of 10%), over regions with at least one.
    pub clustering: [[u64; FRACTION_BUCKETS]; 3],
    /// Per category, mean of that fraction over the same regions.
    pub mean_fraction: [f64; 3],
}

fn category(gap_ns: u64) -> usize {
    if gap_ns < HOUR_NS {
        0
    } else if (23 * HOUR_NS..=25 * HOUR_NS).contains(&gap_ns) {
        1
    } else {
        2
    }
}

/// Analyses block accesses in time order. `region_bytes` must be a multiple of `block_size`.
pub fn analyze(trace: &[TimedAccess], block_size: u32, region_bytes: u64) -> ReaccessReport {
    assert!(block_size > 0 && region_bytes >= u64::from(block_size), "region must hold at least one block");
    let region_blocks = region_bytes / u64::from(block_size);
    let mut r = ReaccessReport {
        accesses: trace.len() as u64,
        block_size,
        region_bytes,
        span_ns: trace.last().zip(trace.first()).map_or(0, |(l, f)| l.time_ns.saturating_sub(f.time_ns)),
        reaccesses: [0; 3],
        daily_by_hour: [0; 24],
        reuse_groups: [[0; 4]; 3],
        clustering: [[0; FRACTION_BUCKETS]; 3],
        mean_fraction: [0.0; 3],
    };
    let as_access: Vec<Access> = trace
        .iter()
        .enumerate()
        .map(|(i, a)| Access {
            key: a.block,
            size: block_size,
            vtime: i as u64,
            next_access: NEVER,
            op: Op::Read,
            ctx: 0,
        })
        .collect();
    // Blocks re-accessed per category: (category, block) -> (), then counted per region.
    let mut reaccessed = [key_map::<()>(0), key_map::<()>(0), key_map::<()>(0)];
    let mut last_time = key_map::<u64>(trace.len() / 4);
    hearth_estimate::for_each_reuse(&as_access, |i, reuse| {
        let a = trace[i];
        let previous = last_time.insert(a.block, a.time_ns);
        let (Some((stack, _)), Some(prev)) = (reuse, previous) else { return };
        let c = category(a.time_ns.saturating_sub(prev));
        r.reaccesses[c] += 1;
        if c == 1 {
            r.daily_by_hour[((a.time_ns / HOUR_NS) % 24) as usize] += 1;
        }
        let bytes = stack.saturating_mul(u64::from(block_size));
        r.reuse_groups[c][GROUP_BOUNDS.partition_point(|&b| b <= bytes)] += 1;
        reaccessed[c].insert(a.block, ());
    });
    for (c, blocks) in reaccessed.iter().enumerate() {
        let mut per_region = key_map::<u64>(blocks.len() / 4);
        for &b in blocks.keys() {
            *per_region.entry(b / region_blocks).or_insert(0) += 1;
        }
        let mut sum = 0.0;
        for &n in per_region.values() {
            let fraction = n as f64 / region_blocks as f64;
            sum += fraction;
            r.clustering[c][((fraction * FRACTION_BUCKETS as f64) as usize).min(FRACTION_BUCKETS - 1)] += 1;
        }
        r.mean_fraction[c] = if per_region.is_empty() { 0.0 } else { sum / per_region.len() as f64 };
    }
    r
}

impl ReaccessReport {
    pub fn total_reaccesses(&self) -> u64 {
        self.reaccesses.iter().sum()
    }

    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let total = self.total_reaccesses();
        let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
        let _ = writeln!(
            s,
            "re-accesses       {} of {} accesses ({:.1}%), trace spans {:.2} h",
            total,
            self.accesses,
            pct(total, self.accesses),
            self.span_ns as f64 / HOUR_NS as f64
        );
        for (c, name) in CATEGORIES.iter().enumerate() {
            let _ = writeln!(s, "  {name:<16} {:>10} {:5.1}%", self.reaccesses[c], pct(self.reaccesses[c], total));
        }
        if self.span_ns < 23 * HOUR_NS {
            let _ = writeln!(s, "  (the trace spans less than 23 h, so it cannot show daily re-accesses)");
        }
        let _ = writeln!(s, "\nreuse distance (distinct bytes between uses), % of each category:");
        let _ = writeln!(s, "  {:<16} {}", "", GROUPS.map(|g| format!("{g:>14}")).join(""));
        for (c, name) in CATEGORIES.iter().enumerate() {
            let row: String =
                self.reuse_groups[c].iter().map(|&n| format!("{:>13.1}%", pct(n, self.reaccesses[c]))).collect();
            let _ = writeln!(s, "  {name:<16} {row}");
        }
        if self.reaccesses[1] > 0 {
            let _ = writeln!(s, "\ndaily re-accesses by hour of day (trace clock):");
            for (h, &n) in self.daily_by_hour.iter().enumerate() {
                let _ = writeln!(s, "  {h:02}h {n:>10} {:5.1}%", pct(n, self.reaccesses[1]));
            }
        }
        let _ = writeln!(
            s,
            "\nspatial clustering: per {} region with re-accesses, mean share of its {}-byte blocks re-accessed",
            hearth_core::format_bytes(self.region_bytes),
            self.block_size
        );
        for (c, name) in CATEGORIES.iter().enumerate() {
            let regions: u64 = self.clustering[c].iter().sum();
            let dense: u64 = self.clustering[c][5..].iter().sum();
            let _ = writeln!(
                s,
                "  {name:<16} {:5.1}% over {regions} regions; {:.1}% of them have >= 50% re-accessed",
                100.0 * self.mean_fraction[c],
                pct(dense, regions)
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = HOUR_NS;

    #[test]
    fn categorises_gaps_distances_hours_and_regions() {
        let at = |t: u64, block: u64| TimedAccess { time_ns: t, block };
        // Blocks of 4 KiB, regions of 4 blocks (16 KiB).
        let trace = [
            at(0, 0),
            at(1, 1),
            at(2, 2),
            at(10 * 60 * 1_000_000_000, 0), // hourly, 2 distinct blocks (8 KiB) between
            at(24 * H + 5, 1),              // daily (24 h after t=1), at hour 0
            at(50 * H, 2),                  // other (50 h)
            at(57 * H, 1),                  // other (33 h after its daily re-access)
        ];
        let r = analyze(&trace, 4096, 16384);
        assert_eq!(r.reaccesses, [1, 1, 2]);
        assert_eq!(r.daily_by_hour[0], 1);
        assert_eq!(r.reuse_groups[0], [1, 0, 0, 0]);
        // Region 0 holds blocks 0..4: hourly re-accessed {0} = 1/4, daily {1} = 1/4, other {1,2} = 2/4.
        assert_eq!(r.mean_fraction, [0.25, 0.25, 0.5]);
        assert_eq!(r.clustering[2][5], 1);
        assert!(r.render_text().contains("daily (23-25h)"));
    }

    #[test]
    fn reuse_distance_groups_use_distinct_bytes() {
        // 3000 distinct 4 KiB blocks (~11.7 MiB) between two uses of block 0.
        let mut trace = vec![TimedAccess { time_ns: 0, block: 0 }];
        trace.extend((1..=3000).map(|b| TimedAccess { time_ns: b, block: b }));
        trace.push(TimedAccess { time_ns: 5000, block: 0 });
        let r = analyze(&trace, 4096, 1 << 20);
        assert_eq!(r.reuse_groups[0], [0, 1, 0, 0]);
    }
}

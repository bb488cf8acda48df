//! C-Miner*: block correlations mined offline from a training part of a
//! trace, as closed frequent sequences (CloSpan-style), turned into rules
//! `a -> b` and `a b -> c`.
//!
//! The training stream is cut into segments; a pattern's support is the
//! number of segments holding it as a subsequence whose consecutive items
//! are at most `max_gap` positions apart. Patterns are mined apriori-style
//! up to length 3 (the longest rule needs three blocks): frequent pairs
//! first, then triples whose two pairs are frequent. A pattern is *closed*
//! when no frequent pattern one item longer contains it with the same
//! support; closure is reported for pairs (triples are the longest mined).
//! Rules need `min_confidence`; `a b -> c` is dropped as redundant when
//! `a -> c` or `b -> c` already predicts `c` at least as confidently.
//!
//! Online, on a miss or promote of `b` after `a`, the prefetcher issues the
//! most confident suffixes of `a b` then of `b`.

use hearth_core::Key;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::{is_trigger, Demand, Prefetcher};

#[derive(Clone, Debug)]
pub struct Config {
    /// Accesses per segment.
    pub segment: usize,
    pub max_gap: usize,
    pub min_support: u32,
    pub min_confidence: f64,
}

/// Sizes of what was mined.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MineStats {
    pub frequent_pairs: usize,
    pub closed_pairs: usize,
    pub frequent_triples: usize,
    pub single_rules: usize,
    pub double_rules: usize,
}

/// Mined rules: suffixes sorted by confidence, most confident first.
#[derive(Default)]
pub struct Rules {
    pub single: FxHashMap<Key, Vec<(Key, f32)>>,
    pub double: FxHashMap<(Key, Key), Vec<(Key, f32)>>,
    pub stats: MineStats,
}

impl Rules {
    pub fn len(&self) -> usize {
        self.stats.single_rules + self.stats.double_rules
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Counts each distinct pattern once per segment.
fn count_once<T: std::hash::Hash + Eq + Copy>(seen: &mut FxHashSet<T>, counts: &mut FxHashMap<T, u32>, p: T) {
    if seen.insert(p) {
        *counts.entry(p).or_insert(0) += 1;
    }
}

/// Mines `segments` (each one sequence of blocks).
pub fn mine<'a>(segments: impl Iterator<Item = &'a [Key]> + Clone, cfg: &Config) -> Rules {
    let gap = cfg.max_gap.max(1);
    let mut items: FxHashMap<Key, u32> = FxHashMap::default();
    let mut pairs: FxHashMap<(Key, Key), u32> = FxHashMap::default();
    let (mut seen_items, mut seen_pairs) = (FxHashSet::default(), FxHashSet::default());
    for s in segments.clone() {
        seen_items.clear();
        seen_pairs.clear();
        for (i, &a) in s.iter().enumerate() {
            count_once(&mut seen_items, &mut items, a);
            for &b in s.iter().skip(i + 1).take(gap) {
                if a != b {
                    count_once(&mut seen_pairs, &mut pairs, (a, b));
                }
            }
        }
    }
    pairs.retain(|_, n| *n >= cfg.min_support);
    let mut triples: FxHashMap<(Key, Key, Key), u32> = FxHashMap::default();
    let mut seen_triples = FxHashSet::default();
    for s in segments {
        seen_triples.clear();
        for i in 0..s.len() {
            for j in i + 1..(i + 1 + gap).min(s.len()) {
                let (a, b) = (s[i], s[j]);
                if !pairs.contains_key(&(a, b)) {
                    continue;
                }
                for &c in s.iter().skip(j + 1).take(gap) {
                    if c != a && c != b && pairs.contains_key(&(b, c)) {
                        count_once(&mut seen_triples, &mut triples, (a, b, c));
                    }
                }
            }
        }
    }
    triples.retain(|_, n| *n >= cfg.min_support);

    let mut stats = MineStats { frequent_pairs: pairs.len(), frequent_triples: triples.len(), ..MineStats::default() };
    let mut not_closed: FxHashSet<(Key, Key)> = FxHashSet::default();
    for (&(a, b, c), &n) in &triples {
        for sub in [(a, b), (a, c), (b, c)] {
            if pairs.get(&sub) == Some(&n) {
                not_closed.insert(sub);
            }
        }
    }
    stats.closed_pairs = pairs.len() - not_closed.len();

    let mut rules = Rules::default();
    let conf = |n: u32, of: u32| n as f64 / of.max(1) as f64;
    for (&(a, b), &n) in &pairs {
        let c = conf(n, items[&a]);
        if c >= cfg.min_confidence {
            rules.single.entry(a).or_default().push((b, c as f32));
            stats.single_rules += 1;
        }
    }
    let single_conf = |rules: &Rules, a: Key, c: Key| {
        rules.single.get(&a).and_then(|v| v.iter().find(|s| s.0 == c)).map_or(0.0, |s| f64::from(s.1))
    };
    let mut doubles = Vec::new();
    for (&(a, b, c), &n) in &triples {
        let confidence = conf(n, pairs[&(a, b)]);
        let redundant = single_conf(&rules, a, c).max(single_conf(&rules, b, c)) >= confidence;
        if confidence >= cfg.min_confidence && !redundant {
            doubles.push(((a, b), (c, confidence as f32)));
        }
    }
    for (prefix, suffix) in doubles {
        rules.double.entry(prefix).or_default().push(suffix);
        stats.double_rules += 1;
    }
    let by_confidence = |v: &mut Vec<(Key, f32)>| v.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    rules.single.values_mut().for_each(by_confidence);
    rules.double.values_mut().for_each(by_confidence);
    rules.stats = stats;
    rules
}

pub struct CMiner {
    rules: Rules,
    degree: usize,
    prev: Option<Key>,
}

impl CMiner {
    pub fn new(rules: Rules, degree: usize) -> Self {
        CMiner { rules, degree, prev: None }
    }
}

impl Prefetcher for CMiner {
    fn name(&self) -> String {
        "C-Miner*".into()
    }
    fn access(&mut self, d: &Demand, cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        let prev = self.prev.replace(d.block);
        if !is_trigger(d.class) {
            return;
        }
        let double = prev.and_then(|a| self.rules.double.get(&(a, d.block)));
        let single = self.rules.single.get(&d.block);
        let start = out.len();
        for &(c, _) in double.into_iter().flatten().chain(single.into_iter().flatten()) {
            if out.len() - start == self.degree {
                break;
            }
            if !cached(c) && !out[start..].contains(&c) {
                out.push(c);
            }
        }
    }
    fn rule_count(&self) -> usize {
        self.rules.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supports_closure_and_rules_by_hand() {
        // Segments (gap 2): "1 2 3" three times, "1 2 9" once, "5 1" once.
        let segs: Vec<Vec<Key>> = vec![vec![1, 2, 3], vec![1, 2, 3], vec![1, 2, 3], vec![1, 2, 9], vec![5, 1]];
        let cfg = Config { segment: 3, max_gap: 2, min_support: 2, min_confidence: 0.5 };
        let r = mine(segs.iter().map(|s| s.as_slice()), &cfg);
        // Frequent pairs: 12 (4), 13 (3), 23 (3); 19, 29, 51 have support 1.
        // Triple 123 (3) is frequent; it has 13 and 23's support, so those
        // are not closed; 12 (4) is.
        assert_eq!(
            r.stats,
            MineStats { frequent_pairs: 3, closed_pairs: 1, frequent_triples: 1, single_rules: 3, double_rules: 0 }
        );
        // 1->2 conf 4/5, 1->3 3/5, 2->3 3/4. 12->3 has conf 3/4, no better
        // than 2->3, so it is redundant.
        assert_eq!(r.single[&1], vec![(2, 0.8), (3, 0.6)]);
        assert_eq!(r.single[&2], vec![(3, 0.75)]);
        assert!(r.double.is_empty());
    }

    #[test]
    fn a_two_block_prefix_beats_one_block_when_it_disambiguates() {
        // After 7, 8 and 9 are equally likely; after 6 7 it is always 8.
        let segs: Vec<Vec<Key>> = vec![vec![6, 7, 8], vec![6, 7, 8], vec![5, 7, 9], vec![5, 7, 9]];
        let cfg = Config { segment: 3, max_gap: 1, min_support: 2, min_confidence: 0.5 };
        let r = mine(segs.iter().map(|s| s.as_slice()), &cfg);
        assert_eq!(r.double[&(6, 7)], vec![(8, 1.0)]);
        let mut m = CMiner::new(r, 1);
        let mut out = Vec::new();
        let d = |block| Demand { block, ctx: 0, time_ns: 0, op: hearth_core::Op::Read, class: crate::Class::Miss };
        m.access(&d(6), &|_| false, &mut out);
        out.clear();
        m.access(&d(7), &|_| false, &mut out);
        assert_eq!(out, vec![8]);
    }
}

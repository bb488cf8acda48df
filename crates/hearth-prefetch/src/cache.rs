//! The storage cache with a prefetch partition: prefetched blocks wait in
//! their own small LRU partition (at most 4% of the cache by default) until
//! a demand request promotes them into the main cache, so a bad prefetcher
//! can displace at most that share of demand-fetched data, and nothing once
//! it stops prefetching.

use std::collections::VecDeque;

use hearth_core::{Access, Key, KeyMap, Op, Policy};
use hearth_policy::Lru;
use serde::Serialize;

/// How a demand access was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Class {
    /// In the main cache.
    Hit,
    /// Not in the main cache but prefetched (arrived or in flight).
    Promote,
    /// Neither: read from the backend on demand.
    Miss,
}

/// Counters of a run; ratios are over demand accesses.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    pub accesses: u64,
    pub hits: u64,
    pub promotes: u64,
    pub misses: u64,
    /// Prefetches sent to the backend.
    pub issued: u64,
    /// Prefetched blocks later demanded (promotes).
    pub used: u64,
    /// Prefetched blocks evicted from the partition without a demand.
    pub wasted: u64,
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl Stats {
    pub fn miss_rate(&self) -> f64 {
        ratio(self.misses, self.accesses)
    }
    pub fn hit_rate(&self) -> f64 {
        ratio(self.hits, self.accesses)
    }
    pub fn promote_rate(&self) -> f64 {
        ratio(self.promotes, self.accesses)
    }
    /// Share of issued prefetches that were used.
    pub fn accuracy(&self) -> f64 {
        ratio(self.used, self.issued)
    }
    /// Share of would-be misses that prefetching turned into promotes.
    pub fn coverage(&self) -> f64 {
        ratio(self.promotes, self.promotes + self.misses)
    }
}

pub struct PrefetchCache {
    main: Box<dyn Policy>,
    partition: Lru,
    total: u64,
    block_size: u32,
    /// Demand insertions into the main cache so far: the clock that ages
    /// prefetched blocks.
    inserts: u64,
    /// Prefetched blocks in arrival order, with the clock at arrival.
    arrivals: VecDeque<(u64, Key)>,
    arrived_at: KeyMap<u64>,
    /// Blocks prefetched before [`PrefetchCache::reset_stats`]: their use or
    /// waste is not counted against later prefetches.
    carried: KeyMap<()>,
    evicted: Vec<Key>,
    /// (block, used) outcomes of prefetched blocks not yet taken.
    outcomes: Vec<(Key, bool)>,
    pub stats: Stats,
}

impl PrefetchCache {
    /// A cache of `total_bytes` run by `main_policy`, of which prefetched
    /// blocks may hold at most `prefetch_fraction` (0..1). The partition
    /// borrows its space from the main cache only while it holds blocks, so
    /// a prefetcher that stops prefetching costs the main cache nothing; a
    /// prefetched block not demanded within one turnover of the main cache
    /// (as many demand insertions as the main cache holds blocks) is
    /// dropped, as an LRU cache would have dropped it by then.
    pub fn new(main_policy: &str, total_bytes: u64, prefetch_fraction: f64, block_size: u32) -> Result<Self, String> {
        if !(0.0..1.0).contains(&prefetch_fraction) {
            return Err(format!("prefetch fraction must be in [0, 1), got {prefetch_fraction}"));
        }
        Ok(PrefetchCache {
            main: hearth_policy::build(main_policy, total_bytes)?,
            partition: Lru::new((total_bytes as f64 * prefetch_fraction) as u64),
            total: total_bytes,
            block_size,
            inserts: 0,
            arrivals: VecDeque::new(),
            arrived_at: KeyMap::default(),
            carried: KeyMap::default(),
            evicted: Vec::with_capacity(16),
            outcomes: Vec::with_capacity(16),
            stats: Stats::default(),
        })
    }

    fn access(&self, key: Key, op: Op) -> Access {
        Access { key, size: self.block_size, op, ..Access::default() }
    }

    /// Whether `key` is in the main cache or the prefetch partition.
    pub fn contains(&self, key: Key) -> bool {
        self.main.contains(key) || self.partition.contains(key)
    }

    /// Bytes held by prefetched, not yet demanded blocks.
    pub fn prefetched_bytes(&self) -> u64 {
        self.partition.occupancy()
    }

    /// Bytes held in all.
    pub fn occupancy(&self) -> u64 {
        self.main.occupancy() + self.partition.occupancy()
    }

    /// Records the outcome of prefetched block `key` leaving the partition.
    fn settle(&mut self, key: Key, used: bool) {
        self.arrived_at.remove(&key);
        if self.carried.remove(&key).is_some() {
            return;
        }
        if used {
            self.stats.used += 1;
        } else {
            self.stats.wasted += 1;
        }
        self.outcomes.push((key, used));
    }

    /// Evicts from the main cache until `extra` more bytes fit in the total.
    fn make_room(&mut self, extra: u64, now: &Access) {
        while self.occupancy() + extra > self.total {
            if self.main.evict(now).is_none() {
                break;
            }
        }
    }

    /// Drops prefetched blocks older than one main-cache turnover.
    fn age_out(&mut self) {
        let horizon = self.main.len().max(1) as u64;
        while let Some(&(at, key)) = self.arrivals.front() {
            if self.inserts - at <= horizon {
                break;
            }
            self.arrivals.pop_front();
            // Skip entries of blocks that left (or were prefetched again).
            if self.arrived_at.get(&key) == Some(&at) && self.partition.remove(key) {
                self.settle(key, false);
            }
        }
    }

    /// A demand access: classifies it and updates both parts.
    pub fn demand(&mut self, key: Key, op: Op) -> Class {
        let a = self.access(key, op);
        self.stats.accesses += 1;
        if self.main.lookup(&a) {
            self.stats.hits += 1;
            return Class::Hit;
        }
        let class = if self.partition.remove(key) {
            self.stats.promotes += 1;
            self.settle(key, true);
            Class::Promote
        } else {
            self.stats.misses += 1;
            Class::Miss
        };
        if u64::from(self.block_size) <= self.total {
            self.make_room(u64::from(self.block_size), &a);
            self.evicted.clear();
            self.main.insert(&a, &mut self.evicted);
            self.inserts += 1;
            self.age_out();
        }
        class
    }

    /// Prefetches `key` unless it is cached or the partition has no room at
    /// all; returns whether a backend read was issued.
    pub fn prefetch(&mut self, key: Key) -> bool {
        if self.contains(key) || u64::from(self.block_size) > self.partition.capacity() {
            return false;
        }
        let a = self.access(key, Op::Read);
        self.evicted.clear();
        self.partition.insert(&a, &mut self.evicted);
        let evicted = std::mem::take(&mut self.evicted);
        for &k in &evicted {
            self.settle(k, false);
        }
        self.evicted = evicted;
        self.make_room(0, &a);
        self.arrived_at.insert(key, self.inserts);
        self.arrivals.push_back((self.inserts, key));
        self.stats.issued += 1;
        true
    }

    /// Hands every pending (block, used) outcome to `f`.
    pub fn drain_outcomes(&mut self, mut f: impl FnMut(Key, bool)) {
        for (k, used) in self.outcomes.drain(..) {
            f(k, used);
        }
    }

    /// Clears the counters (end of warm-up); cache contents stay, and blocks
    /// prefetched so far no longer count as used or wasted.
    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
        self.carried = self.arrived_at.keys().map(|&k| (k, ())).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_share_limit_and_ageing() {
        // 10 blocks; prefetched blocks may hold 2 (20%).
        let mut c = PrefetchCache::new("lru", 10, 0.2, 1).unwrap();
        assert_eq!(c.demand(1, Op::Read), Class::Miss);
        assert_eq!(c.demand(1, Op::Read), Class::Hit);
        assert!(c.prefetch(2));
        assert!(!c.prefetch(2), "already in flight");
        assert!(!c.prefetch(1), "already cached");
        assert!(c.prefetch(3));
        // A third prefetch evicts the oldest unused one (2) from the share.
        assert!(c.prefetch(4));
        assert_eq!(c.prefetched_bytes(), 2);
        assert_eq!(c.demand(2, Op::Read), Class::Miss);
        assert_eq!(c.demand(3, Op::Read), Class::Promote);
        assert_eq!(c.demand(3, Op::Read), Class::Hit, "promoted into the main cache");
        let mut outcomes = Vec::new();
        c.drain_outcomes(|k, used| outcomes.push((k, used)));
        assert_eq!(outcomes, vec![(2, false), (3, true)]);
        let s = &c.stats;
        assert_eq!((s.accesses, s.hits, s.promotes, s.misses), (5, 2, 1, 2));
        assert_eq!((s.issued, s.used, s.wasted), (3, 1, 1));

        // Without prefetched blocks the main cache uses all 10 blocks...
        let mut plain = PrefetchCache::new("lru", 10, 0.2, 1).unwrap();
        for k in 0..10 {
            plain.demand(k, Op::Read);
        }
        assert!((0..10).all(|k| plain.contains(k)));
        // ...and a prefetch borrows one block from it (LRU victim 0).
        assert!(plain.prefetch(100));
        assert!(!plain.contains(0) && plain.occupancy() == 10);
        // Unused for more than one turnover (9 main blocks) it is dropped,
        // returning the space.
        for k in 200..210 {
            plain.demand(k, Op::Read);
        }
        assert!(!plain.contains(100));
        assert_eq!(plain.stats.wasted, 1);
    }

    #[test]
    fn warm_up_prefetches_are_not_counted_after_a_reset() {
        let mut c = PrefetchCache::new("lru", 100, 0.1, 1).unwrap();
        c.prefetch(7);
        c.reset_stats();
        assert_eq!(c.demand(7, Op::Read), Class::Promote);
        assert_eq!((c.stats.promotes, c.stats.used, c.stats.issued), (1, 0, 0));
    }
}

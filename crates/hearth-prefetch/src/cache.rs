//! The storage cache with a prefetch partition: prefetched blocks wait in
//! their own small LRU partition (default 4% of the cache) until a demand
//! request promotes them into the main cache, so a bad prefetcher can only
//! evict other prefetched blocks, never demand-fetched ones.

use hearth_core::{Access, Key, Op, Policy};
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
    block_size: u32,
    evicted: Vec<Key>,
    /// (block, used) outcomes of prefetched blocks not yet taken.
    outcomes: Vec<(Key, bool)>,
    pub stats: Stats,
}

impl PrefetchCache {
    /// A cache of `total_bytes` whose `prefetch_fraction` (0..1) is the
    /// prefetch partition and the rest a `main_policy` cache.
    pub fn new(main_policy: &str, total_bytes: u64, prefetch_fraction: f64, block_size: u32) -> Result<Self, String> {
        if !(0.0..1.0).contains(&prefetch_fraction) {
            return Err(format!("prefetch fraction must be in [0, 1), got {prefetch_fraction}"));
        }
        let partition_bytes = (total_bytes as f64 * prefetch_fraction) as u64;
        Ok(PrefetchCache {
            main: hearth_policy::build(main_policy, total_bytes - partition_bytes)?,
            partition: Lru::new(partition_bytes),
            block_size,
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
            self.stats.used += 1;
            self.outcomes.push((key, true));
            Class::Promote
        } else {
            self.stats.misses += 1;
            Class::Miss
        };
        if u64::from(self.block_size) <= self.main.capacity() {
            self.evicted.clear();
            self.main.insert(&a, &mut self.evicted);
        }
        class
    }

    /// Prefetches `key` unless it is cached or the partition has no room at
    /// all; returns whether a backend read was issued.
    pub fn prefetch(&mut self, key: Key) -> bool {
        if self.contains(key) || u64::from(self.block_size) > self.partition.capacity() {
            return false;
        }
        self.evicted.clear();
        let a = self.access(key, Op::Read);
        self.partition.insert(&a, &mut self.evicted);
        for &k in &self.evicted {
            self.outcomes.push((k, false));
        }
        self.stats.wasted += self.evicted.len() as u64;
        self.stats.issued += 1;
        true
    }

    /// Hands every pending (block, used) outcome to `f`.
    pub fn drain_outcomes(&mut self, mut f: impl FnMut(Key, bool)) {
        for (k, used) in self.outcomes.drain(..) {
            f(k, used);
        }
    }

    /// Clears the counters (end of warm-up); cache contents stay.
    pub fn reset_stats(&mut self) {
        self.stats = Stats::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_partition_isolation() {
        // 10 blocks: 9 main (LRU), 1 prefetch slot (10%).
        let mut c = PrefetchCache::new("lru", 10, 0.1, 1).unwrap();
        assert_eq!(c.demand(1, Op::Read), Class::Miss);
        assert_eq!(c.demand(1, Op::Read), Class::Hit);
        assert!(c.prefetch(2));
        assert!(!c.prefetch(2), "already in flight");
        assert!(!c.prefetch(1), "already cached");
        // A second prefetch evicts the unused first one from the one slot.
        assert!(c.prefetch(3));
        assert_eq!(c.demand(2, Op::Read), Class::Miss);
        assert_eq!(c.demand(3, Op::Read), Class::Promote);
        assert_eq!(c.demand(3, Op::Read), Class::Hit, "promoted into the main cache");
        let mut outcomes = Vec::new();
        c.drain_outcomes(|k, used| outcomes.push((k, used)));
        assert_eq!(outcomes, vec![(2, false), (3, true)]);
        // Prefetches never evicted block 1 from the main cache.
        for k in 10..20 {
            c.prefetch(k);
        }
        assert_eq!(c.demand(1, Op::Read), Class::Hit);
        let s = &c.stats;
        assert_eq!((s.accesses, s.hits, s.promotes, s.misses), (6, 3, 1, 2));
        assert_eq!((s.issued, s.used), (12, 1));
        assert_eq!(s.wasted, 10, "2 and 10..=18 were evicted unused");
    }
}

//! Prefetching into the cache itself, as libCacheSim does it: a prefetched
//! object is inserted into the main policy like a demanded one (at LRU's
//! MRU end), evicting what the policy chooses, and a later demand for it is
//! a hit. This is the model of `hearth sim --prefetch`, so its miss ratios
//! can be set beside libCacheSim's `cachesim --prefetch`; `hearth prefetch
//! sim` and the server keep prefetched blocks in their own partition
//! ([`crate::cache::PrefetchCache`]) instead.
//!
//! Per request, in libCacheSim's order: the demand (lookup, insert on a
//! miss), then the prefetcher sees it with its class and answers with
//! blocks, each inserted unless cached. A prefetched object takes the size
//! the prefetcher gives ([`Prefetcher::object_size`]) or that of its last
//! demand, and in a block cache the block size. A prefetched object evicted
//! before any demand may go back to the insertion point
//! ([`Prefetcher::second_chances`]), right away, while the eviction that
//! reached it goes on.

use hearth_core::{Access, Key, KeyMap, Op, Policy, NEVER};

use crate::{Class, Demand, Prefetcher, Stats};

/// A prefetched object not demanded yet.
#[derive(Clone, Copy)]
struct Waiting {
    size: u32,
    /// Second chances it has had.
    chances: u32,
}

pub struct DirectCache {
    policy: Box<dyn Policy>,
    /// Every block's size in a block cache; `None` in an object cache.
    block_size: Option<u32>,
    /// Size of each object's last demand (object caches only).
    demanded_size: KeyMap<u32>,
    waiting: KeyMap<Waiting>,
    stats: Stats,
    out: Vec<Key>,
    evicted: Vec<Key>,
}

impl DirectCache {
    /// `policy` holds demanded and prefetched objects alike; `block_size`
    /// is every object's size in a block cache, `None` in an object cache.
    pub fn new(policy: Box<dyn Policy>, block_size: Option<u32>) -> DirectCache {
        DirectCache {
            policy,
            block_size,
            demanded_size: KeyMap::default(),
            waiting: KeyMap::default(),
            stats: Stats::default(),
            out: Vec::with_capacity(32),
            evicted: Vec::with_capacity(16),
        }
    }

    /// Counters: a promote is a hit on a prefetched object not demanded
    /// before (libCacheSim counts it as a hit); `wasted` counts prefetched
    /// objects evicted for good before any demand.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }

    /// One demand request, then the prefetches it triggers.
    pub fn request(&mut self, a: &Access, prefetcher: &mut dyn Prefetcher) -> Class {
        self.stats.accesses += 1;
        let class = if self.policy.lookup(a) {
            if self.waiting.remove(&a.key).is_some() {
                self.stats.promotes += 1;
                self.stats.used += 1;
                prefetcher.outcome(a.key, true);
                Class::Promote
            } else {
                self.stats.hits += 1;
                Class::Hit
            }
        } else {
            self.stats.misses += 1;
            if u64::from(a.size) <= self.policy.capacity() {
                self.make_room(a.size, a, prefetcher);
                self.evicted.clear();
                self.policy.insert(a, &mut self.evicted);
            }
            Class::Miss
        };
        if self.block_size.is_none() {
            self.demanded_size.insert(a.key, a.size);
        }
        if a.op != Op::Read {
            return class;
        }
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let demand = Demand { block: a.key, ctx: a.ctx, time_ns: 0, op: a.op, class };
        let policy = &self.policy;
        prefetcher.access(&demand, &|k| policy.contains(k), &mut out);
        for &key in &out {
            self.prefetch(key, a, prefetcher);
        }
        self.out = out;
        class
    }

    fn prefetch(&mut self, key: Key, now: &Access, prefetcher: &mut dyn Prefetcher) {
        let size = match self.block_size {
            Some(b) => b,
            None => prefetcher.object_size().or_else(|| self.demanded_size.get(&key).copied()).unwrap_or(1),
        };
        if self.policy.contains(key) || u64::from(size) > self.policy.capacity() {
            return;
        }
        self.make_room(size, now, prefetcher);
        let a = Access { key, size, vtime: now.vtime, next_access: NEVER, op: Op::Read, ctx: now.ctx };
        self.evicted.clear();
        self.policy.insert(&a, &mut self.evicted);
        self.waiting.insert(key, Waiting { size, chances: 0 });
        self.stats.issued += 1;
    }

    /// Evicts until `size` more bytes fit, giving prefetched objects their
    /// second chances as they come up for eviction.
    fn make_room(&mut self, size: u32, now: &Access, prefetcher: &mut dyn Prefetcher) {
        let chances = prefetcher.second_chances();
        while self.policy.occupancy() + u64::from(size) > self.policy.capacity() {
            let Some(victim) = self.policy.evict(now) else { break };
            let Some(w) = self.waiting.get_mut(&victim) else { continue };
            if w.chances < chances {
                w.chances += 1;
                let again = Access { key: victim, size: w.size, next_access: NEVER, ..*now };
                self.evicted.clear();
                self.policy.insert(&again, &mut self.evicted);
            } else {
                self.waiting.remove(&victim);
                self.stats.wasted += 1;
                prefetcher.outcome(victim, false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefetches `key + 1` on every read (of `only`, if set), into a cache
    /// that gives each prefetched block `chances` second chances.
    struct NextBlock {
        chances: u32,
        only: Option<Key>,
    }

    impl Prefetcher for NextBlock {
        fn name(&self) -> String {
            "next".into()
        }
        fn access(&mut self, d: &Demand, _: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
            if self.only.is_none_or(|k| k == d.block) {
                out.push(d.block + 1);
            }
        }
        fn second_chances(&self) -> u32 {
            self.chances
        }
    }

    fn read(key: Key, vtime: u64) -> Access {
        Access { key, size: 1, vtime, next_access: NEVER, op: Op::Read, ctx: 0 }
    }

    #[test]
    fn prefetched_objects_share_the_lru_list_and_count_as_hits() {
        let mut c = DirectCache::new(hearth_policy::build("lru", 3).unwrap(), Some(1));
        let mut p = NextBlock { chances: 0, only: None };
        assert_eq!(c.request(&read(1, 0), &mut p), Class::Miss); // holds 1, 2
        assert_eq!(c.request(&read(2, 1), &mut p), Class::Promote); // 1, 2, 3
        assert_eq!(c.request(&read(10, 2), &mut p), Class::Miss); // evicts 1 then 2 (3 unused)
        assert!(!c.policy().contains(1) && c.policy().contains(3));
        assert_eq!(c.request(&read(20, 3), &mut p), Class::Miss); // evicts 3 unused and 10
        let s = c.stats();
        assert_eq!((s.hits, s.promotes, s.misses), (0, 1, 3));
        assert_eq!((s.issued, s.used, s.wasted), (4, 1, 1));
    }

    #[test]
    fn a_second_chance_puts_an_unused_prefetch_back_at_the_mru_end() {
        let run = |chances| {
            let mut c = DirectCache::new(hearth_policy::build("lru", 3).unwrap(), Some(1));
            let mut p = NextBlock { chances, only: Some(1) };
            // LRU order 1, 2; then 1, 2, 5; then 6 pushes out 1: 2, 5, 6.
            for (t, k) in [1, 5, 6].into_iter().enumerate() {
                c.request(&read(k, t as u64), &mut p);
            }
            // 7 needs room: with a chance, 2 goes back to the MRU end and 5 goes.
            c.request(&read(7, 3), &mut p);
            let held = (c.policy().contains(2), c.policy().contains(5), c.stats().wasted);
            // 8 pushes out 6; 9 finds 2 at the LRU end again, its chance spent.
            c.request(&read(8, 4), &mut p);
            c.request(&read(9, 5), &mut p);
            (held, c.policy().contains(2), c.stats().wasted)
        };
        assert_eq!(run(1), ((true, false, 0), false, 1));
        assert_eq!(run(0), ((false, true, 1), false, 1));
    }
}

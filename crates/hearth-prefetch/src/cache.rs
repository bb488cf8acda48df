//! The storage cache with a prefetch partition: prefetched blocks wait in
//! their own small LRU partition (at most 4% of the cache by default) until
//! a demand request promotes them into the main cache, so a bad prefetcher
//! can displace at most that share of demand-fetched data, and nothing once
//! it stops prefetching.

use hearth_core::{Access, Key, Op, Policy};
use hearth_policy::PolicySpec;
use serde::Serialize;

use crate::partition::Partition;
use crate::PrefetchError;

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
    /// Misses on blocks the main cache gave up while spare prefetches held
    /// room it would have kept them in ([`Partition::displaced_miss`]).
    pub displaced: u64,
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

/// The shape of the cache a prefetcher's blocks land in.
#[derive(Clone, Debug)]
pub struct CacheShape {
    /// Main-cache policy.
    pub policy: PolicySpec,
    pub total_bytes: u64,
    /// Share of `total_bytes` prefetched blocks may hold.
    pub prefetch_fraction: f64,
    pub block_size: u32,
}

pub struct PrefetchCache {
    main: Box<dyn Policy>,
    partition: Partition,
    total: u64,
    block_size: u32,
    /// Demand insertions into the main cache so far: the clock that ages
    /// prefetched blocks.
    inserts: u64,
    evicted: Vec<Key>,
    /// Displacement misses not yet taken by [`PrefetchCache::drain_displaced`].
    displaced: Vec<Key>,
    /// Accesses, hits, promotes, misses and prefetches issued; used and
    /// wasted are the partition's.
    counts: Stats,
}

impl PrefetchCache {
    /// A cache of `total_bytes` run by `main_policy`, of which prefetched
    /// blocks may hold at most `prefetch_fraction` (0..1). The partition
    /// borrows its space from the main cache only while it holds blocks, so
    /// a prefetcher that stops prefetching costs the main cache nothing; a
    /// prefetched block not demanded within one turnover of the main cache
    /// (as many demand insertions as the main cache holds blocks) is
    /// dropped, as an LRU cache would have dropped it by then.
    pub fn new(
        main_policy: &PolicySpec,
        total_bytes: u64,
        prefetch_fraction: f64,
        block_size: u32,
    ) -> Result<Self, PrefetchError> {
        if !(0.0..1.0).contains(&prefetch_fraction) {
            return Err(PrefetchError::range(
                "prefetch fraction",
                format!("must be in [0, 1), got {prefetch_fraction}"),
            ));
        }
        Ok(PrefetchCache {
            main: main_policy.build(total_bytes),
            partition: Partition::new((total_bytes as f64 * prefetch_fraction) as u64, block_size),
            total: total_bytes,
            block_size,
            inserts: 0,
            evicted: Vec::with_capacity(16),
            displaced: Vec::new(),
            counts: Stats::default(),
        })
    }

    /// The same cache with its partition sized as the traffic goes (see
    /// [`Partition::adaptive`]): it starts at its fixed share, may grow to
    /// half of the cache, and never shrinks below where it started. Call
    /// before the first access.
    pub fn adaptive(mut self) -> Self {
        self.partition = Partition::adaptive(self.total, self.partition.limit(), self.block_size);
        self
    }

    /// The bytes the partition may hold now.
    pub fn partition_limit(&self) -> u64 {
        self.partition.limit()
    }

    /// A cache of `shape` (see [`PrefetchCache::new`]).
    pub fn with_shape(shape: &CacheShape) -> Result<Self, PrefetchError> {
        PrefetchCache::new(&shape.policy, shape.total_bytes, shape.prefetch_fraction, shape.block_size)
    }

    /// The counters of the run so far.
    pub fn stats(&self) -> Stats {
        Stats { used: self.partition.used(), wasted: self.partition.wasted(), ..self.counts.clone() }
    }

    /// Whether `key` is in the main cache or the prefetch partition.
    pub fn contains(&self, key: Key) -> bool {
        self.main.contains(key) || self.partition.contains(key)
    }

    /// Whether `key` is in the main cache or a base prefetch: what a base
    /// prefetcher counts as cached (a spare block is not, see
    /// [`crate::Prefetcher::access_tiered`]).
    pub fn contains_outside_spare(&self, key: Key) -> bool {
        self.main.contains(key) || (self.partition.contains(key) && !self.partition.is_spare(key))
    }

    /// Whether `key` waits in the partition's spare tier.
    pub fn is_spare(&self, key: Key) -> bool {
        self.partition.is_spare(key)
    }

    /// Bytes held by prefetched, not yet demanded blocks.
    pub fn prefetched_bytes(&self) -> u64 {
        self.partition.bytes()
    }

    /// Bytes held in all.
    pub fn occupancy(&self) -> u64 {
        self.main.occupancy() + self.partition.bytes()
    }

    /// Evicts from the main cache until `extra` more bytes fit in the total.
    fn make_room(&mut self, extra: u64, now: &Access) {
        while self.occupancy() + extra > self.total {
            let Some(victim) = self.main.evict(now) else { break };
            self.partition.main_evicted(victim);
        }
    }

    /// A demand access: classifies it and updates both parts.
    pub fn demand(&mut self, key: Key, op: Op) -> Class {
        let a = Access { key, size: self.block_size, op, ..Access::default() };
        self.counts.accesses += 1;
        if self.main.lookup(&a) {
            self.counts.hits += 1;
            return Class::Hit;
        }
        let class = if self.partition.take(key) {
            self.counts.promotes += 1;
            Class::Promote
        } else {
            self.counts.misses += 1;
            if self.partition.displaced_miss(key) {
                self.counts.displaced += 1;
                self.displaced.push(key);
            }
            Class::Miss
        };
        self.evicted.clear();
        self.partition.adapt(key, class == Class::Miss, &mut self.evicted);
        if u64::from(self.block_size) <= self.total {
            self.make_room(u64::from(self.block_size), &a);
            self.evicted.clear();
            self.main.insert(&a, &mut self.evicted);
            for i in 0..self.evicted.len() {
                self.partition.main_evicted(self.evicted[i]);
            }
            self.inserts += 1;
            // One turnover of the main cache as it would be without spare
            // blocks, so base prefetches age as they would with none.
            let horizon = (self.main.len() + self.partition.spare_blocks()).max(1) as u64;
            self.partition.age_out(self.inserts, horizon, &mut self.evicted);
            self.trim_ghosts();
        }
        class
    }

    /// Tells the partition how many blocks the main cache holds fewer than
    /// it would with no spare blocks: the room beside the base tier less
    /// what it holds. Called when a main cache without spare blocks would
    /// be full (after a demand insertion, or room made for a prefetch).
    fn trim_ghosts(&mut self) {
        self.partition.trim_ghosts_beside(self.total, self.main.len());
    }

    /// Prefetches `key` unless it is cached or the partition has no room at
    /// all; returns whether a backend read was issued. A block waiting in
    /// the spare tier is taken over by the base tier with no new read.
    pub fn prefetch(&mut self, key: Key) -> bool {
        if self.partition.is_spare(key) {
            self.evicted.clear();
            self.partition.land(key, self.inserts, &mut self.evicted);
            return false;
        }
        if self.contains(key) || !self.partition.has_room_for_a_block() {
            return false;
        }
        self.evicted.clear();
        self.partition.land(key, self.inserts, &mut self.evicted);
        let a = Access { key, size: self.block_size, op: Op::Read, ..Access::default() };
        self.make_room(0, &a);
        self.trim_ghosts();
        self.counts.issued += 1;
        true
    }

    /// Prefetches `key` into the partition's spare tier: only if it is not
    /// cached and the base prefetches leave room (it may push out older
    /// spare blocks, never a base one); returns whether a read was issued.
    pub fn prefetch_spare(&mut self, key: Key) -> bool {
        if self.contains(key) {
            return false;
        }
        self.evicted.clear();
        if !self.partition.land_spare(key, self.inserts, &mut self.evicted) {
            return false;
        }
        let a = Access { key, size: self.block_size, op: Op::Read, ..Access::default() };
        self.make_room(0, &a);
        self.trim_ghosts();
        self.counts.issued += 1;
        true
    }

    /// Outcomes not yet taken by [`PrefetchCache::drain_outcomes`]: read
    /// after [`PrefetchCache::demand`], those the demand caused (a promote,
    /// blocks aged out, or pushed out as an adaptive partition shrank),
    /// before any prefetch lands.
    pub fn pending_outcomes(&self) -> usize {
        self.partition.pending_outcomes()
    }

    /// Hands every pending (block, used) outcome to `f`.
    pub fn drain_outcomes(&mut self, f: impl FnMut(Key, bool)) {
        self.partition.drain_outcomes(f);
    }

    /// Hands every displacement miss not yet taken to `f`.
    pub fn drain_displaced(&mut self, f: impl FnMut(Key)) {
        self.displaced.drain(..).for_each(f);
    }

    /// Clears the counters (end of warm-up); cache contents stay, and blocks
    /// prefetched so far no longer count as used or wasted.
    pub fn reset_stats(&mut self) {
        self.counts = Stats::default();
        self.partition.forget_waiting();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lru() -> PolicySpec {
        "lru".parse().unwrap()
    }

    #[test]
    fn classes_share_limit_and_ageing() {
        // 10 blocks; prefetched blocks may hold 2 (20%).
        let mut c = PrefetchCache::new(&lru(), 10, 0.2, 1).unwrap();
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
        let s = &c.stats();
        assert_eq!((s.accesses, s.hits, s.promotes, s.misses), (5, 2, 1, 2));
        assert_eq!((s.issued, s.used, s.wasted), (3, 1, 1));

        // Without prefetched blocks the main cache uses all 10 blocks...
        let mut plain = PrefetchCache::new(&lru(), 10, 0.2, 1).unwrap();
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
        assert_eq!(plain.stats().wasted, 1);
    }

    /// The main cache's blocks a cache with no spare blocks would still
    /// hold (LRU): a miss on one is a displacement miss.
    #[test]
    fn misses_on_blocks_the_spare_room_cost_are_displacement_misses() {
        // 10 blocks, a partition of 2.
        let mut c = PrefetchCache::new(&lru(), 10, 0.2, 1).unwrap();
        (0..10).for_each(|k| _ = c.demand(k, Op::Read));
        // A spare block takes 0's room; a demand miss on 50 pushes out 1.
        assert!(c.prefetch_spare(100));
        c.demand(50, Op::Read);
        // Without the spare block, 50 would have pushed out 0 and 1 would
        // still be cached: a miss on 1 is a displacement miss.
        assert_eq!((c.demand(1, Op::Read), c.stats().displaced), (Class::Miss, 1));
        let mut displaced = Vec::new();
        c.drain_displaced(|k| displaced.push(k));
        assert_eq!(displaced, vec![1]);
        // 0 would have been pushed out all the same.
        assert_eq!((c.demand(0, Op::Read), c.stats().displaced), (Class::Miss, 1));
        // Once the spare block is used, the cache is as large as without
        // it, and its next victim (4) is one either cache gives up.
        assert_eq!(c.demand(100, Op::Read), Class::Promote);
        c.demand(60, Op::Read);
        assert!(!c.contains(4));
        assert_eq!((c.demand(4, Op::Read), c.stats().displaced), (Class::Miss, 1));
    }

    /// Spare blocks shrink the main cache, but not the turnover that ages
    /// base prefetches: a base block ages out after the same insertions
    /// with or without spare blocks beside it.
    #[test]
    fn spare_blocks_do_not_hasten_the_ageing_of_base_blocks() {
        let ages = |with_spare: bool| {
            let mut c = PrefetchCache::new(&lru(), 20, 0.2, 1).unwrap();
            (0..20).for_each(|k| _ = c.demand(k, Op::Read));
            assert!(c.prefetch(100));
            if with_spare {
                assert!(c.prefetch_spare(101) && c.prefetch_spare(102));
            }
            let mut insertions = 0;
            while c.contains(100) {
                c.demand(200 + insertions, Op::Read);
                insertions += 1;
            }
            insertions
        };
        assert_eq!(ages(true), ages(false));
    }

    /// SARC's rule: a miss on a block the partition pushed out lately grows
    /// it a block, a miss on one the main cache evicted lately shrinks it
    /// one, never below its fixed share nor above half the cache; a fixed
    /// partition never moves.
    #[test]
    fn an_adaptive_partition_moves_towards_the_side_that_missed() {
        // 200 one-byte blocks: the partition starts at 4% (8), may hold 8 to
        // 100, and each side remembers its last 2 (1%).
        let run = |adaptive: bool| {
            let c = PrefetchCache::new(&lru(), 200, 0.04, 1).unwrap();
            let mut c = if adaptive { c.adaptive() } else { c };
            (0..200).for_each(|k| _ = c.demand(k, Op::Read));
            let start = c.partition_limit();
            // Nine prefetches into room for eight push out the first.
            (1000..1009).for_each(|k| assert!(c.prefetch(k)));
            assert!(!c.contains(1000));
            assert_eq!(c.demand(1000, Op::Read), Class::Miss);
            let grown = c.partition_limit();
            // The main cache's newest victim (LRU: the highest block gone).
            c.demand(5000, Op::Read);
            let main_victim = (0..200).rev().find(|&k| !c.contains(k)).expect("the main cache gave blocks up");
            let before = c.partition_limit();
            assert_eq!(c.demand(main_victim, Op::Read), Class::Miss);
            (start, grown, before, c.partition_limit())
        };
        let (start, grown, before, shrunk) = run(true);
        assert_eq!((start, grown), (8, 9), "a miss on a pushed-out prefetch grows the partition");
        assert_eq!(shrunk, before - 1, "a miss on a main-cache victim shrinks it");
        assert_eq!(run(false), (8, 8, 8, 8), "a fixed partition stays");

        // Grown to 9, then emptied (its blocks demanded): with nothing in it
        // the partition takes no room, so a miss on the main cache's newest
        // victim is not its cost.
        let mut c = PrefetchCache::new(&lru(), 200, 0.04, 1).unwrap().adaptive();
        (0..200).for_each(|k| _ = c.demand(k, Op::Read));
        (1000..1009).for_each(|k| _ = c.prefetch(k));
        assert_eq!((c.demand(1000, Op::Read), c.partition_limit()), (Class::Miss, 9));
        (1001..1009).for_each(|k| assert_eq!(c.demand(k, Op::Read), Class::Promote));
        assert_eq!(c.prefetched_bytes(), 0);
        c.demand(6000, Op::Read);
        let victim = (0..200).rev().find(|&k| !c.contains(k)).expect("the main cache gave blocks up");
        assert_eq!((c.demand(victim, Op::Read), c.partition_limit()), (Class::Miss, 9), "an empty partition stays");

        // Bounds: misses on main victims evicted while prefetched blocks
        // held room take it back down to its fixed share and no further.
        let mut c = PrefetchCache::new(&lru(), 200, 0.04, 1).unwrap().adaptive();
        let mut order: std::collections::VecDeque<Key> = (0..200).collect();
        order.iter().for_each(|&k| _ = c.demand(k, Op::Read));
        for k in 0..50 {
            c.prefetch(10_000 + k);
            c.demand(1_000 + k, Op::Read);
            order.push_back(1_000 + k);
            // The LRU victims, oldest first; miss on the newest of them.
            let mut newest = None;
            while order.front().is_some_and(|&v| !c.contains(v)) {
                newest = order.pop_front();
            }
            let v = newest.expect("the new block pushed one out");
            assert_eq!(c.demand(v, Op::Read), Class::Miss);
            order.push_back(v);
        }
        assert_eq!(c.partition_limit(), 8, "never below the fixed share");
    }

    #[test]
    fn warm_up_prefetches_are_not_counted_after_a_reset() {
        let mut c = PrefetchCache::new(&lru(), 100, 0.1, 1).unwrap();
        c.prefetch(7);
        c.reset_stats();
        assert_eq!(c.demand(7, Op::Read), Class::Promote);
        let s = c.stats();
        assert_eq!((s.promotes, s.used, s.issued), (1, 0, 0));
    }
}

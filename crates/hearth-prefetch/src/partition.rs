//! The prefetch partition, written once for both drivers: the simulator's
//! [`PrefetchCache`](crate::PrefetchCache) and the server's block cache.
//!
//! Prefetched blocks wait here, in a small LRU of their own, until a demand
//! takes them (a promote, the prefetch was *used*) or they leave unused
//! (*wasted*): pushed out by newer prefetches, or aged out after one
//! turnover of the main cache, when an LRU main cache would have dropped
//! them too. The partition only decides; its owner holds the blocks' data
//! and frees what leaves.
//!
//! Blocks land in one of two tiers sharing the capacity: *base* prefetches
//! ([`Partition::land`]) and *spare* ones ([`Partition::land_spare`], the
//! guarded QuickMine's extra candidates). A spare block takes only room
//! the base tier leaves and may push out only older spare blocks; a base
//! block pushes out spare blocks first, so the base tier holds exactly what
//! it would hold with no spare blocks at all. A base block that already
//! waits as a spare one is taken over: it moves into the base tier as if it
//! arrived now, where a fresh base prefetch of it would have landed.
//!
//! Spare blocks borrow their room from the main cache like base ones, so
//! the main cache may hold fewer blocks than it would without them. The
//! partition remembers the blocks the main cache gave up last
//! ([`Partition::main_evicted`]), as many as the owner says it holds fewer
//! than it would with no spare blocks ([`Partition::trim_ghosts`]): a main
//! cache without the spare blocks would still hold those (exactly so under
//! LRU), and a demand miss on one is a *displacement* miss, the spare
//! tier's cost ([`Partition::displaced_miss`]).

use std::collections::VecDeque;

use hearth_core::{Access, Key, KeyMap, Op, Policy};
use hearth_policy::Lru;

pub struct Partition {
    lru: Lru,
    /// The spare tier: blocks that never displace one of `lru`'s.
    spare: Lru,
    /// Bytes both tiers may hold together: their capacity, or less when the
    /// partition is sized as the traffic goes ([`Partition::adaptive`]).
    limit: u64,
    block_size: u32,
    /// Blocks in arrival order, with the owner's clock at arrival.
    arrivals: VecDeque<(u64, Key)>,
    arrived_at: KeyMap<u64>,
    /// Blocks that arrived before [`Partition::forget_waiting`]: their use
    /// or waste is reported to the prefetcher but not counted.
    carried: KeyMap<()>,
    evicted: Vec<Key>,
    /// (block, used) outcomes not yet taken by [`Partition::drain_outcomes`].
    outcomes: Vec<(Key, bool)>,
    used: u64,
    wasted: u64,
    /// Main-cache victims: as many as the last [`Partition::trim_ghosts`]
    /// kept, plus victims since.
    ghosts: Ghosts,
    /// The limit following the traffic, if the owner asked for it
    /// ([`Partition::adaptive`]).
    sizing: Option<Sizing>,
}

/// The partition sized by marginal utility, SARC's rule (Gill and Modha,
/// USENIX ATC 2005) between the main cache and the partition: a demand miss
/// on a block the partition pushed out lately (one a partition a band
/// larger would have held) grows it by a block; a miss on one the main
/// cache evicted lately, while the partition's blocks held its room,
/// shrinks it by one. Both bands are the same width, so the partition
/// moves towards whichever side earns more at its edge. It never shrinks
/// below the share it starts from: every loss measured came from
/// shrinking, every gain from growing (docs/dev/prefetch-adaptive-partition.md).
/// Written once for both drivers, like the rest of the partition.
struct Sizing {
    /// Prefetched blocks pushed out unused for lack of room, the newest `band`.
    pushed_out: Ghosts,
    /// Main-cache victims, the newest `band` or as many as the partition
    /// holds blocks, whichever is fewer.
    main_evicted: Ghosts,
    band: usize,
    /// Bounds of the limit, in bytes.
    least: u64,
    most: u64,
}

/// Keys that left a cache, newest last, of which the newest are kept: a
/// set to ask whether a key left lately, with the order to forget by.
#[derive(Default)]
pub(crate) struct Ghosts {
    /// Keys in the order they left, each with its number; entries of keys
    /// taken or left again since stay until trimmed.
    order: VecDeque<(u64, Key)>,
    /// Live keys, each with its number in `order`.
    live: KeyMap<u64>,
    seq: u64,
}

impl Ghosts {
    pub(crate) fn push(&mut self, key: Key) {
        self.seq += 1;
        self.live.insert(key, self.seq);
        self.order.push_back((self.seq, key));
    }

    /// Whether `key` is live; it is not afterwards.
    pub(crate) fn take(&mut self, key: Key) -> bool {
        self.live.remove(&key).is_some()
    }

    /// Keeps the newest `keep` live keys; the order stays within twice that.
    pub(crate) fn trim(&mut self, keep: usize) {
        while self.live.len() > keep || self.order.len() > 2 * keep + 16 {
            let Some((seq, k)) = self.order.pop_front() else { break };
            if self.live.get(&k) == Some(&seq) {
                self.live.remove(&k);
            }
        }
    }
}

/// An adaptive partition's band, as a share of the cache.
const ADAPTIVE_BAND: f64 = 0.01;
/// The most of the cache an adaptive partition may hold.
const ADAPTIVE_MOST: f64 = 0.5;

impl Partition {
    /// A partition of at most `capacity` bytes of `block_size` blocks.
    pub fn new(capacity: u64, block_size: u32) -> Self {
        Partition {
            lru: Lru::new(capacity),
            spare: Lru::new(capacity),
            limit: capacity,
            block_size,
            arrivals: VecDeque::new(),
            arrived_at: KeyMap::default(),
            carried: KeyMap::default(),
            evicted: Vec::with_capacity(16),
            outcomes: Vec::with_capacity(16),
            used: 0,
            wasted: 0,
            ghosts: Ghosts::default(),
            sizing: None,
        }
    }

    /// A partition sized as the traffic goes (see [`Sizing`]) in a cache of
    /// `total` bytes: it holds `least` bytes at first, never less, and may
    /// grow to half the cache, moving a block at a time on misses within a
    /// band of 1% of the cache on either side's edge.
    pub fn adaptive(total: u64, least: u64, block_size: u32) -> Self {
        let block = u64::from(block_size);
        let share = |f: f64| ((total as f64 * f) as u64 / block).max(1) * block;
        let (band, most) = ((share(ADAPTIVE_BAND) / block) as usize, share(ADAPTIVE_MOST));
        let least = least.min(most);
        let sizing = Sizing { pushed_out: Ghosts::default(), main_evicted: Ghosts::default(), band, least, most };
        Partition { limit: least, sizing: Some(sizing), ..Partition::new(most, block_size) }
    }

    /// Whether the partition is sized as the traffic goes.
    pub fn is_adaptive(&self) -> bool {
        self.sizing.is_some()
    }

    /// Bytes the partition may hold now.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Lets the partition hold `limit` bytes (at most its capacity): blocks
    /// past it leave as wasted, spare ones first, then the oldest base
    /// ones, appended to `left`.
    pub fn set_limit(&mut self, limit: u64, left: &mut Vec<Key>) {
        self.limit = limit.min(self.lru.capacity());
        let evicted = self.fit_limit();
        self.note_pushed_out(&evicted);
        left.extend_from_slice(&evicted);
        self.evicted = evicted;
    }

    /// Remembers blocks pushed out for lack of room, for [`Sizing`].
    fn note_pushed_out(&mut self, keys: &[Key]) {
        if let Some(sizing) = &mut self.sizing {
            keys.iter().for_each(|&k| sizing.pushed_out.push(k));
            sizing.pushed_out.trim(sizing.band);
        }
    }

    /// SARC's move on a demand of `key`, which `missed` or not (see
    /// [`Sizing`]): a key either band holds leaves it, and a miss on one
    /// moves the limit a block, up for the partition's band, down for the
    /// main cache's. Blocks a lower limit pushes out are appended to `left`.
    /// Nothing unless the partition is [`adaptive`](Partition::adaptive).
    pub fn adapt(&mut self, key: Key, missed: bool, left: &mut Vec<Key>) {
        let Some(sizing) = &mut self.sizing else { return };
        let (pushed_out, main_evicted) = (sizing.pushed_out.take(key), sizing.main_evicted.take(key));
        let block = u64::from(self.block_size);
        let moved = match (missed, pushed_out, main_evicted) {
            (true, true, _) => (self.limit + block).min(sizing.most),
            (true, false, true) => self.limit.saturating_sub(block).max(sizing.least),
            _ => return,
        };
        self.set_limit(moved, left);
    }

    /// Pushes blocks out, spare ones first, until both tiers fit the limit;
    /// settles them as wasted and returns them (in `self.evicted`'s buffer,
    /// taken: the caller puts it back).
    fn fit_limit(&mut self) -> Vec<Key> {
        let mut evicted = std::mem::take(&mut self.evicted);
        let now = Access { size: self.block_size, op: Op::Read, ..Access::default() };
        let start = evicted.len();
        while self.lru.occupancy() + self.spare.occupancy() > self.limit {
            match self.spare.evict(&now).or_else(|| self.lru.evict(&now)) {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        for &k in &evicted[start..] {
            self.settle(k, false);
        }
        evicted
    }

    /// The owner's main cache evicted `key`. An adaptive partition keeps
    /// as many of the newest victims as it holds blocks (at most its band):
    /// a main cache larger by the partition's borrowed room would have kept
    /// those, so only a miss on one is the partition's cost.
    pub fn main_evicted(&mut self, key: Key) {
        self.ghosts.push(key);
        let borrowed = (self.bytes() / u64::from(self.block_size)) as usize;
        if let Some(sizing) = &mut self.sizing {
            sizing.main_evicted.push(key);
            sizing.main_evicted.trim(sizing.band.min(borrowed));
        }
    }

    /// A demand missed `key`: true if the main cache gave it up while spare
    /// blocks held the room it would have kept it in.
    pub fn displaced_miss(&mut self, key: Key) -> bool {
        self.ghosts.take(key)
    }

    /// Keeps the newest `deficit` victims: the owner's main cache holds
    /// `deficit` blocks fewer than it would with no spare blocks (told when
    /// both would be full: after a demand insertion or a prefetch's room
    /// was made). The deque stays within twice that, dropping entries of
    /// victims missed since.
    pub fn trim_ghosts(&mut self, deficit: usize) {
        self.ghosts.trim(deficit);
    }

    /// [`Partition::trim_ghosts`] for a main cache of `main_blocks` blocks
    /// in a cache of `total` bytes: the deficit is the room beside the base
    /// tier less what the main cache holds.
    pub fn trim_ghosts_beside(&mut self, total: u64, main_blocks: usize) {
        let room = total.saturating_sub(self.base_bytes()) / u64::from(self.block_size);
        self.trim_ghosts(room.saturating_sub(main_blocks as u64) as usize);
    }

    pub fn contains(&self, key: Key) -> bool {
        self.lru.contains(key) || self.spare.contains(key)
    }

    /// Whether `key` waits in the spare tier.
    pub fn is_spare(&self, key: Key) -> bool {
        self.spare.contains(key)
    }

    /// Bytes held by blocks waiting for a demand.
    pub fn bytes(&self) -> u64 {
        self.lru.occupancy() + self.spare.occupancy()
    }

    /// Blocks waiting in the spare tier.
    pub fn spare_blocks(&self) -> usize {
        self.spare.len()
    }

    /// Bytes held by base prefetches.
    pub fn base_bytes(&self) -> u64 {
        self.lru.occupancy()
    }

    /// Whether a spare block fits beside the base tier.
    pub fn has_spare_room(&self) -> bool {
        self.lru.occupancy() + u64::from(self.block_size) <= self.limit
    }

    /// Whether a block fits at all.
    pub fn has_room_for_a_block(&self) -> bool {
        u64::from(self.block_size) <= self.limit
    }

    /// Prefetched blocks later demanded, and those that left unused.
    pub fn used(&self) -> u64 {
        self.used
    }
    pub fn wasted(&self) -> u64 {
        self.wasted
    }

    /// Prefetched `key` arrives at `clock`, the owner's count of demand
    /// insertions into its main cache. Blocks it pushes out (wasted) are
    /// appended to `left`. If `key` waits in the spare tier it is taken
    /// over: it leaves that tier with no outcome and lands here as a fresh
    /// base prefetch (newest, arrived at `clock`, counted when it leaves).
    pub fn land(&mut self, key: Key, clock: u64, left: &mut Vec<Key>) {
        if self.spare.remove(key) {
            self.carried.remove(&key);
        }
        self.land_in(false, key, clock, left);
    }

    /// Lands `key` in the spare tier if the base tier leaves room for it,
    /// pushing out older spare blocks only; false (nothing landed) if not.
    pub fn land_spare(&mut self, key: Key, clock: u64, left: &mut Vec<Key>) -> bool {
        if !self.has_spare_room() {
            return false;
        }
        self.land_in(true, key, clock, left);
        true
    }

    fn land_in(&mut self, spare: bool, key: Key, clock: u64, left: &mut Vec<Key>) {
        let a = Access { key, size: self.block_size, op: Op::Read, ..Access::default() };
        self.evicted.clear();
        let tier = if spare { &mut self.spare } else { &mut self.lru };
        tier.insert(&a, &mut self.evicted);
        for i in 0..self.evicted.len() {
            self.settle(self.evicted[i], false);
        }
        // The tiers share the limit: the spare tier gives way (its newest
        // block always fits, as the base tier left room for it), then, under
        // a limit below the capacity, the oldest base blocks.
        let evicted = self.fit_limit();
        self.note_pushed_out(&evicted);
        left.extend_from_slice(&evicted);
        self.evicted = evicted;
        if self.contains(key) {
            self.arrived_at.insert(key, clock);
            self.arrivals.push_back((clock, key));
        }
        // Entries of blocks that left stay until they age out, which never
        // happens while the owner's clock stands still: drop them once they
        // outnumber the live ones, so the queue stays within twice the
        // partition's blocks (amortised O(1)).
        if self.arrivals.len() > 2 * self.arrived_at.len() + 16 {
            let arrived_at = &self.arrived_at;
            self.arrivals.retain(|(at, k)| arrived_at.get(k) == Some(at));
        }
    }

    /// The first demand of `key`: true if it was waiting here (a promote),
    /// after which it belongs to the main cache.
    pub fn take(&mut self, key: Key) -> bool {
        let waiting = self.lru.remove(key) || self.spare.remove(key);
        if waiting {
            self.settle(key, true);
        }
        waiting
    }

    /// Drops `key` with no outcome: the owner invalidated it.
    pub fn remove(&mut self, key: Key) -> bool {
        self.arrived_at.remove(&key);
        self.carried.remove(&key);
        self.lru.remove(key) || self.spare.remove(key)
    }

    /// Drops blocks that arrived more than `horizon` main-cache insertions
    /// before `clock` (one turnover: `horizon` is the main cache's length),
    /// appending them to `left` as wasted.
    pub fn age_out(&mut self, clock: u64, horizon: u64, left: &mut Vec<Key>) {
        while let Some(&(at, key)) = self.arrivals.front() {
            if clock - at <= horizon {
                break;
            }
            self.arrivals.pop_front();
            // Skip entries of blocks that left (or arrived again since).
            if self.arrived_at.get(&key) == Some(&at) && (self.lru.remove(key) || self.spare.remove(key)) {
                self.settle(key, false);
                left.push(key);
            }
        }
    }

    /// Records the outcome of `key` leaving the partition.
    fn settle(&mut self, key: Key, used: bool) {
        self.arrived_at.remove(&key);
        // The prefetcher hears every outcome: where counting starts must
        // not change what it learns, and so how the run goes.
        self.outcomes.push((key, used));
        if self.carried.remove(&key).is_some() {
            return;
        }
        if used {
            self.used += 1;
        } else {
            self.wasted += 1;
        }
    }

    /// Outcomes not yet taken by [`Partition::drain_outcomes`].
    pub fn pending_outcomes(&self) -> usize {
        self.outcomes.len()
    }

    /// Hands every pending (block, used) outcome to `f`.
    pub fn drain_outcomes(&mut self, mut f: impl FnMut(Key, bool)) {
        for (k, used) in self.outcomes.drain(..) {
            f(k, used);
        }
    }

    /// Clears the counts (end of warm-up): blocks waiting now stay, but no
    /// longer count as used or wasted when they leave.
    pub fn forget_waiting(&mut self) {
        self.used = 0;
        self.wasted = 0;
        self.carried = self.arrived_at.keys().map(|&k| (k, ())).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_leave_used_pushed_out_or_aged_and_removal_has_no_outcome() {
        // Room for two 1-byte blocks.
        let mut p = Partition::new(2, 1);
        let mut left = Vec::new();
        p.land(1, 0, &mut left);
        p.land(2, 0, &mut left);
        p.land(3, 1, &mut left);
        assert_eq!(left, vec![1], "the oldest is pushed out");
        assert!(p.take(2) && !p.take(2), "taken once");
        p.land(4, 5, &mut left);
        // At clock 7 with a horizon of 5, block 3 (arrived at 1) is too old; 4 is not.
        p.age_out(7, 5, &mut left);
        assert_eq!(left, vec![1, 3]);
        assert!(p.remove(4) && p.bytes() == 0);
        let mut outcomes = Vec::new();
        p.drain_outcomes(|k, used| outcomes.push((k, used)));
        assert_eq!(outcomes, vec![(1, false), (2, true), (3, false)]);
        assert_eq!((p.used(), p.wasted()), (1, 2));
    }

    #[test]
    fn spare_blocks_never_push_out_base_blocks() {
        // Room for three 1-byte blocks.
        let mut p = Partition::new(3, 1);
        let mut left = Vec::new();
        p.land(1, 0, &mut left);
        assert!(p.land_spare(10, 0, &mut left) && p.land_spare(11, 0, &mut left));
        // A third spare block pushes out the oldest spare one, not base 1.
        assert!(p.land_spare(12, 0, &mut left));
        assert_eq!(left, vec![10]);
        assert!(p.contains(1) && p.is_spare(11) && p.is_spare(12));
        // A base block pushes out spare blocks first: 11.
        p.land(2, 0, &mut left);
        assert_eq!(left, vec![10, 11]);
        p.land(3, 0, &mut left);
        assert_eq!(left, vec![10, 11, 12]);
        // The base tier is full: spare blocks are refused and push out nothing.
        assert!(!p.has_spare_room() && !p.land_spare(13, 0, &mut left));
        assert!(!p.contains(13) && [1, 2, 3].iter().all(|&k| p.contains(k)));
        // Base blocks push out the oldest base block, as with no spare tier.
        p.land(4, 0, &mut left);
        assert_eq!(left, vec![10, 11, 12, 1]);
        // A spare block is promoted like any other, and ages out like one.
        assert!(p.take(2) && p.land_spare(14, 0, &mut left) && p.take(14));
        assert!(p.land_spare(15, 1, &mut left));
        p.age_out(5, 2, &mut left);
        assert_eq!(left, vec![10, 11, 12, 1, 3, 4, 15]);
        assert_eq!((p.used(), p.wasted(), p.bytes()), (2, 7, 0));
    }

    #[test]
    fn a_base_block_waiting_as_spare_is_taken_over_and_kept_from_spare_blocks() {
        // Room for three 1-byte blocks.
        let mut p = Partition::new(3, 1);
        let mut left = Vec::new();
        assert!(p.land_spare(10, 0, &mut left) && p.land_spare(11, 0, &mut left));
        // The base asks for 10: it moves into the base tier, arriving at clock 4.
        p.land(10, 4, &mut left);
        assert!(p.contains(10) && !p.is_spare(10) && p.bytes() == 2 && left.is_empty());
        // Spare blocks now push out only each other, never 10.
        for k in 12..20 {
            assert!(p.land_spare(k, 4, &mut left));
        }
        assert!(p.contains(10) && !left.contains(&10));
        // It ages from its takeover, not from its spare arrival at 0.
        p.age_out(6, 3, &mut left);
        assert!(p.contains(10));
        assert!(p.take(10));
        let mut outcomes = Vec::new();
        p.drain_outcomes(|k, used| outcomes.push((k, used)));
        assert_eq!(outcomes.iter().filter(|o| o.0 == 10).collect::<Vec<_>>(), vec![&(10, true)], "one outcome");
    }

    #[test]
    fn misses_on_the_last_victims_within_the_deficit_are_displacement_misses() {
        let mut p = Partition::new(4, 1);
        p.main_evicted(1);
        p.trim_ghosts(0);
        assert!(!p.displaced_miss(1), "no deficit: no ghost");
        for k in [2, 3, 4] {
            p.main_evicted(k);
        }
        p.trim_ghosts(2);
        assert!(!p.displaced_miss(2) && p.displaced_miss(4) && !p.displaced_miss(4), "counted once");
        p.main_evicted(5);
        p.trim_ghosts(1);
        assert!(!p.displaced_miss(3) && p.displaced_miss(5));
        // Many victims, few live: the deque stays bounded.
        for k in 0..1000 {
            p.main_evicted(k);
            p.trim_ghosts(1);
        }
        assert!(p.ghosts.order.len() <= 18 && p.displaced_miss(999));
    }

    #[test]
    fn arrivals_stay_bounded_while_the_clock_stands_still() {
        let mut p = Partition::new(2, 1);
        let mut left = Vec::new();
        for k in 0..10_000 {
            p.land(k, 0, &mut left);
            left.clear();
        }
        assert!(p.arrivals.len() <= 2 * 2 + 17, "{} arrival entries for 2 blocks", p.arrivals.len());
        // Ageing still finds the live ones.
        p.age_out(10, 1, &mut left);
        assert_eq!(left, vec![9_998, 9_999]);
    }

    #[test]
    fn blocks_waiting_at_a_reset_are_not_counted_but_still_reported() {
        let mut p = Partition::new(4, 1);
        let mut left = Vec::new();
        p.land(7, 0, &mut left);
        p.forget_waiting();
        assert!(p.take(7));
        assert_eq!((p.used(), p.wasted()), (0, 0));
        let mut outcomes = Vec::new();
        p.drain_outcomes(|k, used| outcomes.push((k, used)));
        assert_eq!(outcomes, vec![(7, true)], "the prefetcher still learns from it");
    }
}

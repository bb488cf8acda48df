//! One-pass LRU miss-ratio curves from stack distances (Mattson et al. 1970).
//!
//! LRU is a stack algorithm: a request hits in an LRU cache of `C` bytes
//! exactly when the bytes of the distinct items requested since the item's
//! previous request, plus the item itself, fit in `C`. So one pass that
//! measures that "needed size" for every request gives the hit count at
//! every cache size at once. Needed sizes come from per-slot sizes (each
//! item's size at the slot of its latest request), summed by block of
//! slots and through a Fenwick tree over groups of blocks
//! ([`crate::stack_slots`]): O(log n) per request, and the tree is 1/4096 of
//! the slots, so it stays in cache where a per-slot tree of tens of
//! millions of entries would miss on nearly every level. The slots are
//! renumbered when they run out, so memory follows the number of distinct
//! items, not the trace's length.
//!
//! The counts equal a full `hearth_policy::Lru` simulation when every
//! item keeps one size and none is larger than the smallest cache (always
//! true in block mode): LRU then keeps exactly the most recent prefix of the
//! stack that fits.
//!
//! [`Shards`] samples items by a hash of their key (Waldspurger et al.,
//! FAST '15) and scales the distances it measures by the sampling rate: a
//! curve from 1% of the items, at about 1% of the cost ([`shards`]).
//!
//! Both take accesses as they come; `hearth_sim::mrc` drives them over a
//! trace, and the server over the reads it serves.

use std::collections::VecDeque;

use hearth_core::{key_map, Access, KeyMap, NEVER};

use crate::stack_slots::{Packing, Slots, GRAIN};
use crate::SimResult;

mod shards;
pub use shards::{Shards, ShardsMode, HOT_KEYS, TRUSTED_SAMPLE_KEYS};

/// Fewest request slots the table starts with.
const MIN_SLOTS: usize = 1 << 16;
/// Requests per window of [`NextUses`].
const WINDOW: u64 = 1 << 16;
/// How many requests ahead [`StackDistances::access_all`] fetches the slots
/// a request will read: enough to cover a memory load (about 170 ns a
/// request today, so 8 hide ~1.4 us) without evicting them before use.
const PREFETCH_AHEAD: usize = 8;
/// Needed cache sizes of a request stream, counted per cache size.
pub struct StackDistances {
    /// Where each tracked item's latest slot is found.
    index: SlotIndex,
    /// Tracked items (live slots).
    live: usize,
    /// Size of the item whose latest request is in each slot; 0 once the
    /// item has been requested again (sizes are at least 1).
    slots: Slots,
    next_slot: usize,
    /// Sum of every tracked item's size (the whole table), so the bytes above
    /// an item take one prefix sum rather than two.
    total: u64,
    counts: Counts,
    /// Places between slots that follow the items through renumbering:
    /// stratified SHARDS's hot items, kept out of the table, mark where
    /// their latest requests fell among its slots (see [`shards`]).
    marks: Vec<u32>,
    /// A word per slot for the caller, moved with its item through
    /// renumbering ([`push_tagged`](Self::push_tagged)); empty unless used.
    tags: Vec<u32>,
}

/// How a request finds the slot of its item's previous request.
enum SlotIndex {
    /// Item -> slot of its latest request.
    ByKey(KeyMap<u32>),
    /// The trace gives each request's next use (oracleGeneral does).
    ByNextUse(NextUses),
}

impl StackDistances {
    /// Counts hits at each of `cache_bytes` (any order), finding items by key.
    pub fn new(cache_bytes: &[u64]) -> StackDistances {
        StackDistances::with_index(cache_bytes, SlotIndex::ByKey(key_map(1024)))
    }

    /// As [`new`](Self::new), for a stream whose accesses carry their next
    /// use (`Access::next_access`, trusted as given): no per-request hash
    /// lookup, which is what dominates a pass over millions of items.
    pub fn with_next_uses(cache_bytes: &[u64]) -> StackDistances {
        StackDistances::with_index(cache_bytes, SlotIndex::ByNextUse(NextUses::new()))
    }

    fn with_index(cache_bytes: &[u64], index: SlotIndex) -> StackDistances {
        StackDistances {
            index,
            live: 0,
            slots: Slots::new(MIN_SLOTS),
            next_slot: 0,
            total: 0,
            counts: Counts::new(cache_bytes),
            marks: Vec::new(),
            tags: Vec::new(),
        }
    }

    /// Records requests in order. With next uses known, each request's
    /// previous slot is known [`PREFETCH_AHEAD`] requests early, so its
    /// block of the per-slot table (tens of MB, far beyond the core's cache)
    /// is fetched while earlier requests are recorded.
    pub fn access_all(&mut self, accesses: &[Access]) {
        for (i, a) in accesses.iter().enumerate() {
            if let Some(ahead) = accesses.get(i + PREFETCH_AHEAD) {
                self.prefetch(ahead);
            }
            self.access(a);
        }
    }

    /// Starts loading what recording `a` will read.
    fn prefetch(&self, a: &Access) {
        if let Some(previous) = self.filed_slot(a) {
            self.slots.prefetch(previous);
        }
    }

    /// The slot of `a`'s item's previous request as filed now, when next
    /// uses are known (a hint: it may be renumbered before `a` comes).
    fn filed_slot(&self, a: &Access) -> Option<usize> {
        match &self.index {
            SlotIndex::ByNextUse(next_uses) => next_uses.peek(a.vtime),
            SlotIndex::ByKey(_) => None,
        }
    }

    /// Records one request.
    pub fn access(&mut self, a: &Access) {
        let size = a.size.max(1);
        let needed = self.push(a, size).map(|(above, _)| above + u64::from(size));
        self.counts.record(needed, u64::from(size), 1.0);
    }

    /// Moves the item to the top of the stack; returns the bytes of the
    /// distinct items above it before the move and the slot it moved from
    /// (`None` for its first request).
    fn push(&mut self, a: &Access, size: u32) -> Option<(u64, u32)> {
        if self.next_slot == self.slots.len() {
            self.renumber();
        }
        let slot = self.next_slot as u32;
        self.next_slot += 1;
        let previous = match &mut self.index {
            SlotIndex::ByKey(latest) => latest.insert(a.key, slot),
            SlotIndex::ByNextUse(next_uses) => {
                let previous = next_uses.take(a.vtime);
                next_uses.file(a.next_access, slot);
                previous
            }
        };
        let above = match previous {
            Some(prev) => {
                let prev = prev as usize;
                // Every slot after `prev` is more recent (`slot` is still empty).
                let above = self.total - self.slots.prefix_sum(prev + 1);
                self.total -= u64::from(self.slots.clear(prev));
                Some((above, prev as u32))
            }
            None => {
                self.live += 1;
                None
            }
        };
        self.slots.fill(slot as usize, size);
        self.total += u64::from(size);
        above
    }

    /// As [`push`](Self::push), also returning the item's tag, which moves
    /// with it to its new slot; an item's first request takes `first()`.
    /// Stratified SHARDS keeps each sampled key's row of counts there, which
    /// saves a second lookup by key.
    fn push_tagged(&mut self, a: &Access, size: u32, first: impl FnOnce() -> u32) -> (Option<(u64, u32)>, u32) {
        let above = self.push(a, size);
        if self.tags.len() < self.slots.len() {
            self.tags.resize(self.slots.len(), 0);
        }
        let tag = match above {
            Some((_, previous)) => self.tags[previous as usize],
            None => first(),
        };
        self.tags[self.next_slot - 1] = tag;
        (above, tag)
    }

    /// Whether `key` is tracked (by-key index only).
    fn tracks(&self, key: u64) -> bool {
        matches!(&self.index, SlotIndex::ByKey(latest) if latest.contains_key(&key))
    }

    /// Drops `key` from the stack (SHARDS stops tracking it; by-key index).
    fn forget(&mut self, key: u64) {
        if let SlotIndex::ByKey(latest) = &mut self.index {
            if let Some(slot) = latest.remove(&key) {
                self.total -= u64::from(self.slots.clear(slot as usize));
                self.live -= 1;
            }
        }
    }

    /// Packs live slots to the front, keeping their order, and makes room for
    /// as many new requests as there are items (amortised O(1) a request).
    fn renumber(&mut self) {
        let len = (2 * self.live).max(MIN_SLOTS).next_multiple_of(GRAIN);
        let packing = self.slots.packing(self.next_slot);
        match &mut self.index {
            SlotIndex::ByKey(latest) => latest.values_mut().for_each(|slot| *slot = packing.new_slot(*slot)),
            SlotIndex::ByNextUse(next_uses) => next_uses.renumber(&packing),
        }
        self.marks.iter_mut().for_each(|mark| *mark = packing.live_below(*mark));
        if !self.tags.is_empty() {
            // Packing keeps the live slots in order.
            let live = (0..self.next_slot).filter(|&old| self.slots.size(old) > 0);
            let mut tags: Vec<u32> = live.map(|old| self.tags[old]).collect();
            tags.resize(len, 0);
            self.tags = tags;
        }
        self.slots.pack(self.next_slot, len);
        self.next_slot = self.live;
    }

    /// LRU results at each cache size, in the order given to `new`.
    pub fn results(&self) -> Vec<SimResult> {
        self.counts.results("LRU", None)
    }
}

/// Slots filed by the vtime of their item's next request: a request takes
/// its item's previous slot from the cell of its own vtime. The current
/// window of vtimes is a dense array; slots due in later windows are
/// appended to that window's list (sequential writes) and scattered into
/// the array when it comes, so no step is a random probe into a table of
/// every item.
struct NextUses {
    /// First vtime of the current window.
    start: u64,
    /// Slot + 1 due at `start + i`, or 0.
    current: Vec<u32>,
    /// (vtime - window start, slot) per later window, the next one first.
    later: VecDeque<Vec<(u32, u32)>>,
    /// Emptied lists of past windows, reused for new ones: allocating each
    /// window afresh faulted in hundreds of MB of new pages a pass.
    spare: Vec<Vec<(u32, u32)>>,
}

impl NextUses {
    fn new() -> NextUses {
        NextUses { start: 0, current: vec![0; WINDOW as usize], later: VecDeque::new(), spare: Vec::new() }
    }

    /// Files `slot` under `next` (after the current request's vtime).
    fn file(&mut self, next: u64, slot: u32) {
        if next == NEVER {
            return;
        }
        let ahead = next - self.start;
        let (window, offset) = ((ahead / WINDOW) as usize, (ahead % WINDOW) as u32);
        if window == 0 {
            self.current[offset as usize] = slot + 1;
        } else {
            if self.later.len() < window {
                self.later.resize_with(window, || self.spare.pop().unwrap_or_default());
            }
            self.later[window - 1].push((offset, slot));
        }
    }

    /// The slot filed under `vtime` if it lies in the current window, left
    /// in place.
    fn peek(&self, vtime: u64) -> Option<usize> {
        let cell = self.current.get(usize::try_from(vtime.checked_sub(self.start)?).ok()?)?;
        (*cell as usize).checked_sub(1)
    }

    /// The slot filed under `vtime`, which is at or after every vtime taken
    /// before.
    fn take(&mut self, vtime: u64) -> Option<u32> {
        while vtime >= self.start + WINDOW {
            self.current.fill(0);
            self.start += WINDOW;
            let mut due = self.later.pop_front().unwrap_or_default();
            for &(offset, slot) in &due {
                self.current[offset as usize] = slot + 1;
            }
            due.clear();
            self.spare.push(due);
        }
        let due = std::mem::take(&mut self.current[(vtime - self.start) as usize]);
        due.checked_sub(1)
    }

    fn renumber(&mut self, packing: &Packing) {
        for cell in self.current.iter_mut().filter(|c| **c > 0) {
            *cell = packing.new_slot(*cell - 1) + 1;
        }
        for (_, slot) in self.later.iter_mut().flatten() {
            *slot = packing.new_slot(*slot);
        }
    }
}

/// Requests, bytes and hits per cache size, weighted (SHARDS counts a
/// sampled request as 1/rate requests).
#[derive(Clone)]
struct Counts {
    /// Cache sizes ascending, and each one's index in the caller's order.
    sorted: Vec<(u64, usize)>,
    /// Requests (and their bytes) whose needed size is at most
    /// `sorted[i]` but above `sorted[i - 1]`.
    first_hit: Vec<(f64, f64)>,
    requests: f64,
    bytes: f64,
    /// [`log_bucket`] of the smallest size.
    first_bucket: usize,
    /// Per bucket from `first_bucket` to the largest size's: how many sizes
    /// lie in lower buckets, where a search for a size in it can start.
    bucket_starts: Vec<u32>,
}

/// A bucket of sizes by their top bits (exponent and the next 3 bits: an
/// eighth of a doubling, finer than a step of any grid of sizes, so a
/// bucket rarely holds more than one). Larger sizes never get lower buckets.
fn log_bucket(bytes: u64) -> usize {
    ((bytes as f64).to_bits() >> 49) as usize
}

impl Counts {
    fn new(cache_bytes: &[u64]) -> Counts {
        let mut sorted: Vec<(u64, usize)> = cache_bytes.iter().copied().zip(0..).collect();
        sorted.sort_unstable();
        let bucket_of = |i: Option<&(u64, usize)>| i.map_or(0, |&(c, _)| log_bucket(c));
        let (first_bucket, last_bucket) = (bucket_of(sorted.first()), bucket_of(sorted.last()));
        let bucket_starts =
            (first_bucket..=last_bucket).map(|b| sorted.partition_point(|&(c, _)| log_bucket(c) < b) as u32).collect();
        Counts {
            first_hit: vec![(0.0, 0.0); sorted.len()],
            sorted,
            requests: 0.0,
            bytes: 0.0,
            first_bucket,
            bucket_starts,
        }
    }

    /// The first of `sorted` at or above `needed`: the bucket's start, then
    /// a step or two, where a binary search over every size was a chain of
    /// dependent loads on every request.
    fn first_at_least(&self, needed: u64) -> usize {
        let start = match log_bucket(needed).checked_sub(self.first_bucket) {
            None => return 0,
            Some(offset) => match self.bucket_starts.get(offset) {
                Some(&start) => start as usize,
                None => return self.sorted.len(),
            },
        };
        start + self.sorted[start..].iter().take_while(|&&(c, _)| c < needed).count()
    }

    fn record(&mut self, needed: Option<u64>, size: u64, weight: f64) {
        self.record_in(self.bucket(needed), size, weight);
    }

    /// Records a request whose [`bucket`](Self::bucket) is known.
    fn record_in(&mut self, bucket: usize, size: u64, weight: f64) {
        self.add_in(bucket, weight, weight * size as f64);
    }

    /// Records requests of `bytes` in all that share a known bucket.
    fn add_in(&mut self, bucket: usize, requests: f64, bytes: f64) {
        self.requests += requests;
        self.bytes += bytes;
        if let Some(first_hits) = self.first_hit.get_mut(bucket) {
            first_hits.0 += requests;
            first_hits.1 += bytes;
        }
    }

    /// Where a request of `needed` bytes first hits: the index of the
    /// first size at or above it in ascending order, `sorted.len()` for a
    /// request that misses at every size (`None`: a first request).
    fn bucket(&self, needed: Option<u64>) -> usize {
        needed.map_or(self.sorted.len(), |needed| self.first_at_least(needed))
    }

    /// Per size, ascending: its place in the caller's order, its bytes,
    /// and the (weighted) hits and hit bytes at it.
    fn hits_by_size(&self) -> impl Iterator<Item = (usize, u64, f64, f64)> + '_ {
        self.sorted.iter().zip(&self.first_hit).scan((0.0, 0.0), |sum, (&(cache_bytes, index), &(hits, bytes))| {
            sum.0 += hits;
            sum.1 += bytes;
            Some((index, cache_bytes, sum.0, sum.1))
        })
    }

    /// Results at each size in the caller's order. With `totals` (the
    /// requests and bytes of the whole stream), a sample's misses are
    /// divided by the whole stream's count rather than the sample's own
    /// (SHARDS_adj): a sample that drew a hot item by chance then does not
    /// also count that item's hits against every other request.
    fn results(&self, policy: &str, totals: Option<(u64, u64)>) -> Vec<SimResult> {
        let whole = totals.map_or((self.requests, self.bytes), |(r, b)| (r as f64, b as f64));
        in_callers_order(self.hits_by_size().map(|(index, cache_bytes, hits, hit_bytes)| {
            let missed = (self.requests - hits, self.bytes - hit_bytes);
            (index, estimated(policy, cache_bytes, whole, missed))
        }))
    }
}

/// The result of a stream of `(requests, bytes)` of which `missed` missed
/// (estimates, rounded; misses beyond the stream count as all of it).
fn estimated(policy: &str, cache_bytes: u64, (requests, bytes): (f64, f64), missed: (f64, f64)) -> SimResult {
    SimResult {
        policy: policy.to_string(),
        cache_bytes,
        requests: requests.round() as u64,
        hits: (requests - missed.0).max(0.0).round() as u64,
        bytes: bytes.round() as u64,
        hit_bytes: (bytes - missed.1).max(0.0).round() as u64,
        interval_miss_ratios: Vec::new(),
        train_seconds: None,
    }
}

/// Results given with their place in the caller's order, put in it.
fn in_callers_order(results: impl Iterator<Item = (usize, SimResult)>) -> Vec<SimResult> {
    let mut placed: Vec<(usize, SimResult)> = results.collect();
    placed.sort_unstable_by_key(|&(index, _)| index);
    placed.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::{fill_next_access, Op};
    use proptest::prelude::*;

    pub(super) fn accesses(items: &[(u64, u32)]) -> Vec<Access> {
        items
            .iter()
            .enumerate()
            .map(|(i, &(key, size))| Access { key, size, vtime: i as u64, next_access: 0, op: Op::Read, ctx: 0 })
            .collect()
    }

    /// The results of a full LRU simulation at each of `sizes`.
    fn full_lru(accesses: Vec<Access>, sizes: &[u64]) -> Vec<SimResult> {
        let run = |cache_bytes: u64| {
            let mut lru = hearth_policy::build("lru", cache_bytes).unwrap();
            let (mut hits, mut bytes, mut hit_bytes) = (0, 0, 0);
            for a in &accesses {
                bytes += u64::from(a.size);
                if lru.access(a, &mut Vec::new()) {
                    hits += 1;
                    hit_bytes += u64::from(a.size);
                }
            }
            let requests = accesses.len() as u64;
            let policy = lru.name();
            SimResult {
                policy,
                cache_bytes,
                requests,
                hits,
                bytes,
                hit_bytes,
                interval_miss_ratios: Vec::new(),
                train_seconds: None,
            }
        };
        sizes.iter().map(|&cache_bytes| run(cache_bytes)).collect()
    }

    pub(super) fn one_pass(accesses: &[Access], sizes: &[u64]) -> Vec<SimResult> {
        let mut sd = StackDistances::new(sizes);
        accesses.iter().for_each(|a| sd.access(a));
        sd.results()
    }

    /// The same pass finding items by their next use instead of their key.
    fn one_pass_by_next_use(accesses: &[Access], sizes: &[u64]) -> Vec<SimResult> {
        let mut with_next = accesses.to_vec();
        fill_next_access(&mut with_next);
        let mut sd = StackDistances::with_next_uses(sizes);
        sd.access_all(&with_next);
        sd.results()
    }

    #[test]
    fn tags_follow_their_items_through_renumbering() {
        // Far more requests than the first slot table holds; each item's
        // first request tags it with its key, and every later one must find
        // that tag, whichever index finds the item.
        let items: Vec<(u64, u32)> =
            (0..(MIN_SLOTS as u64 * 5)).map(|i| ((i * 7919) % 3001, 1 + (i % 3) as u32)).collect();
        let mut with_next = accesses(&items);
        fill_next_access(&mut with_next);
        for mut sd in [StackDistances::new(&[10]), StackDistances::with_next_uses(&[10])] {
            for a in &with_next {
                let (above, tag) = sd.push_tagged(a, a.size, || a.key as u32);
                assert_eq!(tag, a.key as u32, "vtime {}", a.vtime);
                assert_eq!(above.is_none(), a.vtime < 3001);
            }
            assert!(sd.tags.len() >= sd.live);
        }
    }

    #[test]
    fn renumbering_keeps_the_counts_exact() {
        // Far more requests than the first slot table holds, over few items.
        let items: Vec<(u64, u32)> = (0..(MIN_SLOTS as u64 * 5)).map(|i| ((i * 7919) % 3001, 1)).collect();
        let sizes = [1, 10, 100, 1000, 2000, 3000, 4000];
        let a = accesses(&items);
        assert_eq!(one_pass_by_next_use(&a, &sizes), one_pass(&a, &sizes));
        assert_eq!(one_pass(&a, &sizes), full_lru(a, &sizes));
    }

    #[test]
    fn a_second_size_after_renumbering_keeps_the_counts_exact() {
        // One size across renumberings (the table holds live bits), then a
        // second set of keys of another size (it turns into sizes) across
        // more renumberings; each key keeps its size, as exactness needs.
        let half = MIN_SLOTS as u64 * 2;
        let items: Vec<(u64, u32)> = (0..2 * half)
            .map(|i| match i < half || i % 2 == 0 {
                true => ((i * 7919) % 5003, 4),
                false => (100_000 + (i * 31) % 2000, 9),
            })
            .collect();
        let sizes = [4, 400, 4000, 20_000, 40_000];
        let a = accesses(&items);
        assert_eq!(one_pass_by_next_use(&a, &sizes), one_pass(&a, &sizes));
        assert_eq!(one_pass(&a, &sizes), full_lru(a, &sizes));
    }

    #[test]
    fn next_uses_span_many_windows() {
        // Reuse distances from 1 to several windows, across renumberings.
        let items: Vec<(u64, u32)> = (0..(WINDOW * 6))
            .map(|i| (if i % 3 == 0 { i % 7 } else { (i * 2654435761) % 150_000 }, 1 + (i % 5) as u32))
            .collect();
        let mut a = accesses(&items);
        // One size per item, as the exactness needs.
        a.iter_mut().for_each(|x| x.size = 1 + (x.key % 5) as u32);
        let sizes = [100, 10_000, 100_000, 400_000];
        assert_eq!(one_pass_by_next_use(&a, &sizes), one_pass(&a, &sizes));
    }

    proptest! {
        #[test]
        fn the_bucketed_search_finds_what_a_binary_search_does(
            sizes in proptest::collection::vec(1u64..1 << 40, 0..50),
            needed in proptest::collection::vec(1u64..1 << 42, 1..200),
        ) {
            let counts = Counts::new(&sizes);
            let grid = counts.sorted.iter().map(|&(c, _)| c);
            for n in needed.into_iter().chain(grid.clone()).chain(grid.map(|c| c + 1)) {
                prop_assert_eq!(counts.first_at_least(n), counts.sorted.partition_point(|&(c, _)| c < n), "{}", n);
            }
        }

        // Each key keeps one size, and no item outgrows the smallest cache.
        #[test]
        fn one_pass_equals_full_lru_simulation(
            keys in proptest::collection::vec(0u64..60, 1..600),
            mut sizes in proptest::collection::vec(8u64..400, 1..8),
        ) {
            let items: Vec<(u64, u32)> = keys.iter().map(|&k| (k, (k % 8 + 1) as u32)).collect();
            sizes.dedup();
            let a = accesses(&items);
            prop_assert_eq!(one_pass_by_next_use(&a, &sizes), one_pass(&a, &sizes));
            prop_assert_eq!(one_pass(&a, &sizes), full_lru(a, &sizes));
        }
    }
}

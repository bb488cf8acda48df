//! One-pass LRU miss-ratio curves from stack distances (Mattson et al. 1970).
//!
//! LRU is a stack algorithm: a request hits in an LRU cache of `C` bytes
//! exactly when the bytes of the distinct items requested since the item's
//! previous request, plus the item itself, fit in `C`. So one pass that
//! measures that "needed size" for every request gives the hit count at
//! every cache size at once. Needed sizes come from a Fenwick tree over
//! request slots holding each item's size at its latest slot (O(log n) per
//! request); the slots are renumbered when they run out, so memory follows
//! the number of distinct items, not the trace's length.
//!
//! The counts equal a full [`Lru`](hearth_policy::Lru) simulation when every
//! item keeps one size and none is larger than the smallest cache (always
//! true in block mode): LRU then keeps exactly the most recent prefix of the
//! stack that fits.
//!
//! [`Shards`] samples items by a hash of their key (Waldspurger et al.,
//! FAST '15) and scales the distances it measures by the sampling rate: a
//! curve from 1% of the items, at about 1% of the cost.

use std::collections::BinaryHeap;

use hearth_core::{key_map, Access, KeyMap};
use hearth_trace::sample;

use crate::SimResult;

/// Fewest request slots the tree starts with.
const MIN_SLOTS: usize = 1 << 16;
/// Marks a slot whose item has been requested again since.
const EMPTY_SLOT: u64 = u64::MAX;

/// Needed cache sizes of a request stream, counted per cache size.
pub struct StackDistances {
    /// Item -> (slot of its latest request, its size).
    latest: KeyMap<(u32, u32)>,
    /// Fenwick tree of sizes by slot.
    tree: Vec<u64>,
    /// The item whose latest request is in each slot, or [`EMPTY_SLOT`].
    slot_keys: Vec<u64>,
    next_slot: usize,
    /// Sum of every tracked item's size (the whole tree), so the bytes above
    /// an item take one prefix sum rather than two.
    total: u64,
    counts: Counts,
}

impl StackDistances {
    /// Counts hits at each of `cache_bytes` (any order).
    pub fn new(cache_bytes: &[u64]) -> StackDistances {
        StackDistances {
            latest: key_map(1024),
            tree: vec![0; MIN_SLOTS + 1],
            slot_keys: vec![EMPTY_SLOT; MIN_SLOTS],
            next_slot: 0,
            total: 0,
            counts: Counts::new(cache_bytes),
        }
    }

    /// Records one request.
    pub fn access(&mut self, a: &Access) {
        let size = a.size.max(1);
        let needed = self.push(a.key, size).map(|d| d + u64::from(size));
        self.counts.record(needed, u64::from(size), 1.0);
    }

    /// Moves `key` to the top of the stack; returns the bytes of the distinct
    /// items above it before the move (`None` for its first request).
    fn push(&mut self, key: u64, size: u32) -> Option<u64> {
        if self.next_slot == self.slot_keys.len() {
            self.renumber();
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        let previous = self.latest.insert(key, (slot as u32, size));
        let above = previous.map(|(prev, prev_size)| {
            let prev = prev as usize;
            self.slot_keys[prev] = EMPTY_SLOT;
            // Every slot after `prev` is more recent (`slot` is still empty).
            let above = self.total - self.prefix_sum(prev + 1);
            self.add(prev, -i64::from(prev_size));
            self.total -= u64::from(prev_size);
            above
        });
        self.slot_keys[slot] = key;
        self.add(slot, i64::from(size));
        self.total += u64::from(size);
        above
    }

    /// Drops `key` from the stack (SHARDS stops tracking it).
    fn forget(&mut self, key: u64) {
        if let Some((slot, size)) = self.latest.remove(&key) {
            self.slot_keys[slot as usize] = EMPTY_SLOT;
            self.add(slot as usize, -i64::from(size));
            self.total -= u64::from(size);
        }
    }

    /// Packs live slots to the front, keeping their order, and makes room for
    /// as many new requests as there are items (amortised O(1) a request).
    fn renumber(&mut self) {
        let live = self.latest.len();
        let slots = (2 * live).max(MIN_SLOTS);
        let mut keys = Vec::with_capacity(slots);
        keys.extend(self.slot_keys.iter().copied().filter(|&k| k != EMPTY_SLOT));
        keys.resize(slots, EMPTY_SLOT);
        self.tree.clear();
        self.tree.resize(slots + 1, 0);
        for (slot, &key) in keys.iter().take(live).enumerate() {
            let entry = self.latest.get_mut(&key).expect("a live slot's item is tracked");
            entry.0 = slot as u32;
            self.tree[slot + 1] = u64::from(entry.1);
        }
        // Linear-time Fenwick build: push each node's sum to its parent.
        for i in 1..=slots {
            let parent = i + (i & i.wrapping_neg());
            if parent <= slots {
                self.tree[parent] += self.tree[i];
            }
        }
        self.slot_keys = keys;
        self.next_slot = live;
    }

    /// Sum of sizes in slots `0..end`.
    fn prefix_sum(&self, end: usize) -> u64 {
        let (mut i, mut sum) = (end, 0);
        while i > 0 {
            sum += self.tree[i];
            i &= i - 1;
        }
        sum
    }

    fn add(&mut self, slot: usize, delta: i64) {
        let mut i = slot + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// LRU results at each cache size, in the order given to `new`.
    pub fn results(&self) -> Vec<SimResult> {
        self.counts.results("LRU", None)
    }
}

/// Requests, bytes and hits per cache size, weighted (SHARDS counts a
/// sampled request as 1/rate requests).
struct Counts {
    /// Cache sizes ascending, and each one's index in the caller's order.
    sorted: Vec<(u64, usize)>,
    /// Requests (and their bytes) whose needed size is at most
    /// `sorted[i]` but above `sorted[i - 1]`.
    first_hit: Vec<(f64, f64)>,
    requests: f64,
    bytes: f64,
}

impl Counts {
    fn new(cache_bytes: &[u64]) -> Counts {
        let mut sorted: Vec<(u64, usize)> = cache_bytes.iter().copied().zip(0..).collect();
        sorted.sort_unstable();
        Counts { first_hit: vec![(0.0, 0.0); sorted.len()], sorted, requests: 0.0, bytes: 0.0 }
    }

    fn record(&mut self, needed: Option<u64>, size: u64, weight: f64) {
        self.requests += weight;
        self.bytes += weight * size as f64;
        if let Some(needed) = needed {
            let i = self.sorted.partition_point(|&(c, _)| c < needed);
            if let Some(bucket) = self.first_hit.get_mut(i) {
                bucket.0 += weight;
                bucket.1 += weight * size as f64;
            }
        }
    }

    /// Results at each size in the caller's order. With `totals` (the
    /// requests and bytes of the whole stream), a sample's misses are
    /// divided by the whole stream's count rather than the sample's own
    /// (SHARDS_adj): a sample that drew a hot item by chance then does not
    /// also count that item's hits against every other request.
    fn results(&self, policy: &str, totals: Option<(u64, u64)>) -> Vec<SimResult> {
        let (requests, bytes) = totals.map_or((self.requests, self.bytes), |(r, b)| (r as f64, b as f64));
        let mut out: Vec<Option<SimResult>> = self.sorted.iter().map(|_| None).collect();
        let (mut hits, mut hit_bytes) = (0.0, 0.0);
        for (&(cache_bytes, index), &(h, b)) in self.sorted.iter().zip(&self.first_hit) {
            hits += h;
            hit_bytes += b;
            let (misses, miss_bytes) = (self.requests - hits, self.bytes - hit_bytes);
            out[index] = Some(SimResult {
                policy: policy.to_string(),
                cache_bytes,
                requests: requests.round() as u64,
                hits: (requests - misses).max(0.0).round() as u64,
                bytes: bytes.round() as u64,
                hit_bytes: (bytes - miss_bytes).max(0.0).round() as u64,
                interval_miss_ratios: Vec::new(),
            });
        }
        out.into_iter().map(|r| r.expect("one result per size")).collect()
    }
}

/// How SHARDS picks its sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShardsMode {
    /// Every item whose key hashes below `rate` of the hash range.
    FixedRate(f64),
    /// At most this many items: start at rate 1 and lower the rate to drop
    /// the highest-hashing tracked item whenever one more would be too many
    /// (SHARDS "fixed size": bounded memory whatever the footprint).
    FixedSize(usize),
}

/// An approximate LRU miss-ratio curve from a spatial sample of the items.
pub struct Shards {
    mode: ShardsMode,
    /// Items whose hash is below this are sampled.
    threshold: u64,
    stack: StackDistances,
    /// Tracked items by hash, to find the highest when the sample is full.
    tracked: BinaryHeap<(u64, u64)>,
    /// Requests and bytes of the whole stream, sampled or not.
    totals: (u64, u64),
}

impl Shards {
    pub fn new(mode: ShardsMode, cache_bytes: &[u64]) -> Result<Shards, String> {
        let threshold = match mode {
            ShardsMode::FixedRate(rate) if rate > 0.0 && rate <= 1.0 => sample::threshold(rate),
            ShardsMode::FixedRate(rate) => return Err(format!("sampling rate {rate} is not in (0, 1]")),
            ShardsMode::FixedSize(0) => return Err("a SHARDS sample needs room for at least one item".into()),
            ShardsMode::FixedSize(_) => u64::MAX,
        };
        Ok(Shards {
            mode,
            threshold,
            stack: StackDistances::new(cache_bytes),
            tracked: BinaryHeap::new(),
            totals: (0, 0),
        })
    }

    /// Records one request of the full stream (most are not sampled).
    pub fn access(&mut self, a: &Access) {
        self.totals.0 += 1;
        self.totals.1 += u64::from(a.size.max(1));
        if !sample::keeps(a.key, self.threshold) {
            return;
        }
        let size = a.size.max(1);
        let fresh = !self.stack.latest.contains_key(&a.key);
        let above = self.stack.push(a.key, size);
        if let (ShardsMode::FixedSize(limit), true) = (self.mode, fresh) {
            self.tracked.push((sample::key_hash(a.key), a.key));
            while self.tracked.len() > limit {
                let (top, _) = *self.tracked.peek().expect("over the limit, so not empty");
                // Lower the rate past every item sharing the top hash.
                while self.tracked.peek().is_some_and(|&(h, _)| h == top) {
                    let (_, key) = self.tracked.pop().expect("peeked");
                    self.stack.forget(key);
                }
                self.threshold = top;
            }
            if !sample::keeps(a.key, self.threshold) {
                return;
            }
        }
        let rate = sample::rate_of(self.threshold);
        let needed = above.map(|d| (d as f64 / rate).round() as u64 + u64::from(size));
        self.stack.counts.record(needed, u64::from(size), 1.0 / rate);
    }

    /// The sampling rate in force now (it only falls, in fixed-size mode).
    pub fn rate(&self) -> f64 {
        sample::rate_of(self.threshold)
    }

    /// Estimated LRU results at each cache size, in the order given to `new`.
    pub fn results(&self) -> Vec<SimResult> {
        self.stack.counts.results("LRU", Some(self.totals))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run_jobs, Job, Trace};
    use hearth_core::Op;
    use proptest::prelude::*;

    fn accesses(items: &[(u64, u32)]) -> Vec<Access> {
        items
            .iter()
            .enumerate()
            .map(|(i, &(key, size))| Access { key, size, vtime: i as u64, next_access: 0, op: Op::Read, ctx: 0 })
            .collect()
    }

    fn full_lru(accesses: Vec<Access>, sizes: &[u64]) -> Vec<SimResult> {
        let trace = Trace::from_accesses(accesses, hearth_trace::Mode::Object);
        let jobs: Vec<Job> = sizes.iter().map(|&cache_bytes| Job { policy: "lru".into(), cache_bytes }).collect();
        run_jobs(&trace, &jobs, 1, &|_| {}).unwrap()
    }

    fn one_pass(accesses: &[Access], sizes: &[u64]) -> Vec<SimResult> {
        let mut sd = StackDistances::new(sizes);
        accesses.iter().for_each(|a| sd.access(a));
        sd.results()
    }

    #[test]
    fn renumbering_keeps_the_counts_exact() {
        // Far more requests than the first slot table holds, over few items.
        let items: Vec<(u64, u32)> = (0..(MIN_SLOTS as u64 * 5)).map(|i| ((i * 7919) % 3001, 1)).collect();
        let sizes = [1, 10, 100, 1000, 2000, 3000, 4000];
        let a = accesses(&items);
        assert_eq!(one_pass(&a, &sizes), full_lru(a, &sizes));
    }

    proptest! {
        // Each key keeps one size, and no item outgrows the smallest cache.
        #[test]
        fn one_pass_equals_full_lru_simulation(
            keys in proptest::collection::vec(0u64..60, 1..600),
            mut sizes in proptest::collection::vec(8u64..400, 1..8),
        ) {
            let items: Vec<(u64, u32)> = keys.iter().map(|&k| (k, (k % 8 + 1) as u32)).collect();
            sizes.dedup();
            let a = accesses(&items);
            prop_assert_eq!(one_pass(&a, &sizes), full_lru(a, &sizes));
        }
    }

    #[test]
    fn shards_at_rate_one_is_exact_and_fixed_size_caps_the_sample() {
        let items: Vec<(u64, u32)> = (0..50_000u64).map(|i| ((i * i) % 4099, 1)).collect();
        let a = accesses(&items);
        let sizes = [16, 256, 1024, 4096];
        let mut all = Shards::new(ShardsMode::FixedRate(1.0), &sizes).unwrap();
        a.iter().for_each(|x| all.access(x));
        assert_eq!(all.results(), one_pass(&a, &sizes));

        let mut capped = Shards::new(ShardsMode::FixedSize(200), &sizes).unwrap();
        a.iter().for_each(|x| capped.access(x));
        assert!(capped.stack.latest.len() <= 200);
        assert!(capped.rate() < 0.1, "4099 items into 200 slots: rate {}", capped.rate());
        for bad in [ShardsMode::FixedRate(0.0), ShardsMode::FixedRate(1.5), ShardsMode::FixedSize(0)] {
            assert!(Shards::new(bad, &sizes).is_err(), "{bad:?}");
        }
    }
}

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
//! The counts equal a full [`Lru`](hearth_policy::Lru) simulation when every
//! item keeps one size and none is larger than the smallest cache (always
//! true in block mode): LRU then keeps exactly the most recent prefix of the
//! stack that fits.
//!
//! [`Shards`] samples items by a hash of their key (Waldspurger et al.,
//! FAST '15) and scales the distances it measures by the sampling rate: a
//! curve from 1% of the items, at about 1% of the cost.

use std::collections::{BinaryHeap, VecDeque};

use hearth_core::{key_map, Access, KeyMap, NEVER};
use hearth_trace::sample;

use crate::minisim;
use crate::source::{SourceError, Streamed};
use crate::stack_slots::{Packing, Slots, GRAIN};
use crate::stream::run_pipelined;
use crate::{SettingError, SimResult};

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
        if let SlotIndex::ByNextUse(next_uses) = &self.index {
            if let Some(prev) = next_uses.peek(a.vtime) {
                self.slots.prefetch(prev);
            }
        }
    }

    /// Records one request.
    pub fn access(&mut self, a: &Access) {
        let size = a.size.max(1);
        let needed = self.push(a, size).map(|d| d + u64::from(size));
        self.counts.record(needed, u64::from(size), 1.0);
    }

    /// Moves the item to the top of the stack; returns the bytes of the
    /// distinct items above it before the move (`None` for its first request).
    fn push(&mut self, a: &Access, size: u32) -> Option<u64> {
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
                Some(above)
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
        self.requests += weight;
        self.bytes += weight * size as f64;
        if let Some(needed) = needed {
            let i = self.first_at_least(needed);
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

/// The exact LRU results of `trace` at each of `cache_bytes` (in that
/// order), from one pass. An oracleGeneral file is read through the
/// sampled reader keeping every key, a batch at a time on this thread: its
/// records decode in place in the read buffer, at a fraction of the cost of
/// the general reader's per-record dispatch and of handing chunks to
/// another thread. Other traces cost about as much to decode as the pass
/// itself, so another thread decodes them. `progress` receives accesses
/// read.
pub fn exact_pass(
    trace: &Streamed,
    cache_bytes: &[u64],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, SourceError> {
    let mut sd = if trace.records_next_access() {
        StackDistances::with_next_uses(cache_bytes)
    } else {
        StackDistances::new(cache_bytes)
    };
    let consume = |batch: &[Access]| {
        sd.access_all(batch);
        progress(batch.len() as u64);
    };
    if trace.source().records_next_access(trace.mode) {
        trace.sampled_accesses(u64::MAX)?.for_each_batch(consume)?;
    } else {
        run_pipelined(trace.accesses()?, consume)?;
    }
    Ok(sd.results())
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
    pub fn new(mode: ShardsMode, cache_bytes: &[u64]) -> Result<Shards, SettingError> {
        let threshold = match mode {
            ShardsMode::FixedRate(rate) if rate > 0.0 && rate <= 1.0 => sample::threshold(rate),
            ShardsMode::FixedRate(rate) => return Err(SettingError::SamplingRate { rate }),
            ShardsMode::FixedSize(0) => return Err(SettingError::EmptySample),
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
        if !sample::keeps(a.key, self.threshold) {
            self.skip(1, u64::from(a.size.max(1)));
            return;
        }
        self.record_sampled(a);
    }

    /// Records a request whose key the current threshold keeps.
    fn record_sampled(&mut self, a: &Access) {
        self.totals.0 += 1;
        self.totals.1 += u64::from(a.size.max(1));
        let size = a.size.max(1);
        // Only a fixed-size sample needs to know (a second lookup a request).
        let fresh = matches!(self.mode, ShardsMode::FixedSize(_)) && !self.stack.tracks(a.key);
        let above = self.stack.push(a, size);
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

    /// The hash threshold in force now (`hearth_trace::sample::keeps`); it
    /// only falls. A caller that drops requests whose keys are not kept at
    /// any threshold it read earlier drops none this would sample.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// Counts requests the caller did not offer because their keys are not
    /// sampled (see [`threshold`](Self::threshold)): the whole stream's
    /// totals include them.
    pub fn skip(&mut self, requests: u64, bytes: u64) {
        self.totals.0 += requests;
        self.totals.1 += bytes;
    }

    /// Estimated LRU results at each cache size, in the order given to `new`.
    pub fn results(&self) -> Vec<SimResult> {
        self.stack.counts.results("LRU", Some(self.totals))
    }

    /// Distinct keys in the sample now. Below [`TRUSTED_SAMPLE_KEYS`] the
    /// curve can be off by more than sampling at a higher rate would be.
    pub fn sampled_keys(&self) -> usize {
        self.stack.live
    }
}

/// Fewest distinct sampled keys a SHARDS curve is trusted with: the sample
/// size of the SHARDS paper's fixed-size variant (s_max = 8K), which the
/// paper found accurate across its traces. Fixed before any Hearth curve
/// was measured against it; front ends warn below it.
pub const TRUSTED_SAMPLE_KEYS: usize = 8192;

/// A SHARDS curve: one sample, or at a fixed rate one per rate its sizes
/// needed (see [`shards_pass`]).
pub struct ShardsCurve {
    rate: f64,
    results: Vec<SimResult>,
    sampled_keys: usize,
}

impl ShardsCurve {
    /// The rate asked for (fixed rate), or the one the sample ended at
    /// (fixed size).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Estimated LRU results, in the order of the sizes given.
    pub fn results(&self) -> Vec<SimResult> {
        self.results.clone()
    }

    /// Distinct keys of the smallest sample used (see [`TRUSTED_SAMPLE_KEYS`]).
    pub fn sampled_keys(&self) -> usize {
        self.sampled_keys
    }
}

/// Runs SHARDS over `trace`. At a fixed rate, a size whose cache scaled by
/// the rate would hold fewer than [`MIN_MINIATURE_OBJECTS`](minisim::MIN_MINIATURE_OBJECTS) objects is
/// estimated from a sample at twice the rate, again until it holds enough
/// (the rule miniature simulations follow, for the same reason: a scaled
/// cache of a few objects sees every sampled distance in steps of 1/rate
/// objects, and one sampled hot item decides its curve). Every rate's
/// sample is drawn in one read of the trace ([`fixed_rate_passes`]), and
/// only sampled accesses are decoded where the format allows
/// ([`Streamed::sampled_accesses`]). Fixed-size SHARDS lowers its rate as
/// it goes, so it reads every access once. `progress` receives accesses
/// read.
pub fn shards_pass(
    trace: &Streamed,
    mode: ShardsMode,
    cache_bytes: &[u64],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ShardsCurve, SourceError> {
    let ShardsMode::FixedRate(rate) = mode else {
        let mut shards = Shards::new(mode, cache_bytes)?;
        run_pipelined(trace.accesses()?, |chunk| {
            chunk.iter().for_each(|a| shards.access(a));
            progress(chunk.len() as u64);
        })?;
        return Ok(ShardsCurve { rate: shards.rate(), results: shards.results(), sampled_keys: shards.sampled_keys() });
    };
    Shards::new(mode, cache_bytes)?; // checks the rate before any pass
    let groups = minisim::raised_rates(trace, cache_bytes, rate, minisim::ObjectSize::Mean);
    let passes: Vec<(f64, Vec<u64>)> =
        groups.iter().map(|(rate, members)| (*rate, members.iter().map(|&i| cache_bytes[i]).collect())).collect();
    let samples = fixed_rate_passes(trace, &passes, progress)?;
    let mut results: Vec<Option<SimResult>> = vec![None; cache_bytes.len()];
    for ((_, members), shards) in groups.iter().zip(&samples) {
        for (&i, r) in members.iter().zip(shards.results()) {
            results[i] = Some(r);
        }
    }
    let sampled_keys = samples.iter().map(Shards::sampled_keys).min().unwrap_or(0);
    let results = results.into_iter().map(|r| r.expect("every size is in a group")).collect();
    Ok(ShardsCurve { rate, results, sampled_keys })
}

/// SHARDS at each (rate, sizes) of `passes`, from one read of the trace
/// that decodes only the accesses the densest sample keeps where it can.
/// Thresholds nest, so every sparser sample's accesses are among them:
/// each is offered to every sample, which records it or counts it as
/// skipped, exactly as a pass of its own would.
fn fixed_rate_passes(
    trace: &Streamed,
    passes: &[(f64, Vec<u64>)],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Shards>, SourceError> {
    let mut samples: Vec<Shards> = passes
        .iter()
        .map(|(rate, sizes)| Shards::new(ShardsMode::FixedRate(*rate), sizes))
        .collect::<Result<_, _>>()?;
    let Some(densest) = samples.iter().map(Shards::threshold).max() else {
        return Ok(samples);
    };
    let mut sampled = trace.sampled_accesses(densest)?;
    let (mut kept, mut reported) = (0u64, 0u64);
    let mut report = |kept: u64, skipped: u64| {
        progress(kept + skipped - reported);
        reported = kept + skipped;
    };
    while let Some(a) = sampled.next() {
        let a = a?;
        samples.iter_mut().for_each(|shards| shards.access(&a));
        kept += 1;
        if kept.is_multiple_of(1 << 12) {
            report(kept, sampled.skipped().requests);
        }
    }
    let skipped = sampled.skipped();
    report(kept, skipped.requests);
    samples.iter_mut().for_each(|shards| shards.skip(skipped.requests, skipped.bytes));
    Ok(samples)
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

    /// The same pass finding items by their next use instead of their key.
    fn one_pass_by_next_use(accesses: &[Access], sizes: &[u64]) -> Vec<SimResult> {
        let mut with_next = accesses.to_vec();
        hearth_trace::fill_next_access(&mut with_next);
        let mut sd = StackDistances::with_next_uses(sizes);
        sd.access_all(&with_next);
        sd.results()
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
        assert!(capped.stack.live <= 200);
        assert!(capped.rate() < 0.1, "4099 items into 200 slots: rate {}", capped.rate());
        for bad in [ShardsMode::FixedRate(0.0), ShardsMode::FixedRate(1.5), ShardsMode::FixedSize(0)] {
            assert!(Shards::new(bad, &sizes).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn small_caches_are_estimated_from_a_denser_sample() {
        use crate::source::{Needs, TraceSource};
        let source = TraceSource { requests: 200_000, ..TraceSource::new("synth:zipf:200000:0.8") };
        let trace = Streamed::open(&source, Needs::default(), &()).unwrap();
        // At 1%, 100 blocks of 4 KiB need a 40 MiB cache: 4 MiB needs 16%.
        let (small, large) = (4 << 20, 64 << 20);
        let curve = shards_pass(&trace, ShardsMode::FixedRate(0.01), &[small, large], &|_| {}).unwrap();
        let at = |rate: f64, size: u64| {
            let alone = fixed_rate_passes(&trace, &[(rate, vec![size])], &|_| {}).unwrap();
            alone[0].results().remove(0)
        };
        assert_eq!(curve.results(), vec![at(0.16, small), at(0.01, large)]);
        assert_eq!(curve.rate(), 0.01);
        assert_ne!(at(0.16, small), at(0.01, small), "the case should tell the rates apart");
    }
}

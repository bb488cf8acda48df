//! W-TinyLFU (Einziger, Friedman & Manes, "TinyLFU: A Highly Efficient Cache
//! Admission Policy", ACM ToS 2017), with Caffeine's frequency sketch and the
//! window and main caches arranged as libCacheSim's `WTinyLFU`.
//!
//! New items enter a small LRU window (1% of the bytes by default,
//! `wtinylfu:window=F`). The rest is the main cache, a segmented LRU with a
//! probationary and a protected segment (`protected=F` of it, 0.8 by
//! default): a hit in probation moves an item to the protected head, and a
//! protected segment over budget demotes its LRU items to the probation head.
//! When the cache is full, the window's LRU item (the candidate) moves to the
//! main cache if that has room; otherwise it is compared with the main
//! cache's victim (the LRU item of probation, or of protected when probation
//! is empty), and only a candidate estimated strictly more frequent replaces
//! it, otherwise the candidate is evicted. So an item must prove itself more
//! popular than what it displaces, which keeps scans and one-hit wonders out
//! of the main cache.
//!
//! Frequencies come from a count-min sketch of 4-bit counters (depth 4) as in
//! Caffeine: it is sized, and resized, by the number of resident items once
//! the cache is half full (as Caffeine does for weighted caches) and counts
//! nothing before; every hit and every insertion is a sample, and after 10 x
//! its item capacity samples all counters are halved, so old popularity
//! fades. In front of it a doorkeeper Bloom filter (TinyLFU's) absorbs each
//! key's first sample in the current period, so one-hit wonders cost no
//! counters; it is cleared at each halving.
//!
//! As in libCacheSim, nothing leaves the window until the whole cache is
//! full, so a cold cache fills completely before admission starts. Following
//! libCacheSim's SLRU, a window item moved into the main cache goes
//! to the lowest segment with room (so an empty main cache fills protected
//! too), and a hit can evict: when demotions overfill probation, its LRU
//! items leave at once. Those victims, and main-cache victims of an
//! admission beyond the one compared, are reported by the next `insert` or
//! `evict` call. Items larger than the window or the probation segment are
//! not admitted.
//!
//! `wtinylfu:freq=exact` counts as libCacheSim's `WTinyLFU` does instead,
//! and then matches its miss counts exactly: an insertion, a main-cache hit
//! (not a window hit) and every time an item is the window's candidate add
//! one to its count, and counts are halved once per 32 x main-cache-bytes
//! main-cache hits. libCacheSim keeps them in a counting Bloom filter of
//! unbounded counters sized by the main cache's bytes, so large that its
//! estimates are practically exact; Hearth keeps an exact count per key ever
//! seen, so memory grows with the number of distinct keys. The default
//! sketch forgets what it counted before the cache was half full, saturates
//! at 16 and halves far more often: on cloudPhysicsIO at 128 MiB..1 GiB its
//! miss counts differ from libCacheSim's by -2.8% to +5.7%.
//!
//! Caffeine's random admission of some warm candidates (a defence against
//! hash flooding) is left out to stay deterministic. Next to Caffeine 3.3.1
//! itself (`scripts/bench-caffeine.sh`; figures and causes in
//! `scripts/caffeine/README.md`) hit ratios differ by up to 2.5 points,
//! mostly because Caffeine adapts its window and this one is fixed.

use crate::SpecError;
use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

/// How candidate and victim frequencies are estimated (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frequency {
    /// Caffeine's count-min sketch with a doorkeeper (the default).
    Sketch,
    /// libCacheSim's counting, kept exactly.
    Exact,
}

impl std::str::FromStr for Frequency {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "sketch" => Ok(Frequency::Sketch),
            "exact" => Ok(Frequency::Exact),
            _ => Err(SpecError::range("wtinylfu", format!("freq must be \"sketch\" or \"exact\", got {s:?}"))),
        }
    }
}

/// The three LRU lists; the discriminant indexes `lists`, `bytes` and `budgets`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Segment {
    Window = 0,
    Probation = 1,
    Protected = 2,
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    segment: Segment,
}

pub struct WTinyLfu {
    capacity: u64,
    /// Byte budget of the main cache (probation and protected together).
    main_budget: u64,
    budgets: [u64; 3],
    index: KeyIndex,
    slab: Slab<Entry>,
    /// MRU at the head of each list.
    lists: [List; 3],
    bytes: [u64; 3],
    estimator: Estimator,
    /// Keys evicted but not yet reported (see the module doc).
    unreported: Vec<Key>,
}

impl WTinyLfu {
    /// A W-TinyLFU cache whose window gets `window` of the capacity, whose
    /// protected segment gets `protected` of the rest, estimating frequencies
    /// by `frequency`.
    pub fn new(capacity: u64, window: f64, protected: f64, frequency: Frequency) -> Result<Self, SpecError> {
        if !(0.0..1.0).contains(&window) {
            return Err(SpecError::range("wtinylfu", format!("window must be in [0, 1), got {window}")));
        }
        if !(0.0..1.0).contains(&protected) {
            return Err(SpecError::range("wtinylfu", format!("protected must be in [0, 1), got {protected}")));
        }
        // Truncating products, as libCacheSim sizes its window and segments.
        let window_budget = (capacity as f64 * window) as u64;
        let main_budget = capacity - window_budget;
        // Probation gets the remainder, as in Caffeine.
        let protected_budget = (main_budget as f64 * protected) as u64;
        let probation_budget = main_budget - protected_budget;
        Ok(WTinyLfu {
            capacity,
            main_budget,
            budgets: [window_budget, probation_budget, protected_budget],
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            lists: [List::new(); 3],
            bytes: [0; 3],
            estimator: match frequency {
                Frequency::Sketch => Estimator::Sketch(FrequencySketch::default()),
                Frequency::Exact => Estimator::Exact(ExactCounts::new(32 * main_budget)),
            },
            unreported: Vec::new(),
        })
    }

    fn main_bytes(&self) -> u64 {
        self.bytes[Segment::Probation as usize] + self.bytes[Segment::Protected as usize]
    }

    fn attach_front(&mut self, i: u32, segment: Segment) {
        let e = self.slab.get_mut(i);
        e.segment = segment;
        self.bytes[segment as usize] += u64::from(e.size);
        self.slab.push_front(&mut self.lists[segment as usize], i);
    }

    fn detach(&mut self, i: u32) {
        let e = *self.slab.get(i);
        self.slab.unlink(&mut self.lists[e.segment as usize], i);
        self.bytes[e.segment as usize] -= u64::from(e.size);
    }

    /// Detaches and frees slot `i`; returns its key.
    fn forget(&mut self, i: u32) -> Key {
        self.detach(i);
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        e.key
    }

    /// The main cache's next victim: probation's LRU item, else protected's.
    fn main_victim(&self) -> Option<u32> {
        self.lists[Segment::Probation as usize].tail().or_else(|| self.lists[Segment::Protected as usize].tail())
    }

    /// Puts the detached slot `i` into the lowest main segment with room for
    /// it; if neither has, evicts main victims until the main cache has room
    /// and uses probation.
    fn enter_main(&mut self, i: u32) {
        let size = u64::from(self.slab.get(i).size);
        let fits = |s: Segment| self.bytes[s as usize] + size <= self.budgets[s as usize];
        let segment = if fits(Segment::Probation) {
            Segment::Probation
        } else if fits(Segment::Protected) {
            Segment::Protected
        } else {
            while self.main_bytes() + size > self.main_budget {
                let Some(victim) = self.main_victim() else { break };
                let key = self.forget(victim);
                self.unreported.push(key);
            }
            Segment::Probation
        };
        self.attach_front(i, segment);
    }

    /// After a promotion: demotes protected's LRU items while it is over
    /// budget; if any were, evicts probation's while that is. (An admission
    /// can leave probation over budget; as in libCacheSim, only demotions
    /// make it shed items.)
    fn rebalance_main(&mut self) {
        let mut demoted = false;
        while self.bytes[Segment::Protected as usize] > self.budgets[Segment::Protected as usize] {
            let Some(i) = self.lists[Segment::Protected as usize].tail() else { break };
            self.detach(i);
            self.attach_front(i, Segment::Probation);
            demoted = true;
        }
        while demoted && self.bytes[Segment::Probation as usize] > self.budgets[Segment::Probation as usize] {
            let Some(i) = self.lists[Segment::Probation as usize].tail() else { break };
            let key = self.forget(i);
            self.unreported.push(key);
        }
    }
}

impl Policy for WTinyLfu {
    fn name(&self) -> String {
        "W-TinyLFU".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.bytes.iter().sum()
    }
    fn len(&self) -> usize {
        self.index.len()
    }
    fn contains(&self, key: Key) -> bool {
        self.index.contains_key(&key)
    }
    fn warm(&self, key: Key) {
        if let Some(&i) = self.index.get(&key) {
            self.slab.prefetch(i);
        }
    }
    /// The index slot, and what the request will count: none of it waits
    /// on a read, since each address follows from the key alone.
    fn warm_index(&self, key: Key) {
        self.index.prefetch(key);
        self.estimator.prefetch(key);
    }
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        let segment = self.slab.get(i).segment;
        self.estimator.record_hit(a.key, segment);
        match segment {
            Segment::Window => self.slab.move_to_front(&mut self.lists[Segment::Window as usize], i),
            Segment::Protected => self.slab.move_to_front(&mut self.lists[Segment::Protected as usize], i),
            Segment::Probation => {
                self.detach(i);
                self.attach_front(i, Segment::Protected);
                self.rebalance_main();
            }
        }
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        evicted.append(&mut self.unreported);
        let size = u64::from(a.size);
        if size > self.budgets[Segment::Window as usize] || size > self.budgets[Segment::Probation as usize] {
            return;
        }
        let half_full = self.occupancy() >= self.capacity / 2;
        self.estimator.record_insertion(a.key, half_full.then_some(self.len() + 1));
        self.make_room(a, evicted);
        evicted.append(&mut self.unreported);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, segment: Segment::Window });
        self.index.insert(a.key, i);
        self.attach_front(i, Segment::Window);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if let Some(key) = self.unreported.pop() {
            return Some(key);
        }
        loop {
            let Some(candidate) = self.lists[Segment::Window as usize].tail() else {
                let victim = self.main_victim()?;
                return Some(self.forget(victim));
            };
            let Entry { key: candidate_key, size, .. } = *self.slab.get(candidate);
            if self.main_bytes() + u64::from(size) <= self.main_budget {
                self.detach(candidate);
                self.enter_main(candidate);
                self.estimator.record_candidate(candidate_key);
                continue;
            }
            let victim = self.main_victim().expect("a main cache without room holds something");
            let admit = self.estimator.frequency(candidate_key) > self.estimator.frequency(self.slab.get(victim).key);
            self.estimator.record_candidate(candidate_key);
            if admit {
                let key = self.forget(victim);
                self.detach(candidate);
                self.enter_main(candidate);
                return Some(key);
            }
            return Some(self.forget(candidate));
        }
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else {
            self.unreported.retain(|&k| k != key);
            return false;
        };
        self.forget(i);
        true
    }
}

/// Where frequencies come from, and which events count.
enum Estimator {
    Sketch(FrequencySketch),
    Exact(ExactCounts),
}

impl Estimator {
    /// A hit on a resident key: Caffeine counts every one, libCacheSim only
    /// those in the main cache.
    fn record_hit(&mut self, key: Key, segment: Segment) {
        match self {
            Estimator::Sketch(sketch) => sketch.record(key),
            Estimator::Exact(counts) if segment != Segment::Window => counts.record_main_hit(key),
            Estimator::Exact(_) => {}
        }
    }

    /// An insertion; `items` is the item count after it once the cache is
    /// half full, by which Caffeine sizes its sketch.
    fn record_insertion(&mut self, key: Key, items: Option<usize>) {
        match self {
            Estimator::Sketch(sketch) => {
                if let Some(items) = items {
                    sketch.ensure_capacity(items);
                }
                sketch.record(key);
            }
            Estimator::Exact(counts) => counts.add(key),
        }
    }

    /// A window item has just been tested for the main cache: libCacheSim
    /// counts it once more, Caffeine does not.
    fn record_candidate(&mut self, key: Key) {
        if let Estimator::Exact(counts) = self {
            counts.add(key);
        }
    }

    fn frequency(&self, key: Key) -> u32 {
        match self {
            Estimator::Sketch(sketch) => sketch.frequency(key),
            Estimator::Exact(counts) => counts.get(key),
        }
    }

    /// Asks the CPU for the memory counting `key` will touch.
    fn prefetch(&self, key: Key) {
        match self {
            Estimator::Sketch(sketch) => sketch.prefetch(key),
            Estimator::Exact(counts) => counts.counts.prefetch(key),
        }
    }
}

/// libCacheSim's counts, exactly: one per key ever counted, all halved once
/// per `period` main-cache hits.
struct ExactCounts {
    /// Key to count (a `KeyIndex` for its prefetch; counts never reach
    /// `u32::MAX`, its empty mark, in fewer than 2^32 requests).
    counts: KeyIndex,
    period: u64,
    main_hits: u64,
}

impl ExactCounts {
    fn new(period: u64) -> Self {
        ExactCounts { counts: KeyIndex::with_capacity(1024), period, main_hits: 0 }
    }

    fn add(&mut self, key: Key) {
        match self.counts.get_mut(&key) {
            Some(count) => *count += 1,
            None => {
                self.counts.insert(key, 1);
            }
        }
    }

    fn record_main_hit(&mut self, key: Key) {
        self.add(key);
        self.main_hits += 1;
        if self.main_hits >= self.period {
            self.main_hits = 0;
            self.counts.values_mut().for_each(|count| *count /= 2);
        }
    }

    fn get(&self, key: Key) -> u32 {
        self.counts.get(&key).copied().unwrap_or(0)
    }
}

/// Rows of the count-min sketch (and hash functions per key).
const DEPTH: usize = 4;
/// Per-row hash seeds (Caffeine's).
const SEEDS: [u64; DEPTH] =
    [0xc3a5_c85c_97cb_3127, 0xb492_b66f_be98_f273, 0x9ae1_6a3b_2f90_404f, 0xcbf2_9ce4_8422_2325];
/// Counters per table word: 16 of 4 bits.
const COUNTERS_PER_WORD: usize = 16;
/// The low bit of every counter, for counting odd counters at a halving.
const ONE_MASK: u64 = 0x1111_1111_1111_1111;
/// Clears the bit each counter's top bit receives from its neighbour when a
/// word is shifted right by one.
const RESET_MASK: u64 = 0x7777_7777_7777_7777;

/// Caffeine's frequency sketch behind a doorkeeper: estimates how often a
/// key was sampled recently, saturating at 15 (+1 from the doorkeeper).
#[derive(Default)]
struct FrequencySketch {
    /// `DEPTH` hashed counters per key, anywhere in the table; empty until
    /// the first `ensure_capacity`.
    table: Vec<u64>,
    /// Bloom filter of keys sampled once in this period, one bit per counter.
    doorkeeper: Vec<u64>,
    /// Samples per period: 10 x the item capacity.
    period: u64,
    samples: u64,
}

impl FrequencySketch {
    /// Sizes the sketch for `items` items if it is smaller; like Caffeine,
    /// growing starts from empty counters. Items only grow with the cache's
    /// item count, so once that is stable this never allocates again.
    fn ensure_capacity(&mut self, items: usize) {
        if self.table.len() >= items {
            return;
        }
        let words = items.next_power_of_two().max(8);
        self.table = vec![0; words];
        self.doorkeeper = vec![0; words * COUNTERS_PER_WORD / 64];
        self.period = 10 * items as u64;
        self.samples = 0;
    }

    /// One hash per row; its low bits pick the table word, its top four the
    /// counter in the word, and bits from 30 up the doorkeeper bit.
    fn hashes(key: Key) -> [u64; DEPTH] {
        SEEDS.map(|seed| {
            // splitmix64's finalizer: every key bit affects every hash bit.
            let mut h = key ^ seed;
            h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            h ^ (h >> 31)
        })
    }

    fn counter(&self, h: u64) -> (usize, u32) {
        ((h as usize) & (self.table.len() - 1), ((h >> 60) as u32) * 4)
    }

    /// The doorkeeper bits of a key: from the first two row hashes.
    fn doorkeeper_bits(&self, hashes: &[u64; DEPTH]) -> [usize; 2] {
        let mask = self.doorkeeper.len() * 64 - 1;
        [((hashes[0] >> 30) as usize) & mask, ((hashes[1] >> 30) as usize) & mask]
    }

    fn record(&mut self, key: Key) {
        if self.table.is_empty() {
            return;
        }
        let hashes = Self::hashes(key);
        let bits = self.doorkeeper_bits(&hashes);
        let mut added = false;
        for bit in bits {
            let (word, mask) = (bit / 64, 1u64 << (bit % 64));
            added |= self.doorkeeper[word] & mask == 0;
            self.doorkeeper[word] |= mask;
        }
        if !added {
            // Seen before in this period: count it in every row that is not saturated.
            for h in hashes {
                let (word, shift) = self.counter(h);
                if (self.table[word] >> shift) & 0xf != 0xf {
                    self.table[word] += 1 << shift;
                    added = true;
                }
            }
        }
        if added {
            self.samples += 1;
            if self.samples == self.period {
                self.halve();
            }
        }
    }

    /// Asks the CPU for `key`'s counter words and doorkeeper words.
    fn prefetch(&self, key: Key) {
        if self.table.is_empty() {
            return;
        }
        let hashes = Self::hashes(key);
        for &h in &hashes {
            hearth_core::prefetch_line(&self.table[self.counter(h).0]);
        }
        for bit in self.doorkeeper_bits(&hashes) {
            hearth_core::prefetch_line(&self.doorkeeper[bit / 64]);
        }
    }

    fn frequency(&self, key: Key) -> u32 {
        if self.table.is_empty() {
            return 0;
        }
        let hashes = Self::hashes(key);
        let in_doorkeeper =
            self.doorkeeper_bits(&hashes).iter().all(|&bit| self.doorkeeper[bit / 64] & (1 << (bit % 64)) != 0);
        let count = hashes
            .iter()
            .map(|&h| {
                let (word, shift) = self.counter(h);
                ((self.table[word] >> shift) & 0xf) as u32
            })
            .min()
            .unwrap_or(0);
        count + u32::from(in_doorkeeper)
    }

    /// Ages every count by halving it and empties the doorkeeper. The new
    /// sample count is Caffeine's: halved, after taking off the samples lost
    /// to rounding odd counters down (a quarter of them, one per row).
    fn halve(&mut self) {
        let mut odd = 0;
        for word in &mut self.table {
            odd += u64::from((*word & ONE_MASK).count_ones());
            *word = (*word >> 1) & RESET_MASK;
        }
        self.doorkeeper.fill(0);
        self.samples = (self.samples - odd / 4) / 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cache: &mut WTinyLfu, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = cache.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    fn segment_of(cache: &WTinyLfu, key: Key) -> Segment {
        cache.slab.get(cache.index[&key]).segment
    }

    #[test]
    fn sketch_counts_after_the_doorkeeper_and_halves() {
        let mut sketch = FrequencySketch::default();
        sketch.record(7);
        assert_eq!(sketch.frequency(7), 0, "nothing is counted before the sketch is sized");
        sketch.ensure_capacity(4);
        for expected in 1..=16 {
            sketch.record(7);
            assert_eq!(sketch.frequency(7), expected);
        }
        // Saturated: 15 in the counters plus the doorkeeper bit.
        sketch.record(7);
        assert_eq!(sketch.frequency(7), 16);
        assert_eq!(sketch.frequency(8), 0);
        // 16 samples counted so far (the saturated one was not); the period is 40.
        for key in 100..124 {
            sketch.record(key);
        }
        assert_eq!(sketch.frequency(7), 7, "halved, doorkeeper cleared");
    }

    /// Fills a 100-byte cache (10-byte window, 18 bytes of probation, 72 of
    /// protected) with unit items 0..100 and requests 100. Until the cache is
    /// full nothing leaves the window; the first eviction moves 0..90 into
    /// the main cache, bottom segment first, then compares 90 with 0.
    fn filled() -> WTinyLfu {
        let mut cache = WTinyLfu::new(100, 0.1, 0.8, Frequency::Sketch).unwrap();
        for k in 0..100 {
            request(&mut cache, k);
        }
        assert_eq!(segment_of(&cache, 0), Segment::Window);
        // The sketch was sized when the cache became half full (and resized at
        // 65 items), so 0 has no samples and 90 has one: 0 is evicted.
        assert_eq!(request(&mut cache, 100).1, vec![0]);
        assert_eq!(segment_of(&cache, 90), Segment::Probation);
        assert_eq!(segment_of(&cache, 17), Segment::Probation);
        assert_eq!(segment_of(&cache, 18), Segment::Protected);
        cache
    }

    #[test]
    fn candidates_must_be_more_frequent_than_the_main_victim() {
        let mut cache = filled();
        // Candidates 91.. (one sample each) replace probation's 1..=17 (none).
        for k in 101..=117 {
            assert_eq!(request(&mut cache, k).1, vec![k - 100]);
        }
        // Probation's LRU item is now 90, with one sample like candidate 108: a tie keeps 90.
        assert_eq!(request(&mut cache, 118).1, vec![108]);
        // A window hit moves 109 away from the window's LRU end; 110 is next.
        assert!(request(&mut cache, 109).0);
        assert_eq!(request(&mut cache, 119).1, vec![110]);
        assert_eq!(cache.occupancy(), 100);
    }

    #[test]
    fn probation_hits_are_protected_and_oversized_items_are_refused() {
        let mut cache = filled();
        assert!(request(&mut cache, 1).0);
        assert_eq!(segment_of(&cache, 1), Segment::Protected);
        // Protected was full: its LRU item (18) was demoted to probation.
        assert_eq!(segment_of(&cache, 18), Segment::Probation);
        assert_eq!(cache.occupancy(), 100);
        let mut evicted = Vec::new();
        cache.access(&Access { key: 300, size: 11, ..Access::default() }, &mut evicted);
        assert!(!cache.contains(300), "larger than the window");
        assert!(WTinyLfu::new(100, 1.0, 0.8, Frequency::Sketch).is_err());
    }
}

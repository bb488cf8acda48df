//! MQ, the Multi-Queue algorithm (Zhou, Philbin & Li, "The Multi-Queue
//! Replacement Algorithm for Second Level Buffer Caches", USENIX ATC 2001).
//!
//! `m` LRU queues Q0..Q(m-1). A block referenced `f` times lives in queue
//! `min(log2 f, m-1)`, so hotter blocks sit in higher queues. Every access
//! sets the block's `expireTime = currentTime + lifeTime`; after each access
//! the LRU end of every queue k > 0 is checked, and a block whose time has
//! expired drops to queue k-1 with a fresh expireTime (so a block that was
//! hot long ago sinks). The victim is the LRU end of the lowest non-empty
//! queue. Evicted blocks are remembered with their reference count in Qout,
//! a FIFO history; a block that returns from Qout resumes its count.
//!
//! Choices (following the paper unless said otherwise):
//! - currentTime is the request's [`Access::vtime`]. An expireTime is
//!   "expired" when it is below currentTime + 1, because the paper advances
//!   currentTime before checking.
//! - Demotion keeps the reference count, as in the paper's `Adjust`.
//! - Qout holds `qout` × cache entries keys (paper: 4×). Entries are not fixed
//!   when objects vary in size, so the cache's size in entries is taken as the
//!   most items it has held at once so far. `history=bytes` bounds it at
//!   `qout` × capacity bytes of its blocks' sizes instead, as libCacheSim's
//!   `MQ` does; with `lifetime=10000` (libCacheSim's default) that is its
//!   parameterisation.
//! - lifeTime: the paper sets it from the peak of the temporal distance
//!   distribution (distance, in requests, between consecutive accesses to a
//!   block) and lets it adjust dynamically. Distances of blocks in the cache
//!   or in Qout are recorded in power-of-two buckets; lifeTime is the upper
//!   end of the fullest bucket. The buckets are halved every
//!   [`DECAY_EVERY`] observations so the peak follows the workload. Until
//!   the first distance is seen nothing expires. `lifetime=N` fixes it.
//!
//! Cost per request: one hash lookup, O(1) list moves, and `m` queue-head
//! checks; histogram decay is 64 halvings every [`DECAY_EVERY`] requests.

use crate::SpecError;
use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

/// Queue number marking a block that is in Qout (history) rather than resident.
const IN_QOUT: u8 = u8::MAX;

/// Number of distance observations between halvings of the distance histogram.
pub const DECAY_EVERY: u64 = 1 << 16;

/// What bounds Qout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// `qout` × the most items the cache has held (the paper's entries).
    Entries,
    /// `qout` × capacity bytes of the remembered blocks' sizes (libCacheSim).
    Bytes,
}

impl std::str::FromStr for History {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "entries" => Ok(History::Entries),
            "bytes" => Ok(History::Bytes),
            _ => Err(SpecError::range("mq", format!("history must be entries or bytes, got {s:?}"))),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Block {
    key: Key,
    size: u32,
    /// Reference count.
    freq: u32,
    expire: u64,
    last_access: u64,
    queue: u8,
}

/// Temporal distances in power-of-two buckets: bucket b counts distances in
/// [2^b, 2^(b+1)).
struct DistanceHistogram {
    buckets: [u64; 64],
    peak: usize,
    observed: u64,
    until_decay: u64,
}

impl DistanceHistogram {
    fn record(&mut self, distance: u64) {
        let b = 63 - distance.max(1).leading_zeros() as usize;
        self.buckets[b] += 1;
        if self.buckets[b] > self.buckets[self.peak] {
            self.peak = b;
        }
        self.observed += 1;
        self.until_decay -= 1;
        if self.until_decay == 0 {
            self.until_decay = DECAY_EVERY;
            for c in &mut self.buckets {
                *c /= 2;
            }
        }
    }

    /// The upper end of the fullest bucket, or `None` before any observation.
    fn peak_distance(&self) -> Option<u64> {
        // A shift, not `pow`: this runs on every hit.
        (self.observed > 0).then(|| 1u64.checked_shl(self.peak as u32 + 1).unwrap_or(u64::MAX))
    }
}

pub struct Mq {
    capacity: u64,
    used: u64,
    resident: usize,
    /// Most items resident at once so far: the cache's size in entries.
    peak_resident: usize,
    qout_ratio: f64,
    history: History,
    /// Bytes of the blocks remembered in Qout.
    qout_bytes: u64,
    /// `lifetime=N` override; adaptive when `None`.
    fixed_lifetime: Option<u64>,
    distances: DistanceHistogram,
    index: KeyIndex,
    slab: Slab<Block>,
    /// Q0..Q(m-1), most recently used at each head.
    queues: Vec<List>,
    /// History of evicted blocks, newest at the head.
    qout: List,
}

impl Mq {
    /// An MQ cache of `capacity` bytes with `m` queues, a history of `qout` ×
    /// cache entries, and a fixed lifeTime in requests (`None`: adaptive).
    pub fn new(capacity: u64, m: usize, qout: f64, lifetime: Option<u64>) -> Result<Self, SpecError> {
        if !(1..=32).contains(&m) {
            return Err(SpecError::range("mq", format!("needs 1 to 32 queues, got m={m}")));
        }
        if !(qout >= 0.0 && qout.is_finite()) {
            return Err(SpecError::range("mq", format!("qout must be a non-negative number, got {qout}")));
        }
        if lifetime == Some(0) {
            return Err(SpecError::range("mq", "lifetime must be at least 1 request"));
        }
        Ok(Mq {
            capacity,
            used: 0,
            resident: 0,
            peak_resident: 0,
            qout_ratio: qout,
            history: History::Entries,
            qout_bytes: 0,
            fixed_lifetime: lifetime,
            distances: DistanceHistogram { buckets: [0; 64], peak: 0, observed: 0, until_decay: DECAY_EVERY },
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            queues: vec![List::new(); m],
            qout: List::new(),
        })
    }

    /// As [`Mq::new`], with lifeTime given as `"auto"` (adaptive) or a number
    /// of requests.
    pub fn with_lifetime_spec(capacity: u64, m: usize, qout: f64, lifetime: &str) -> Result<Self, SpecError> {
        let lifetime = match lifetime {
            "auto" => None,
            n => Some(n.parse().map_err(|_| {
                SpecError::range("mq", format!("lifetime must be \"auto\" or a number of requests, got {n:?}"))
            })?),
        };
        Self::new(capacity, m, qout, lifetime)
    }

    /// Bounds Qout as `history` says.
    pub fn with_history(self, history: History) -> Self {
        Mq { history, ..self }
    }

    fn qout_full(&self) -> bool {
        match self.history {
            History::Entries => self.qout.len() > (self.qout_ratio * self.peak_resident as f64) as usize,
            History::Bytes => self.qout_bytes > (self.qout_ratio * self.capacity as f64) as u64,
        }
    }

    /// The lifeTime in force, in requests.
    pub fn lifetime(&self) -> u64 {
        self.fixed_lifetime.or_else(|| self.distances.peak_distance()).unwrap_or(u64::MAX / 2)
    }

    fn queue_for(&self, freq: u32) -> u8 {
        let log2 = 31 - freq.max(1).leading_zeros() as usize;
        log2.min(self.queues.len() - 1) as u8
    }

    /// Counts one more reference to the (unlinked) block at node `i` and puts
    /// it at the MRU end of its queue.
    fn reference(&mut self, i: u32, now: u64) {
        let expire = now.saturating_add(self.lifetime());
        let freq = self.slab.get(i).freq.saturating_add(1);
        let q = self.queue_for(freq);
        *self.slab.get_mut(i) = Block { freq, expire, last_access: now, queue: q, ..*self.slab.get(i) };
        self.slab.push_front(&mut self.queues[q as usize], i);
    }

    /// The paper's `Adjust`: demote each queue's LRU block whose lifeTime ran out.
    fn adjust(&mut self, now: u64) {
        let expire = now.saturating_add(1).saturating_add(self.lifetime());
        for k in 1..self.queues.len() {
            let Some(i) = self.queues[k].tail() else { continue };
            if self.slab.get(i).expire <= now {
                self.slab.unlink(&mut self.queues[k], i);
                self.slab.push_front(&mut self.queues[k - 1], i);
                let b = self.slab.get_mut(i);
                b.queue = (k - 1) as u8;
                b.expire = expire;
            }
        }
    }

    fn evict_block(&mut self) -> Option<Key> {
        let q = self.queues.iter().position(|q| !q.is_empty())?;
        let i = self.slab.pop_back(&mut self.queues[q]).expect("queue is not empty");
        let b = self.slab.get_mut(i);
        b.queue = IN_QOUT;
        let (key, size) = (b.key, b.size);
        self.used -= u64::from(size);
        self.resident -= 1;
        self.slab.push_front(&mut self.qout, i);
        self.qout_bytes += u64::from(size);
        while self.qout_full() {
            let Some(old) = self.slab.pop_back(&mut self.qout) else { break };
            let gone = self.slab.release(old);
            self.qout_bytes -= u64::from(gone.size);
            self.index.remove(&gone.key);
        }
        Some(key)
    }

    #[cfg(test)]
    fn queue_of(&self, key: Key) -> Option<u8> {
        self.index.get(&key).map(|&i| self.slab.get(i).queue)
    }
}

impl Policy for Mq {
    fn name(&self) -> String {
        "MQ".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.resident
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).queue != IN_QOUT)
    }

    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        let b = *self.slab.get(i);
        if b.queue == IN_QOUT {
            return false;
        }
        if self.fixed_lifetime.is_none() {
            self.distances.record(a.vtime.saturating_sub(b.last_access));
        }
        self.slab.unlink(&mut self.queues[b.queue as usize], i);
        self.reference(i, a.vtime);
        self.adjust(a.vtime);
        true
    }

    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        // Take a returning block out of Qout before evicting, so the history
        // trim cannot drop the count it is about to resume.
        let returning = match self.index.get(&a.key).copied() {
            Some(i) if self.slab.get(i).queue == IN_QOUT => {
                self.slab.unlink(&mut self.qout, i);
                self.qout_bytes -= u64::from(self.slab.get(i).size);
                if self.fixed_lifetime.is_none() {
                    self.distances.record(a.vtime.saturating_sub(self.slab.get(i).last_access));
                }
                Some(i)
            }
            Some(_) => return, // already resident
            None => None,
        };
        let size = u64::from(a.size);
        while self.used + size > self.capacity {
            match self.evict_block() {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        let i = match returning {
            Some(i) => {
                self.slab.get_mut(i).size = a.size;
                i
            }
            None => {
                let i =
                    self.slab.alloc(Block { key: a.key, size: a.size, freq: 0, expire: 0, last_access: 0, queue: 0 });
                self.index.insert(a.key, i);
                i
            }
        };
        self.reference(i, a.vtime);
        self.used += size;
        self.resident += 1;
        self.peak_resident = self.peak_resident.max(self.resident);
        self.adjust(a.vtime);
    }

    fn evict(&mut self, _now: &Access) -> Option<Key> {
        self.evict_block()
    }

    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        let b = *self.slab.get(i);
        if b.queue == IN_QOUT {
            return false;
        }
        self.slab.unlink(&mut self.queues[b.queue as usize], i);
        self.slab.release(i);
        self.index.remove(&key);
        self.used -= u64::from(b.size);
        self.resident -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a policy with unit-size requests, numbering them as it goes.
    struct Driver {
        p: Mq,
        vtime: u64,
    }

    impl Driver {
        fn new(p: Mq) -> Self {
            Driver { p, vtime: 0 }
        }
        fn access(&mut self, key: Key) -> (bool, Vec<Key>) {
            let mut evicted = Vec::new();
            let a = Access { key, size: 1, vtime: self.vtime, ..Default::default() };
            self.vtime += 1;
            let hit = self.p.access(&a, &mut evicted);
            assert!(self.p.occupancy() <= self.p.capacity());
            (hit, evicted)
        }
    }

    const NEVER_EXPIRE: Option<u64> = Some(1 << 40);

    #[test]
    fn reference_count_picks_the_queue() {
        let mut d = Driver::new(Mq::new(10, 3, 4.0, NEVER_EXPIRE).unwrap());
        let expected = [0, 1, 1, 2, 2, 2, 2, 2]; // min(log2 f, m-1) for f = 1..8
        for q in expected {
            d.access(7);
            assert_eq!(d.p.queue_of(7), Some(q));
        }
    }

    #[test]
    fn victim_is_lru_of_lowest_nonempty_queue() {
        let mut d = Driver::new(Mq::new(3, 8, 4.0, NEVER_EXPIRE).unwrap());
        for k in [1, 1, 2, 3] {
            d.access(k); // 1 in Q1; 2, 3 in Q0
        }
        assert_eq!(d.access(4), (false, vec![2]));
        assert_eq!(d.access(5), (false, vec![3]));
        assert_eq!(d.access(6), (false, vec![4]));
        assert!(d.p.contains(1));
    }

    #[test]
    fn expired_block_drops_one_queue_per_lifetime() {
        let mut d = Driver::new(Mq::new(10, 8, 4.0, Some(2)).unwrap());
        for _ in 0..4 {
            d.access(1); // t = 0..3: f = 4, Q2, expires at 3 + 2 = 5
        }
        d.access(2); // t = 4: not yet expired
        assert_eq!(d.p.queue_of(1), Some(2));
        d.access(3); // t = 5: expired, to Q1; expires at 6 + 2 = 8
        assert_eq!(d.p.queue_of(1), Some(1));
        d.access(2); // t = 6
        d.access(2); // t = 7
        assert_eq!(d.p.queue_of(1), Some(1));
        d.access(3); // t = 8: expired again, to Q0
        assert_eq!(d.p.queue_of(1), Some(0));
        // The count survived the demotions: one more reference (f = 5) puts
        // it straight back in Q2.
        d.access(1);
        assert_eq!(d.p.queue_of(1), Some(2));
    }

    #[test]
    fn qout_restores_the_count_of_a_returning_block() {
        for (qout, queue_on_return) in [(4.0, 2), (0.0, 0)] {
            let mut d = Driver::new(Mq::new(1, 8, qout, NEVER_EXPIRE).unwrap());
            for _ in 0..3 {
                d.access(1); // f = 3
            }
            assert_eq!(d.access(2), (false, vec![1]));
            assert_eq!(d.access(1), (false, vec![2]));
            // With history, f resumes at 3 + 1 = 4 (Q2); without, f = 1 (Q0).
            assert_eq!(d.p.queue_of(1), Some(queue_on_return), "qout={qout}");
        }
    }

    #[test]
    fn history_holds_qout_times_cache_entries() {
        // 2 entries, qout = 1: two evicted keys are remembered.
        let mut d = Driver::new(Mq::new(2, 8, 1.0, NEVER_EXPIRE).unwrap());
        for k in [1, 1, 2, 3, 4, 5] {
            d.access(k); // 1 reaches Q1; 2, 3, 4 are evicted from Q0 in turn
        }
        // History keeps the two newest: 4 and 3.
        assert!(d.p.contains(1) && d.p.contains(5));
        assert_eq!(d.p.queue_of(2), None);
        assert_eq!(d.p.queue_of(3), Some(IN_QOUT));
        assert_eq!(d.p.queue_of(4), Some(IN_QOUT));
    }

    #[test]
    fn byte_history_holds_qout_times_capacity_bytes() {
        // 2 bytes, qout = 1.5: 3 bytes of history, a 2-byte and a 1-byte block.
        let mut p = Mq::new(2, 8, 1.5, NEVER_EXPIRE).unwrap().with_history(History::Bytes);
        let mut ev = Vec::new();
        for (t, (key, size)) in [(1, 2), (2, 1), (3, 1), (4, 2), (5, 2)].into_iter().enumerate() {
            p.access(&Access { key, size, vtime: t as u64, ..Default::default() }, &mut ev);
        }
        // Evicted in turn: 1 (2 bytes), 2 and 3 (1 each), 4 (2): 4 and 3 fit in 3 bytes.
        assert_eq!(ev, vec![1, 2, 3, 4]);
        assert_eq!((p.queue_of(4), p.queue_of(3), p.queue_of(2)), (Some(IN_QOUT), Some(IN_QOUT), None));
    }

    #[test]
    fn adaptive_lifetime_follows_the_peak_reuse_distance() {
        let mut d = Driver::new(Mq::new(1000, 8, 4.0, None).unwrap());
        assert_eq!(d.p.lifetime(), u64::MAX / 2); // nothing observed yet
        for _ in 0..10 {
            for k in 0..50 {
                d.access(k); // every reuse distance is 50, in bucket [32, 64)
            }
        }
        assert_eq!(d.p.lifetime(), 64);
        // A burst of immediate re-references (distance 1) outnumbers them.
        for k in 0..600 {
            d.access(100 + k);
            d.access(100 + k);
        }
        assert_eq!(d.p.lifetime(), 2);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Mq::new(10, 0, 4.0, None).is_err());
        assert!(Mq::new(10, 8, -1.0, None).is_err());
        assert!(Mq::new(10, 8, 4.0, Some(0)).is_err());
        assert!(Mq::with_lifetime_spec(10, 8, 4.0, "soon").is_err());
        assert_eq!(Mq::with_lifetime_spec(10, 8, 4.0, "77").unwrap().lifetime(), 77);
    }
}

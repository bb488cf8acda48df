//! FIFO-Merge, as libCacheSim's `FIFO_Merge` (after the segment merging of
//! Yang et al.'s Segcache, NSDI'21): a FIFO queue whose evictions examine
//! `exam` consecutive items (100) at a time, from where the last
//! examination stopped towards the newest item (wrapping to the oldest), and
//! evict the `exam - keep - 1` (49) of them least worth keeping; the rest
//! stay where they are. Worth is `retain=freq` (default): 1e6 x (hits + a
//! tie-breaking draw in [0, 0.1)) / size, or `retain=recency`: 1e12 /
//! requests since the last one / size. With at most `exam` items resident,
//! the oldest goes.
//!
//! Its cost is one examination and a sort of `exam` items per `exam - keep
//! - 1` evictions. The draws come from libCacheSim's generator (seeded
//! Lehmer64, `seed=S`, default its fresh-process state), one per examined
//! item in order, and the sort is stable as glibc's `qsort` (a merge sort)
//! is, so the miss counts are libCacheSim's. libCacheSim's `retain=belady`
//! (next use, offline) and `retain=none` (which aborts) are not offered.

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

use crate::admission::Lehmer64;
use crate::SpecError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retain {
    Frequency,
    Recency,
}

impl std::str::FromStr for Retain {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "freq" | "frequency" => Ok(Retain::Frequency),
            "recency" => Ok(Retain::Recency),
            _ => Err(SpecError::range("fifomerge", format!("retain must be freq or recency, got {s:?}"))),
        }
    }
}

#[derive(Clone, Copy)]
struct Item {
    key: Key,
    size: u32,
    hits: u32,
    /// `Access::vtime` of its last request.
    last_access: u64,
}

/// Marks an examined slot that was removed (invalidated) since.
const GONE: u32 = u32::MAX;

pub struct FifoMerge {
    capacity: u64,
    used: u64,
    exam: usize,
    keep: usize,
    retain: Retain,
    index: KeyIndex,
    slab: Slab<Item>,
    /// Newest at the head.
    queue: List,
    /// Where the next examination starts (None: at the oldest item).
    next_to_exam: Option<u32>,
    /// The last examination's (worth, slot), least worth first.
    examined: Vec<(f64, u32)>,
    /// The next entry of `examined` to take.
    pos: usize,
    /// Requests so far (libCacheSim's `n_req`), for `retain=recency`.
    now: u64,
    rng: Lehmer64,
}

impl FifoMerge {
    /// Most items one eviction may examine.
    pub const MAX_EXAM: usize = 1 << 20;

    /// Refuses an examination window that keeps all it examines; the
    /// registry row checks a spec's through this too.
    pub fn check(exam: usize, keep: usize) -> Result<(), SpecError> {
        // The examined items are gathered into a buffer of exam entries.
        if exam > Self::MAX_EXAM {
            return Err(SpecError::range("fifomerge", format!("exam must be at most {}, got {exam}", Self::MAX_EXAM)));
        }
        if exam == 0 || keep >= exam {
            return Err(SpecError::range(
                "fifomerge",
                format!("exam must be at least 1 and keep below it, got exam={exam}, keep={keep}"),
            ));
        }
        Ok(())
    }

    pub fn new(capacity: u64, exam: usize, keep: usize, retain: Retain, seed: u64) -> Result<Self, SpecError> {
        Self::check(exam, keep)?;
        if seed == 0 {
            return Err(SpecError::range("fifomerge", "seed must not be 0 (the generator would stay at 0)"));
        }
        Ok(FifoMerge {
            capacity,
            used: 0,
            exam,
            keep,
            retain,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            queue: List::new(),
            next_to_exam: None,
            examined: Vec::with_capacity(exam),
            pos: usize::MAX,
            now: 0,
            rng: Lehmer64::new(seed),
        })
    }

    fn worth(&mut self, i: u32) -> f64 {
        let item = *self.slab.get(i);
        match self.retain {
            Retain::Frequency => {
                let draw = (self.rng.next_u64() % 1000) as f64 / 10000.0;
                1.0e6 * (f64::from(item.hits) + draw) / f64::from(item.size)
            }
            Retain::Recency => 1.0e12 / (self.now - item.last_access) as f64 / f64::from(item.size),
        }
    }

    fn take(&mut self, i: u32) -> Key {
        self.slab.unlink(&mut self.queue, i);
        let item = self.slab.release(i);
        self.index.remove(&item.key);
        self.used -= u64::from(item.size);
        item.key
    }

    /// Examines the next `exam` items, sorted least worth first.
    fn examine(&mut self) {
        self.examined.clear();
        let mut at = self.next_to_exam;
        for _ in 0..self.exam {
            let i = at.or(self.queue.tail()).expect("more items than exam are resident");
            let worth = self.worth(i);
            self.examined.push((worth, i));
            at = self.slab.prev(i);
        }
        self.next_to_exam = at;
        self.examined.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
}

impl Policy for FifoMerge {
    fn name(&self) -> String {
        "FIFO-Merge".into()
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        self.now = a.vtime + 1;
        let Some(&i) = self.index.get(&a.key) else { return false };
        let item = self.slab.get_mut(i);
        item.hits = item.hits.saturating_add(1);
        item.last_access = self.now;
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Item { key: a.key, size: a.size, hits: 0, last_access: self.now });
        self.slab.push_front(&mut self.queue, i);
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        // The examined items after the first are evicted one per call,
        // up to the last `keep + 1`.
        while self.pos < self.exam {
            let (_, i) = self.examined[self.pos];
            self.pos += 1;
            if self.pos >= self.exam - self.keep {
                break;
            }
            if i != GONE {
                return Some(self.take(i));
            }
        }
        if self.index.len() <= self.exam {
            self.next_to_exam = None;
            let oldest = self.queue.tail()?;
            return Some(self.take(oldest));
        }
        self.examine();
        self.pos = 1;
        Some(self.take(self.examined[0].1))
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        if self.next_to_exam == Some(i) {
            self.next_to_exam = self.slab.prev(i);
        }
        for entry in self.examined.iter_mut().skip(self.pos) {
            if entry.1 == i {
                entry.1 = GONE;
            }
        }
        self.take(i);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::DEFAULT_SEED;

    fn request(c: &mut FifoMerge, key: Key, size: u32, vtime: u64) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = c.access(&Access { key, size, vtime, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn a_small_cache_is_a_fifo() {
        let mut c = FifoMerge::new(3, 100, 50, Retain::Frequency, DEFAULT_SEED).unwrap();
        for k in 0..3 {
            request(&mut c, k, 1, k);
        }
        assert!(request(&mut c, 0, 1, 3).0);
        assert_eq!(request(&mut c, 9, 1, 4).1, vec![0]);
    }

    #[test]
    fn an_examination_evicts_the_least_worth_and_keeps_the_rest_in_place() {
        // exam 4, keep 1: an examination evicts 2 of 4 (4 - 1 - 1), one now
        // and one at the next eviction.
        let mut c = FifoMerge::new(6, 4, 1, Retain::Frequency, DEFAULT_SEED).unwrap();
        for k in 0..6 {
            request(&mut c, k, 1, k);
        }
        // 0 and 2 hit twice, 1 once: 3 has none among the four oldest.
        for (t, k) in [0, 0, 1, 2, 2].into_iter().enumerate() {
            assert!(request(&mut c, k, 1, 6 + t as u64).0);
        }
        assert_eq!(request(&mut c, 10, 1, 11).1, vec![3]);
        assert_eq!(request(&mut c, 11, 1, 12).1, vec![1]);
        // The next examination starts past the first four: 4, 5, 10, 11.
        assert_eq!(c.next_to_exam, c.index.get(&4).copied());
        let (_, victims) = request(&mut c, 12, 1, 13);
        assert!([4, 5, 10, 11].contains(&victims[0]), "{victims:?}");
        assert!(c.contains(0) && c.contains(2));
    }

    #[test]
    fn recency_keeps_the_recently_requested() {
        let mut c = FifoMerge::new(6, 4, 1, Retain::Recency, DEFAULT_SEED).unwrap();
        for k in 0..6 {
            request(&mut c, k, 1, k);
        }
        request(&mut c, 0, 1, 6);
        request(&mut c, 2, 1, 7);
        // Of 0..3, 1 is the least recently requested, then 3.
        assert_eq!(request(&mut c, 10, 1, 8).1, vec![1]);
        assert_eq!(request(&mut c, 11, 1, 9).1, vec![3]);
        assert!(c.remove(4) && !c.contains(4));
        assert!(FifoMerge::new(6, 4, 4, Retain::Recency, 1).is_err());
        assert!("belady".parse::<Retain>().is_err());
    }
}

//! Least recently used: evict the item whose last request is oldest; and
//! its mirror, most recently used (MRU, as libCacheSim's): evict the item
//! requested (or inserted) last. MRU is poor for most workloads but suited
//! to a loop larger than the cache: LRU misses every request there, while
//! MRU gives up the item just used and keeps the rest for the next round.
//!
//! And LRU-Prob, as libCacheSim's `LRU_Prob`: LRU whose hits move an item to
//! the front only with probability `prob` (0.5), which spares the list most
//! of its reordering. As libCacheSim does, a hit promotes when the seeded
//! Lehmer64 draw (`seed=S`, default libCacheSim's initial state) is a
//! multiple of `1 / prob` truncated to a whole number, so `prob=0.3`
//! promotes one hit in 3, and only hits draw: with the same seed the two
//! tools promote the same hits.

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

use crate::admission::Lehmer64;
use crate::SpecError;

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
}

pub struct Lru {
    capacity: u64,
    used: u64,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// Most recently used at the front.
    stack: List,
    /// Evict from the front (MRU) instead of the back.
    evict_most_recent: bool,
    /// LRU-Prob: hits promote only when this says so; plain LRU and MRU promote every hit.
    promotion: Option<Promotion>,
}

/// LRU-Prob's draw: a hit promotes when a draw is a multiple of `every`.
struct Promotion {
    every: u64,
    rng: Lehmer64,
}

impl Lru {
    pub fn new(capacity: u64) -> Self {
        Lru {
            capacity,
            used: 0,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            stack: List::new(),
            evict_most_recent: false,
            promotion: None,
        }
    }

    /// Most recently used.
    pub fn mru(capacity: u64) -> Self {
        Lru { evict_most_recent: true, ..Lru::new(capacity) }
    }

    /// LRU-Prob: a hit moves its item to the front with probability `prob`.
    pub fn prob(capacity: u64, prob: f64, seed: u64) -> Result<Self, SpecError> {
        if !(prob > 0.0 && prob <= 1.0) {
            return Err(SpecError::range("lruprob", format!("prob must be in (0, 1], got {prob}")));
        }
        if seed == 0 {
            return Err(SpecError::range("lruprob", "seed must not be 0 (the generator would stay at 0)"));
        }
        let promotion = Promotion { every: (1.0 / prob) as u64, rng: Lehmer64::new(seed) };
        Ok(Lru { promotion: Some(promotion), ..Lru::new(capacity) })
    }
}

impl Policy for Lru {
    fn name(&self) -> String {
        match (self.evict_most_recent, &self.promotion) {
            (true, _) => "MRU",
            (false, Some(_)) => "LRU-Prob",
            (false, None) => "LRU",
        }
        .into()
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        match self.index.get(&a.key) {
            Some(&i) => {
                if self.promotion.as_mut().is_none_or(|p| p.rng.next_u64() % p.every == 0) {
                    self.slab.move_to_front(&mut self.stack, i);
                }
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size });
        self.slab.push_front(&mut self.stack, i);
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let i = if self.evict_most_recent {
            self.slab.pop_front(&mut self.stack)
        } else {
            self.slab.pop_back(&mut self.stack)
        }?;
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.index.remove(&key) else { return false };
        self.slab.unlink(&mut self.stack, i);
        let e = self.slab.release(i);
        self.used -= u64::from(e.size);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::DEFAULT_SEED;

    fn request(mru: &mut Lru, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = mru.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn evicts_the_most_recently_used() {
        let mut mru = Lru::mru(3);
        for key in [0, 1, 2] {
            request(&mut mru, key);
        }
        assert_eq!(request(&mut mru, 3).1, vec![2]);
        assert!(request(&mut mru, 0).0);
        assert_eq!(request(&mut mru, 4).1, vec![0]);
    }

    #[test]
    fn a_loop_larger_than_the_cache_still_hits() {
        let mut mru = Lru::mru(3);
        let mut hits = 0;
        for _ in 0..3 {
            for key in 0..4 {
                hits += usize::from(request(&mut mru, key).0);
            }
        }
        // LRU misses all 12 requests; MRU hits three of four after the first round.
        assert_eq!(hits, 6);
    }

    fn request_prob(p: &mut Lru, key: Key) -> Vec<Key> {
        let mut evicted = Vec::new();
        p.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        evicted
    }

    #[test]
    fn prob_one_is_lru() {
        let mut p = Lru::prob(2, 1.0, DEFAULT_SEED).unwrap();
        request_prob(&mut p, 1);
        request_prob(&mut p, 2);
        request_prob(&mut p, 1);
        assert_eq!(request_prob(&mut p, 3), vec![2]);
    }

    #[test]
    fn a_hit_promotes_about_prob_of_the_time() {
        // Two residents, 1 inserted first; a hit on 1 then an insert evicts
        // 2 exactly when the hit promoted 1.
        let mut promoted = 0;
        for seed in 1..=1000 {
            let mut p = Lru::prob(2, 0.25, seed).unwrap();
            request_prob(&mut p, 1);
            request_prob(&mut p, 2);
            request_prob(&mut p, 1);
            promoted += usize::from(request_prob(&mut p, 3) == vec![2]);
        }
        assert!((180..320).contains(&promoted), "{promoted}");
        assert!(Lru::prob(2, 0.0, 1).is_err() && Lru::prob(2, 1.5, 1).is_err() && Lru::prob(2, 0.5, 0).is_err());
    }
}

//! LRU-Prob, as libCacheSim's `LRU_Prob`: LRU whose hits move an item to the
//! front only with probability `prob` (0.5), which spares the list most of
//! its reordering. As libCacheSim does, a hit promotes when the seeded
//! Lehmer64 draw (`seed=S`, default libCacheSim's initial state) is a
//! multiple of `1 / prob` truncated to a whole number, so `prob=0.3`
//! promotes one hit in 3, and only hits draw: with the same seed the two
//! tools promote the same hits.

use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

use crate::admission::Lehmer64;
use crate::SpecError;

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
}

pub struct LruProb {
    capacity: u64,
    used: u64,
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// Most recently inserted or promoted at the front.
    stack: List,
    /// A hit promotes when a draw is a multiple of this.
    every: u64,
    rng: Lehmer64,
}

impl LruProb {
    pub fn new(capacity: u64, prob: f64, seed: u64) -> Result<Self, SpecError> {
        if !(prob > 0.0 && prob <= 1.0) {
            return Err(SpecError::range("lruprob", format!("prob must be in (0, 1], got {prob}")));
        }
        if seed == 0 {
            return Err(SpecError::range("lruprob", "seed must not be 0 (the generator would stay at 0)"));
        }
        Ok(LruProb {
            capacity,
            used: 0,
            index: key_map(1024),
            slab: Slab::default(),
            stack: List::new(),
            every: (1.0 / prob) as u64,
            rng: Lehmer64::new(seed),
        })
    }
}

impl Policy for LruProb {
    fn name(&self) -> String {
        "LRU-Prob".into()
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        if self.rng.next_u64() % self.every == 0 {
            self.slab.move_to_front(&mut self.stack, i);
        }
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size });
        self.slab.push_front(&mut self.stack, i);
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let i = self.slab.pop_back(&mut self.stack)?;
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

    fn request(p: &mut LruProb, key: Key) -> Vec<Key> {
        let mut evicted = Vec::new();
        p.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        evicted
    }

    #[test]
    fn prob_one_is_lru() {
        let mut p = LruProb::new(2, 1.0, DEFAULT_SEED).unwrap();
        request(&mut p, 1);
        request(&mut p, 2);
        request(&mut p, 1);
        assert_eq!(request(&mut p, 3), vec![2]);
    }

    #[test]
    fn a_hit_promotes_about_prob_of_the_time() {
        // Two residents, 1 inserted first; a hit on 1 then an insert evicts
        // 2 exactly when the hit promoted 1.
        let mut promoted = 0;
        for seed in 1..=1000 {
            let mut p = LruProb::new(2, 0.25, seed).unwrap();
            request(&mut p, 1);
            request(&mut p, 2);
            request(&mut p, 1);
            promoted += usize::from(request(&mut p, 3) == vec![2]);
        }
        assert!((180..320).contains(&promoted), "{promoted}");
        assert!(
            LruProb::new(2, 0.0, 1).is_err() && LruProb::new(2, 1.5, 1).is_err() && LruProb::new(2, 0.5, 0).is_err()
        );
    }
}

//! Random replacement, seeded and reproducible: the victim is drawn
//! uniformly from the resident items with libCacheSim's generator
//! (Lehmer64, `random:seed=S`, default libCacheSim's initial state).
//!
//! Residents sit in a dense array (a removal swaps the last one into the
//! hole), so a draw is O(1). libCacheSim's `Random` also draws uniformly,
//! but through its chained hash table (a random non-empty bucket, then a
//! random item of its chain), so which item a draw picks depends on its
//! hash function and table layout: the two agree in distribution, not
//! victim by victim, and their miss counts differ by the noise of two
//! different random streams.

use hearth_core::{key_map, Access, Key, KeyMap, Policy};

use crate::admission::{Lehmer64, DEFAULT_SEED};
use crate::SpecError;

pub struct Random {
    capacity: u64,
    used: u64,
    /// Key -> position in `items`.
    index: KeyMap<u32>,
    /// (key, size) of every resident item, in no order.
    items: Vec<(Key, u32)>,
    rng: Lehmer64,
}

impl Random {
    pub fn new(capacity: u64, seed: u64) -> Result<Self, SpecError> {
        if seed == 0 {
            return Err(SpecError::range("random", "seed must not be 0 (the generator would stay at 0)"));
        }
        Ok(Random {
            capacity,
            used: 0,
            index: key_map(1024),
            items: Vec::with_capacity(1024),
            rng: Lehmer64::new(seed),
        })
    }

    pub fn with_default_seed(capacity: u64) -> Self {
        Random::new(capacity, DEFAULT_SEED).expect("the default seed is not 0")
    }

    /// Removes the item at `pos`; returns its key.
    fn take(&mut self, pos: usize) -> Key {
        let (key, size) = crate::swap_take(&mut self.items, &mut self.index, pos, |&(k, _)| k);
        self.used -= u64::from(size);
        key
    }
}

impl Policy for Random {
    fn name(&self) -> String {
        "Random".into()
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        self.index.contains_key(&a.key)
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        self.index.insert(a.key, self.items.len() as u32);
        self.items.push((a.key, a.size));
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.items.is_empty() {
            return None;
        }
        let pos = (self.rng.next_u64() % self.items.len() as u64) as usize;
        Some(self.take(pos))
    }
    remove_by_index!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key) -> Access {
        Access { key, size: 1, ..Access::default() }
    }

    #[test]
    fn the_same_seed_evicts_the_same_items() {
        let run = |seed| {
            let mut r = Random::new(8, seed).unwrap();
            let mut ev = Vec::new();
            for k in 0..100 {
                r.access(&acc(k * 7 % 23), &mut ev);
            }
            ev
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
        assert!(Random::new(8, 0).is_err());
    }

    #[test]
    fn victims_are_spread_over_the_residents() {
        let mut r = Random::with_default_seed(4);
        let mut ev = Vec::new();
        let mut counts = [0u32; 4];
        for round in 0..400u64 {
            for k in 0..4 {
                r.access(&acc(round * 4 + k), &mut ev);
            }
            ev.clear();
            // Which of the four residents (by arrival order) goes first.
            let k = r.evict(&acc(0)).unwrap();
            counts[(k - round * 4) as usize] += 1;
            for k in 0..4 {
                r.remove(round * 4 + k);
            }
        }
        assert!(counts.iter().all(|&c| c > 60), "{counts:?}");
    }
}

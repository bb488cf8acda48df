//! RandomLRU and RandomTwo, as libCacheSim's: draw `samples` resident items
//! uniformly (seeded Lehmer64) and evict the one requested longest ago — LRU
//! approximated by sampling. RandomLRU draws 16 by default
//! (`randomlru:samples=N,seed=S`); RandomTwo is two draws, the power of two
//! random choices (`randomtwo:seed=S`). An item drawn twice competes with
//! itself; among equal times the last draw goes, as libCacheSim's
//! RandomTwo breaks its tie (only an item drawn twice can tie).
//!
//! Residents sit in a dense array as in [`crate::Random`], so an eviction is
//! O(1). libCacheSim draws through its hash table's buckets (see random.rs),
//! so the two agree in distribution, not victim by victim.

use hearth_core::{key_map, Access, Key, KeyMap, Policy};

use crate::admission::Lehmer64;
use crate::SpecError;

#[derive(Clone, Copy)]
struct Item {
    key: Key,
    size: u32,
    /// The request time (`Access::vtime`) of its last request.
    last_access: u64,
}

pub struct RandomLru {
    name: &'static str,
    samples: u32,
    capacity: u64,
    used: u64,
    /// Key -> position in `items`.
    index: KeyMap<u32>,
    /// Every resident item, in no order.
    items: Vec<Item>,
    rng: Lehmer64,
}

impl RandomLru {
    /// RandomLRU: evict the least recently requested of `samples` draws.
    pub fn new(capacity: u64, samples: u32, seed: u64) -> Result<Self, SpecError> {
        if samples == 0 {
            return Err(SpecError::range("randomlru", "samples must be at least 1"));
        }
        RandomLru::named("RandomLRU", "randomlru", capacity, samples, seed)
    }

    /// RandomTwo: RandomLRU with two draws.
    pub fn two(capacity: u64, seed: u64) -> Result<Self, SpecError> {
        RandomLru::named("RandomTwo", "randomtwo", capacity, 2, seed)
    }

    fn named(
        name: &'static str,
        spec: &'static str,
        capacity: u64,
        samples: u32,
        seed: u64,
    ) -> Result<Self, SpecError> {
        if seed == 0 {
            return Err(SpecError::range(spec, "seed must not be 0 (the generator would stay at 0)"));
        }
        Ok(RandomLru {
            name,
            samples,
            capacity,
            used: 0,
            index: key_map(1024),
            items: Vec::with_capacity(1024),
            rng: Lehmer64::new(seed),
        })
    }

    /// Removes the item at `pos`; returns its key.
    fn take(&mut self, pos: usize) -> Key {
        let item = crate::swap_take(&mut self.items, &mut self.index, pos, |i| i.key);
        self.used -= u64::from(item.size);
        item.key
    }

    fn draw(&mut self) -> usize {
        (self.rng.next_u64() % self.items.len() as u64) as usize
    }
}

impl Policy for RandomLru {
    fn name(&self) -> String {
        self.name.into()
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        match self.index.get(&a.key) {
            Some(&pos) => {
                self.items[pos as usize].last_access = a.vtime;
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        self.index.insert(a.key, self.items.len() as u32);
        self.items.push(Item { key: a.key, size: a.size, last_access: a.vtime });
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.items.is_empty() {
            return None;
        }
        let mut oldest = self.draw();
        for _ in 1..self.samples {
            let next = self.draw();
            if self.items[next].last_access <= self.items[oldest].last_access {
                oldest = next;
            }
        }
        Some(self.take(oldest))
    }
    remove_by_index!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::DEFAULT_SEED;

    fn acc(key: Key, vtime: u64) -> Access {
        Access { key, size: 1, vtime, ..Access::default() }
    }

    #[test]
    fn the_same_seed_evicts_the_same_items() {
        let run = |seed| {
            let mut r = RandomLru::two(8, seed).unwrap();
            let mut ev = Vec::new();
            for t in 0..200 {
                r.access(&acc(t * 7 % 23, t), &mut ev);
            }
            ev
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
        assert!(RandomLru::two(8, 0).is_err());
        assert!(RandomLru::new(8, 0, 1).is_err());
    }

    #[test]
    fn the_older_of_two_draws_goes() {
        // With two residents, each eviction draws both or one twice: the
        // item requested last is evicted only when drawn twice (1 in 4 draws).
        let mut fresh_evicted = 0;
        for round in 0..400u64 {
            let mut r = RandomLru::two(2, DEFAULT_SEED + round).unwrap();
            let mut ev = Vec::new();
            r.access(&acc(1, 0), &mut ev);
            r.access(&acc(2, 1), &mut ev);
            r.access(&acc(1, 2), &mut ev);
            fresh_evicted += usize::from(r.evict(&acc(3, 3)) == Some(1));
        }
        assert!((60..140).contains(&fresh_evicted), "{fresh_evicted}");
    }

    #[test]
    fn many_samples_evict_like_lru() {
        // 64 draws over 4 residents miss the oldest with odds (3/4)^64.
        let mut r = RandomLru::new(4, 64, DEFAULT_SEED).unwrap();
        let mut ev = Vec::new();
        for t in 0..4 {
            r.access(&acc(t, t), &mut ev);
        }
        r.access(&acc(0, 4), &mut ev);
        r.access(&acc(9, 5), &mut ev);
        r.access(&acc(10, 6), &mut ev);
        assert_eq!(ev, vec![1, 2]);
    }
}

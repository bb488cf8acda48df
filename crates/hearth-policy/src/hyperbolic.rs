//! Hyperbolic caching (Blankstein et al., USENIX ATC'17), as libCacheSim's
//! `Hyperbolic`: an item's priority is its request count divided by the
//! time since it entered the cache (in requests), and the victim is the
//! lowest-priority item among `samples` (64) drawn at random with
//! replacement. Draws use libCacheSim's generator (Lehmer64, `seed=S`), so
//! runs repeat; O(samples) per eviction, O(1) per request.
//!
//! Like libCacheSim's, the priority ignores the item's size. libCacheSim
//! draws its samples through its hash table's buckets, not uniformly over
//! items (see random.rs), so the two agree in distribution only.

use hearth_core::{key_map, Access, Key, KeyMap, Policy};

use crate::admission::Lehmer64;
use crate::SpecError;

#[derive(Clone, Copy)]
struct Item {
    key: Key,
    size: u32,
    /// Requests since (and including) insertion.
    count: u32,
    /// `vtime` of the insertion.
    since: u64,
}

pub struct Hyperbolic {
    capacity: u64,
    used: u64,
    samples: u32,
    /// Key -> position in `items`.
    index: KeyMap<u32>,
    /// Every resident item, in no order.
    items: Vec<Item>,
    rng: Lehmer64,
}

impl Hyperbolic {
    pub fn new(capacity: u64, samples: u32, seed: u64) -> Result<Self, SpecError> {
        if samples == 0 {
            return Err(SpecError::range("hyperbolic", "samples must be at least 1"));
        }
        if seed == 0 {
            return Err(SpecError::range("hyperbolic", "seed must not be 0 (the generator would stay at 0)"));
        }
        Ok(Hyperbolic {
            capacity,
            used: 0,
            samples,
            index: key_map(1024),
            items: Vec::with_capacity(1024),
            rng: Lehmer64::new(seed),
        })
    }

    fn take(&mut self, pos: usize) -> Key {
        let item = crate::swap_take(&mut self.items, &mut self.index, pos, |i| i.key);
        self.used -= u64::from(item.size);
        item.key
    }
}

impl Policy for Hyperbolic {
    fn name(&self) -> String {
        "Hyperbolic".into()
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        match self.index.get(&a.key) {
            Some(&pos) => {
                let item = &mut self.items[pos as usize];
                item.count = item.count.saturating_add(1);
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        self.index.insert(a.key, self.items.len() as u32);
        self.items.push(Item { key: a.key, size: a.size, count: 1, since: a.vtime });
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, now: &Access) -> Option<Key> {
        if self.items.is_empty() {
            return None;
        }
        let n = self.items.len() as u64;
        // libCacheSim starts from a score of 1e16 and keeps the first of equals.
        let mut best: Option<(usize, f64)> = None;
        for _ in 0..self.samples {
            let pos = (self.rng.next_u64() % n) as usize;
            let item = &self.items[pos];
            // An item inserted at this very request (age 0) scores infinity.
            let age = now.vtime.saturating_sub(item.since) as f64;
            let score = 1.0e8 * f64::from(item.count) / age;
            if best.is_none_or(|(_, s)| s > score) {
                best = Some((pos, score));
            }
        }
        best.map(|(pos, _)| self.take(pos))
    }
    remove_by_index!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key, vtime: u64) -> Access {
        Access { key, size: 1, vtime, ..Access::default() }
    }

    #[test]
    fn rarely_used_old_items_go_first() {
        // With as many samples as a tiny cache holds, every item is seen.
        let mut h = Hyperbolic::new(3, 64, 1).unwrap();
        let mut ev = Vec::new();
        let mut t = 0;
        let mut req = |h: &mut Hyperbolic, k, ev: &mut Vec<Key>| {
            t += 1;
            h.access(&acc(k, t), ev)
        };
        req(&mut h, 1, &mut ev);
        req(&mut h, 2, &mut ev);
        req(&mut h, 3, &mut ev);
        for _ in 0..5 {
            req(&mut h, 1, &mut ev);
            req(&mut h, 3, &mut ev);
        }
        req(&mut h, 4, &mut ev);
        assert_eq!(ev, vec![2], "2 was requested once and is old");
        assert!(Hyperbolic::new(3, 0, 1).is_err() && Hyperbolic::new(3, 8, 0).is_err());
    }
}

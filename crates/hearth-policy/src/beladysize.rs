//! Size-aware Belady (libCacheSim's `BeladySize`), offline: the victim is the
//! item with the largest size x distance to its next request among
//! `samples` (128) resident items drawn at random with replacement, so a
//! large item needed late goes before a small one needed at the same time.
//! Next requests come from `Access::next_access`, as for OPT.
//!
//! An item never requested again is not admitted (and no room is made for
//! it), and an item whose last request was a hit is the next victim: neither
//! can earn a hit. libCacheSim refuses such an item only after making room
//! for it, and drops the other at once, so it runs with free space that
//! Hearth keeps filled until it is needed.
//!
//! Draws use libCacheSim's generator (Lehmer64, `seed=S`), uniform over the
//! residents (a dense array); libCacheSim draws through its hash table's
//! buckets (see random.rs), so the two agree in distribution only.
//! O(samples) per eviction, O(1) per request.

use hearth_core::{key_map, Access, Key, KeyMap, Policy, NEVER};

use crate::admission::Lehmer64;
use crate::SpecError;

#[derive(Clone, Copy)]
struct Item {
    key: Key,
    size: u32,
    next_access: u64,
}

pub struct BeladySize {
    capacity: u64,
    used: u64,
    samples: u32,
    /// Key -> position in `items`.
    index: KeyMap<u32>,
    /// Every resident item, in no order.
    items: Vec<Item>,
    /// Items whose last request was a hit, evicted before any sampling
    /// (checked when popped: one may have been removed since).
    dead: Vec<Key>,
    rng: Lehmer64,
}

impl BeladySize {
    pub fn new(capacity: u64, samples: u32, seed: u64) -> Result<Self, SpecError> {
        if samples == 0 {
            return Err(SpecError::range("beladysize", "samples must be at least 1"));
        }
        if seed == 0 {
            return Err(SpecError::range("beladysize", "seed must not be 0 (the generator would stay at 0)"));
        }
        Ok(BeladySize {
            capacity,
            used: 0,
            samples,
            index: key_map(1024),
            items: Vec::with_capacity(1024),
            dead: Vec::new(),
            rng: Lehmer64::new(seed),
        })
    }

    fn take(&mut self, pos: usize) -> Key {
        let item = crate::swap_take(&mut self.items, &mut self.index, pos, |i| i.key);
        self.used -= u64::from(item.size);
        item.key
    }
}

impl Policy for BeladySize {
    fn name(&self) -> String {
        "BeladySize".into()
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&pos) = self.index.get(&a.key) else { return false };
        self.items[pos as usize].next_access = a.next_access;
        if a.next_access == NEVER {
            self.dead.push(a.key);
        }
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        if a.next_access == NEVER {
            return;
        }
        self.make_room(a, evicted);
        self.index.insert(a.key, self.items.len() as u32);
        self.items.push(Item { key: a.key, size: a.size, next_access: a.next_access });
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, now: &Access) -> Option<Key> {
        while let Some(key) = self.dead.pop() {
            if let Some(&pos) = self.index.get(&key) {
                if self.items[pos as usize].next_access == NEVER {
                    return Some(self.take(pos as usize));
                }
            }
        }
        if self.items.is_empty() {
            return None;
        }
        let n = self.items.len() as u64;
        // Ties keep the first drawn, as libCacheSim's strict comparison does.
        let mut best: Option<(usize, f64)> = None;
        for _ in 0..self.samples {
            let pos = (self.rng.next_u64() % n) as usize;
            let item = &self.items[pos];
            let distance = item.next_access.saturating_sub(now.vtime) as f64;
            let score = f64::from(item.size) * distance;
            if best.is_none_or(|(_, s)| score > s) {
                best = Some((pos, score));
            }
        }
        best.map(|(pos, _)| self.take(pos))
    }
    remove_by_index!();
    fn observe_next_access(&mut self, a: &Access) {
        if let Some(&pos) = self.index.get(&a.key) {
            self.items[pos as usize].next_access = a.next_access;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key, size: u32, vtime: u64, next_access: u64) -> Access {
        Access { key, size, vtime, next_access, ..Access::default() }
    }

    #[test]
    fn the_largest_size_times_distance_goes_and_dead_items_never_stay() {
        // With many samples of a 2-item cache, both items are seen.
        let mut b = BeladySize::new(4, 64, 1).unwrap();
        let mut ev = Vec::new();
        b.access(&acc(1, 1, 0, 10), &mut ev); // 1 x 10
        b.access(&acc(2, 3, 1, 5), &mut ev); // 3 x 4 from vtime 1
        assert!(!b.access(&acc(9, 1, 2, NEVER), &mut ev), "never used again: not admitted");
        assert!(ev.is_empty() && !b.contains(9));
        b.access(&acc(3, 1, 3, 4), &mut ev);
        // At vtime 3: item 1 scores 1 x 7, item 2 scores 3 x 2.
        assert_eq!(ev, vec![1]);
        assert!(b.access(&acc(3, 1, 4, NEVER), &mut ev), "a last hit");
        ev.clear();
        b.access(&acc(4, 1, 5, 9), &mut ev);
        assert_eq!(ev, vec![3], "the item past its last request goes first");
        assert!(BeladySize::new(4, 0, 1).is_err() && BeladySize::new(4, 8, 0).is_err());
    }
}

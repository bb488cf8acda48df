//! Least recently used: evict the item whose last request is oldest; and
//! its mirror, most recently used (MRU, as libCacheSim's): evict the item
//! requested (or inserted) last. MRU is poor for most workloads but suited
//! to a loop larger than the cache: LRU misses every request there, while
//! MRU gives up the item just used and keeps the rest for the next round.

use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
}

pub struct Lru {
    capacity: u64,
    used: u64,
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// Most recently used at the front.
    stack: List,
    /// Evict from the front (MRU) instead of the back.
    evict_most_recent: bool,
}

impl Lru {
    pub fn new(capacity: u64) -> Self {
        Lru {
            capacity,
            used: 0,
            index: key_map(1024),
            slab: Slab::default(),
            stack: List::new(),
            evict_most_recent: false,
        }
    }

    /// Most recently used.
    pub fn mru(capacity: u64) -> Self {
        Lru { evict_most_recent: true, ..Lru::new(capacity) }
    }
}

impl Policy for Lru {
    fn name(&self) -> String {
        if self.evict_most_recent { "MRU" } else { "LRU" }.into()
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        match self.index.get(&a.key) {
            Some(&i) => {
                self.slab.move_to_front(&mut self.stack, i);
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
}

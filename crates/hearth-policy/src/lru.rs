//! Least recently used: evict the item whose last request is oldest.

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
    stack: List,
}

impl Lru {
    pub fn new(capacity: u64) -> Self {
        Lru { capacity, used: 0, index: key_map(1024), slab: Slab::default(), stack: List::new() }
    }
}

impl Policy for Lru {
    fn name(&self) -> String {
        "LRU".into()
    }
    indexed_residency!();
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

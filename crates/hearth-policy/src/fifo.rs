//! First in, first out: evict the item inserted longest ago; hits change
//! nothing. Mirrors libCacheSim's `FIFO` (insert at the head, evict the tail).

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
}

pub struct Fifo {
    capacity: u64,
    used: u64,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// Newest at the head, oldest at the tail.
    queue: List,
}

impl Fifo {
    pub fn new(capacity: u64) -> Self {
        Fifo { capacity, used: 0, index: KeyIndex::with_capacity(1024), slab: Slab::default(), queue: List::new() }
    }
}

impl Policy for Fifo {
    fn name(&self) -> String {
        "FIFO".into()
    }
    indexed_residency!();
    warm_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        self.index.contains_key(&a.key)
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size });
        self.slab.push_front(&mut self.queue, i);
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let i = self.slab.pop_back(&mut self.queue)?;
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.index.remove(&key) else { return false };
        self.slab.unlink(&mut self.queue, i);
        let e = self.slab.release(i);
        self.used -= u64::from(e.size);
        true
    }
}

//! Belady's optimal offline policy (OPT / MIN, Belady 1966): evict the
//! resident item whose next request is furthest in the future, read from
//! `Access::next_access` (items never requested again go first). Like
//! libCacheSim's `Belady`, every missed item is admitted. With unit sizes it
//! minimises misses; with variable sizes it is a strong heuristic, not an
//! optimum.
//!
//! Items sit in a binary max-heap keyed by next access. A hit pushes a fresh
//! entry rather than updating the old one; stale entries are recognised by
//! their stamp and skipped, and the heap is compacted in place when stale
//! entries outnumber live ones (O(log n) amortized, no allocation once warm).

use std::collections::BinaryHeap;

use hearth_core::{key_map, Access, Key, KeyMap, Policy, Slab};

/// Stamp of a slab slot that is free: matches no heap entry.
const FREED: u64 = u64::MAX;

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    /// Identifies the one heap entry that is current for this item.
    stamp: u64,
}

pub struct Opt {
    capacity: u64,
    used: u64,
    next_stamp: u64,
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// (next access, stamp, slot), furthest first.
    heap: BinaryHeap<(u64, u64, u32)>,
}

impl Opt {
    pub fn new(capacity: u64) -> Self {
        Opt { capacity, used: 0, next_stamp: 0, index: key_map(1024), slab: Slab::default(), heap: BinaryHeap::new() }
    }

    /// Gives slot `i` a new heap entry for its next access.
    fn enqueue(&mut self, i: u32, next_access: u64) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.slab.get_mut(i).stamp = stamp;
        self.heap.push((next_access, stamp, i));
        if self.heap.len() > 2 * self.index.len() + 64 {
            let slab = &self.slab;
            self.heap.retain(|&(_, stamp, i)| slab.get(i).stamp == stamp);
        }
    }

    fn release(&mut self, i: u32) -> Entry {
        self.slab.get_mut(i).stamp = FREED;
        let e = self.slab.release(i);
        self.used -= u64::from(e.size);
        e
    }
}

impl Policy for Opt {
    fn name(&self) -> String {
        "OPT".into()
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        self.enqueue(i, a.next_access);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, stamp: FREED });
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
        self.enqueue(i, a.next_access);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        while let Some((_, stamp, i)) = self.heap.pop() {
            if self.slab.get(i).stamp != stamp {
                continue; // superseded by a later hit, or already gone
            }
            let e = self.release(i);
            self.index.remove(&e.key);
            return Some(e.key);
        }
        None
    }
    fn observe_next_access(&mut self, a: &Access) {
        if let Some(&i) = self.index.get(&a.key) {
            self.enqueue(i, a.next_access);
        }
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.index.remove(&key) else { return false };
        self.release(i);
        true
    }
}

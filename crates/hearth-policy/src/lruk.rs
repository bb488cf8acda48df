//! LRU-K (O'Neil, O'Neil & Weikum, "The LRU-K page replacement algorithm for
//! database disk buffering", SIGMOD 1993), as libCacheSim's `LRU_K`; K is 2
//! by default (`lruk:k=N`).
//!
//! The victim is the item whose K-th most recent request is oldest (the
//! largest backward K-distance), so an item needs K requests close together
//! to count as hot, and a single recent request (a scan) does not save it.
//! Items requested fewer than K times have an infinite distance and go
//! first, oldest insertion first. As in libCacheSim, history is kept only
//! while an item is resident (no retained information period): an item
//! inserted again starts from one request.
//!
//! Items with fewer than K requests sit in a FIFO list. The others sit in a
//! binary min-heap keyed by their K-th most recent request; a hit pushes a
//! fresh entry and stale ones are recognised by their stamp and skipped (as
//! in lfu.rs), which keeps requests O(log n) amortized. Request times come
//! from a per-policy clock that lookups advance.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::SpecError;
use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

/// Stamp of an item with no current heap entry (free, or fewer than K requests).
const NOT_IN_HEAP: u64 = u64::MAX;

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    /// Requests since insertion, counted up to K.
    requests: u32,
    /// Position of the latest request time in this slot's history ring.
    latest: u32,
    /// Identifies the one heap entry that is current for this item.
    stamp: u64,
}

pub struct LruK {
    capacity: u64,
    used: u64,
    k: u32,
    /// Lookups so far: the time of the current request.
    clock: u64,
    next_stamp: u64,
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// Items with fewer than K requests, newest at the head.
    young: List,
    /// K request times per slab slot, a ring per slot; grows with the slab.
    history: Vec<u64>,
    /// (K-th most recent request time, stamp, slot), oldest first.
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
}

impl LruK {
    pub fn new(capacity: u64, k: u32) -> Result<Self, SpecError> {
        if k == 0 {
            return Err(SpecError::range("lruk", "k must be at least 1"));
        }
        Ok(LruK {
            capacity,
            used: 0,
            k,
            clock: 0,
            next_stamp: 0,
            index: key_map(1024),
            slab: Slab::default(),
            young: List::new(),
            history: Vec::new(),
            heap: BinaryHeap::new(),
        })
    }

    fn ring(&self, i: u32) -> usize {
        i as usize * self.k as usize
    }

    /// Notes a request of slot `i` now; once it has K, gives it a fresh heap
    /// entry keyed by its K-th most recent request.
    fn record(&mut self, i: u32) {
        let k = self.k;
        let ring = self.ring(i);
        let e = self.slab.get_mut(i);
        if e.requests > 0 {
            e.latest = (e.latest + 1) % k;
        }
        self.history[ring + e.latest as usize] = self.clock;
        if e.requests < k {
            e.requests += 1;
            if e.requests < k {
                return;
            }
        }
        // The ring is full: the slot after the latest holds the K-th most recent.
        let kth = self.history[ring + ((e.latest + 1) % k) as usize];
        e.stamp = self.next_stamp;
        self.heap.push(Reverse((kth, self.next_stamp, i)));
        self.next_stamp += 1;
        if self.heap.len() > 2 * self.index.len() + 64 {
            let slab = &self.slab;
            self.heap.retain(|Reverse((_, stamp, i))| slab.get(*i).stamp == *stamp);
        }
    }

    /// Unlinks slot `i` from wherever it is ranked, frees it and returns its key.
    fn release(&mut self, i: u32) -> Key {
        let e = *self.slab.get(i);
        if e.requests < self.k {
            self.slab.unlink(&mut self.young, i);
        }
        self.slab.get_mut(i).stamp = NOT_IN_HEAP;
        self.slab.release(i);
        self.index.remove(&e.key);
        self.used -= u64::from(e.size);
        e.key
    }
}

impl Policy for LruK {
    fn name(&self) -> String {
        format!("LRU-{}", self.k)
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        self.clock += 1;
        let Some(&i) = self.index.get(&a.key) else { return false };
        if self.slab.get(i).requests == self.k - 1 {
            // This request is its K-th: it leaves the FIFO for the heap.
            self.slab.unlink(&mut self.young, i);
        }
        self.record(i);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, requests: 0, latest: 0, stamp: NOT_IN_HEAP });
        let ring_end = self.ring(i) + self.k as usize;
        if self.history.len() < ring_end {
            self.history.resize(ring_end, 0);
        }
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
        if self.k > 1 {
            self.slab.push_front(&mut self.young, i);
        }
        self.record(i);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if let Some(i) = self.young.tail() {
            return Some(self.release(i));
        }
        while let Some(Reverse((_, stamp, i))) = self.heap.pop() {
            if self.slab.get(i).stamp == stamp {
                return Some(self.release(i));
            }
        }
        None
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        self.release(i);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cache: &mut LruK, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = cache.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn once_requested_items_go_first_then_the_oldest_second_to_last_request() {
        let mut cache = LruK::new(3, 2).unwrap();
        for k in [1, 2, 1, 3, 2] {
            request(&mut cache, k);
        }
        // 3 has one request: it goes although it is the most recent.
        assert_eq!(request(&mut cache, 4).1, vec![3]);
        // Items with one request keep going first.
        assert!(request(&mut cache, 2).0);
        assert_eq!(request(&mut cache, 5).1, vec![4]);
        assert_eq!(request(&mut cache, 6).1, vec![5]);
        // Now all have two: 1's second-to-last request (time 1) is older than
        // 2's (time 5, its requests being at 2, 5 and 7) and 6's (time 9).
        request(&mut cache, 6);
        assert_eq!(request(&mut cache, 7).1, vec![1]);
        assert!(cache.contains(2) && cache.contains(6));
    }

    #[test]
    fn k1_is_lru_and_k3_needs_three_requests() {
        let mut lru = LruK::new(2, 1).unwrap();
        for k in [1, 2, 1] {
            request(&mut lru, k);
        }
        assert_eq!(request(&mut lru, 3).1, vec![2]);
        assert_eq!(lru.name(), "LRU-1");

        let mut cache = LruK::new(2, 3).unwrap();
        for k in [1, 1, 2, 2, 2] {
            request(&mut cache, k);
        }
        // 1 has two requests (infinite 3-distance), 2 has three.
        assert_eq!(request(&mut cache, 3).1, vec![1]);
        assert!(LruK::new(2, 0).is_err());
    }
}

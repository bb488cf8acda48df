//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
//! SOSP 2023), as libCacheSim's `S3FIFO`.
//!
//! Three FIFO queues: a small one (10% of the bytes by default,
//! `s3fifo:small=F`) that new items enter, a main one (the rest) and a ghost
//! queue remembering the keys and sizes of items evicted from the small queue
//! (up to 90% of the capacity in bytes, `ghost=F`). Hits only bump a per-item
//! counter; nothing moves on a hit.
//! - An item whose key is a ghost is inserted straight into the main queue.
//! - Evicting from the small queue: an item hit at least `threshold` times
//!   (2 by default, the paper's `freq > 1`) moves to the main queue with its
//!   counter reset; the first one that was not is evicted and becomes a ghost.
//!   Most one-hit wonders thus leave after a short stay.
//! - Evicting from the main queue is 2-bit CLOCK: an item with hits goes
//!   back to the head with its counter capped at 3 and decremented; the
//!   first one without is evicted (no ghost).
//! - The main queue is evicted from when it exceeds its share or the small
//!   queue is empty, otherwise the small queue.
//!
//! As libCacheSim's current version (not the paper's first), until the first
//! eviction new items go to the main queue once the small one is full, so a
//! cold cache fills completely. Items at least as large as the small queue
//! are not admitted (unless a ghost sends them to the main queue), so one
//! item never fills it alone; libCacheSim also evicts on behalf of a
//! non-ghost item of exactly the small queue's size before refusing it,
//! which Hearth does not.

use crate::SpecError;
use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    Small = 0,
    Main = 1,
    Ghost = 2,
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    /// Hits since insertion or the last reinsertion (saturating; only
    /// comparisons with the threshold and 3 matter).
    hits: u8,
    queue: Queue,
}

pub struct S3Fifo {
    capacity: u64,
    /// Byte budgets of the small, main and ghost queues.
    budgets: [u64; 3],
    /// Small-queue hits that earn a move to the main queue.
    threshold: u8,
    /// Residents and ghosts alike; `Entry::queue` tells which.
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// Newest at the head of each queue, indexed by `Queue`.
    queues: [List; 3],
    bytes: [u64; 3],
    /// Whether anything was ever evicted (until then a full small queue
    /// overflows into the main one).
    has_evicted: bool,
    /// The key whose lookup just found its ghost: the following insert
    /// puts it in the main queue.
    ghost_hit: Option<Key>,
}

impl S3Fifo {
    /// An S3-FIFO cache whose small queue gets `small` of the capacity and
    /// whose ghost queue remembers `ghost` x capacity bytes of items.
    pub fn new(capacity: u64, small: f64, ghost: f64, threshold: u8) -> Result<Self, SpecError> {
        if !(0.0..1.0).contains(&small) || small == 0.0 {
            return Err(SpecError::range("s3fifo", format!("small must be in (0, 1), got {small}")));
        }
        if ghost.is_nan() || ghost < 0.0 {
            return Err(SpecError::range("s3fifo", format!("ghost must be >= 0, got {ghost}")));
        }
        // Truncating products, as libCacheSim sizes its queues.
        let small_budget = (capacity as f64 * small) as u64;
        let ghost_budget = (capacity as f64 * ghost) as u64;
        Ok(S3Fifo {
            capacity,
            budgets: [small_budget, capacity - small_budget, ghost_budget],
            threshold,
            index: key_map(1024),
            slab: Slab::default(),
            queues: [List::new(); 3],
            bytes: [0; 3],
            has_evicted: false,
            ghost_hit: None,
        })
    }

    fn push_front(&mut self, i: u32, queue: Queue) {
        let e = self.slab.get_mut(i);
        e.queue = queue;
        e.hits = 0;
        self.bytes[queue as usize] += u64::from(e.size);
        self.slab.push_front(&mut self.queues[queue as usize], i);
    }

    fn unlink(&mut self, i: u32) {
        let e = *self.slab.get(i);
        self.slab.unlink(&mut self.queues[e.queue as usize], i);
        self.bytes[e.queue as usize] -= u64::from(e.size);
    }

    /// Unlinks and forgets slot `i` entirely; returns its key.
    fn forget(&mut self, i: u32) -> Key {
        self.unlink(i);
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        e.key
    }

    /// Turns the (unlinked) small-queue victim `i` into a ghost, dropping the
    /// oldest ghosts to make room; an item larger than the whole ghost queue
    /// is forgotten instead.
    fn remember(&mut self, i: u32) {
        let size = u64::from(self.slab.get(i).size);
        let budget = self.budgets[Queue::Ghost as usize];
        if size > budget {
            let e = self.slab.release(i);
            self.index.remove(&e.key);
            return;
        }
        while self.bytes[Queue::Ghost as usize] + size > budget {
            let Some(oldest) = self.queues[Queue::Ghost as usize].tail() else { break };
            self.forget(oldest);
        }
        self.push_front(i, Queue::Ghost);
    }

    /// Walks the small queue from its oldest item: frequently hit items move
    /// to the main queue, the first other one is evicted and returned. None
    /// if every item moved.
    fn evict_small(&mut self) -> Option<Key> {
        while let Some(i) = self.queues[Queue::Small as usize].tail() {
            self.unlink(i);
            if self.slab.get(i).hits >= self.threshold {
                self.push_front(i, Queue::Main);
            } else {
                self.remember(i);
                return Some(self.slab.get(i).key);
            }
        }
        None
    }

    /// CLOCK over the main queue with a counter capped at 3.
    fn evict_main(&mut self) -> Option<Key> {
        while let Some(i) = self.queues[Queue::Main as usize].tail() {
            let hits = self.slab.get(i).hits;
            if hits == 0 {
                return Some(self.forget(i));
            }
            self.slab.move_to_front(&mut self.queues[Queue::Main as usize], i);
            self.slab.get_mut(i).hits = hits.min(3) - 1;
        }
        None
    }
}

impl Policy for S3Fifo {
    fn name(&self) -> String {
        "S3-FIFO".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.bytes[Queue::Small as usize] + self.bytes[Queue::Main as usize]
    }
    fn len(&self) -> usize {
        self.queues[Queue::Small as usize].len() + self.queues[Queue::Main as usize].len()
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).queue != Queue::Ghost)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        self.ghost_hit = None;
        let Some(&i) = self.index.get(&a.key) else { return false };
        if self.slab.get(i).queue == Queue::Ghost {
            self.forget(i);
            self.ghost_hit = Some(a.key);
            return false;
        }
        let e = self.slab.get_mut(i);
        e.hits = e.hits.saturating_add(1);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        let to_main = self.ghost_hit.take() == Some(a.key);
        let size = u64::from(a.size);
        let small_budget = self.budgets[Queue::Small as usize];
        if size > small_budget || (size == small_budget && !to_main) {
            return;
        }
        self.make_room(a, evicted);
        let small_full = self.bytes[Queue::Small as usize] >= small_budget;
        let queue = if to_main || (small_full && !self.has_evicted) { Queue::Main } else { Queue::Small };
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, hits: 0, queue });
        self.index.insert(a.key, i);
        self.push_front(i, queue);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.is_empty() {
            return None;
        }
        self.has_evicted = true;
        loop {
            let main_over = self.bytes[Queue::Main as usize] > self.budgets[Queue::Main as usize];
            let victim = if main_over || self.queues[Queue::Small as usize].is_empty() {
                self.evict_main()
            } else {
                self.evict_small()
            };
            if victim.is_some() {
                return victim;
            }
        }
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        // An invalidated item leaves no ghost either: its data is gone.
        let resident = self.slab.get(i).queue != Queue::Ghost;
        self.forget(i);
        resident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cache: &mut S3Fifo, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = cache.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    fn queue_of(cache: &S3Fifo, key: Key) -> Queue {
        cache.slab.get(cache.index[&key]).queue
    }

    #[test]
    fn one_hit_wonders_leave_through_the_small_queue_and_come_back_to_main() {
        // 20 bytes: small queue 2, main 18, ghosts 18.
        let mut cache = S3Fifo::new(20, 0.1, 0.9, 2).unwrap();
        for k in 0..20 {
            request(&mut cache, k);
        }
        // A cold cache fills completely: 0 and 1 in the small queue, the rest
        // in the main one.
        assert_eq!(queue_of(&cache, 1), Queue::Small);
        assert_eq!(queue_of(&cache, 2), Queue::Main);
        // 20 evicts the oldest small item, 0, which becomes a ghost.
        assert_eq!(request(&mut cache, 20).1, vec![0]);
        assert_eq!(queue_of(&cache, 0), Queue::Ghost);
        assert!(!cache.contains(0));
        // Its return is a miss that goes to the main queue.
        assert!(!request(&mut cache, 0).0);
        assert_eq!(queue_of(&cache, 0), Queue::Main);
    }

    #[test]
    fn twice_hit_small_items_move_to_main_and_main_is_a_clock() {
        let mut cache = S3Fifo::new(20, 0.1, 0.9, 2).unwrap();
        for k in 0..20 {
            request(&mut cache, k);
        }
        // 0 (small) is hit twice and 2 (oldest in main) once.
        for k in [0, 0, 2] {
            assert!(request(&mut cache, k).0);
        }
        // The small queue's 0 moves to main, 1 is evicted from the small queue.
        assert_eq!(request(&mut cache, 20).1, vec![1]);
        assert_eq!(queue_of(&cache, 0), Queue::Main);
        // Main is now over its 18 bytes, so it evicts: 2 is spared once, 3 goes.
        assert_eq!(request(&mut cache, 21).1, vec![3]);
        assert!(cache.contains(2));
        assert_eq!(cache.occupancy(), 20);
    }

    #[test]
    fn ghosts_are_bounded_in_bytes_and_not_resident() {
        let mut cache = S3Fifo::new(20, 0.1, 0.1, 2).unwrap();
        for k in 0..30 {
            request(&mut cache, k);
        }
        // Only 2 bytes of ghosts: the last two small-queue victims.
        assert_eq!(cache.queues[Queue::Ghost as usize].len(), 2);
        assert_eq!(cache.len(), 20);
        let ghost = *cache.slab.get(cache.queues[Queue::Ghost as usize].head().unwrap());
        assert!(!cache.remove(ghost.key), "a ghost is not resident");
        assert!(S3Fifo::new(20, 1.0, 0.9, 2).is_err());
    }
}

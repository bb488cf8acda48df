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

use hearth_core::{Access, Key, Policy};

use crate::SpecError;

use crate::three_queues::{Entry, Queue, ThreeQueues};

pub struct S3Fifo {
    capacity: u64,
    /// Small-queue hits that earn a move to the main queue.
    threshold: u8,
    /// Residents and ghosts alike; `Entry::queue` tells which.
    q: ThreeQueues<u8>,
    /// Whether anything was ever evicted (until then a full small queue
    /// overflows into the main one).
    has_evicted: bool,
}

impl S3Fifo {
    /// An S3-FIFO cache whose small queue gets `small` of the capacity and
    /// whose ghost queue remembers `ghost` x capacity bytes of items.
    pub fn new(capacity: u64, small: f64, ghost: f64, threshold: u8) -> Result<Self, SpecError> {
        Ok(S3Fifo { capacity, threshold, q: ThreeQueues::new("s3fifo", capacity, small, ghost)?, has_evicted: false })
    }

    /// CLOCK over the main queue with a counter capped at 3.
    fn evict_main(&mut self) -> Option<Key> {
        while let Some(i) = self.q.tail(Queue::Main) {
            let hits = self.q.slab.get(i).hits;
            if hits == 0 {
                return Some(self.q.forget(i));
            }
            self.q.move_to_front(i);
            self.q.slab.get_mut(i).hits = hits.min(3) - 1;
        }
        None
    }
}

impl Policy for S3Fifo {
    fn name(&self) -> String {
        "S3-FIFO".into()
    }
    three_queue_residency!();
    three_queue_warm!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(i) = self.q.find(a.key) else { return false };
        let e = self.q.slab.get_mut(i);
        e.hits = e.hits.saturating_add(1);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        let to_main = self.q.was_ghost(a.key);
        let size = u64::from(a.size);
        let small_budget = self.q.budget(Queue::Small);
        if size > small_budget || (size == small_budget && !to_main) {
            return;
        }
        self.make_room(a, evicted);
        let small_full = self.q.bytes(Queue::Small) >= small_budget;
        let queue = if to_main || (small_full && !self.has_evicted) { Queue::Main } else { Queue::Small };
        let i = self.q.alloc(Entry::new(a.key, a.size));
        self.q.push_front(i, queue);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.is_empty() {
            return None;
        }
        self.has_evicted = true;
        loop {
            let main_over = self.q.bytes(Queue::Main) > self.q.budget(Queue::Main);
            let victim = if main_over || self.q.is_empty(Queue::Small) {
                self.evict_main()
            } else {
                self.q.drain_small(u32::from(self.threshold))
            };
            if victim.is_some() {
                return victim;
            }
        }
    }
    fn remove(&mut self, key: Key) -> bool {
        self.q.remove(key)
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
        cache.q.queue_of(key)
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
        assert_eq!(cache.q.list(Queue::Ghost).len(), 2);
        assert_eq!(cache.len(), 20);
        let ghost = *cache.q.slab.get(cache.q.list(Queue::Ghost).head().unwrap());
        assert!(!cache.remove(ghost.key), "a ghost is not resident");
        assert!(S3Fifo::new(20, 1.0, 0.9, 2).is_err());
    }
}

//! QD-LP-FIFO (Yang et al., "FIFO can be better than LRU: the power of lazy
//! promotion and quick demotion", HotOS 2023), as libCacheSim's `QDLP` with
//! its defaults (`fifo-size-ratio=0.1,ghost-size-ratio=0.9,main-cache=Clock2,
//! move-to-main-threshold=1`).
//!
//! Quick demotion: new items enter a probationary FIFO; lazy promotion: the
//! main cache is a 2-bit CLOCK that only bumps a counter on a hit.
//! - Room is always made from the probationary FIFO while it holds anything:
//!   its oldest item moves to the main cache if it was hit at least
//!   `threshold` times there (1), else it is dropped and its key and size
//!   join a ghost FIFO of `ghost` x capacity bytes (0.9). Only when the
//!   FIFO is empty does the main cache evict (CLOCK: an item with hits goes
//!   back to the head with its counter, capped at 3, decremented).
//! - The main cache has its own budget, (1 - `small`) x capacity: an item
//!   moving in evicts from it until it fits, so one step of the FIFO can
//!   evict several items (one `evict` call reports the first and hands the
//!   rest to the next `insert` or `evict`).
//! - A miss whose key is a ghost goes straight to the main cache.
//! - The FIFO has no budget of its own (it fills the cache until there is
//!   pressure); `small` x capacity only bounds the items admitted: items at
//!   least that large are refused unless a ghost sends them to the main
//!   cache (libCacheSim makes room before refusing one of exactly that
//!   size, and so does Hearth).

use crate::SpecError;
use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    Fifo = 0,
    Main = 1,
    Ghost = 2,
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    /// Hits in the FIFO (saturating), or the main cache's CLOCK counter (<= 3).
    hits: u8,
    queue: Queue,
}

pub struct Qdlp {
    capacity: u64,
    /// The admission bound of the FIFO, the main cache's and the ghosts' budgets.
    budgets: [u64; 3],
    threshold: u8,
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// Newest at the head.
    queues: [List; 3],
    bytes: [u64; 3],
    /// The key whose lookup just found its ghost.
    ghost_hit: Option<Key>,
    /// Victims of a step that `evict` could not report yet.
    pending: Vec<Key>,
}

impl Qdlp {
    pub fn new(capacity: u64, small: f64, ghost: f64, threshold: u8) -> Result<Self, SpecError> {
        if !(small > 0.0 && small < 1.0) {
            return Err(SpecError::range("qdlp", format!("small must be in (0, 1), got {small}")));
        }
        if ghost.is_nan() || ghost < 0.0 {
            return Err(SpecError::range("qdlp", format!("ghost must be >= 0, got {ghost}")));
        }
        // Truncating products, as libCacheSim sizes its queues.
        let small_budget = (capacity as f64 * small) as u64;
        let ghost_budget = (capacity as f64 * ghost) as u64;
        Ok(Qdlp {
            capacity,
            budgets: [small_budget, capacity - small_budget, ghost_budget],
            threshold,
            index: key_map(1024),
            slab: Slab::default(),
            queues: [List::new(); 3],
            bytes: [0; 3],
            ghost_hit: None,
            pending: Vec::new(),
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

    /// Frees the (unlinked) slot `i`; returns its key.
    fn drop_slot(&mut self, i: u32) -> Key {
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        e.key
    }

    /// Makes the (unlinked) FIFO victim `i` a ghost, dropping the oldest ghosts.
    fn remember(&mut self, i: u32) {
        let size = u64::from(self.slab.get(i).size);
        let budget = self.budgets[Queue::Ghost as usize];
        if size > budget {
            self.drop_slot(i);
            return;
        }
        while self.bytes[Queue::Ghost as usize] + size > budget {
            let Some(oldest) = self.queues[Queue::Ghost as usize].tail() else { break };
            self.unlink(oldest);
            self.drop_slot(oldest);
        }
        self.push_front(i, Queue::Ghost);
    }

    /// One CLOCK eviction from the main cache.
    fn evict_main(&mut self) -> Option<Key> {
        while let Some(i) = self.queues[Queue::Main as usize].tail() {
            let hits = self.slab.get(i).hits;
            if hits == 0 {
                self.unlink(i);
                return Some(self.drop_slot(i));
            }
            self.slab.move_to_front(&mut self.queues[Queue::Main as usize], i);
            self.slab.get_mut(i).hits = hits - 1;
        }
        None
    }

    /// Puts the (unlinked) slot `i` into the main cache, evicting from it
    /// until it fits; an item larger than the main cache is dropped.
    fn admit_main(&mut self, i: u32, victims: &mut Vec<Key>) {
        let size = u64::from(self.slab.get(i).size);
        let budget = self.budgets[Queue::Main as usize];
        if size > budget {
            victims.push(self.drop_slot(i));
            return;
        }
        while self.bytes[Queue::Main as usize] + size > budget {
            match self.evict_main() {
                Some(k) => victims.push(k),
                None => break,
            }
        }
        self.push_front(i, Queue::Main);
    }

    /// libCacheSim's `QDLP_evict`: one step, pushing what left the cache to
    /// `victims`. False if the cache is empty.
    fn step(&mut self, victims: &mut Vec<Key>) -> bool {
        let Some(i) = self.queues[Queue::Fifo as usize].tail() else {
            return match self.evict_main() {
                Some(k) => {
                    victims.push(k);
                    true
                }
                None => false,
            };
        };
        self.unlink(i);
        if self.slab.get(i).hits >= self.threshold {
            self.admit_main(i, victims);
        } else {
            victims.push(self.slab.get(i).key);
            self.remember(i);
        }
        true
    }
}

impl Policy for Qdlp {
    fn name(&self) -> String {
        "QD-LP-FIFO".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.bytes[Queue::Fifo as usize] + self.bytes[Queue::Main as usize]
    }
    fn len(&self) -> usize {
        self.queues[Queue::Fifo as usize].len() + self.queues[Queue::Main as usize].len()
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).queue != Queue::Ghost)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        self.ghost_hit = None;
        let Some(&i) = self.index.get(&a.key) else { return false };
        let e = self.slab.get_mut(i);
        match e.queue {
            Queue::Fifo => e.hits = e.hits.saturating_add(1),
            Queue::Main => e.hits = (e.hits + 1).min(3),
            Queue::Ghost => {
                self.unlink(i);
                self.drop_slot(i);
                self.ghost_hit = Some(a.key);
                return false;
            }
        }
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        evicted.append(&mut self.pending);
        let to_main = self.ghost_hit.take() == Some(a.key);
        let size = u64::from(a.size);
        let small_budget = self.budgets[Queue::Fifo as usize];
        if size > small_budget {
            return;
        }
        self.make_room(a, evicted);
        if !to_main && size == small_budget {
            return;
        }
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, hits: 0, queue: Queue::Fifo });
        self.index.insert(a.key, i);
        if to_main {
            self.admit_main(i, evicted);
        } else {
            self.push_front(i, Queue::Fifo);
        }
    }
    fn make_room(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        evicted.append(&mut self.pending);
        while self.occupancy() + u64::from(a.size) > self.capacity {
            if !self.step(evicted) {
                break;
            }
        }
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.pending.is_empty() {
            let mut victims = std::mem::take(&mut self.pending);
            while victims.is_empty() && self.step(&mut victims) {}
            victims.reverse();
            self.pending = victims;
        }
        self.pending.pop()
    }
    fn remove(&mut self, key: Key) -> bool {
        self.pending.retain(|&k| k != key);
        let Some(&i) = self.index.get(&key) else { return false };
        let resident = self.slab.get(i).queue != Queue::Ghost;
        self.unlink(i);
        self.drop_slot(i);
        if self.ghost_hit == Some(key) {
            self.ghost_hit = None;
        }
        resident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key) -> Access {
        Access { key, size: 1, ..Access::default() }
    }

    #[test]
    fn one_hit_wonders_leave_through_the_fifo_and_hit_items_stay() {
        let mut q = Qdlp::new(10, 0.2, 1.0, 1).unwrap();
        let mut ev = Vec::new();
        for k in 0..10 {
            q.access(&acc(k), &mut ev);
        }
        assert!(q.access(&acc(0), &mut ev), "0 is hit in the FIFO");
        ev.clear();
        q.access(&acc(10), &mut ev);
        // 0 was hit: it moves to the main cache; 1 is the first victim.
        assert_eq!(ev, vec![1]);
        assert!(q.contains(0) && q.contains(10));
        // 1 is a ghost now: its next miss goes to the main cache.
        ev.clear();
        q.access(&acc(1), &mut ev);
        assert_eq!(q.slab.get(q.index[&1]).queue, Queue::Main);
        assert_eq!(q.occupancy(), 10);
    }

    #[test]
    fn parameters_are_checked() {
        assert!(Qdlp::new(10, 0.0, 0.9, 1).is_err());
        assert!(Qdlp::new(10, 1.0, 0.9, 1).is_err());
        assert!(Qdlp::new(10, 0.1, -1.0, 1).is_err());
    }
}

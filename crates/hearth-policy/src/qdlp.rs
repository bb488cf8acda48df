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

use hearth_core::{Access, Key, Policy};

use crate::SpecError;

use crate::three_queues::{Entry, Queue, ThreeQueues};

pub struct Qdlp {
    capacity: u64,
    threshold: u8,
    /// The small queue is the probationary FIFO, whose budget only bounds
    /// the items admitted; `Entry::hits` counts hits in the FIFO
    /// (saturating) and is the main cache's CLOCK counter (<= 3).
    q: ThreeQueues<u8>,
    /// Victims of a step that `evict` could not report yet.
    pending: Vec<Key>,
}

impl Qdlp {
    pub fn new(capacity: u64, small: f64, ghost: f64, threshold: u8) -> Result<Self, SpecError> {
        Ok(Qdlp { capacity, threshold, q: ThreeQueues::new("qdlp", capacity, small, ghost)?, pending: Vec::new() })
    }

    /// One CLOCK eviction from the main cache.
    fn evict_main(&mut self) -> Option<Key> {
        while let Some(i) = self.q.tail(Queue::Main) {
            let hits = self.q.slab.get(i).hits;
            if hits == 0 {
                return Some(self.q.forget(i));
            }
            self.q.move_to_front(i);
            self.q.slab.get_mut(i).hits = hits - 1;
        }
        None
    }

    /// Puts the (unlinked) slot `i` into the main cache, evicting from it
    /// until it fits; an item larger than the main cache is dropped.
    fn admit_main(&mut self, i: u32, victims: &mut Vec<Key>) {
        let size = u64::from(self.q.slab.get(i).size);
        let budget = self.q.budget(Queue::Main);
        if size > budget {
            victims.push(self.q.drop_slot(i));
            return;
        }
        while self.q.bytes(Queue::Main) + size > budget {
            match self.evict_main() {
                Some(k) => victims.push(k),
                None => break,
            }
        }
        self.q.push_front(i, Queue::Main);
    }

    /// libCacheSim's `QDLP_evict`: one step, pushing what left the cache to
    /// `victims`. False if the cache is empty.
    fn step(&mut self, victims: &mut Vec<Key>) -> bool {
        let Some(i) = self.q.tail(Queue::Small) else {
            return match self.evict_main() {
                Some(k) => {
                    victims.push(k);
                    true
                }
                None => false,
            };
        };
        self.q.unlink(i);
        if self.q.slab.get(i).hits >= self.threshold {
            self.admit_main(i, victims);
        } else {
            victims.push(self.q.slab.get(i).key);
            self.q.remember(i);
        }
        true
    }
}

impl Policy for Qdlp {
    fn name(&self) -> String {
        "QD-LP-FIFO".into()
    }
    three_queue_residency!();
    three_queue_warm!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(i) = self.q.find(a.key) else { return false };
        let e = self.q.slab.get_mut(i);
        e.hits = if e.queue == Queue::Main { (e.hits + 1).min(3) } else { e.hits.saturating_add(1) };
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        evicted.append(&mut self.pending);
        let to_main = self.q.was_ghost(a.key);
        let size = u64::from(a.size);
        let small_budget = self.q.budget(Queue::Small);
        if size > small_budget {
            return;
        }
        self.make_room(a, evicted);
        if !to_main && size == small_budget {
            return;
        }
        let i = self.q.alloc(Entry::new(a.key, a.size));
        if to_main {
            self.admit_main(i, evicted);
        } else {
            self.q.push_front(i, Queue::Small);
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
        self.q.remove(key)
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
        assert_eq!(q.q.queue_of(1), Queue::Main);
        assert_eq!(q.occupancy(), 10);
    }

    #[test]
    fn parameters_are_checked() {
        assert!(Qdlp::new(10, 0.0, 0.9, 1).is_err());
        assert!(Qdlp::new(10, 1.0, 0.9, 1).is_err());
        assert!(Qdlp::new(10, 0.1, -1.0, 1).is_err());
    }
}

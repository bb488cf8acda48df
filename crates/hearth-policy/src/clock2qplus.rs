//! CLOCK-2Q+ (libCacheSim's `Clock2QPlus`): 2Q's shape with FIFOs — a small
//! probationary FIFO of `small` x capacity bytes (0.1) in front of a 1-bit
//! CLOCK main cache, and a ghost FIFO of `ghost` x capacity bytes (0.9) —
//! plus a correlation window that keeps a burst of correlated requests from
//! promoting an item.
//! - A hit in the small FIFO counts only once the item has aged past the
//!   window: at least `window` x the small FIFO's budget (0.5) was admitted
//!   to the FIFO after it. A hit in the main cache sets its reference bit.
//! - Room is made from the main cache while it is over its budget
//!   ((1 - `small`) x capacity) or the FIFO is empty (CLOCK: a referenced
//!   item goes back to the head, cleared); otherwise from the FIFO, whose
//!   oldest items move to the main cache if they have `threshold` (1)
//!   counted hits, until one without leaves as a ghost.
//! - A miss whose key is a ghost goes to the main cache; any other miss
//!   enters the FIFO, or the main cache while the FIFO is full and nothing
//!   was evicted yet (warm-up). Items of at least the FIFO's budget are
//!   only admitted through a ghost.
//!
//! The window is measured in bytes admitted to the FIFO, against the FIFO's
//! budget in bytes. libCacheSim 0.3.5 counts the items admitted but
//! compares them with the FIFO's budget in bytes, so with real object sizes
//! its window is tens of thousands of times longer than the FIFO and no FIFO
//! hit ever counts; the two agree where sizes are 1 or the window is 0.

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
    /// Counted hits in the small FIFO, the reference bit in the main cache.
    hits: u32,
    /// `admitted` just after this item entered the small FIFO.
    stamp: u64,
    queue: Queue,
}

pub struct Clock2QPlus {
    capacity: u64,
    /// The small FIFO's, the main cache's and the ghosts' budgets in bytes.
    budgets: [u64; 3],
    threshold: u32,
    /// Bytes a small-FIFO item must see admitted after it before its hits count.
    window: u64,
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// Newest at the head.
    queues: [List; 3],
    bytes: [u64; 3],
    /// Bytes ever admitted to the small FIFO.
    admitted: u64,
    /// Whether anything was evicted yet (the end of warm-up).
    has_evicted: bool,
    /// The key whose lookup just found its ghost.
    ghost_hit: Option<Key>,
}

impl Clock2QPlus {
    pub fn new(capacity: u64, small: f64, ghost: f64, threshold: u32, window: f64) -> Result<Self, SpecError> {
        if !(small > 0.0 && small < 1.0) {
            return Err(SpecError::range("clock2qplus", format!("small must be in (0, 1), got {small}")));
        }
        if ghost.is_nan() || ghost < 0.0 {
            return Err(SpecError::range("clock2qplus", format!("ghost must be >= 0, got {ghost}")));
        }
        if window.is_nan() || window < 0.0 {
            return Err(SpecError::range("clock2qplus", format!("window must be >= 0, got {window}")));
        }
        // Truncating products, as libCacheSim sizes its queues.
        let small_budget = (capacity as f64 * small) as u64;
        let ghost_budget = (capacity as f64 * ghost) as u64;
        Ok(Clock2QPlus {
            capacity,
            budgets: [small_budget, capacity - small_budget, ghost_budget],
            threshold,
            window: (small_budget as f64 * window) as u64,
            index: key_map(1024),
            slab: Slab::default(),
            queues: [List::new(); 3],
            bytes: [0; 3],
            admitted: 0,
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

    /// Frees the (unlinked) slot `i`; returns its key.
    fn drop_slot(&mut self, i: u32) -> Key {
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        e.key
    }

    /// Makes the (unlinked) small-FIFO victim `i` a ghost, dropping the oldest ghosts.
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
            if self.slab.get(i).hits == 0 {
                self.unlink(i);
                return Some(self.drop_slot(i));
            }
            self.slab.move_to_front(&mut self.queues[Queue::Main as usize], i);
            self.slab.get_mut(i).hits = 0;
        }
        None
    }

    /// Drains the small FIFO's tail into the main cache until an item without
    /// enough hits leaves as a ghost (its key returned); None if it empties.
    fn evict_small(&mut self) -> Option<Key> {
        while let Some(i) = self.queues[Queue::Small as usize].tail() {
            self.unlink(i);
            if self.slab.get(i).hits >= self.threshold {
                self.push_front(i, Queue::Main);
            } else {
                let key = self.slab.get(i).key;
                self.remember(i);
                return Some(key);
            }
        }
        None
    }
}

impl Policy for Clock2QPlus {
    fn name(&self) -> String {
        "CLOCK-2Q+".into()
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
        let admitted = self.admitted;
        let window = self.window;
        let e = self.slab.get_mut(i);
        match e.queue {
            Queue::Small => {
                if admitted - e.stamp >= window {
                    e.hits = e.hits.saturating_add(1);
                }
            }
            Queue::Main => e.hits = 1,
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
        let from_ghost = self.ghost_hit.take() == Some(a.key);
        let size = u64::from(a.size);
        let small_budget = self.budgets[Queue::Small as usize];
        if size > small_budget {
            return;
        }
        self.make_room(a, evicted);
        // libCacheSim makes room for an item of exactly the FIFO's budget, then refuses it.
        if !from_ghost && size == small_budget {
            return;
        }
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, hits: 0, stamp: 0, queue: Queue::Small });
        self.index.insert(a.key, i);
        let warming_up = !self.has_evicted && self.bytes[Queue::Small as usize] >= small_budget;
        if from_ghost || warming_up {
            self.push_front(i, Queue::Main);
        } else {
            self.admitted += size;
            self.slab.get_mut(i).stamp = self.admitted;
            self.push_front(i, Queue::Small);
        }
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        self.has_evicted = true;
        loop {
            let main_over = self.bytes[Queue::Main as usize] > self.budgets[Queue::Main as usize];
            if main_over || self.queues[Queue::Small as usize].is_empty() {
                return self.evict_main();
            }
            if let Some(key) = self.evict_small() {
                return Some(key);
            }
        }
    }
    fn remove(&mut self, key: Key) -> bool {
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
    fn correlated_hits_do_not_promote_but_aged_ones_do() {
        // A 2-item FIFO whose window is 1 item: a hit right after insertion is
        // correlated; one after another admission counts.
        let mut c = Clock2QPlus::new(10, 0.2, 1.0, 1, 0.5).unwrap();
        let mut ev = Vec::new();
        for k in 0..8 {
            c.access(&acc(k), &mut ev); // warm-up: the FIFO fills, the rest goes to main
        }
        assert_eq!(c.queues[Queue::Small as usize].len(), 2);
        c.access(&acc(8), &mut ev);
        c.access(&acc(9), &mut ev);
        // 8 and 9 overflowed into the main cache during warm-up too.
        assert_eq!(c.queues[Queue::Main as usize].len(), 8);
        ev.clear();
        c.access(&acc(10), &mut ev); // evicts FIFO item 0 (no hits) as a ghost
        assert_eq!(ev, vec![0]);
        assert!(c.access(&acc(10), &mut ev), "a correlated hit");
        c.access(&acc(11), &mut ev); // evicts 1; 11 is admitted after 10
        assert!(c.access(&acc(10), &mut ev), "a hit past the window");
        ev.clear();
        c.access(&acc(12), &mut ev); // FIFO tail 10 has a counted hit: moves to main
        assert_eq!(c.slab.get(c.index[&10]).queue, Queue::Main);
        assert!(c.occupancy() <= 10);
        // A ghost goes straight to the main cache.
        c.access(&acc(0), &mut ev);
        assert_eq!(c.slab.get(c.index[&0]).queue, Queue::Main);
    }

    #[test]
    fn parameters_are_checked() {
        assert!(Clock2QPlus::new(10, 0.0, 0.9, 1, 0.5).is_err());
        assert!(Clock2QPlus::new(10, 0.1, -1.0, 1, 0.5).is_err());
        assert!(Clock2QPlus::new(10, 0.1, 0.9, 1, -0.5).is_err());
    }
}

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

use hearth_core::{Access, Key, Policy};

use crate::SpecError;

use crate::three_queues::{Entry, Queue, ThreeQueues};

pub struct Clock2QPlus {
    capacity: u64,
    threshold: u32,
    /// Bytes a small-FIFO item must see admitted after it before its hits count.
    window: u64,
    /// Hits are the counted hits in the small FIFO and the reference bit in
    /// the main cache; the stamp is `admitted` just after an item entered
    /// the small FIFO.
    q: ThreeQueues<u32, u64>,
    /// Bytes ever admitted to the small FIFO.
    admitted: u64,
    /// Whether anything was evicted yet (the end of warm-up).
    has_evicted: bool,
}

impl Clock2QPlus {
    pub fn new(capacity: u64, small: f64, ghost: f64, threshold: u32, window: f64) -> Result<Self, SpecError> {
        let q = ThreeQueues::new("clock2qplus", capacity, small, ghost)?;
        if window.is_nan() || window < 0.0 {
            return Err(SpecError::range("clock2qplus", format!("window must be >= 0, got {window}")));
        }
        Ok(Clock2QPlus {
            capacity,
            threshold,
            window: (q.budget(Queue::Small) as f64 * window) as u64,
            q,
            admitted: 0,
            has_evicted: false,
        })
    }

    /// One CLOCK eviction from the main cache.
    fn evict_main(&mut self) -> Option<Key> {
        while let Some(i) = self.q.tail(Queue::Main) {
            if self.q.slab.get(i).hits == 0 {
                return Some(self.q.forget(i));
            }
            self.q.move_to_front(i);
            self.q.slab.get_mut(i).hits = 0;
        }
        None
    }
}

impl Policy for Clock2QPlus {
    fn name(&self) -> String {
        "CLOCK-2Q+".into()
    }
    three_queue_residency!();
    three_queue_warm!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(i) = self.q.find(a.key) else { return false };
        let (admitted, window) = (self.admitted, self.window);
        let e = self.q.slab.get_mut(i);
        if e.queue == Queue::Main {
            e.hits = 1;
        } else if admitted - e.stamp >= window {
            e.hits = e.hits.saturating_add(1);
        }
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        let from_ghost = self.q.was_ghost(a.key);
        let size = u64::from(a.size);
        let small_budget = self.q.budget(Queue::Small);
        if size > small_budget {
            return;
        }
        self.make_room(a, evicted);
        // libCacheSim makes room for an item of exactly the FIFO's budget, then refuses it.
        if !from_ghost && size == small_budget {
            return;
        }
        let warming_up = !self.has_evicted && self.q.bytes(Queue::Small) >= small_budget;
        let i = self.q.alloc(Entry::new(a.key, a.size));
        if from_ghost || warming_up {
            self.q.push_front(i, Queue::Main);
        } else {
            self.admitted += size;
            self.q.slab.get_mut(i).stamp = self.admitted;
            self.q.push_front(i, Queue::Small);
        }
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        self.has_evicted = true;
        loop {
            let main_over = self.q.bytes(Queue::Main) > self.q.budget(Queue::Main);
            if main_over || self.q.is_empty(Queue::Small) {
                return self.evict_main();
            }
            if let Some(key) = self.q.drain_small(self.threshold) {
                return Some(key);
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
        assert_eq!(c.q.list(Queue::Small).len(), 2);
        c.access(&acc(8), &mut ev);
        c.access(&acc(9), &mut ev);
        // 8 and 9 overflowed into the main cache during warm-up too.
        assert_eq!(c.q.list(Queue::Main).len(), 8);
        ev.clear();
        c.access(&acc(10), &mut ev); // evicts FIFO item 0 (no hits) as a ghost
        assert_eq!(ev, vec![0]);
        assert!(c.access(&acc(10), &mut ev), "a correlated hit");
        c.access(&acc(11), &mut ev); // evicts 1; 11 is admitted after 10
        assert!(c.access(&acc(10), &mut ev), "a hit past the window");
        ev.clear();
        c.access(&acc(12), &mut ev); // FIFO tail 10 has a counted hit: moves to main
        assert_eq!(c.q.queue_of(10), Queue::Main);
        assert!(c.occupancy() <= 10);
        // A ghost goes straight to the main cache.
        c.access(&acc(0), &mut ev);
        assert_eq!(c.q.queue_of(0), Queue::Main);
    }

    #[test]
    fn parameters_are_checked() {
        assert!(Clock2QPlus::new(10, 0.0, 0.9, 1, 0.5).is_err());
        assert!(Clock2QPlus::new(10, 0.1, -1.0, 1, 0.5).is_err());
        assert!(Clock2QPlus::new(10, 0.1, 0.9, 1, -0.5).is_err());
    }
}

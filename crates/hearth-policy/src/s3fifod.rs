//! S3-FIFO-d, as libCacheSim's `S3FIFOd`: S3-FIFO (see s3fifo.rs) whose
//! small and main queues trade bytes by where recent misses came from.
//!
//! New items enter the small FIFO (`small` x capacity, 0.1); evicting from
//! it, an item hit at least `threshold` times (1) moves to the main queue, a
//! 2-bit CLOCK, and any other leaves as a ghost (the ghost FIFO starts at the
//! main queue's bytes and moves with it). A miss on a ghost enters the main
//! queue. As libCacheSim's: the small queue is evicted from whenever it
//! holds anything, so its budget only bounds what it admits (an item larger
//! than it is refused) and the main queue's only bounds promotions into it.
//!
//! The adaptation: two more FIFOs, each of a tenth of the capacity in bytes,
//! remember what the small queue and the main queue evicted. A request
//! that misses the small queue and finds its key there counts a hit for
//! that queue (and forgets the key). Before each request, once the two
//! counts sum past 100 (and the main queue has evicted anything lately),
//! the queue whose count is over twice the other's gains
//! max(1, min(small, main) / 1000) bytes from the other (neither drops to
//! 1% of the capacity), and both counts decay to 0.8 of themselves.
//!
//! Deterministic: the miss counts are libCacheSim's.

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

use crate::three_queues::{Entry, Queue, ThreeQueues};
use crate::SpecError;

/// Counts of hits on recently evicted keys past which the sizes adapt.
const ADAPT_AFTER: i32 = 100;

/// Keys a queue evicted, newest first, up to a byte budget.
struct Evicted {
    budget: u64,
    bytes: u64,
    index: KeyIndex,
    slab: Slab<(Key, u32)>,
    list: List,
}

impl Evicted {
    fn new(budget: u64) -> Self {
        Evicted { budget, bytes: 0, index: KeyIndex::with_capacity(1024), slab: Slab::default(), list: List::new() }
    }

    fn record(&mut self, key: Key, size: u32) {
        let size = u64::from(size);
        if size > self.budget || self.index.contains_key(&key) {
            return;
        }
        while self.bytes + size > self.budget {
            let Some(oldest) = self.slab.pop_back(&mut self.list) else { break };
            self.drop_slot(oldest);
        }
        let i = self.slab.alloc((key, size as u32));
        self.slab.push_front(&mut self.list, i);
        self.index.insert(key, i);
        self.bytes += size;
    }

    /// Forgets `key`; whether it was remembered.
    fn take(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        self.slab.unlink(&mut self.list, i);
        self.drop_slot(i);
        true
    }

    fn drop_slot(&mut self, i: u32) {
        let (key, size) = self.slab.release(i);
        self.index.remove(&key);
        self.bytes -= u64::from(size);
    }
}

pub struct S3FifoD {
    capacity: u64,
    threshold: u8,
    /// Residents and ghosts; small-queue hits or the main queue's CLOCK
    /// counter in `hits`.
    q: ThreeQueues<u8>,
    small_evicted: Evicted,
    main_evicted: Evicted,
    small_evicted_hits: i32,
    main_evicted_hits: i32,
    /// Victims of one [`Policy::evict`] step.
    scratch: Vec<Key>,
}

impl S3FifoD {
    pub fn new(capacity: u64, small: f64, threshold: u8) -> Result<Self, SpecError> {
        let mut q = ThreeQueues::new("s3fifod", capacity, small, 0.0)?;
        q.set_budget(Queue::Ghost, q.budget(Queue::Main));
        Ok(S3FifoD {
            capacity,
            threshold,
            q,
            small_evicted: Evicted::new(capacity / 10),
            main_evicted: Evicted::new(capacity / 10),
            small_evicted_hits: 0,
            main_evicted_hits: 0,
            scratch: Vec::new(),
        })
    }

    /// Moves bytes between the small (and ghost) and main queues.
    fn adapt(&mut self) {
        let (small, main) = (self.q.budget(Queue::Small), self.q.budget(Queue::Main));
        let step = (small.min(main) / 1000).max(1);
        let recent = self.small_evicted_hits + self.main_evicted_hits > ADAPT_AFTER;
        if self.main_evicted.bytes == 0 {
            self.small_evicted_hits = 0;
            self.main_evicted_hits = 0;
            return;
        }
        if !recent {
            return;
        }
        let floor = self.capacity / 100;
        let ghost = self.q.budget(Queue::Ghost);
        if self.small_evicted_hits > self.main_evicted_hits * 2 {
            if main > floor {
                self.resize(small + step, ghost + step, main - step);
            }
        } else if self.main_evicted_hits > self.small_evicted_hits * 2 && small > floor {
            self.resize(small - step, ghost.saturating_sub(step), main + step);
        }
        self.small_evicted_hits = (f64::from(self.small_evicted_hits) * 0.8) as i32;
        self.main_evicted_hits = (f64::from(self.main_evicted_hits) * 0.8) as i32;
    }

    fn resize(&mut self, small: u64, ghost: u64, main: u64) {
        self.q.set_budget(Queue::Small, small);
        self.q.set_budget(Queue::Ghost, ghost);
        self.q.set_budget(Queue::Main, main);
    }

    /// 2-bit CLOCK over the main queue: its victim's key and size.
    fn evict_main(&mut self) -> Option<(Key, u32)> {
        while let Some(i) = self.q.tail(Queue::Main) {
            let e = *self.q.slab.get(i);
            if e.hits == 0 {
                self.q.forget(i);
                return Some((e.key, e.size));
            }
            self.q.move_to_front(i);
            self.q.slab.get_mut(i).hits = e.hits - 1;
        }
        None
    }

    /// A main-queue victim, remembered as the main queue's.
    fn evict_main_recorded(&mut self, evicted: &mut Vec<Key>) {
        if let Some((key, size)) = self.evict_main() {
            self.main_evicted.record(key, size);
            evicted.push(key);
        }
    }

    /// One of libCacheSim's eviction steps: the main queue's victim when the
    /// small queue is empty, else the small queue's oldest item leaves (as a
    /// ghost) or moves to the main queue, which then evicts while over its
    /// budget (at most `most` victims, so that [`Policy::evict`] takes one).
    fn evict_step(&mut self, evicted: &mut Vec<Key>, most: usize) {
        let Some(i) = self.q.tail(Queue::Small) else {
            self.evict_main_recorded(evicted);
            return;
        };
        self.q.unlink(i);
        let e = *self.q.slab.get(i);
        if e.hits >= self.threshold {
            self.q.push_front(i, Queue::Main);
            let start = evicted.len();
            while self.q.bytes(Queue::Main) > self.q.budget(Queue::Main) && evicted.len() - start < most {
                self.evict_main_recorded(evicted);
            }
        } else {
            self.q.remember(i);
            self.small_evicted.record(e.key, e.size);
            evicted.push(e.key);
        }
    }
}

impl Policy for S3FifoD {
    fn name(&self) -> String {
        "S3-FIFO-d".into()
    }
    three_queue_residency!();
    // A miss (and a main-queue hit) also looks the key up in both evicted FIFOs.
    fn warm(&self, key: Key) {
        self.q.warm(key);
    }
    fn warm_index(&self, key: Key) {
        self.q.warm_index(key);
        self.small_evicted.index.prefetch(key);
        self.main_evicted.index.prefetch(key);
    }
    fn lookup(&mut self, a: &Access) -> bool {
        self.adapt();
        let found = self.q.find(a.key);
        if let Some(i) = found {
            let e = self.q.slab.get_mut(i);
            if e.queue == Queue::Small {
                e.hits = e.hits.saturating_add(1);
                return true;
            }
            e.hits = (e.hits + 1).min(3);
        }
        if self.small_evicted.take(a.key) {
            self.small_evicted_hits += 1;
        }
        if self.main_evicted.take(a.key) {
            self.main_evicted_hits += 1;
        }
        found.is_some()
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        let to_main = self.q.was_ghost(a.key);
        let size = u64::from(a.size);
        if size > self.q.budget(Queue::Small) {
            return;
        }
        while self.q.resident_bytes() + size > self.capacity && !self.is_empty() {
            self.evict_step(evicted, usize::MAX);
        }
        let queue = if to_main {
            // Into the main queue as its own request: it evicts (silently)
            // to fit, or refuses an item larger than itself.
            if size > self.q.budget(Queue::Main) {
                return;
            }
            while self.q.bytes(Queue::Main) + size > self.q.budget(Queue::Main) {
                let Some((key, _)) = self.evict_main() else { break };
                evicted.push(key);
            }
            Queue::Main
        } else {
            Queue::Small
        };
        let i = self.q.alloc(Entry::new(a.key, a.size));
        self.q.push_front(i, queue);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let mut victims = std::mem::take(&mut self.scratch);
        while victims.is_empty() && !self.is_empty() {
            self.evict_step(&mut victims, 1);
        }
        let victim = victims.pop();
        self.scratch = victims;
        victim
    }
    fn remove(&mut self, key: Key) -> bool {
        self.q.remove(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(c: &mut S3FifoD, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = c.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn the_small_queue_is_drained_first_and_hit_items_move_to_main() {
        // 20 bytes: small budget 2, main 18, ghosts 18.
        let mut c = S3FifoD::new(20, 0.1, 1).unwrap();
        for k in 0..20 {
            request(&mut c, k);
        }
        // Everything sits in the small queue (its budget bounds admission
        // only): a hit on 0 moves it to main, and 1 leaves as a ghost.
        assert!(request(&mut c, 0).0);
        assert_eq!(request(&mut c, 20).1, vec![1]);
        assert_eq!(c.q.queue_of(0), Queue::Main);
        assert_eq!(c.q.queue_of(1), Queue::Ghost);
        // Its return is a miss into the main queue, counted as a hit on
        // what the small queue evicted.
        assert!(!request(&mut c, 1).0);
        assert_eq!(c.q.queue_of(1), Queue::Main);
        assert_eq!(c.small_evicted_hits, 1);
        assert_eq!(c.occupancy(), 20);
    }

    #[test]
    fn hits_on_small_queue_victims_grow_the_small_queue() {
        let mut c = S3FifoD::new(10_000, 0.1, 1).unwrap();
        let small = c.q.budget(Queue::Small);
        // Fill the small queue, give the main queue a victim (the counts
        // only matter once it has evicted), then push 0..=200 out of the
        // small queue: 101 of them come back as small-queue evictions.
        for k in 0..10_000 {
            request(&mut c, k);
        }
        c.main_evicted.record(u64::MAX, 1);
        for k in 10_000..10_201 {
            request(&mut c, k);
        }
        for k in 0..101 {
            request(&mut c, k);
        }
        request(&mut c, 99_999);
        assert_eq!(c.q.budget(Queue::Small), small + 1, "one step of max(1, 1000 / 1000)");
        assert_eq!(c.q.budget(Queue::Main) + c.q.budget(Queue::Small), 10_000);
        assert_eq!(c.small_evicted_hits, 80);
        assert!(S3FifoD::new(10, 0.0, 1).is_err());
    }
}

//! CLOCK (second chance, FIFO with reinsertion), as libCacheSim's `Clock`.
//!
//! Each item has a small reference counter, one bit by default
//! (`clock:bits=N` gives an N-bit counter). New items start at 0; a hit
//! increments the counter up to its maximum. To evict, the hand looks at the
//! oldest item: a non-zero counter is decremented and the item goes back to
//! the head of the queue; the first item found at 0 is evicted. Each
//! reinsertion consumes one earlier hit, so eviction is amortized O(1).

use crate::SpecError;
use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    refs: u8,
}

pub struct Clock {
    capacity: u64,
    used: u64,
    max_refs: u8,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// Newest (or most recently reinserted) at the head; the hand is the tail.
    queue: List,
}

impl Clock {
    /// A CLOCK cache whose reference counters have `bits` bits (1 to 8).
    pub fn new(capacity: u64, bits: u32) -> Result<Self, SpecError> {
        if !(1..=8).contains(&bits) {
            return Err(SpecError::range("clock", format!("bits must be between 1 and 8, got {bits}")));
        }
        let max_refs = ((1u16 << bits) - 1) as u8;
        Ok(Clock {
            capacity,
            used: 0,
            max_refs,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            queue: List::new(),
        })
    }
}

impl Policy for Clock {
    fn name(&self) -> String {
        if self.max_refs == 1 {
            "CLOCK".into()
        } else {
            format!("CLOCK-{}bit", self.max_refs.count_ones())
        }
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        let e = self.slab.get_mut(i);
        e.refs = (e.refs + 1).min(self.max_refs);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, refs: 0 });
        self.slab.push_front(&mut self.queue, i);
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        loop {
            let i = self.queue.tail()?;
            let e = self.slab.get_mut(i);
            if e.refs == 0 {
                break;
            }
            e.refs -= 1;
            self.slab.move_to_front(&mut self.queue, i);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(clock: &mut Clock, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = clock.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn referenced_items_get_a_second_chance() {
        let mut clock = Clock::new(3, 1).unwrap();
        for k in [1, 2, 3] {
            request(&mut clock, k);
        }
        assert!(request(&mut clock, 1).0);
        // 1 is oldest but referenced: it is spared once, 2 goes.
        assert_eq!(request(&mut clock, 4).1, vec![2]);
        // 1's bit was cleared when it was spared; it is now behind 3.
        assert_eq!(request(&mut clock, 5).1, vec![3]);
        assert_eq!(request(&mut clock, 6).1, vec![1]);
    }

    #[test]
    fn wider_counters_remember_more_hits() {
        let mut clock = Clock::new(2, 2).unwrap();
        request(&mut clock, 1);
        request(&mut clock, 2);
        for _ in 0..3 {
            request(&mut clock, 1);
        }
        // 1 holds three hits, so each pass of the hand spares it once more
        // (its counter goes 3, 2, 1); 2, then 3, are evicted instead.
        assert_eq!(request(&mut clock, 3).1, vec![2]);
        assert_eq!(request(&mut clock, 4).1, vec![3]);
        assert!(clock.contains(1));
        assert_eq!(clock.name(), "CLOCK-2bit");
    }

    #[test]
    fn bits_out_of_range_is_an_error() {
        assert!(Clock::new(10, 0).is_err());
        assert!(Clock::new(10, 9).err().unwrap().to_string().contains("bits"));
    }
}

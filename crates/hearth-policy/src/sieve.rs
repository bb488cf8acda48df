//! SIEVE (Zhang et al., "SIEVE is simpler than LRU: an efficient turn-key
//! eviction algorithm for web caches", NSDI 2024), as libCacheSim's `Sieve`.
//!
//! One FIFO queue, new items at the head, and a visited bit per item that a
//! hit sets. A hand walks from the tail towards the head: a visited item
//! loses its bit and stays where it is, the first unvisited one is evicted
//! and the hand stops just past it (towards the head). Past the head it
//! wraps to the tail. Unlike CLOCK, survivors are not moved to the head, so
//! new items sit between the hand and the head and are judged quickly, while
//! items that keep proving useful stay behind the hand.

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    visited: bool,
}

pub struct Sieve {
    capacity: u64,
    used: u64,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// Newest at the head, oldest at the tail.
    queue: List,
    /// Where the next eviction starts looking; None starts at the tail.
    hand: Option<u32>,
}

impl Sieve {
    pub fn new(capacity: u64) -> Self {
        Sieve {
            capacity,
            used: 0,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            queue: List::new(),
            hand: None,
        }
    }

    /// Unlinks and frees slot `i`, first stepping the hand off it.
    fn release(&mut self, i: u32) -> Entry {
        if self.hand == Some(i) {
            self.hand = self.slab.prev(i);
        }
        self.slab.unlink(&mut self.queue, i);
        let e = self.slab.release(i);
        self.used -= u64::from(e.size);
        e
    }
}

impl Policy for Sieve {
    fn name(&self) -> String {
        "SIEVE".into()
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        self.slab.get_mut(i).visited = true;
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, visited: false });
        self.slab.push_front(&mut self.queue, i);
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let tail = self.queue.tail()?;
        let mut i = self.hand.unwrap_or(tail);
        // Terminates within one lap: every visited item passed is cleared.
        while self.slab.get(i).visited {
            self.slab.get_mut(i).visited = false;
            i = self.slab.prev(i).unwrap_or(tail);
        }
        // The hand stops on the victim, so releasing it steps the hand on.
        self.hand = Some(i);
        let e = self.release(i);
        self.index.remove(&e.key);
        Some(e.key)
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.index.remove(&key) else { return false };
        self.release(i);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(sieve: &mut Sieve, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = sieve.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn visited_items_stay_in_place_and_the_hand_remembers_its_position() {
        let mut sieve = Sieve::new(4);
        for k in [1, 2, 3, 4, 1, 3] {
            request(&mut sieve, k);
        }
        // Queue (tail to head) 1* 2 3* 4: the hand clears 1 and evicts 2.
        assert_eq!(request(&mut sieve, 5).1, vec![2]);
        // The hand resumes at 3 rather than the tail: 3 is cleared, 4 goes,
        // and 1 (cleared earlier, still at the tail) survives.
        assert_eq!(request(&mut sieve, 6).1, vec![4]);
        assert!(sieve.contains(1) && sieve.contains(3));
        // Tail to head: 1 3 5 6, the hand on 5. The newer item goes first.
        assert_eq!(request(&mut sieve, 7).1, vec![5]);
        // Tail to head: 1 3 6 7, the hand on 6. With 6 and 7 visited, the
        // hand passes the head and wraps to the tail, where 1 is unvisited.
        request(&mut sieve, 6);
        request(&mut sieve, 7);
        assert_eq!(request(&mut sieve, 8).1, vec![1]);
    }

    #[test]
    fn removing_the_item_under_the_hand_moves_the_hand_on() {
        let mut sieve = Sieve::new(3);
        for k in [1, 2, 3, 1] {
            request(&mut sieve, k);
        }
        // The hand clears 1, evicts 2 and rests on 3.
        assert_eq!(request(&mut sieve, 4).1, vec![2]);
        assert!(sieve.remove(3));
        // It moved on to 4, which is unvisited.
        assert_eq!(request(&mut sieve, 5).1, Vec::<Key>::new());
        assert_eq!(request(&mut sieve, 6).1, vec![4]);
    }
}

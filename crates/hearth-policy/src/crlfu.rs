//! CR-LFU, the churn-resistant expert of Cacheus (Rodriguez et al.,
//! "Learning cache replacement with CACHEUS", FAST'21), on its own as
//! libCacheSim's `CR_LFU`: least frequently used, and among the items with
//! the fewest requests the one that reached that count last goes first
//! (MRU among equals). When a working set larger than the cache churns,
//! its older members thus stay and keep hitting, where LRU or plain LFU
//! (oldest among equals) would cycle through all of them and hit none.
//! Counts start at 1 on every insert (standalone there is no history to
//! resume them from, unlike inside Cacheus).
//!
//! O(1) per request: items sit in per-count lists, newest arrival at the
//! head, and the lists in a chain ordered by count (lowest at the head), so
//! a hit moves its item to the next list and an eviction takes the head of
//! the first. libCacheSim keeps a hash table of every count ever reached and
//! scans counts upward for the lowest non-empty one.

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy)]
struct Item {
    key: Key,
    size: u32,
    /// The count list it is in.
    bucket: u32,
}

#[derive(Clone, Copy)]
struct Bucket {
    count: u64,
    /// Newest arrival at the head.
    items: List,
}

pub struct CrLfu {
    capacity: u64,
    used: u64,
    index: KeyIndex,
    slab: Slab<Item>,
    buckets: Slab<Bucket>,
    /// Non-empty count lists, lowest count at the head.
    counts: List,
}

impl CrLfu {
    pub fn new(capacity: u64) -> Self {
        CrLfu {
            capacity,
            used: 0,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            buckets: Slab::default(),
            counts: List::new(),
        }
    }

    /// Takes item `i` out of its count list, dropping the list if it empties.
    fn unlink(&mut self, i: u32) {
        let b = self.slab.get(i).bucket;
        self.slab.unlink(&mut self.buckets.get_mut(b).items, i);
        if self.buckets.get(b).items.is_empty() {
            self.buckets.unlink(&mut self.counts, b);
            self.buckets.release(b);
        }
    }

    fn push(&mut self, i: u32, b: u32) {
        self.slab.get_mut(i).bucket = b;
        self.slab.push_front(&mut self.buckets.get_mut(b).items, i);
    }
}

impl Policy for CrLfu {
    fn name(&self) -> String {
        "CR-LFU".into()
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        let b = self.slab.get(i).bucket;
        let count = self.buckets.get(b).count + 1;
        let next = self.buckets.next(b).filter(|&n| self.buckets.get(n).count == count);
        let target = next.unwrap_or_else(|| {
            let n = self.buckets.alloc(Bucket { count, items: List::new() });
            self.buckets.insert_after(&mut self.counts, b, n);
            n
        });
        self.unlink(i);
        self.push(i, target);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let first = self.counts.head().filter(|&b| self.buckets.get(b).count == 1);
        let b = first.unwrap_or_else(|| {
            let b = self.buckets.alloc(Bucket { count: 1, items: List::new() });
            self.buckets.push_front(&mut self.counts, b);
            b
        });
        let i = self.slab.alloc(Item { key: a.key, size: a.size, bucket: b });
        self.push(i, b);
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let b = self.counts.head()?;
        let i = self.buckets.get(b).items.head()?;
        self.unlink(i);
        let item = self.slab.release(i);
        self.index.remove(&item.key);
        self.used -= u64::from(item.size);
        Some(item.key)
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.index.remove(&key) else { return false };
        self.unlink(i);
        self.used -= u64::from(self.slab.release(i).size);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(c: &mut CrLfu, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = c.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn the_newest_arrival_at_the_lowest_count_goes() {
        let mut c = CrLfu::new(3);
        for k in [1, 2, 3] {
            request(&mut c, k);
        }
        // All at count 1: the newest, 3, goes.
        assert_eq!(request(&mut c, 4).1, vec![3]);
        // 1 and 2 reach count 2, 2 last; 4 (count 1) goes before either.
        assert!(request(&mut c, 1).0 && request(&mut c, 2).0);
        assert_eq!(request(&mut c, 5).1, vec![4]);
        assert_eq!(request(&mut c, 6).1, vec![5]);
        // Once 6 is gone too, the count-2 list is lowest: 2 reached it last.
        assert!(c.remove(6));
        assert_eq!(c.evict(&Access::default()), Some(2));
        assert_eq!((c.len(), c.occupancy()), (1, 1));
    }

    #[test]
    fn a_churning_working_set_keeps_its_older_members() {
        // A loop over 10 keys through a 5-item cache: LRU hits nothing; CR-LFU
        // keeps the first four and hits them on every pass.
        let mut c = CrLfu::new(5);
        let hits = (0..100).filter(|i| request(&mut c, i % 10).0).count();
        assert_eq!(hits, 9 * 4);
        assert!((0..4).all(|k| c.contains(k)));
    }
}

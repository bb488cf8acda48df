//! Least frequently used, as libCacheSim's `LFU`, with two optional kinds of aging.
//!
//! Plain LFU (`lfu`) evicts the resident item with the fewest requests since
//! it was inserted (counts are forgotten on eviction). Ties go to the item
//! that reached its current count earliest, which is what libCacheSim's
//! per-frequency FIFO lists do.
//!
//! `lfu:aging=da` is LFU with Dynamic Aging (Arlitt et al., "Evaluating
//! content management techniques for Web proxy caches", 2000), unit cost and
//! size: an item's priority is `count + L`, where `L` is the priority of the
//! last evicted item, recomputed on every hit. Old popular items thus lose
//! their advantage once the cache's floor `L` has risen past them, without
//! any periodic sweep.
//!
//! `lfuda:formula=additive` is libCacheSim's `LFUDA`: a hit adds the floor
//! `L` to the item's priority (instead of recomputing `count + L`), a new
//! item enters at `L + 1`, and `L` is the lowest resident priority (0 until
//! the first eviction) rather than the last victim's. Old items thus keep
//! every floor they were hit at, so their priorities grow faster than a
//! count would.
//!
//! `lfu:aging=N` halves every resident count (rounding down, never below 1)
//! once every N requests, so counts measure recent rather than lifetime
//! popularity. The sweep is O(n) once per N requests: pick N at least the
//! number of items the cache holds to keep it O(1) amortized.
//!
//! Items sit in FIFO lists, one per priority (a "bucket"), oldest first, as
//! libCacheSim's per-frequency lists; a map finds a priority's bucket and a
//! min-heap of bucket priorities finds the lowest. A hit moves its item from
//! one bucket's list to the tail of another's: O(1), plus O(log b) to queue
//! a new priority, b the buckets (a few thousand where items number
//! millions, so the heap stays in the CPU cache). A bucket leaves the map when
//! it empties; its heap entry is skipped when it surfaces, and the heap is
//! rebuilt from the map when stale entries outnumber live ones.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::SpecError;
use hearth_core::{key_map, Access, Key, KeyIndex, KeyMap, List, Policy, Slab};

/// How counts lose weight over time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aging {
    /// Counts only grow while an item is resident (libCacheSim's LFU).
    None,
    /// LFU-DA: priority = count + priority of the last victim.
    Dynamic,
    /// libCacheSim's LFU-DA: a hit adds the lowest resident priority.
    DynamicAdditive,
    /// Halve all counts once every this many requests.
    Halve(u64),
}

impl std::str::FromStr for Aging {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "none" => Ok(Aging::None),
            "da" => Ok(Aging::Dynamic),
            _ => match s.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Aging::Halve(n)),
                _ => Err(SpecError::range(
                    "lfu",
                    format!("aging must be \"none\", \"da\" or a request count > 0, got {s:?}"),
                )),
            },
        }
    }
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    count: u64,
    /// What eviction orders by (see [`Aging`]); names the item's bucket.
    priority: u64,
    /// When the item reached its priority: orders a bucket's list, and the
    /// merged buckets after a halving.
    stamp: u64,
}

pub struct Lfu {
    capacity: u64,
    used: u64,
    aging: Aging,
    /// Priority of the last evicted item (LFU-DA's `L`; stays 0 without dynamic aging).
    floor: u64,
    /// Whether anything was evicted yet (the additive floor is 0 until then).
    has_evicted: bool,
    next_stamp: u64,
    /// Requests (lookups) left before the next halving, for `Aging::Halve`.
    until_halving: u64,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// Each priority held by a resident item: its items, oldest first.
    buckets: KeyMap<List>,
    /// Priorities of `buckets`, smallest first; also stale ones of buckets
    /// that emptied since, skipped when they surface.
    priorities: BinaryHeap<Reverse<u64>>,
}

impl Lfu {
    pub fn new(capacity: u64, aging: Aging) -> Self {
        Lfu {
            capacity,
            used: 0,
            aging,
            floor: 0,
            has_evicted: false,
            next_stamp: 0,
            until_halving: match aging {
                Aging::Halve(every) => every,
                _ => 0,
            },
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            buckets: key_map(64),
            priorities: BinaryHeap::new(),
        }
    }

    /// The lowest priority a resident item has, dropping stale heap entries
    /// on the way; `None` in an empty cache.
    fn lowest_bucket(&mut self) -> Option<u64> {
        while let Some(&Reverse(priority)) = self.priorities.peek() {
            if self.buckets.contains_key(&priority) {
                return Some(priority);
            }
            self.priorities.pop();
        }
        None
    }

    /// The priority of slot `i` after an insert (`hit` false) or a hit,
    /// worked out while a hit item still sits in its bucket (the additive
    /// floor may be its own priority).
    fn next_priority(&mut self, i: u32, hit: bool) -> u64 {
        match self.aging {
            Aging::None | Aging::Halve(_) => self.slab.get(i).count,
            Aging::Dynamic => self.floor + self.slab.get(i).count,
            Aging::DynamicAdditive => {
                // A hit on the lowest item doubles it: priorities can grow
                // exponentially, so they saturate.
                let floor = if self.has_evicted { self.lowest_bucket().unwrap_or(self.floor) } else { 0 };
                if hit {
                    self.slab.get(i).priority.saturating_add(floor)
                } else {
                    floor.saturating_add(1)
                }
            }
        }
    }

    /// Halves every resident count and rebuilds the buckets; items keep
    /// their stamps, so ties still go to the longest-standing one. O(n log n)
    /// once per halving period.
    fn halve_counts(&mut self) {
        let mut residents: Vec<(u64, u64, u32)> = self
            .index
            .values()
            .map(|&i| {
                let e = self.slab.get_mut(i);
                e.count = (e.count / 2).max(1);
                e.priority = e.count;
                (e.count, e.stamp, i)
            })
            .collect();
        residents.sort_unstable();
        self.buckets.clear();
        self.priorities.clear();
        for (_, _, i) in residents {
            self.append(i);
        }
    }

    /// Puts slot `i` at the tail of its priority's bucket.
    fn append(&mut self, i: u32) {
        let priority = self.slab.get(i).priority;
        let bucket = self.buckets.entry(priority).or_insert_with(|| {
            self.priorities.push(Reverse(priority));
            List::new()
        });
        self.slab.push_back(bucket, i);
        if self.priorities.len() > 2 * self.buckets.len() + 64 {
            self.priorities = self.buckets.keys().map(|&p| Reverse(p)).collect();
        }
    }

    /// Takes slot `i` out of its bucket, dropping the bucket if it empties.
    fn detach(&mut self, i: u32) {
        let priority = self.slab.get(i).priority;
        let bucket = self.buckets.get_mut(&priority).expect("a resident item's bucket exists");
        self.slab.unlink(bucket, i);
        if bucket.is_empty() {
            self.buckets.remove(&priority);
        }
    }

    /// Gives slot `i` its place for its current priority, as the newest there.
    fn enqueue(&mut self, i: u32) {
        self.slab.get_mut(i).stamp = self.next_stamp;
        self.next_stamp += 1;
        self.append(i);
    }

    fn release(&mut self, i: u32) -> Entry {
        self.detach(i);
        let e = self.slab.release(i);
        self.used -= u64::from(e.size);
        e
    }
}

impl Policy for Lfu {
    fn name(&self) -> String {
        match self.aging {
            Aging::None => "LFU".into(),
            Aging::Dynamic => "LFU-DA".into(),
            Aging::DynamicAdditive => "LFU-DA-additive".into(),
            Aging::Halve(every) => format!("LFU-halve{every}"),
        }
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        if let Aging::Halve(every) = self.aging {
            self.until_halving -= 1;
            if self.until_halving == 0 {
                self.until_halving = every;
                self.halve_counts();
            }
        }
        let Some(&i) = self.index.get(&a.key) else { return false };
        self.slab.get_mut(i).count += 1;
        let priority = self.next_priority(i, true);
        self.detach(i);
        self.slab.get_mut(i).priority = priority;
        self.enqueue(i);
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, count: 1, priority: 0, stamp: 0 });
        let priority = self.next_priority(i, false);
        self.slab.get_mut(i).priority = priority;
        self.index.insert(a.key, i);
        self.used += u64::from(a.size);
        self.enqueue(i);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let priority = self.lowest_bucket()?;
        let i = self.buckets[&priority].head().expect("buckets in the map are not empty");
        if matches!(self.aging, Aging::Dynamic | Aging::DynamicAdditive) {
            self.floor = priority;
        }
        self.has_evicted = true;
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

    /// Requests `keys` in order on a cache of `capacity` unit-size items.
    fn run(lfu: &mut Lfu, keys: &[Key]) {
        let mut evicted = Vec::new();
        for (t, &key) in keys.iter().enumerate() {
            let a = Access { key, size: 1, vtime: t as u64, ..Access::default() };
            lfu.access(&a, &mut evicted);
        }
    }

    #[test]
    fn evicts_least_frequent_and_oldest_among_equals() {
        let mut lfu = Lfu::new(3, Aging::None);
        // All three reach count 2; 2 got there first, so 4 evicts it.
        run(&mut lfu, &[1, 2, 3, 2, 3, 1, 4]);
        assert!(!lfu.contains(2));
        assert!(lfu.contains(1) && lfu.contains(3) && lfu.contains(4));
        // 4 alone has count 1.
        run(&mut lfu, &[5]);
        assert!(!lfu.contains(4));
    }

    #[test]
    fn plain_lfu_keeps_an_old_favourite_forever() {
        let mut lfu = Lfu::new(2, Aging::None);
        run(&mut lfu, &[7, 7, 7]);
        run(&mut lfu, &(100..200).collect::<Vec<_>>());
        assert!(lfu.contains(7));
    }

    #[test]
    fn dynamic_aging_lets_new_items_overtake_an_old_favourite() {
        let mut lfu = Lfu::new(2, Aging::Dynamic);
        run(&mut lfu, &[7, 7, 7]);
        // Each one-hit item raises the floor by one; after three, 7 (priority
        // 3, oldest) loses the tie.
        run(&mut lfu, &[100, 101, 102]);
        assert!(lfu.contains(7));
        run(&mut lfu, &[103]);
        assert!(!lfu.contains(7));
    }

    #[test]
    fn additive_aging_adds_the_lowest_priority_at_each_hit() {
        let mut lfu = Lfu::new(2, Aging::DynamicAdditive);
        // Before any eviction the floor is 0: hits only reorder (7 becomes newest).
        run(&mut lfu, &[7, 8, 7, 9]);
        assert!(!lfu.contains(8) && lfu.contains(7));
        // Floor 1 now: 9 entered at 2 and 7's hit lifts it to 2 too; 9 got
        // there first and goes; 10 enters at 2 + 1.
        run(&mut lfu, &[7, 10]);
        assert!(!lfu.contains(9));
        let priority = |lfu: &Lfu, k| lfu.slab.get(lfu.index[&k]).priority;
        assert_eq!((priority(&lfu, 7), priority(&lfu, 10)), (2, 3));
        // 7 is the lowest (2): its hit adds 2.
        run(&mut lfu, &[7]);
        assert_eq!(priority(&lfu, 7), 4);
    }

    #[test]
    fn halving_forgets_old_popularity() {
        let mut lfu = Lfu::new(2, Aging::Halve(4));
        // Key 7: count 3 at the 4th request, halved to 1, then hits to 3.
        run(&mut lfu, &[7, 7, 7, 7, 7, 100, 101]);
        assert!(lfu.contains(7) && lfu.contains(101));
        // The 8th request halves 7 to 1, tying with 101; 7 has held its
        // count longer, so it goes.
        run(&mut lfu, &[102]);
        assert!(!lfu.contains(7));
    }

    #[test]
    fn bad_aging_is_an_error() {
        assert!("da".parse::<Aging>().is_ok());
        assert_eq!("100".parse::<Aging>(), Ok(Aging::Halve(100)));
        assert!("0".parse::<Aging>().unwrap_err().to_string().contains("aging"));
        assert!("sometimes".parse::<Aging>().is_err());
    }
}

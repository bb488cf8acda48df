//! Segmented LRU (Karedla, Love & Wherry, "Caching strategies to improve disk
//! system performance", 1994), shaped like libCacheSim's `SLRU`.
//!
//! The cache is split into `segments` LRU lists of equal byte budget (4 by
//! default, `slru:segments=N`). Segment 0 is probationary; a hit moves an
//! item to the head of the next segment up (or to the head of the top one),
//! and a segment over budget demotes its LRU items to the head of the one
//! below. A new item goes into the lowest segment that has room for it, so an
//! empty cache fills bottom to top; once all are full, it goes to segment 0.
//! Victims come from the tail of the lowest non-empty segment. Items larger
//! than one segment are not admitted.
//!
//! Like libCacheSim, a hit can evict: when demotions overfill segment 0,
//! its LRU items leave the cache at once. `Policy::lookup` cannot report
//! victims, so those keys are held back and reported by the next `insert`
//! (first in its `evicted` list) or `evict` call; `remove` of such a key
//! returns false and cancels its report. `contains` is accurate at all times. (Leaving
//! segment 0 over budget until the next insertion instead changes miss
//! counts by up to 0.7% on cloudPhysicsIO.)

use crate::SpecError;
use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    segment: u8,
}

#[derive(Clone, Copy, Default)]
struct Segment {
    list: List,
    bytes: u64,
    budget: u64,
}

pub struct Slru {
    capacity: u64,
    used: u64,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// Segment 0 is probationary, the last one the most protected.
    segments: Vec<Segment>,
    /// Victims of hits, not yet reported (see the module doc).
    evicted_by_hits: Vec<Key>,
}

impl Slru {
    /// Most segments accepted (libCacheSim's limit too).
    pub const MAX_SEGMENTS: usize = 16;

    pub fn new(capacity: u64, segments: usize) -> Result<Self, SpecError> {
        if !(1..=Self::MAX_SEGMENTS).contains(&segments) {
            return Err(SpecError::range(
                "slru",
                format!("segments must be between 1 and {}, got {segments}", Self::MAX_SEGMENTS),
            ));
        }
        let budget = capacity / segments as u64;
        let segments = vec![Segment { budget, ..Segment::default() }; segments];
        Ok(Slru {
            capacity,
            used: 0,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            segments,
            evicted_by_hits: Vec::new(),
        })
    }

    fn attach_front(&mut self, i: u32, level: usize) {
        let e = self.slab.get_mut(i);
        e.segment = level as u8;
        let size = u64::from(e.size);
        let seg = &mut self.segments[level];
        self.slab.push_front(&mut seg.list, i);
        seg.bytes += size;
    }

    fn detach(&mut self, i: u32) {
        let e = *self.slab.get(i);
        let seg = &mut self.segments[usize::from(e.segment)];
        self.slab.unlink(&mut seg.list, i);
        seg.bytes -= u64::from(e.size);
    }

    /// Moves LRU items of `level` down one segment until it fits its budget,
    /// cascading downwards; an overfull segment 0 evicts.
    fn demote_overflow(&mut self, level: usize) {
        while self.segments[level].bytes > self.segments[level].budget {
            if level == 0 {
                let Some(key) = self.evict_lowest() else { break };
                self.evicted_by_hits.push(key);
                continue;
            }
            let Some(i) = self.segments[level].list.tail() else { break };
            self.detach(i);
            self.attach_front(i, level - 1);
            self.demote_overflow(level - 1);
        }
    }

    /// Evicts the LRU item of the lowest non-empty segment.
    fn evict_lowest(&mut self) -> Option<Key> {
        let level = self.segments.iter().position(|s| !s.list.is_empty())?;
        let i = self.segments[level].list.tail()?;
        self.detach(i);
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
}

impl Policy for Slru {
    fn name(&self) -> String {
        format!("SLRU-{}", self.segments.len())
    }
    indexed_residency!();
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        let top = self.segments.len() - 1;
        let level = usize::from(self.slab.get(i).segment);
        if level == top {
            self.slab.move_to_front(&mut self.segments[top].list, i);
        } else {
            self.detach(i);
            self.attach_front(i, level + 1);
            self.demote_overflow(level + 1);
        }
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        evicted.append(&mut self.evicted_by_hits);
        let size = u64::from(a.size);
        if size > self.segments[0].budget {
            return; // would not fit in the probationary segment
        }
        self.make_room(a, evicted);
        let level = self.segments.iter().position(|s| s.bytes + size <= s.budget).unwrap_or(0);
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, segment: 0 });
        self.attach_front(i, level);
        self.index.insert(a.key, i);
        self.used += size;
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        self.evicted_by_hits.pop().or_else(|| self.evict_lowest())
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.index.remove(&key) else {
            self.evicted_by_hits.retain(|&k| k != key);
            return false;
        };
        self.detach(i);
        let e = self.slab.release(i);
        self.used -= u64::from(e.size);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(slru: &mut Slru, key: Key, size: u32) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = slru.access(&Access { key, size, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    fn segment_of(slru: &Slru, key: Key) -> u8 {
        slru.slab.get(slru.index[&key]).segment
    }

    #[test]
    fn fills_bottom_up_and_promotes_on_hits() {
        let mut slru = Slru::new(8, 2).unwrap();
        for k in 1..=6 {
            request(&mut slru, k, 1);
        }
        // Segment 0 took 1..=4, segment 1 the rest.
        assert_eq!(segment_of(&slru, 4), 0);
        assert_eq!(segment_of(&slru, 5), 1);
        request(&mut slru, 1, 1);
        assert_eq!(segment_of(&slru, 1), 1);
        // Segment 1 is now 1, 6, 5 (3 of 4 bytes); a second hit keeps 1 on top.
        request(&mut slru, 1, 1);
        assert_eq!(segment_of(&slru, 1), 1);
    }

    #[test]
    fn a_hit_that_overfills_probation_evicts_and_reports_later() {
        let mut slru = Slru::new(8, 2).unwrap();
        // Segment 1 gets 10 and 11 (2 bytes each) after 1..=4 fill segment 0.
        for k in 1..=4 {
            request(&mut slru, k, 1);
        }
        request(&mut slru, 10, 2);
        request(&mut slru, 11, 2);
        assert_eq!(segment_of(&slru, 10), 1);
        // Promoting 1 overfills segment 1; 10 drops to segment 0, which then
        // holds 5 bytes in a 4-byte budget, so its LRU item (2) is evicted.
        assert!(request(&mut slru, 1, 1).0);
        assert!(!slru.contains(2));
        assert_eq!(slru.occupancy(), 7);
        // The victim is reported with the next insertion.
        assert_eq!(request(&mut slru, 20, 1).1, vec![2]);
    }

    #[test]
    fn items_larger_than_a_segment_are_not_admitted() {
        let mut slru = Slru::new(8, 4).unwrap();
        request(&mut slru, 1, 3);
        assert!(!slru.contains(1));
        request(&mut slru, 2, 2);
        assert!(slru.contains(2));
        assert!(Slru::new(8, 0).is_err());
        assert!(Slru::new(8, 17).err().unwrap().to_string().contains("segments"));
    }
}

//! FBR, Frequency-Based Replacement (Robinson & Devarakonda, "Data Cache
//! Management Using Frequency-Based Replacement", SIGMETRICS 1990).
//!
//! Blocks sit in an LRU stack split into three sections: new (top), middle
//! and old (bottom). Every block has a reference count, set to 1 when it
//! enters the cache. A hit moves the block to the top; its count grows by one
//! only if it was *not* in the new section, which "factors out locality": a
//! burst of re-references while the block is fresh counts once. The victim
//! is the block with the smallest count in the old section, the least
//! recently used one among ties. The middle section gives blocks that leave
//! the new section time to earn references before they become candidates.
//! Counts age: when the mean count exceeds `amax`, every count c becomes
//! ceil(c/2); no count exceeds `cmax`.
//!
//! Choices:
//! - Sections are measured in bytes: the new section is the most recently
//!   used blocks up to `new` × capacity, the middle section the next ones up
//!   to (1 − `new` − `old`) × capacity, the old section the rest.
//!   Defaults: new 25 %, old 25 %.
//! - Defaults amax = 100 and cmax = 1000 are ours; aging needs amax < cmax.
//! - The old section is kept as one LRU list per count (1..=cmax) plus a
//!   bitmap of non-empty counts, so finding the victim is a scan of cmax/64
//!   words at most and every other step is O(1). Blocks enter the old
//!   section in LRU order, so each per-count list is itself in LRU order.
//! - Aging visits every block (O(n)); it runs at most once per about
//!   n × amax / 2 count increments, so its amortized cost per request is O(1).
//! - If the old section is empty (tiny caches), the middle section's and then
//!   the new section's LRU block is the victim.

use crate::SpecError;
use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    New,
    Middle,
    Old,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    key: Key,
    size: u32,
    count: u32,
    section: Section,
    /// When the block entered the old section (orders merges during aging).
    entered_old: u64,
}

pub struct Fbr {
    capacity: u64,
    used: u64,
    new_limit: u64,
    middle_limit: u64,
    new_bytes: u64,
    middle_bytes: u64,
    amax: u32,
    cmax: u32,
    total_count: u64,
    old_clock: u64,
    index: KeyMap<u32>,
    slab: Slab<Block>,
    /// Most recent at the head, as are all lists below.
    new: List,
    middle: List,
    /// `old[c]`: old-section blocks with count c (index 0 unused).
    old: Vec<List>,
    /// Bit c set when `old[c]` is non-empty.
    old_nonempty: Vec<u64>,
}

impl Fbr {
    /// Largest `cmax`: the old section keeps a list per count (24 bytes each).
    pub const MAX_CMAX: u32 = 1 << 20;

    /// Refuses section shares and count limits FBR cannot run with; the
    /// registry row checks a spec's through this too.
    pub fn check(new: f64, old: f64, amax: u32, cmax: u32) -> Result<(), SpecError> {
        if !(new > 0.0 && old > 0.0 && new + old <= 1.0) {
            return Err(SpecError::range(
                "fbr",
                format!("needs new > 0, old > 0 and new + old <= 1, got new={new}, old={old}"),
            ));
        }
        if !(1 <= amax && amax < cmax) {
            return Err(SpecError::range("fbr", format!("needs 1 <= amax < cmax, got amax={amax}, cmax={cmax}")));
        }
        // One list per count: a count limit is a memory limit.
        if cmax > Self::MAX_CMAX {
            return Err(SpecError::range("fbr", format!("cmax is at most {}, got {cmax}", Self::MAX_CMAX)));
        }
        Ok(())
    }

    /// An FBR cache of `capacity` bytes; `new` and `old` are the sections'
    /// shares of the capacity.
    pub fn new(capacity: u64, new: f64, old: f64, amax: u32, cmax: u32) -> Result<Self, SpecError> {
        Self::check(new, old, amax, cmax)?;
        let new_limit = (new * capacity as f64) as u64;
        let middle_limit = ((1.0 - new - old).max(0.0) * capacity as f64) as u64;
        Ok(Fbr {
            capacity,
            used: 0,
            new_limit,
            middle_limit,
            new_bytes: 0,
            middle_bytes: 0,
            amax,
            cmax,
            total_count: 0,
            old_clock: 0,
            index: key_map(1024),
            slab: Slab::default(),
            new: List::new(),
            middle: List::new(),
            old: vec![List::new(); cmax as usize + 1],
            old_nonempty: vec![0; cmax as usize / 64 + 1],
        })
    }

    fn set_nonempty(&mut self, count: u32, nonempty: bool) {
        let (word, bit) = (count as usize / 64, count % 64);
        if nonempty {
            self.old_nonempty[word] |= 1 << bit;
        } else {
            self.old_nonempty[word] &= !(1 << bit);
        }
    }

    fn push_old(&mut self, i: u32) {
        self.old_clock += 1;
        let b = self.slab.get_mut(i);
        b.section = Section::Old;
        b.entered_old = self.old_clock;
        let c = b.count;
        self.slab.push_front(&mut self.old[c as usize], i);
        self.set_nonempty(c, true);
    }

    /// Takes block `i` out of whichever section holds it.
    fn unlink(&mut self, i: u32) {
        let b = *self.slab.get(i);
        let size = u64::from(b.size);
        match b.section {
            Section::New => {
                self.slab.unlink(&mut self.new, i);
                self.new_bytes -= size;
            }
            Section::Middle => {
                self.slab.unlink(&mut self.middle, i);
                self.middle_bytes -= size;
            }
            Section::Old => {
                let list = &mut self.old[b.count as usize];
                self.slab.unlink(list, i);
                if list.is_empty() {
                    self.set_nonempty(b.count, false);
                }
            }
        }
    }

    /// Puts block `i` on top of the stack and lets overflowing sections spill
    /// their LRU blocks downwards.
    fn push_top(&mut self, i: u32) {
        let b = self.slab.get_mut(i);
        b.section = Section::New;
        self.new_bytes += u64::from(b.size);
        self.slab.push_front(&mut self.new, i);
        while self.new_bytes > self.new_limit {
            let Some(t) = self.slab.pop_back(&mut self.new) else { break };
            let b = self.slab.get_mut(t);
            b.section = Section::Middle;
            let size = u64::from(b.size);
            self.new_bytes -= size;
            self.middle_bytes += size;
            self.slab.push_front(&mut self.middle, t);
        }
        while self.middle_bytes > self.middle_limit {
            let Some(t) = self.slab.pop_back(&mut self.middle) else { break };
            self.middle_bytes -= u64::from(self.slab.get(t).size);
            self.push_old(t);
        }
    }

    fn lowest_old_count(&self) -> Option<u32> {
        self.old_nonempty
            .iter()
            .enumerate()
            .find(|(_, &w)| w != 0)
            .map(|(word, w)| (word * 64) as u32 + w.trailing_zeros())
    }

    fn victim(&self) -> Option<u32> {
        match self.lowest_old_count() {
            Some(c) => self.old[c as usize].tail(),
            None => self.middle.tail().or(self.new.tail()),
        }
    }

    fn evict_block(&mut self) -> Option<Key> {
        let i = self.victim()?;
        self.unlink(i);
        let b = self.slab.release(i);
        self.index.remove(&b.key);
        self.used -= u64::from(b.size);
        self.total_count -= u64::from(b.count);
        Some(b.key)
    }

    fn age_if_needed(&mut self) {
        if self.total_count <= u64::from(self.amax) * self.index.len() as u64 {
            return;
        }
        let halve = |c: u32| c.div_ceil(2);
        for list in [self.new, self.middle] {
            let mut cur = list.head();
            while let Some(i) = cur {
                let b = self.slab.get_mut(i);
                b.count = halve(b.count);
                cur = self.slab.next(i);
            }
        }
        // Counts 2k-1 and 2k merge into k, keeping LRU order by entry time.
        // Every source list index is >= its target, so targets are built
        // from lists already taken.
        for w in &mut self.old_nonempty {
            *w = 0;
        }
        for target in 1..=halve(self.cmax) {
            let mut a = std::mem::take(&mut self.old[2 * target as usize - 1]);
            let mut b = match self.old.get_mut(2 * target as usize) {
                Some(l) => std::mem::take(l),
                None => List::new(),
            };
            let mut merged = List::new();
            loop {
                let oldest = match (a.tail(), b.tail()) {
                    (None, None) => break,
                    (Some(x), None) => (x, true),
                    (None, Some(y)) => (y, false),
                    (Some(x), Some(y)) => {
                        if self.slab.get(x).entered_old < self.slab.get(y).entered_old {
                            (x, true)
                        } else {
                            (y, false)
                        }
                    }
                };
                let (i, from_a) = oldest;
                self.slab.unlink(if from_a { &mut a } else { &mut b }, i);
                self.slab.get_mut(i).count = target;
                self.slab.push_front(&mut merged, i);
            }
            if !merged.is_empty() {
                self.set_nonempty(target, true);
            }
            self.old[target as usize] = merged;
        }
        self.total_count = self.index.values().map(|&i| u64::from(self.slab.get(i).count)).sum();
    }

    #[cfg(test)]
    fn count_of(&self, key: Key) -> u32 {
        self.slab.get(self.index[&key]).count
    }
}

impl Policy for Fbr {
    fn name(&self) -> String {
        "FBR".into()
    }
    indexed_residency!();

    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        let b = *self.slab.get(i);
        if b.section == Section::New {
            self.slab.move_to_front(&mut self.new, i);
            return true;
        }
        self.unlink(i);
        if b.count < self.cmax {
            self.slab.get_mut(i).count += 1;
            self.total_count += 1;
        }
        self.push_top(i);
        self.age_if_needed();
        true
    }

    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        if self.index.contains_key(&a.key) {
            return;
        }
        let size = u64::from(a.size);
        while self.used + size > self.capacity {
            match self.evict_block() {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        let i = self.slab.alloc(Block { key: a.key, size: a.size, count: 1, section: Section::New, entered_old: 0 });
        self.index.insert(a.key, i);
        self.used += size;
        self.total_count += 1;
        self.push_top(i);
    }

    fn evict(&mut self, _now: &Access) -> Option<Key> {
        self.evict_block()
    }

    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        self.unlink(i);
        let b = self.slab.release(i);
        self.index.remove(&key);
        self.used -= u64::from(b.size);
        self.total_count -= u64::from(b.count);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(p: &mut Fbr, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = p.access(&Access { key, size: 1, ..Default::default() }, &mut evicted);
        assert!(p.occupancy() <= p.capacity());
        (hit, evicted)
    }

    /// 4 slots: new = 1, middle = 1, old = 2.
    fn small() -> Fbr {
        Fbr::new(4, 0.25, 0.5, 100, 1000).unwrap()
    }

    #[test]
    fn hits_in_the_new_section_do_not_count() {
        let mut p = small();
        access(&mut p, 1);
        for _ in 0..5 {
            assert!(access(&mut p, 1).0); // 1 stays on top, in the new section
        }
        assert_eq!(p.count_of(1), 1);
        access(&mut p, 2); // 1 slides to the middle section
        assert!(access(&mut p, 1).0);
        assert_eq!(p.count_of(1), 2);
    }

    #[test]
    fn victim_is_lowest_count_in_old_section_lru_among_ties() {
        let mut p = small();
        for k in [1, 2, 1, 3, 4] {
            access(&mut p, k);
        }
        // Stack, top first: 4 | 3 | 1 (count 2), 2 (count 1).
        assert_eq!(p.count_of(1), 2);
        assert_eq!(access(&mut p, 5), (false, vec![2]));
        // 5 | 4 | 3, 1: 3 has the lower count although 1 is older.
        assert_eq!(access(&mut p, 6), (false, vec![3]));
        assert_eq!(access(&mut p, 7), (false, vec![4]));
        assert_eq!(access(&mut p, 8), (false, vec![5]));
        assert!(p.contains(1));
        // Equal counts: the least recently used goes.
        let mut p = small();
        for k in [1, 2, 3, 4] {
            access(&mut p, k);
        }
        assert_eq!(access(&mut p, 5), (false, vec![1]));
        assert_eq!(access(&mut p, 6), (false, vec![2]));
    }

    #[test]
    fn only_old_section_blocks_are_candidates() {
        let mut p = small();
        for k in [1, 2, 1, 2, 1, 2] {
            access(&mut p, k); // 1 and 2 swap between new and middle: both reach 3
        }
        assert_eq!((p.count_of(1), p.count_of(2)), (3, 3));
        access(&mut p, 3);
        access(&mut p, 4); // stack: 4 | 3 | 2, 1
                           // 3 (middle) and 4 (new) have count 1 but are not eligible.
        assert_eq!(access(&mut p, 5), (false, vec![1]));
    }

    #[test]
    fn counts_age_when_the_mean_exceeds_amax() {
        // amax = 2: the mean count may not exceed 2.
        let mut p = Fbr::new(4, 0.25, 0.5, 2, 8).unwrap();
        for k in [1, 2, 3, 4] {
            access(&mut p, k);
        }
        // Seven hits, none in the new section (it holds one block and the
        // keys alternate): without aging the counts would total 4 + 7 = 11.
        for k in [1, 2, 3, 1, 2, 3, 1] {
            assert!(access(&mut p, k).0);
            assert!(p.total_count <= 2 * 4, "mean above amax: total {}", p.total_count);
        }
        let total: u32 = [1, 2, 3, 4].iter().map(|&k| p.count_of(k)).sum();
        assert_eq!(u64::from(total), p.total_count);
        for (c, list) in p.old.iter().enumerate() {
            for i in p.slab.iter(list) {
                assert_eq!(p.slab.get(i).count as usize, c);
            }
        }
    }

    #[test]
    fn aging_merges_old_lists_in_lru_order() {
        // 6 slots: new 1, middle 1, old 4.
        let mut p = Fbr::new(6, 0.2, 0.6, 100, 1000).unwrap();
        for k in [1, 2, 3, 4, 5, 6, 5, 7, 8, 9] {
            access(&mut p, k);
        }
        // 5 (count 2) entered the old section between 6 and 7 (count 1):
        // old section in entry order 4, 6, 5, 7.
        assert_eq!(p.count_of(5), 2);
        p.amax = 1; // the mean (7/6) is now too high
        p.age_if_needed();
        assert_eq!(p.count_of(5), 1);
        let old_ones: Vec<Key> = p.slab.iter(&p.old[1]).map(|i| p.slab.get(i).key).collect();
        assert_eq!(old_ones, vec![7, 5, 6, 4]); // most recent first
        assert_eq!(access(&mut p, 10), (false, vec![4]));
        assert_eq!(access(&mut p, 11), (false, vec![6]));
        assert_eq!(access(&mut p, 12), (false, vec![5]));
    }

    #[test]
    fn remove_and_bad_parameters() {
        let mut p = small();
        for k in 1..=4 {
            access(&mut p, k);
        }
        assert!(p.remove(1));
        assert!(!p.remove(1));
        assert_eq!((p.len(), p.occupancy(), p.total_count), (3, 3, 3));
        assert!(Fbr::new(4, 0.6, 0.6, 100, 1000).is_err());
        assert!(Fbr::new(4, 0.25, 0.25, 100, 100).is_err());
    }
}

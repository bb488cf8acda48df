//! CLOCK-Pro (Jiang, Chen and Zhang, USENIX ATC'05): LIRS's reuse-distance
//! test on a CLOCK. The paper keeps hot and cold resident items and
//! non-resident cold items still in their test period on one circular list
//! swept by three hands; here each kind has its own list, so a hand only
//! steps over items it acts on and every request costs amortised O(1)
//! (the paper's hands step over the other kinds one at a time).
//! - A hit sets the item's reference bit; nothing moves.
//! - HAND_cold (the cold list's tail) makes room: a cold item it finds
//!   referenced is promoted to hot if still in its test period, else given
//!   a new test period; both move to the head. An unreferenced one is
//!   evicted, and stays as a non-resident item while its test period lasts.
//! - HAND_hot (the hot list's tail) runs while hot items exceed their budget
//!   (capacity - the cold target): it clears referenced hot items and
//!   demotes the first unreferenced one to cold.
//! - HAND_test (the non-resident list's tail) drops the oldest non-resident
//!   item while non-resident items exceed the capacity (so the lists
//!   describe at most twice the cache).
//! - A miss on a non-resident item in its test period enters as hot; any
//!   other miss enters as cold in a test period.
//! - Adaptation: the cold target grows by an item's size when a cold item is
//!   re-requested during its test period and shrinks by it when a test period
//!   ends unused (within 0..capacity, starting at `cold` x capacity, 0.5 as
//!   libCacheSim's `init_ratio_cold`).
//!
//! Test periods end where the paper's do, when HAND_hot or HAND_test passes
//! the item's place on the single clock. Every placement at a list's head
//! takes the next `stamp`, the item's place on that clock; a hand passing
//! the item stamped `s` ends the test periods of all items stamped before
//! `s` (`frontier`). Non-resident items are evicted in stamp order, so those
//! whose test ended are dropped from the tail at once; resident cold ones
//! are settled when HAND_cold reaches them.
//!
//! Everything counts bytes. libCacheSim 0.3.5's `ClockPro` is not this
//! algorithm: it drops promoted items from its table (it misses more than
//! LRU on cloudPhysicsIO), so its counts are printed, not matched.

use crate::SpecError;
use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Hot,
    Cold,
    NonResident,
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    kind: Kind,
    referenced: bool,
    in_test: bool,
    /// The item's place on the paper's single clock (larger is newer).
    stamp: u64,
}

pub struct ClockPro {
    capacity: u64,
    /// Target bytes of resident cold items (hot items get the rest).
    cold_target: u64,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// One list per kind, newest at the head; each hand is its list's tail.
    hot: List,
    cold: List,
    non_resident: List,
    hot_bytes: u64,
    cold_bytes: u64,
    non_resident_bytes: u64,
    /// The last stamp handed out.
    stamp: u64,
    /// Test periods of items stamped before this have ended.
    frontier: u64,
}

impl ClockPro {
    pub fn new(capacity: u64, cold: f64) -> Result<Self, SpecError> {
        if !(0.0..=1.0).contains(&cold) {
            return Err(SpecError::range("clockpro", format!("cold must be in [0, 1], got {cold}")));
        }
        Ok(ClockPro {
            capacity,
            cold_target: (capacity as f64 * cold) as u64,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            hot: List::new(),
            cold: List::new(),
            non_resident: List::new(),
            hot_bytes: 0,
            cold_bytes: 0,
            non_resident_bytes: 0,
            stamp: 0,
            frontier: 0,
        })
    }

    /// The slab, and the list and byte count of `kind`.
    fn parts(&mut self, kind: Kind) -> (&mut Slab<Entry>, &mut List, &mut u64) {
        match kind {
            Kind::Hot => (&mut self.slab, &mut self.hot, &mut self.hot_bytes),
            Kind::Cold => (&mut self.slab, &mut self.cold, &mut self.cold_bytes),
            Kind::NonResident => (&mut self.slab, &mut self.non_resident, &mut self.non_resident_bytes),
        }
    }

    /// Puts `i` at the head of `kind`'s list, keeping its stamp.
    fn link(&mut self, i: u32, kind: Kind) {
        let (slab, list, bytes) = self.parts(kind);
        let entry = slab.get_mut(i);
        entry.kind = kind;
        *bytes += u64::from(entry.size);
        slab.push_front(list, i);
    }

    /// Puts `i` at the head of `kind`'s list, newest on the clock.
    fn link_new(&mut self, i: u32, kind: Kind) {
        self.stamp += 1;
        self.slab.get_mut(i).stamp = self.stamp;
        self.link(i, kind);
    }

    fn unlink(&mut self, i: u32) {
        let e = *self.slab.get(i);
        let (slab, list, bytes) = self.parts(e.kind);
        *bytes -= u64::from(e.size);
        slab.unlink(list, i);
    }

    /// Drops node `i` from its list and the index; returns its key.
    fn forget(&mut self, i: u32) -> Key {
        self.unlink(i);
        let key = self.slab.release(i).key;
        self.index.remove(&key);
        key
    }

    /// Ends the test period of cold item `i`. It passed unused, so the cold
    /// target shrinks.
    fn end_test(&mut self, i: u32) {
        let entry = self.slab.get_mut(i);
        entry.in_test = false;
        self.cold_target = self.cold_target.saturating_sub(u64::from(entry.size));
    }

    /// A hand passed the item stamped `stamp`: test periods of items stamped
    /// before it end, and non-resident ones among them are dropped.
    fn pass(&mut self, stamp: u64) {
        self.frontier = self.frontier.max(stamp);
        while let Some(i) = self.non_resident.tail() {
            if self.slab.get(i).stamp >= self.frontier {
                break;
            }
            self.end_test(i);
            self.forget(i);
        }
    }

    fn grow_cold_target(&mut self, size: u32) {
        self.cold_target = (self.cold_target + u64::from(size)).min(self.capacity);
    }

    /// HAND_hot: demotes one hot item (there must be one). A referenced one
    /// it passes keeps its place on the paper's clock as the hand moves on,
    /// which makes it the newest there: it moves to the head.
    fn run_hand_hot(&mut self) {
        while let Some(i) = self.hot.tail() {
            let e = *self.slab.get(i);
            self.pass(e.stamp);
            self.unlink(i);
            if e.referenced {
                self.slab.get_mut(i).referenced = false;
                self.link_new(i, Kind::Hot);
            } else {
                self.link_new(i, Kind::Cold);
                return;
            }
        }
    }

    /// HAND_test: drops the oldest non-resident item (there must be one).
    fn run_hand_test(&mut self) {
        let i = self.non_resident.tail().expect("non-resident bytes belong to listed items");
        let stamp = self.slab.get(i).stamp;
        self.end_test(i);
        self.forget(i);
        self.pass(stamp);
    }

    fn balance_hot(&mut self) {
        while self.hot_bytes > 0 && self.hot_bytes > self.capacity - self.cold_target.min(self.capacity) {
            self.run_hand_hot();
        }
    }

    /// Inserts a resident item for `a` at the head of `kind`'s list.
    fn add(&mut self, a: &Access, kind: Kind, in_test: bool) {
        let i = self.slab.alloc(Entry { key: a.key, size: a.size, kind, referenced: false, in_test, stamp: 0 });
        self.index.insert(a.key, i);
        self.link_new(i, kind);
    }
}

impl Policy for ClockPro {
    fn name(&self) -> String {
        "CLOCK-Pro".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.hot_bytes + self.cold_bytes
    }
    fn len(&self) -> usize {
        self.hot.len() + self.cold.len()
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).kind != Kind::NonResident)
    }
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        if self.slab.get(i).kind == Kind::NonResident {
            return false;
        }
        self.slab.get_mut(i).referenced = true;
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        // Listed but not resident (a caller may insert without a lookup first): non-resident,
        // in its test period, so re-requested during it.
        if let Some(&i) = self.index.get(&a.key) {
            // The cold target grows, and it enters hot.
            self.forget(i);
            self.grow_cold_target(a.size);
            self.make_room(a, evicted);
            self.add(a, Kind::Hot, false);
            self.balance_hot();
        } else {
            self.make_room(a, evicted);
            self.add(a, Kind::Cold, true);
        }
    }
    /// HAND_cold, until it evicts one item.
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.hot.is_empty() && self.cold.is_empty() {
            return None;
        }
        loop {
            if self.cold.is_empty() {
                self.run_hand_hot();
            }
            let i = self.cold.tail().expect("HAND_hot demoted an item");
            let mut e = *self.slab.get(i);
            if e.in_test && e.stamp < self.frontier {
                self.end_test(i);
                e.in_test = false;
            }
            self.unlink(i);
            let entry = self.slab.get_mut(i);
            match (e.referenced, e.in_test) {
                (true, true) => {
                    entry.referenced = false;
                    entry.in_test = false;
                    self.link_new(i, Kind::Hot);
                    self.grow_cold_target(e.size);
                    self.balance_hot();
                }
                (true, false) => {
                    entry.referenced = false;
                    entry.in_test = true;
                    self.link_new(i, Kind::Cold);
                }
                (false, true) => {
                    // Evictions go in stamp order, so the list stays sorted.
                    self.link(i, Kind::NonResident);
                    while self.non_resident_bytes > self.capacity {
                        self.run_hand_test();
                    }
                    return Some(e.key);
                }
                (false, false) => {
                    self.slab.release(i);
                    self.index.remove(&e.key);
                    return Some(e.key);
                }
            }
        }
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        let resident = self.slab.get(i).kind != Kind::NonResident;
        self.forget(i);
        resident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key) -> Access {
        Access { key, size: 1, ..Access::default() }
    }

    /// The server's caches insert written blocks without a lookup first: a
    /// non-resident item's node must be reused, not shadowed (a shadowed one
    /// later took the index entry of the resident item with it).
    #[test]
    fn an_insert_without_a_lookup_of_a_non_resident_item_keeps_one_node() {
        let mut c = ClockPro::new(4, 0.5).unwrap();
        let mut ev = Vec::new();
        for k in 0..5 {
            c.access(&acc(k), &mut ev);
        }
        assert!(!c.contains(0) && c.index.contains_key(&0), "0 is non-resident in its test period");
        ev.clear();
        c.insert(&acc(0), &mut ev);
        assert!(c.contains(0));
        assert_eq!(c.slab.get(c.index[&0]).kind, Kind::Hot);
        assert_eq!(c.len() + c.non_resident.len(), c.index.len(), "one node per listed key");
        // Every later eviction names a key the policy held.
        let mut held: std::collections::HashSet<Key> = (0..5).filter(|&k| c.contains(k)).collect();
        for k in 5..200 {
            let key = k * 7 % 13;
            if c.contains(key) {
                continue;
            }
            ev.clear();
            c.insert(&acc(key), &mut ev);
            for v in &ev {
                assert!(held.remove(v), "evicted {v}, which it did not hold");
            }
            assert!(c.contains(key));
            held.insert(key);
            assert_eq!(held.len(), c.len());
        }
    }

    #[test]
    fn a_reuse_within_the_test_period_makes_an_item_hot() {
        let mut c = ClockPro::new(4, 0.5).unwrap();
        let mut ev = Vec::new();
        for k in 0..4 {
            c.access(&acc(k), &mut ev);
        }
        c.access(&acc(4), &mut ev); // evicts 0, which stays non-resident in its test period
        assert_eq!(ev, vec![0]);
        assert!(!c.contains(0) && c.index.contains_key(&0));
        ev.clear();
        assert!(!c.access(&acc(0), &mut ev), "a non-resident item misses");
        assert_eq!(c.slab.get(c.index[&0]).kind, Kind::Hot);
        assert_eq!(c.cold_target, 3, "its reuse grew the cold target");
        // A referenced cold item survives HAND_cold; an unreferenced one goes.
        assert!(c.access(&acc(2), &mut ev));
        ev.clear();
        c.access(&acc(5), &mut ev);
        assert_eq!(ev, vec![3]);
        assert!(c.contains(2) && c.occupancy() == 4);
        assert!(ClockPro::new(4, 1.5).is_err());
    }
}

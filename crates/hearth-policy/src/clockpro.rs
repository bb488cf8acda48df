//! CLOCK-Pro (Jiang, Chen and Zhang, USENIX ATC'05): LIRS's reuse-distance
//! test on a CLOCK. One circular list holds hot and cold resident items and
//! non-resident cold items still in their test period; three hands sweep it
//! from the oldest end.
//! - A hit sets the item's reference bit; nothing moves.
//! - HAND_cold makes room: a cold item it finds referenced is promoted to
//!   hot if still in its test period, else given a new test period; both
//!   move to the head. An unreferenced one is evicted, and stays as a
//!   non-resident item while its test period lasts.
//! - HAND_hot runs while hot items exceed their budget (capacity - the cold
//!   target): it clears referenced hot items and demotes the first
//!   unreferenced one to cold. It ends the test periods of the cold items
//!   it passes, dropping non-resident ones.
//! - HAND_test ends test periods the same way while non-resident items
//!   exceed the capacity (so the list describes at most twice the cache).
//! - A miss on a non-resident item in its test period enters as hot; any
//!   other miss enters as cold in a test period.
//! - Adaptation: the cold target grows by an item's size when a cold item is
//!   re-requested during its test period and shrinks by it when a test period
//!   ends unused (within 0..capacity, starting at `cold` x capacity, 0.5 as
//!   libCacheSim's `init_ratio_cold`).
//!
//! Everything counts bytes. libCacheSim 0.3.5's `ClockPro` is not this
//! algorithm: it drops promoted items from its table (it misses more than
//! LRU on cloudPhysicsIO), so its counts are printed, not matched.

use crate::SpecError;
use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab, NIL};

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
}

pub struct ClockPro {
    capacity: u64,
    /// Target bytes of resident cold items (hot items get the rest).
    cold_target: u64,
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// Newest at the head; hands move from the tail towards the head and wrap.
    list: List,
    hand_cold: u32,
    hand_hot: u32,
    hand_test: u32,
    hot_bytes: u64,
    cold_bytes: u64,
    non_resident_bytes: u64,
    resident: usize,
    /// The key whose lookup just found it non-resident in its test period.
    test_hit: Option<Key>,
}

impl ClockPro {
    pub fn new(capacity: u64, cold: f64) -> Result<Self, SpecError> {
        if !(0.0..=1.0).contains(&cold) {
            return Err(SpecError::range("clockpro", format!("cold must be in [0, 1], got {cold}")));
        }
        Ok(ClockPro {
            capacity,
            cold_target: (capacity as f64 * cold) as u64,
            index: key_map(1024),
            slab: Slab::default(),
            list: List::new(),
            hand_cold: NIL,
            hand_hot: NIL,
            hand_test: NIL,
            hot_bytes: 0,
            cold_bytes: 0,
            non_resident_bytes: 0,
            resident: 0,
            test_hit: None,
        })
    }

    /// The node after `i` in the hands' direction (towards the head, wrapping).
    fn forward(&self, i: u32) -> u32 {
        self.slab.prev(i).or(self.list.tail()).unwrap_or(NIL)
    }

    fn bytes_of(&mut self, kind: Kind) -> &mut u64 {
        match kind {
            Kind::Hot => &mut self.hot_bytes,
            Kind::Cold => &mut self.cold_bytes,
            Kind::NonResident => &mut self.non_resident_bytes,
        }
    }

    fn set_kind(&mut self, i: u32, kind: Kind) {
        let e = *self.slab.get(i);
        let size = u64::from(e.size);
        *self.bytes_of(e.kind) -= size;
        *self.bytes_of(kind) += size;
        if (e.kind == Kind::NonResident) != (kind == Kind::NonResident) {
            self.resident = if kind == Kind::NonResident { self.resident - 1 } else { self.resident + 1 };
        }
        self.slab.get_mut(i).kind = kind;
    }

    /// Unlinks `i`, first moving any hand on it to the next node.
    fn detach(&mut self, i: u32) {
        let next = if self.list.len() == 1 { NIL } else { self.forward(i) };
        for hand in [&mut self.hand_cold, &mut self.hand_hot, &mut self.hand_test] {
            if *hand == i {
                *hand = next;
            }
        }
        self.slab.unlink(&mut self.list, i);
    }

    fn push_head(&mut self, i: u32) {
        self.slab.push_front(&mut self.list, i);
        let tail = self.list.tail().unwrap_or(NIL);
        for hand in [&mut self.hand_cold, &mut self.hand_hot, &mut self.hand_test] {
            if *hand == NIL {
                *hand = tail;
            }
        }
    }

    fn move_to_head(&mut self, i: u32) {
        self.detach(i);
        self.push_head(i);
    }

    /// Drops node `i` from the list and the index; returns its key.
    fn forget(&mut self, i: u32) -> Key {
        let e = *self.slab.get(i);
        *self.bytes_of(e.kind) -= u64::from(e.size);
        if e.kind != Kind::NonResident {
            self.resident -= 1;
        }
        self.detach(i);
        self.slab.release(i);
        self.index.remove(&e.key);
        e.key
    }

    /// Ends the test period of cold item `i`; a non-resident one is dropped.
    /// Its test period passed unused, so the cold target shrinks.
    fn end_test(&mut self, i: u32) {
        let e = *self.slab.get(i);
        self.slab.get_mut(i).in_test = false;
        self.cold_target = self.cold_target.saturating_sub(u64::from(e.size));
        if e.kind == Kind::NonResident {
            self.forget(i);
        }
    }

    fn grow_cold_target(&mut self, size: u32) {
        self.cold_target = (self.cold_target + u64::from(size)).min(self.capacity);
    }

    /// HAND_hot: demotes one hot item (there must be one).
    fn run_hand_hot(&mut self) {
        loop {
            let i = self.hand_hot;
            self.hand_hot = self.forward(i);
            let e = *self.slab.get(i);
            match e.kind {
                Kind::Hot if e.referenced => self.slab.get_mut(i).referenced = false,
                Kind::Hot => {
                    self.set_kind(i, Kind::Cold);
                    return;
                }
                _ if e.in_test => self.end_test(i),
                _ => {}
            }
        }
    }

    /// HAND_test: ends test periods until one non-resident item is dropped
    /// (there must be one).
    fn run_hand_test(&mut self) {
        loop {
            let i = self.hand_test;
            self.hand_test = self.forward(i);
            let e = *self.slab.get(i);
            if e.kind != Kind::Hot && e.in_test {
                self.end_test(i);
                if e.kind == Kind::NonResident {
                    return;
                }
            }
        }
    }

    fn balance_hot(&mut self) {
        while self.hot_bytes > 0 && self.hot_bytes > self.capacity - self.cold_target.min(self.capacity) {
            self.run_hand_hot();
        }
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
        self.resident
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).kind != Kind::NonResident)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        self.test_hit = None;
        let Some(&i) = self.index.get(&a.key) else { return false };
        if self.slab.get(i).kind == Kind::NonResident {
            self.test_hit = Some(a.key);
            return false;
        }
        self.slab.get_mut(i).referenced = true;
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        if self.test_hit.take() == Some(a.key) {
            // Re-requested during its test period: the cold target grows, it enters hot.
            let i = self.index[&a.key];
            self.forget(i);
            self.grow_cold_target(a.size);
            self.make_room(a, evicted);
            let i =
                self.slab.alloc(Entry { key: a.key, size: a.size, kind: Kind::Hot, referenced: false, in_test: false });
            self.index.insert(a.key, i);
            self.hot_bytes += u64::from(a.size);
            self.resident += 1;
            self.push_head(i);
            self.balance_hot();
        } else {
            self.make_room(a, evicted);
            let i =
                self.slab.alloc(Entry { key: a.key, size: a.size, kind: Kind::Cold, referenced: false, in_test: true });
            self.index.insert(a.key, i);
            self.cold_bytes += u64::from(a.size);
            self.resident += 1;
            self.push_head(i);
        }
    }
    /// HAND_cold, until it evicts one item.
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.resident == 0 {
            return None;
        }
        loop {
            if self.cold_bytes == 0 {
                self.run_hand_hot();
            }
            let i = self.hand_cold;
            self.hand_cold = self.forward(i);
            let e = *self.slab.get(i);
            if e.kind != Kind::Cold {
                continue;
            }
            match (e.referenced, e.in_test) {
                (true, true) => {
                    let entry = self.slab.get_mut(i);
                    entry.referenced = false;
                    entry.in_test = false;
                    self.set_kind(i, Kind::Hot);
                    self.move_to_head(i);
                    self.grow_cold_target(e.size);
                    self.balance_hot();
                }
                (true, false) => {
                    self.slab.get_mut(i).referenced = false;
                    self.slab.get_mut(i).in_test = true;
                    self.move_to_head(i);
                }
                (false, true) => {
                    self.set_kind(i, Kind::NonResident);
                    while self.non_resident_bytes > self.capacity {
                        self.run_hand_test();
                    }
                    return Some(e.key);
                }
                (false, false) => return Some(self.forget(i)),
            }
        }
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        let resident = self.slab.get(i).kind != Kind::NonResident;
        self.forget(i);
        if self.test_hit == Some(key) {
            self.test_hit = None;
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

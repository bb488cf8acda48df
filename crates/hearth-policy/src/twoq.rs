//! 2Q, the full version (Johnson & Shasha, "2Q: A Low Overhead High
//! Performance Buffer Management Replacement Algorithm", VLDB 1994).
//!
//! A first reference puts a block in A1in, a FIFO; hits there change
//! nothing, so a burst of correlated references does not make a block look
//! hot. Blocks pushed out of A1in are remembered (key only) in A1out, a ghost
//! FIFO. A miss on a block remembered in A1out shows a real second reference:
//! it goes to Am, an LRU. Replacement takes A1in's oldest block while A1in
//! holds more than Kin, otherwise Am's LRU block.
//!
//! Choices for a byte-sized cache:
//! - Kin is `kin` × capacity in bytes (paper: 25 % of the page slots).
//! - Kout is counted in entries as in the paper (50 % of the page slots).
//!   Slots are not fixed when objects vary in size, so a "slot" is the most
//!   items the cache has held at once so far; A1out keeps at most
//!   `kout` × that many keys.
//! - When A1in is within Kin but Am is empty, A1in's oldest block is the
//!   victim (and is remembered in A1out like any block leaving A1in).
//!
//! `2q:sizing=bytes` sizes the queues as libCacheSim's `TwoQ` does: A1out
//! holds `kout` x capacity bytes of ghosts (their items' sizes), and Am is a
//! cache of its own of (1 - `kin`) x capacity bytes, so a block promoted
//! from A1out evicts Am's LRU blocks until it fits there even when A1in
//! leaves room. (libCacheSim also refuses items larger than Kin; Hearth
//! admits them in both sizings.)

use crate::SpecError;
use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    A1in,
    Am,
    /// Ghost: remembered in A1out, not resident.
    A1out,
}

/// How A1out and Am are bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sizing {
    /// The paper's: A1out counts keys against the cache's slots, Am takes
    /// whatever A1in leaves.
    Slots,
    /// libCacheSim's: A1out holds `kout` x capacity bytes, Am at most
    /// (1 - `kin`) x capacity bytes.
    Bytes,
}

impl std::str::FromStr for Sizing {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "slots" => Ok(Sizing::Slots),
            "bytes" => Ok(Sizing::Bytes),
            _ => Err(SpecError::range("2q", format!("sizing must be slots or bytes, got {s:?}"))),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: Key,
    size: u32,
    place: Place,
}

pub struct TwoQ {
    capacity: u64,
    kin_bytes: u64,
    kout: f64,
    sizing: Sizing,
    used: u64,
    a1in_bytes: u64,
    /// Bytes of A1out's ghosts (their items' sizes).
    a1out_bytes: u64,
    resident: usize,
    /// Most items resident at once so far: the cache's size in "slots".
    peak_resident: usize,
    index: KeyIndex,
    slab: Slab<Entry>,
    /// Newest at the head.
    a1in: List,
    /// Most recently used at the head.
    am: List,
    /// Newest ghost at the head.
    a1out: List,
}

impl TwoQ {
    /// A 2Q cache of `capacity` bytes; `kin` is A1in's share of the bytes,
    /// `kout` A1out's length relative to the number of resident items.
    pub fn new(capacity: u64, kin: f64, kout: f64) -> Result<Self, SpecError> {
        Self::with_sizing(capacity, kin, kout, Sizing::Slots)
    }

    /// [`TwoQ::new`] with A1out and Am bounded as `sizing` says.
    pub fn with_sizing(capacity: u64, kin: f64, kout: f64, sizing: Sizing) -> Result<Self, SpecError> {
        if !(kin > 0.0 && kin < 1.0) {
            return Err(SpecError::range("2q", format!("kin must be in (0, 1), got {kin}")));
        }
        if !(kout >= 0.0 && kout.is_finite()) {
            return Err(SpecError::range("2q", format!("kout must be a non-negative number, got {kout}")));
        }
        Ok(TwoQ {
            capacity,
            kin_bytes: (kin * capacity as f64) as u64,
            kout,
            sizing,
            used: 0,
            a1in_bytes: 0,
            a1out_bytes: 0,
            resident: 0,
            peak_resident: 0,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            a1in: List::new(),
            am: List::new(),
            a1out: List::new(),
        })
    }

    fn kout_entries(&self) -> usize {
        (self.kout * self.peak_resident as f64) as usize
    }

    /// Evicts one resident block by the paper's `reclaimfor` rule.
    fn reclaim(&mut self) -> Option<Key> {
        if self.a1in_bytes > self.kin_bytes || self.am.is_empty() {
            let i = self.slab.pop_back(&mut self.a1in)?;
            let e = self.slab.get_mut(i);
            e.place = Place::A1out;
            let (key, size) = (e.key, e.size);
            self.a1in_bytes -= u64::from(size);
            self.used -= u64::from(size);
            self.resident -= 1;
            self.slab.push_front(&mut self.a1out, i);
            self.a1out_bytes += u64::from(size);
            self.trim_a1out();
            Some(key)
        } else {
            self.evict_am()
        }
    }

    /// Evicts Am's least recently used block.
    fn evict_am(&mut self) -> Option<Key> {
        let i = self.slab.pop_back(&mut self.am)?;
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        self.used -= u64::from(e.size);
        self.resident -= 1;
        Some(e.key)
    }

    fn a1out_full(&self) -> bool {
        match self.sizing {
            Sizing::Slots => self.a1out.len() > self.kout_entries(),
            Sizing::Bytes => self.a1out_bytes > (self.kout * self.capacity as f64) as u64,
        }
    }

    fn trim_a1out(&mut self) {
        while self.a1out_full() {
            let Some(i) = self.slab.pop_back(&mut self.a1out) else { break };
            let e = self.slab.release(i);
            self.a1out_bytes -= u64::from(e.size);
            self.index.remove(&e.key);
        }
    }
}

impl Policy for TwoQ {
    fn name(&self) -> String {
        "2Q".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.resident
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).place != Place::A1out)
    }

    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        match self.slab.get(i).place {
            Place::Am => {
                self.slab.move_to_front(&mut self.am, i);
                true
            }
            // Correlated re-reference: deliberately no promotion.
            Place::A1in => true,
            Place::A1out => false,
        }
    }

    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        let size = u64::from(a.size);
        // Membership is decided before reclaiming (as in the paper); take a
        // remembered key out of A1out first so trimming cannot drop it.
        let remembered = match self.index.get(&a.key).copied() {
            Some(i) if self.slab.get(i).place == Place::A1out => {
                self.slab.unlink(&mut self.a1out, i);
                self.a1out_bytes -= u64::from(self.slab.get(i).size);
                Some(i)
            }
            Some(_) => return, // already resident
            None => None,
        };
        while self.used + size > self.capacity {
            match self.reclaim() {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        match remembered {
            Some(i) => {
                if self.sizing == Sizing::Bytes {
                    let am_budget = self.capacity - self.kin_bytes;
                    while self.used - self.a1in_bytes + size > am_budget {
                        match self.evict_am() {
                            Some(k) => evicted.push(k),
                            None => break,
                        }
                    }
                }
                *self.slab.get_mut(i) = Entry { key: a.key, size: a.size, place: Place::Am };
                self.slab.push_front(&mut self.am, i);
            }
            None => {
                let i = self.slab.alloc(Entry { key: a.key, size: a.size, place: Place::A1in });
                self.slab.push_front(&mut self.a1in, i);
                self.index.insert(a.key, i);
                self.a1in_bytes += size;
            }
        }
        self.used += size;
        self.resident += 1;
        self.peak_resident = self.peak_resident.max(self.resident);
    }

    fn evict(&mut self, _now: &Access) -> Option<Key> {
        self.reclaim()
    }

    fn remove(&mut self, key: Key) -> bool {
        let Some(&i) = self.index.get(&key) else { return false };
        let e = *self.slab.get(i);
        match e.place {
            Place::A1out => return false,
            Place::A1in => {
                self.slab.unlink(&mut self.a1in, i);
                self.a1in_bytes -= u64::from(e.size);
            }
            Place::Am => self.slab.unlink(&mut self.am, i),
        }
        self.slab.release(i);
        self.index.remove(&key);
        self.used -= u64::from(e.size);
        self.resident -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(p: &mut TwoQ, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = p.access(&Access { key, size: 1, ..Default::default() }, &mut evicted);
        assert!(p.occupancy() <= p.capacity());
        (hit, evicted)
    }

    #[test]
    fn second_reference_after_a1in_goes_to_am_via_a1out() {
        // 4 slots: Kin = 1 byte, A1out up to 2 keys.
        let mut p = TwoQ::new(4, 0.25, 0.5).unwrap();
        for k in 1..=4 {
            access(&mut p, k);
        }
        assert_eq!(access(&mut p, 1), (true, vec![])); // A1in hit: no promotion
                                                       // A1in (4 bytes) is over Kin: its oldest, 1, goes to A1out.
        assert_eq!(access(&mut p, 5), (false, vec![1]));
        // 1 is remembered: this miss puts it in Am (evicting 2 from A1in).
        assert_eq!(access(&mut p, 1), (false, vec![2]));
        assert_eq!(access(&mut p, 6), (false, vec![3]));
        assert_eq!(access(&mut p, 7), (false, vec![4])); // A1out keeps 2 keys: 3, 4
        assert_eq!(access(&mut p, 8), (false, vec![5]));
        // 1 sits in Am and survives the stream of first references.
        assert!(p.contains(1));
        assert_eq!(access(&mut p, 1), (true, vec![]));
        // 2 was pushed out of A1out, so it is new again: A1in, not Am.
        assert_eq!(access(&mut p, 2), (false, vec![6]));
        assert_eq!(p.slab.get(p.index[&2]).place, Place::A1in);
        // 5 is remembered (A1out = 6, 5). Reclaiming for it pushes 7 into
        // A1out, which would trim 5 had it not been taken out first.
        assert_eq!(access(&mut p, 5), (false, vec![7]));
        assert_eq!(p.slab.get(p.index[&5]).place, Place::Am);
    }

    #[test]
    fn am_is_lru_and_used_once_a1in_is_within_kin() {
        // 4 slots, Kin = 2 bytes; A1out long enough to remember everything.
        let mut p = TwoQ::new(4, 0.5, 4.0).unwrap();
        for k in [1, 2, 3, 4, 5, 6, 1, 2] {
            access(&mut p, k); // 1 and 2 come back from A1out into Am
        }
        assert_eq!(p.slab.get(p.index[&1]).place, Place::Am);
        assert_eq!(p.slab.get(p.index[&2]).place, Place::Am);
        assert_eq!(access(&mut p, 1), (true, vec![])); // Am, MRU first: 1 2
                                                       // A1in = {6, 5} is not over Kin: Am's LRU block goes.
        assert_eq!(access(&mut p, 7), (false, vec![2]));
        // A1in = {7, 6, 5} is over Kin: its oldest goes.
        assert_eq!(access(&mut p, 8), (false, vec![5]));
        assert_eq!(access(&mut p, 9), (false, vec![6]));
        assert!(p.contains(1));
    }

    #[test]
    fn remove_and_bad_parameters() {
        let mut p = TwoQ::new(4, 0.25, 0.5).unwrap();
        access(&mut p, 1);
        assert!(p.remove(1));
        assert!(!p.remove(1));
        assert_eq!((p.len(), p.occupancy()), (0, 0));
        assert!(TwoQ::new(4, 1.5, 0.5).is_err());
        assert!(TwoQ::new(4, 0.25, -1.0).is_err());
    }
}

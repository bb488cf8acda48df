//! SR-LRU, the scan-resistant expert of Cacheus (Rodriguez et al.,
//! "Learning cache replacement with CACHEUS", FAST'21), on its own as
//! libCacheSim's `SR_LRU`.
//!
//! Residents are split into SR, where new items enter, and R, where items
//! go once hit; both are LRU lists, and items leaving SR are remembered in a
//! history H of up to the capacity in bytes (oldest forgotten first).
//! - A hit in R moves the item to R's MRU end; a hit in SR moves it there
//!   too, and R's LRU items are demoted to SR's MRU end while R is over its
//!   size.
//! - A miss found in H enters R (demoting R's LRU items to make room); any
//!   other miss enters SR. Then SR's LRU items leave for H while SR is over
//!   its size: that is the only eviction.
//! - SR and R start at half the capacity each. SR grows when an item that
//!   left SR unhit (a "new" item) comes back from H: by max(1, demoted /
//!   new) bytes, demoted and new being the counts of demotions and of new
//!   items sent to H, and at most to the resident bytes minus 1; R gets the
//!   rest of the capacity. An item larger than the list it would enter is
//!   not admitted.
//!
//! As libCacheSim 0.3.5's: the paper's other adjustment, shrinking SR when a
//! demoted item is hit there, never happens, because a hit item enters R as
//! a fresh object whose demoted flag is clear; and the demotion count is
//! only lowered when a demoted item leaves SR for H. When SR grows past
//! what R gives up, libCacheSim may go on holding more than its capacity
//! (by up to that growth) until R next makes room; Hearth then demotes R's
//! excess at once, so that it never does. On the bundled trace that changes
//! no miss count.

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Sr = 0,
    R = 1,
    History = 2,
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    place: Place,
    /// Entered SR on a miss not found in H, and not hit since.
    new: bool,
    /// Demoted from R to SR, and not hit since.
    demoted: bool,
}

pub struct SrLru {
    capacity: u64,
    /// SR's and R's sizes in bytes (H's is the capacity).
    sizes: [u64; 2],
    /// SR, R and H, MRU at the head.
    lists: [List; 3],
    bytes: [u64; 3],
    /// Demotions not yet sent to H, and new items sent to H (never lowered).
    demoted: u64,
    new: u64,
    /// Residents and H, by key.
    index: KeyIndex,
    slab: Slab<Entry>,
}

impl SrLru {
    pub fn new(capacity: u64) -> Self {
        SrLru {
            capacity,
            sizes: [capacity / 2, capacity / 2],
            lists: [List::new(); 3],
            bytes: [0; 3],
            demoted: 0,
            new: 0,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
        }
    }

    fn push(&mut self, i: u32, place: Place) {
        let e = self.slab.get_mut(i);
        e.place = place;
        self.bytes[place as usize] += u64::from(e.size);
        self.slab.push_front(&mut self.lists[place as usize], i);
    }

    fn unlink(&mut self, i: u32) {
        let e = *self.slab.get(i);
        self.slab.unlink(&mut self.lists[e.place as usize], i);
        self.bytes[e.place as usize] -= u64::from(e.size);
    }

    /// Demotes R's LRU item to SR's MRU end.
    fn demote(&mut self) -> bool {
        let Some(i) = self.lists[Place::R as usize].tail() else { return false };
        self.unlink(i);
        let e = self.slab.get_mut(i);
        e.new = false;
        e.demoted = true;
        self.demoted += 1;
        self.push(i, Place::Sr);
        true
    }

    /// SR grows: a new item came back from H.
    fn grow_sr(&mut self) {
        let ratio = self.demoted / self.new.max(1);
        let resident = self.bytes[0] + self.bytes[1];
        let sr = self.sizes[0];
        // libCacheSim adds max(1.0, ratio + 0.5) to a byte count and truncates.
        let grown = if ratio == 0 { sr + 1 } else { sr + ratio };
        let over =
            if ratio == 0 { sr + 1 > resident.saturating_sub(1) } else { sr + ratio >= resident.saturating_sub(1) };
        // Never past the capacity: with sizes other than one, `resident`
        // (the block just moved in included) can exceed it, and a target above
        // the capacity would leave the cache over it once R is empty.
        self.sizes[0] = if over { resident.saturating_sub(1) } else { grown }.min(self.capacity);
        self.sizes[1] = self.capacity.saturating_sub(self.sizes[0]);
    }

    /// Sends SR's LRU items to H while SR is over its size.
    fn shed_sr(&mut self, inserted: Key, evicted: &mut Vec<Key>) {
        while self.bytes[Place::Sr as usize] > self.sizes[0] {
            let Some(i) = self.lists[Place::Sr as usize].tail() else { break };
            self.unlink(i);
            let e = self.slab.get_mut(i);
            if e.new {
                self.new += 1;
            }
            if e.demoted {
                e.demoted = false;
                self.demoted -= 1;
            }
            let key = e.key;
            self.push(i, Place::History);
            // The item just inserted was never reported held.
            if key != inserted {
                evicted.push(key);
            }
        }
        while self.bytes[Place::History as usize] >= self.capacity {
            let Some(i) = self.lists[Place::History as usize].tail() else { break };
            self.unlink(i);
            self.index.remove(&self.slab.release(i).key);
        }
    }
}

impl Policy for SrLru {
    fn name(&self) -> String {
        "SR-LRU".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.bytes[0] + self.bytes[1]
    }
    fn len(&self) -> usize {
        self.lists[0].len() + self.lists[1].len()
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).place != Place::History)
    }
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&i) = self.index.get(&a.key) else { return false };
        match self.slab.get(i).place {
            Place::History => false,
            Place::R => {
                self.slab.move_to_front(&mut self.lists[Place::R as usize], i);
                true
            }
            Place::Sr => {
                self.unlink(i);
                let e = self.slab.get_mut(i);
                e.new = false;
                e.demoted = false;
                self.push(i, Place::R);
                while self.bytes[Place::R as usize] > self.sizes[1] && self.demote() {}
                true
            }
        }
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        let size = u64::from(a.size);
        match self.index.get(&a.key).copied() {
            Some(i) => {
                // Back from H, into R.
                if size > self.sizes[1] {
                    return;
                }
                self.unlink(i);
                let was_new = self.slab.get(i).new;
                while self.bytes[Place::R as usize] + size > self.sizes[1] && self.demote() {}
                *self.slab.get_mut(i) = Entry { key: a.key, size: a.size, place: Place::R, new: false, demoted: false };
                self.push(i, Place::R);
                if was_new {
                    self.grow_sr();
                }
            }
            None => {
                if size > self.sizes[0] {
                    return;
                }
                let i =
                    self.slab.alloc(Entry { key: a.key, size: a.size, place: Place::Sr, new: true, demoted: false });
                self.index.insert(a.key, i);
                self.push(i, Place::Sr);
            }
        }
        self.shed_sr(a.key, evicted);
        // R may still hold bytes SR's growth took from it: where libCacheSim
        // would then hold more than the capacity, demote them and shed again.
        while self.occupancy() > self.capacity && self.bytes[Place::R as usize] > self.sizes[1] && self.demote() {
            self.shed_sr(a.key, evicted);
        }
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let i = self.lists[Place::Sr as usize].tail().or(self.lists[Place::R as usize].tail())?;
        let key = self.slab.get(i).key;
        self.remove(key);
        Some(key)
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(i) = self.index.remove(&key) else { return false };
        self.unlink(i);
        let e = self.slab.release(i);
        if e.place != Place::History && e.demoted {
            self.demoted -= 1;
        }
        e.place != Place::History
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(c: &mut SrLru, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = c.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    fn place(c: &SrLru, key: Key) -> Place {
        c.slab.get(c.index[&key]).place
    }

    #[test]
    fn a_scan_passes_through_sr_and_leaves_r_alone() {
        let mut c = SrLru::new(8);
        for k in [1, 2, 1, 2] {
            request(&mut c, k);
        }
        assert_eq!((place(&c, 1), place(&c, 2)), (Place::R, Place::R));
        // A scan of 20 new keys only cycles through SR's 4 bytes.
        for k in 100..120 {
            request(&mut c, k);
        }
        assert!(request(&mut c, 1).0 && request(&mut c, 2).0);
        assert_eq!(place(&c, 115), Place::History);
        assert!(!c.index.contains_key(&100), "H keeps under the capacity in bytes");
        assert_eq!(c.len(), 6);
    }

    #[test]
    fn r_overflow_is_demoted_and_a_returning_new_item_grows_sr() {
        let mut c = SrLru::new(4);
        // SR and R hold 2 each: hits on 1, 2, 3 move them to R, demoting 1.
        for k in [1, 2, 1, 2, 3, 3] {
            request(&mut c, k);
        }
        assert_eq!((place(&c, 1), c.slab.get(c.index[&1]).demoted), (Place::Sr, true));
        assert_eq!(c.demoted, 1);
        // 4, 5 and 6 enter SR, pushing 1 (demoted) then 4 (new) out to H.
        assert_eq!(request(&mut c, 4).1, Vec::<Key>::new());
        assert_eq!(request(&mut c, 5).1, vec![1]);
        assert_eq!(c.demoted, 0);
        assert_eq!(request(&mut c, 6).1, vec![4]);
        assert_eq!(c.new, 1);
        // 4 comes back from H into R, demoting 2: SR grows by demoted / new =
        // 1 byte and R shrinks to 1, so R's 3 is demoted too and SR sheds 5.
        assert_eq!(request(&mut c, 4).1, vec![5]);
        assert_eq!(place(&c, 4), Place::R);
        assert_eq!(c.sizes, [3, 1]);
        assert_eq!(c.occupancy(), 4);
    }
}

//! Adaptive Replacement Cache (Megiddo & Modha, "ARC: A Self-Tuning, Low
//! Overhead Replacement Cache", FAST 2003), sized in bytes as libCacheSim's
//! `ARC` does.
//!
//! T1 holds items seen once recently, T2 items seen at least twice; B1 and B2
//! are ghost lists remembering keys (and sizes) recently evicted from T1 and
//! T2. The target size `p` of T1 grows on a B1 ghost hit and shrinks on a B2
//! ghost hit. Following libCacheSim:
//! - list sizes are in bytes, ghosts counting the size of the item they stand
//!   for; `p` is a float in bytes and moves by `max(|B2|/|B1|, 1)` (resp.
//!   `max(|B1|/|B2|, 1)`) per ghost hit: the paper's page-count formula
//!   applied unchanged to byte counts, so `p` moves only a few bytes per
//!   ghost hit. That is libCacheSim's behaviour, kept by default so results
//!   compare; `arc:step=size` scales each move by the ghost item's size, the
//!   byte analogue of the paper's one-page step;
//! - a ghost hit is still a miss; the item is re-inserted at the head of T2;
//! - one eviction step evicts one data item. On a ghost hit it is REPLACE;
//!   otherwise (case IV) it first trims B1 if |T1|+|B1|+size exceeds the
//!   capacity (or drops T1's LRU outright when B1 is empty), or trims B2 if
//!   all four lists reach twice the capacity, then calls REPLACE.

use crate::SpecError;
use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab};

/// How far one ghost hit moves the target `p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `max(ratio, 1)` bytes, as libCacheSim does.
    Byte,
    /// `max(ratio, 1)` times the size of the item that hit the ghost.
    Size,
}

impl std::str::FromStr for Step {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "byte" => Ok(Step::Byte),
            "size" => Ok(Step::Size),
            _ => Err(SpecError::range("arc", format!("step must be \"byte\" or \"size\", got {s:?}"))),
        }
    }
}

/// The four lists; the discriminant indexes `Arc::lists` and `Arc::bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    T1 = 0,
    T2 = 1,
    B1 = 2,
    B2 = 3,
    /// In no list: a ghost that just hit, waiting for its insert (which
    /// reuses its node and index entry rather than forgetting and
    /// re-adding the key).
    Detached = 4,
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    at: Where,
}

pub struct Arc {
    capacity: u64,
    step: Step,
    /// Target byte size of T1.
    p: f64,
    /// Residents and ghosts alike; `Entry::at` tells which list a key is in.
    index: KeyIndex,
    slab: Slab<Entry>,
    /// MRU at the head of each list.
    lists: [List; 4],
    bytes: [u64; 4],
    /// The key whose lookup just hit a ghost, which ghost list, and its
    /// detached node: the following insert and its evictions take the
    /// ghost-hit path.
    ghost_hit: Option<(Key, Where, u32)>,
}

impl Arc {
    pub fn new(capacity: u64, step: Step) -> Self {
        Arc {
            capacity,
            step,
            p: 0.0,
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            lists: [List::new(); 4],
            bytes: [0; 4],
            ghost_hit: None,
        }
    }

    fn bytes(&self, at: Where) -> u64 {
        self.bytes[at as usize]
    }

    fn unlink(&mut self, i: u32) {
        let e = *self.slab.get(i);
        self.slab.unlink(&mut self.lists[e.at as usize], i);
        self.bytes[e.at as usize] -= u64::from(e.size);
    }

    fn push_front(&mut self, i: u32, at: Where) {
        let e = self.slab.get_mut(i);
        e.at = at;
        self.bytes[at as usize] += u64::from(e.size);
        self.slab.push_front(&mut self.lists[at as usize], i);
    }

    /// Forgets the LRU entry of list `at` entirely; returns its key.
    fn drop_tail(&mut self, at: Where) -> Option<Key> {
        let i = self.lists[at as usize].tail()?;
        self.unlink(i);
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        Some(e.key)
    }

    /// Moves the LRU item of resident list `from` to the head of ghost list `to`.
    fn demote_tail(&mut self, from: Where, to: Where) -> Option<Key> {
        let i = self.lists[from as usize].tail()?;
        self.unlink(i);
        self.push_front(i, to);
        Some(self.slab.get(i).key)
    }

    /// Forgets the node a ghost hit detached when no insert of its key
    /// followed.
    fn forget_ghost_hit(&mut self) {
        if let Some((key, _, i)) = self.ghost_hit.take() {
            self.slab.release(i);
            self.index.remove(&key);
        }
    }

    /// The paper's REPLACE: evict from T1 if it exceeds its target, else T2.
    fn replace(&mut self, hit_in_b2: bool) -> Option<Key> {
        let t1 = self.bytes(Where::T1);
        let t1_over = t1 > 0 && (t1 as f64 > self.p || (t1 as f64 == self.p && hit_in_b2));
        if t1_over || self.bytes(Where::T2) == 0 {
            self.demote_tail(Where::T1, Where::B1).or_else(|| self.demote_tail(Where::T2, Where::B2))
        } else {
            self.demote_tail(Where::T2, Where::B2).or_else(|| self.demote_tail(Where::T1, Where::B1))
        }
    }
}

impl Policy for Arc {
    fn name(&self) -> String {
        match self.step {
            Step::Byte => "ARC".into(),
            Step::Size => "ARC-sizestep".into(),
        }
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.bytes(Where::T1) + self.bytes(Where::T2)
    }
    fn len(&self) -> usize {
        self.lists[Where::T1 as usize].len() + self.lists[Where::T2 as usize].len()
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| matches!(self.slab.get(i).at, Where::T1 | Where::T2))
    }
    warm_by_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        self.forget_ghost_hit();
        let Some(&i) = self.index.get(&a.key) else { return false };
        match self.slab.get(i).at {
            Where::T1 => {
                self.unlink(i);
                self.push_front(i, Where::T2);
                true
            }
            Where::T2 => {
                self.slab.move_to_front(&mut self.lists[Where::T2 as usize], i);
                true
            }
            Where::Detached => unreachable!("forget_ghost_hit dropped the only detached node"),
            ghost => {
                // Case II / III: adapt p towards the list that would have hit.
                let (b1, b2) = (self.bytes(Where::B1) as f64, self.bytes(Where::B2) as f64);
                let unit = match self.step {
                    Step::Byte => 1.0,
                    Step::Size => f64::from(self.slab.get(i).size),
                };
                if ghost == Where::B1 {
                    self.p = (self.p + (b2 / b1).max(1.0) * unit).min(self.capacity as f64);
                } else {
                    self.p = (self.p - (b1 / b2).max(1.0) * unit).max(0.0);
                }
                self.unlink(i);
                self.slab.get_mut(i).at = Where::Detached;
                self.ghost_hit = Some((a.key, ghost, i));
                false
            }
        }
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        while self.occupancy() + u64::from(a.size) > self.capacity {
            match self.evict(a) {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        match self.ghost_hit {
            Some((key, _, i)) if key == a.key => {
                self.ghost_hit = None;
                self.slab.get_mut(i).size = a.size;
                self.push_front(i, Where::T2);
            }
            _ => {
                self.forget_ghost_hit();
                let i = self.slab.alloc(Entry { key: a.key, size: a.size, at: Where::T1 });
                self.index.insert(a.key, i);
                self.push_front(i, Where::T1);
            }
        }
    }
    fn evict(&mut self, now: &Access) -> Option<Key> {
        if self.is_empty() {
            return None;
        }
        if let Some((key, ghost, _)) = self.ghost_hit {
            if key == now.key {
                return self.replace(ghost == Where::B2);
            }
        }
        // Case IV: a miss in all four lists.
        let incoming = u64::from(now.size);
        if self.bytes(Where::T1) + self.bytes(Where::B1) + incoming > self.capacity {
            if self.bytes(Where::B1) > 0 {
                self.drop_tail(Where::B1);
                self.replace(false)
            } else {
                self.drop_tail(Where::T1)
            }
        } else {
            let total: u64 = self.bytes.iter().sum();
            if total >= 2 * self.capacity && self.bytes(Where::B2) > 0 {
                self.drop_tail(Where::B2);
            }
            self.replace(false)
        }
    }
    fn remove(&mut self, key: Key) -> bool {
        self.forget_ghost_hit();
        let Some(&i) = self.index.get(&key) else { return false };
        let resident = matches!(self.slab.get(i).at, Where::T1 | Where::T2);
        self.unlink(i);
        self.slab.release(i);
        self.index.remove(&key);
        resident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(arc: &mut Arc, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let hit = arc.access(&Access { key, size: 1, ..Access::default() }, &mut evicted);
        (hit, evicted)
    }

    #[test]
    fn ghost_hits_move_the_target_and_readmit_into_t2() {
        let mut arc = Arc::new(2, Step::Byte);
        request(&mut arc, 1);
        assert!(request(&mut arc, 1).0); // 1 moves to T2
        request(&mut arc, 2); // T1 = [2]
                              // T1 is over its target p = 0, so 2 becomes a B1 ghost.
        assert_eq!(request(&mut arc, 3), (false, vec![2]));
        assert!(!arc.contains(2));

        // A B1 ghost hit is a miss that raises p to 1 byte; T1 (= [3]) is no
        // longer over it, so T2's LRU (1) makes room and 2 enters T2.
        assert_eq!(request(&mut arc, 2), (false, vec![1]));
        assert_eq!(arc.p, 1.0);
        assert_eq!(arc.slab.get(arc.index[&2]).at, Where::T2);

        // A B2 ghost hit lowers p back to 0, so T1's 3 is the victim.
        assert_eq!(request(&mut arc, 1), (false, vec![3]));
        assert_eq!(arc.p, 0.0);
        assert!(arc.contains(1) && arc.contains(2));
    }

    #[test]
    fn a_ghost_hit_not_followed_by_its_insert_is_forgotten() {
        let mut arc = Arc::new(2, Step::Byte);
        for k in [1, 1, 2, 3] {
            request(&mut arc, k);
        }
        // 2 is a B1 ghost; its lookup misses and detaches it, but no insert follows.
        assert!(!arc.lookup(&Access { key: 2, size: 1, ..Access::default() }));
        assert!(!request(&mut arc, 4).0);
        assert!(!arc.index.contains_key(&2), "the detached ghost is forgotten");
        // Met again, 2 is a plain miss: it enters T1, not T2.
        request(&mut arc, 2);
        assert_eq!(arc.slab.get(arc.index[&2]).at, Where::T1);
        let listed: usize = arc.lists.iter().map(List::len).sum();
        assert_eq!(listed, arc.index.len(), "every indexed node is in a list");
    }

    #[test]
    fn ghosts_are_not_resident_and_count_no_bytes() {
        let mut arc = Arc::new(2, Step::Byte);
        for k in [1, 1, 2, 3] {
            request(&mut arc, k);
        }
        assert_eq!(arc.len(), 2);
        assert_eq!(arc.occupancy(), 2);
        assert!(!arc.remove(2), "a ghost is not resident");
        assert!(arc.remove(3));
        assert_eq!(arc.occupancy(), 1);
    }
}

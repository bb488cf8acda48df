//! LIRS, Low Inter-reference Recency Set (Jiang & Zhang, SIGMETRICS 2002),
//! following libCacheSim's byte-capacity variant so that miss counts match
//! its `LIRS` on the same trace.
//!
//! Blocks with a short inter-reference recency are LIR and always resident;
//! the rest are HIR. Stack S orders recently seen blocks (LIR, resident HIR
//! and non-resident HIR) and is pruned so that its bottom is always LIR.
//! Queue Q holds the resident HIR blocks; its LRU end is the victim.
//!
//! Choices taken from libCacheSim (`cache/eviction/LIRS.c`):
//! - The HIR part (Q) is `hir` × capacity bytes, default 1 % (at least one
//!   byte); the LIR set gets the rest. Both are counted in bytes.
//! - An object larger than either part is never admitted.
//! - Non-resident HIR entries are bounded by S's total bytes: while S (all
//!   its entries, resident or not) exceeds 2 × capacity, the oldest
//!   non-resident entry (in order of becoming non-resident) leaves S.
//! - A hit on a resident HIR block that is in Q but not in S makes room for
//!   it in the LIR byte budget first (demoting bottom LIR blocks to Q), then
//!   puts it on top of S, still HIR. A demotion into a full Q evicts Q's LRU
//!   end, so a *hit* can evict; those victims are handed out with the next
//!   [`Policy::insert`]'s victims.
//! - A miss on a non-resident HIR block in S makes room in the LIR budget,
//!   then admits the block straight into the LIR set.
//! - A new block is LIR while the LIR set has room, otherwise resident HIR.
//! - A block remembered in S keeps the size it was first seen with.

use crate::SpecError;
use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab, NIL};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// Resident, in S only.
    Lir,
    /// Resident, in Q and possibly in S.
    HirResident,
    /// Not resident, in S and in the non-resident list.
    HirGhost,
}

#[derive(Clone, Copy, Debug)]
struct Meta {
    size: u32,
    status: Status,
    /// Node in the S slab, or `NIL` when the block is not in S.
    s: u32,
    /// Node in the Q slab: in Q when `HirResident`, in the non-resident list
    /// when `HirGhost`, `NIL` when `Lir`.
    q: u32,
}

pub struct Lirs {
    capacity: u64,
    lir_limit: u64,
    hir_limit: u64,
    lir_bytes: u64,
    hir_bytes: u64,
    /// Bytes of every entry in S, resident or not (bounds the history).
    stack_bytes: u64,
    resident: usize,
    index: KeyMap<Meta>,
    s_nodes: Slab<Key>,
    /// Stack S, top (most recent) at the head.
    stack: List,
    /// Q and the non-resident list share one slab: a block is in one of them.
    q_nodes: Slab<Key>,
    /// Resident HIR blocks, most recent at the head; victims come from the tail.
    queue: List,
    /// Non-resident HIR blocks in S, newest at the head; trimmed from the tail.
    ghosts: List,
    /// Blocks evicted during a hit, reported with the next insert.
    pending_victims: Vec<Key>,
}

impl Lirs {
    /// A LIRS cache of `capacity` bytes with libCacheSim's 1 % HIR part.
    pub fn new(capacity: u64) -> Self {
        Self::build(capacity, 0.01)
    }

    /// A LIRS cache whose HIR part (Q) is `hir_ratio` of the capacity.
    pub fn with_hir_ratio(capacity: u64, hir_ratio: f64) -> Result<Self, SpecError> {
        if !(hir_ratio > 0.0 && hir_ratio < 1.0) {
            return Err(SpecError::range("lirs", format!("hir must be in (0, 1), got {hir_ratio}")));
        }
        Ok(Self::build(capacity, hir_ratio))
    }

    fn build(capacity: u64, hir_ratio: f64) -> Self {
        let hir_limit = ((hir_ratio * capacity as f64) as u64).max(1).min(capacity);
        Lirs {
            capacity,
            lir_limit: capacity - hir_limit,
            hir_limit,
            lir_bytes: 0,
            hir_bytes: 0,
            stack_bytes: 0,
            resident: 0,
            index: key_map(1024),
            s_nodes: Slab::default(),
            stack: List::new(),
            q_nodes: Slab::default(),
            queue: List::new(),
            ghosts: List::new(),
            pending_victims: Vec::with_capacity(16),
        }
    }

    /// Brings `key`'s nodes in S and Q (or the non-resident list) into the
    /// CPU cache: a hit or a ghost hit moves them.
    fn prefetch_nodes(&self, key: Key) {
        if let Some(m) = self.index.get(&key) {
            self.s_nodes.prefetch(m.s);
            self.q_nodes.prefetch(m.q);
        }
    }

    fn meta(&mut self, key: Key) -> &mut Meta {
        self.index.get_mut(&key).expect("every list node has an index entry")
    }

    /// Removes the block's S entry, if any.
    fn leave_stack(&mut self, key: Key) {
        let m = *self.meta(key);
        if m.s != NIL {
            self.s_nodes.unlink(&mut self.stack, m.s);
            self.s_nodes.release(m.s);
            self.stack_bytes -= u64::from(m.size);
            self.meta(key).s = NIL;
        }
    }

    fn push_stack(&mut self, key: Key) {
        let i = self.s_nodes.alloc(key);
        self.s_nodes.push_front(&mut self.stack, i);
        let m = self.meta(key);
        m.s = i;
        self.stack_bytes += u64::from(m.size);
    }

    /// Stack pruning: drop HIR entries from the bottom of S until an LIR
    /// block is there (the top entry always stays).
    fn prune(&mut self) {
        while let (Some(bottom), Some(top)) = (self.stack.tail(), self.stack.head()) {
            if bottom == top {
                break;
            }
            let key = *self.s_nodes.get(bottom);
            let m = self.index[&key];
            match m.status {
                Status::Lir => break,
                Status::HirResident => self.leave_stack(key),
                Status::HirGhost => {
                    self.leave_stack(key);
                    self.forget_ghost(key);
                }
            }
        }
    }

    /// Drops a non-resident block's entry in the ghost list and its index entry.
    fn forget_ghost(&mut self, key: Key) {
        let m = self.index.remove(&key).expect("ghost is indexed");
        self.q_nodes.unlink(&mut self.ghosts, m.q);
        self.q_nodes.release(m.q);
    }

    /// Evicts Q's LRU end. A block still in S stays there as non-resident.
    fn evict_hir(&mut self) -> Option<Key> {
        let i = self.q_nodes.pop_back(&mut self.queue)?;
        let key = *self.q_nodes.get(i);
        let m = *self.meta(key);
        self.hir_bytes -= u64::from(m.size);
        self.resident -= 1;
        if m.s != NIL {
            self.q_nodes.push_front(&mut self.ghosts, i);
            self.meta(key).status = Status::HirGhost;
        } else {
            self.q_nodes.release(i);
            self.index.remove(&key);
        }
        Some(key)
    }

    /// Moves the LIR block at the bottom of S into Q as resident HIR (evicting
    /// from Q to make room), then prunes S. Returns false if S holds no LIR
    /// block below its top (nothing to demote).
    fn demote_bottom_lir(&mut self) -> bool {
        // Pruning keeps S's top even when it is HIR, so after a removal left
        // only HIR entries, a block pushed later sits above HIR entries:
        // prune again so the bottom is LIR.
        self.prune();
        let Some(bottom) = self.stack.tail() else { return false };
        let key = *self.s_nodes.get(bottom);
        let size = u64::from(self.index[&key].size);
        if self.index[&key].status != Status::Lir {
            return false;
        }
        self.leave_stack(key);
        self.lir_bytes -= size;
        if size <= self.hir_limit {
            while self.hir_bytes + size > self.hir_limit {
                match self.evict_hir() {
                    Some(victim) => self.pending_victims.push(victim),
                    None => break,
                }
            }
            let i = self.q_nodes.alloc(key);
            self.q_nodes.push_front(&mut self.queue, i);
            let m = self.meta(key);
            m.q = i;
            m.status = Status::HirResident;
            self.hir_bytes += size;
        } else {
            self.index.remove(&key);
            self.resident -= 1;
            self.pending_victims.push(key);
        }
        self.prune();
        true
    }

    /// Demotes bottom LIR blocks until `size` more bytes fit the LIR budget.
    fn make_lir_room(&mut self, size: u64) {
        while self.lir_bytes + size > self.lir_limit {
            if !self.demote_bottom_lir() {
                break;
            }
        }
    }

    /// Bounds the history: S may hold at most twice the capacity in bytes.
    fn limit_stack(&mut self) {
        while self.stack_bytes > 2 * self.capacity {
            let Some(i) = self.ghosts.tail() else { break };
            let key = *self.q_nodes.get(i);
            self.leave_stack(key);
            self.forget_ghost(key);
        }
    }

    fn hit_hir(&mut self, key: Key, m: Meta) {
        let size = u64::from(m.size);
        self.q_nodes.move_to_front(&mut self.queue, m.q);
        if m.s != NIL {
            // Short reuse distance: the block joins the LIR set.
            self.s_nodes.move_to_front(&mut self.stack, m.s);
            self.q_nodes.unlink(&mut self.queue, m.q);
            self.q_nodes.release(m.q);
            self.hir_bytes -= size;
            self.meta(key).q = NIL;
            // Becomes LIR only once room is made (as in libCacheSim), so the
            // demotions below never pick this block.
            self.make_lir_room(size);
            self.meta(key).status = Status::Lir;
            self.lir_bytes += size;
        } else {
            self.make_lir_room(size);
            // Demotions can evict Q's tail; only re-enter S if still resident.
            if self.index.get(&key).is_some_and(|m| m.status == Status::HirResident) {
                self.push_stack(key);
            }
        }
    }
}

impl Policy for Lirs {
    fn name(&self) -> String {
        "LIRS".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.lir_bytes + self.hir_bytes
    }
    fn len(&self) -> usize {
        self.resident
    }
    fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|m| m.status != Status::HirGhost)
    }

    fn warm(&self, key: Key) {
        self.prefetch_nodes(key);
    }
    /// A hash map's entry cannot be prefetched without looking it up: the
    /// lookup 16 requests ahead waits on it then, so `warm`'s finds it cached.
    fn warm_index(&self, key: Key) {
        self.prefetch_nodes(key);
    }

    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&m) = self.index.get(&a.key) else { return false };
        match m.status {
            Status::Lir => {
                self.s_nodes.move_to_front(&mut self.stack, m.s);
                self.prune();
            }
            Status::HirResident => self.hit_hir(a.key, m),
            Status::HirGhost => {
                // A miss, but the history entry moves to the top of S.
                self.s_nodes.move_to_front(&mut self.stack, m.s);
                return false;
            }
        }
        self.limit_stack();
        true
    }

    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        evicted.append(&mut self.pending_victims);
        let size = u64::from(a.size);
        match self.index.get(&a.key).copied() {
            Some(m) if m.status == Status::HirGhost => {
                // Its reuse distance beat the bottom LIR block's: admit as LIR.
                let size = u64::from(m.size);
                self.s_nodes.move_to_front(&mut self.stack, m.s);
                self.make_lir_room(size);
                let m = *self.meta(a.key);
                self.q_nodes.unlink(&mut self.ghosts, m.q);
                self.q_nodes.release(m.q);
                while self.occupancy() + size > self.capacity {
                    while self.hir_bytes >= self.hir_limit {
                        match self.evict_hir() {
                            Some(victim) => self.pending_victims.push(victim),
                            None => break,
                        }
                    }
                    if !self.demote_bottom_lir() {
                        match self.evict_hir() {
                            Some(victim) => self.pending_victims.push(victim),
                            None => break,
                        }
                    }
                }
                let m = self.meta(a.key);
                m.q = NIL;
                m.status = Status::Lir;
                self.lir_bytes += size;
                self.resident += 1;
            }
            Some(_) => return, // already resident
            None => {
                if size > self.lir_limit || size > self.hir_limit {
                    return; // libCacheSim never admits these
                }
                if self.lir_bytes + size > self.lir_limit && self.hir_bytes + size > self.hir_limit {
                    // Both parts full: the newcomer will be HIR, so Q makes room.
                    while self.hir_bytes + size > self.hir_limit {
                        match self.evict_hir() {
                            Some(victim) => self.pending_victims.push(victim),
                            None => break,
                        }
                    }
                }
                while self.occupancy() + size > self.capacity {
                    match self.evict_hir() {
                        Some(victim) => self.pending_victims.push(victim),
                        None if self.demote_bottom_lir() => {}
                        None => break,
                    }
                }
                let status = if self.lir_bytes + size <= self.lir_limit { Status::Lir } else { Status::HirResident };
                self.index.insert(a.key, Meta { size: a.size, status, s: NIL, q: NIL });
                self.push_stack(a.key);
                if status == Status::Lir {
                    self.lir_bytes += size;
                } else {
                    let i = self.q_nodes.alloc(a.key);
                    self.q_nodes.push_front(&mut self.queue, i);
                    self.meta(a.key).q = i;
                    self.hir_bytes += size;
                }
                self.resident += 1;
            }
        }
        evicted.append(&mut self.pending_victims);
        self.limit_stack();
    }

    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.queue.is_empty() {
            let before = self.pending_victims.len();
            self.demote_bottom_lir();
            // A block too large for Q leaves the cache directly.
            if self.pending_victims.len() > before {
                return self.pending_victims.pop();
            }
        }
        self.evict_hir()
    }

    fn remove(&mut self, key: Key) -> bool {
        let m = self.index.get(&key).copied();
        match m {
            None | Some(Meta { status: Status::HirGhost, .. }) => {
                // Evicted by a hit and not yet reported: the caller drops it now,
                // so a later report would name a block it no longer thinks held.
                self.pending_victims.retain(|&k| k != key);
                return false;
            }
            Some(m @ Meta { status: Status::Lir, .. }) => {
                self.leave_stack(key);
                self.lir_bytes -= u64::from(m.size);
                self.index.remove(&key);
                self.prune();
            }
            Some(m @ Meta { status: Status::HirResident, .. }) => {
                self.leave_stack(key);
                self.q_nodes.unlink(&mut self.queue, m.q);
                self.q_nodes.release(m.q);
                self.hir_bytes -= u64::from(m.size);
                self.index.remove(&key);
            }
        }
        self.resident -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(p: &mut Lirs, key: Key) -> (bool, Vec<Key>) {
        let mut evicted = Vec::new();
        let a = Access { key, size: 1, ..Default::default() };
        let hit = p.access(&a, &mut evicted);
        assert!(p.occupancy() <= p.capacity());
        (hit, evicted)
    }

    fn run(p: &mut Lirs, keys: &[Key]) {
        for &k in keys {
            access(p, k);
        }
    }

    const A: Key = 1;
    const B: Key = 2;
    const C: Key = 3;
    const D: Key = 4;
    const E: Key = 5;

    #[test]
    fn ghost_in_stack_returns_as_lir_and_demotes_bottom_lir() {
        // 3 bytes: LIR budget 2, Q 1.
        let mut p = Lirs::with_hir_ratio(3, 0.34).unwrap();
        run(&mut p, &[A, B, C]); // A, B LIR; C resident HIR
        assert_eq!(access(&mut p, D), (false, vec![C])); // C leaves Q but stays in S
        assert!(!p.contains(C));
        // C's reuse beats A's recency: A drops to Q (pushing D out), C is LIR.
        assert_eq!(access(&mut p, C), (false, vec![D]));
        assert!(p.contains(A) && p.contains(B) && p.contains(C));
        // D is still a ghost in S: it comes back LIR, B (bottom LIR) goes to
        // Q and A, HIR and no longer in S, is evicted outright.
        assert_eq!(access(&mut p, D), (false, vec![A]));
        assert!(p.contains(B) && p.contains(C) && p.contains(D));
        // B is now the only HIR block: the next newcomer evicts it.
        assert_eq!(access(&mut p, E), (false, vec![B]));
    }

    #[test]
    fn hit_on_hir_in_stack_switches_it_to_lir() {
        let mut p = Lirs::with_hir_ratio(3, 0.34).unwrap();
        run(&mut p, &[A, B, C]);
        assert_eq!(access(&mut p, C), (true, vec![])); // C LIR, A demoted to Q
        assert_eq!(access(&mut p, D), (false, vec![A]));
        assert!(p.contains(B) && p.contains(C) && p.contains(D));
    }

    #[test]
    fn hit_on_hir_outside_stack_demotes_an_lir_block_and_reports_victims_later() {
        // 4 bytes: LIR budget 2, Q 2.
        let mut p = Lirs::with_hir_ratio(4, 0.5).unwrap();
        run(&mut p, &[A, B, C, D]); // S = D C B A, Q = D C
        assert!(access(&mut p, A).0);
        assert!(access(&mut p, B).0); // pruning drops C and D from S: S = B A
                                      // C is in Q only. libCacheSim makes LIR room first: A goes to Q,
                                      // which pushes D (Q's LRU end) out, then C re-enters S as HIR.
        assert!(access(&mut p, C).0);
        assert!(!p.contains(D));
        assert_eq!(p.len(), 3);
        // One LIR slot is free now, so E is LIR and evicts nothing; D's
        // eviction during the hit is reported here.
        assert_eq!(access(&mut p, E), (false, vec![D]));
        assert!([A, B, C, E].iter().all(|&k| p.contains(k)));
    }

    #[test]
    fn history_is_bounded_to_twice_the_capacity() {
        let mut p = Lirs::with_hir_ratio(3, 0.34).unwrap();
        run(&mut p, &[A, B]);
        run(&mut p, &(10..20).collect::<Vec<_>>()); // each newcomer pushes the last out of Q
                                                    // S holds at most 6 bytes: A, B, resident 19 and ghosts 18, 17, 16.
        assert_eq!(p.stack_bytes, 6);
        // Ghost 17 is remembered: it returns LIR, and A drops to Q ...
        assert_eq!(access(&mut p, 17), (false, vec![19]));
        assert_eq!(access(&mut p, 30), (false, vec![A]));
        // ... while 10 was forgotten and comes back merely HIR.
        assert_eq!(access(&mut p, 10), (false, vec![30]));
        assert_eq!(access(&mut p, 31), (false, vec![10]));
    }

    #[test]
    fn objects_larger_than_the_hir_part_are_not_admitted() {
        let mut p = Lirs::with_hir_ratio(100, 0.1).unwrap();
        let mut evicted = Vec::new();
        let big = Access { key: 1, size: 11, ..Default::default() };
        assert!(!p.access(&big, &mut evicted));
        assert!(!p.contains(1));
        let fits = Access { key: 2, size: 10, ..Default::default() };
        p.access(&fits, &mut evicted);
        assert!(p.contains(2));
        assert!(Lirs::with_hir_ratio(100, 1.0).is_err());
    }

    #[test]
    fn remove_and_evict_keep_accounting() {
        let mut p = Lirs::with_hir_ratio(4, 0.5).unwrap();
        run(&mut p, &[A, B, C, D]);
        assert!(p.remove(B));
        assert!(!p.remove(B));
        assert_eq!((p.len(), p.occupancy()), (3, 3));
        let now = Access::default();
        assert_eq!(p.evict(&now), Some(C)); // Q's LRU end
        assert_eq!(p.evict(&now), Some(D));
        assert_eq!(p.evict(&now), Some(A)); // the LIR block, via Q
        assert_eq!(p.evict(&now), None);
        assert_eq!((p.len(), p.occupancy()), (0, 0));
    }

    /// Removing the only LIR block leaves an HIR block alone in S; a block
    /// pushed above it later must still let the LIR set make room (found by
    /// the property test: occupancy 3 in a 2-byte cache).
    #[test]
    fn removal_of_the_bottom_lir_block_keeps_capacity() {
        let mut p = Lirs::new(2);
        for key in [4, 6] {
            access(&mut p, key);
        }
        assert!(p.remove(4));
        for key in [11, 4, 4, 3] {
            access(&mut p, key);
            assert!(p.occupancy() <= p.capacity(), "after {key}: {} bytes", p.occupancy());
        }
    }

    /// A block a hit evicted, then removed by the caller before the next
    /// insert, is not reported as a victim afterwards.
    #[test]
    fn removed_pending_victims_are_not_reported() {
        let mut p = Lirs::new(2);
        for key in [0, 2, 2] {
            access(&mut p, key);
        }
        // A hit on 0 (resident HIR, not in S) demotes 2 into a full Q: 0 itself is evicted.
        assert!(access(&mut p, 0).0);
        assert!(!p.contains(0));
        assert!(!p.remove(0));
        let (_, evicted) = access(&mut p, 0);
        assert!(!evicted.contains(&0), "{evicted:?}");
    }
}

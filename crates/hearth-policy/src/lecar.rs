//! LeCaR (Vietri et al., "Driving cache replacement with ML-based LeCaR",
//! HotStorage 2018), as libCacheSim's `LeCaR`.
//!
//! Two experts, LRU and LFU (least requests since insertion, the oldest to
//! reach that count first), each propose a victim. When they differ, one is
//! chosen at random with probability `w_lru` / `w_lfu` (draws from
//! libCacheSim's generator, Lehmer64, `seed=S`). Each evicted item is
//! remembered in its expert's ghost list (FIFO, half the capacity in bytes
//! each); a miss on a ghost means that expert was wrong: its weight is
//! multiplied by e^(-0.45 x 0.005^(t / capacity)), t the requests since the
//! eviction, and the weights are renormalised. A victim both experts chose
//! is remembered by key only (libCacheSim keeps it in its hash table, in no
//! ghost list, until it is requested again); such a miss changes no weight.
//! O(1) per request except LFU's search for the next non-empty count after
//! its lowest empties, which walks up to the highest count (as libCacheSim).

use hearth_core::{Access, Key, KeyIndex, List, Policy, Slab, NIL};

use crate::admission::Lehmer64;
use crate::SpecError;

const LEARNING_RATE: f64 = 0.45;

#[derive(Clone, Copy)]
struct Item {
    key: Key,
    size: u32,
    freq: u32,
    /// Neighbours in the list of items with the same `freq` (oldest first).
    lfu_prev: u32,
    lfu_next: u32,
}

#[derive(Clone, Copy)]
struct Ghost {
    key: Key,
    size: u32,
    /// `vtime` of the eviction.
    evicted_at: u64,
    /// 0: evicted by LRU, 1: by LFU.
    expert: u8,
}

#[derive(Clone, Copy)]
enum Slot {
    Resident(u32),
    Ghost(u32),
}

/// In the index, a ghost's slab index carries this bit; a resident's does
/// not (one `u32` per key keeps the index's slot at 16 bytes).
const GHOST_BIT: u32 = 1 << 31;

impl Slot {
    fn encode(self) -> u32 {
        match self {
            Slot::Resident(i) => {
                assert!(i & GHOST_BIT == 0, "LeCaR: over 2^31 items");
                i
            }
            Slot::Ghost(g) => {
                assert!(g & GHOST_BIT == 0, "LeCaR: over 2^31 ghosts");
                g | GHOST_BIT
            }
        }
    }
    fn decode(v: u32) -> Self {
        if v & GHOST_BIT == 0 {
            Slot::Resident(v)
        } else {
            Slot::Ghost(v & !GHOST_BIT)
        }
    }
}

pub struct LeCaR {
    capacity: u64,
    used: u64,
    /// Each key's `Slot::encode`.
    index: KeyIndex,
    items: Slab<Item>,
    /// Most recent at the head.
    lru: List,
    /// (first, last) item of each request count, indexed by count.
    by_freq: Vec<(u32, u32)>,
    min_freq: u32,
    max_freq: u32,
    ghosts: Slab<Ghost>,
    /// Newest at the head, per expert.
    ghost_lists: [List; 2],
    ghost_bytes: [u64; 2],
    /// Weights of LRU and LFU.
    weights: [f64; 2],
    discount: f64,
    rng: Lehmer64,
}

impl LeCaR {
    pub fn new(capacity: u64, seed: u64) -> Result<Self, SpecError> {
        if seed == 0 {
            return Err(SpecError::range("lecar", "seed must not be 0 (the generator would stay at 0)"));
        }
        Ok(LeCaR {
            capacity,
            used: 0,
            index: KeyIndex::with_capacity(1024),
            items: Slab::default(),
            lru: List::new(),
            by_freq: vec![(NIL, NIL); 2],
            min_freq: 1,
            max_freq: 1,
            ghosts: Slab::default(),
            ghost_lists: [List::new(); 2],
            ghost_bytes: [0; 2],
            weights: [0.5, 0.5],
            discount: 0.005f64.powf(1.0 / capacity as f64),
            rng: Lehmer64::new(seed),
        })
    }

    fn freq_push(&mut self, i: u32) {
        let f = self.items.get(i).freq as usize;
        if self.by_freq.len() <= f {
            self.by_freq.resize(f + 1, (NIL, NIL));
        }
        let (first, last) = self.by_freq[f];
        {
            let it = self.items.get_mut(i);
            it.lfu_prev = last;
            it.lfu_next = NIL;
        }
        if last == NIL {
            self.by_freq[f] = (i, i);
        } else {
            self.items.get_mut(last).lfu_next = i;
            self.by_freq[f] = (first, i);
        }
    }

    /// Unlinks `i` from its count's list; true if that list is now empty.
    fn freq_unlink(&mut self, i: u32) -> bool {
        let Item { freq, lfu_prev, lfu_next, .. } = *self.items.get(i);
        let f = freq as usize;
        if lfu_prev == NIL {
            self.by_freq[f].0 = lfu_next;
        } else {
            self.items.get_mut(lfu_prev).lfu_next = lfu_next;
        }
        if lfu_next == NIL {
            self.by_freq[f].1 = lfu_prev;
        } else {
            self.items.get_mut(lfu_next).lfu_prev = lfu_prev;
        }
        self.by_freq[f].0 == NIL
    }

    /// After the lowest count's list emptied: the next non-empty count.
    fn raise_min_freq(&mut self) {
        for f in self.min_freq + 1..=self.max_freq {
            if self.by_freq.get(f as usize).is_some_and(|&(first, _)| first != NIL) {
                self.min_freq = f;
                return;
            }
        }
    }

    /// Drops resident `i` from both experts' structures.
    fn unlink_item(&mut self, i: u32) -> Item {
        if self.freq_unlink(i) && self.items.get(i).freq == self.min_freq {
            self.raise_min_freq();
        }
        self.items.unlink(&mut self.lru, i);
        let it = self.items.release(i);
        self.used -= u64::from(it.size);
        it
    }

    fn drop_ghost(&mut self, g: u32) -> Ghost {
        let ghost = *self.ghosts.get(g);
        let e = ghost.expert as usize;
        self.ghosts.unlink(&mut self.ghost_lists[e], g);
        self.ghost_bytes[e] -= u64::from(ghost.size);
        self.ghosts.release(g)
    }

    fn slot(&self, key: Key) -> Option<Slot> {
        self.index.get(&key).copied().map(Slot::decode)
    }

    /// libCacheSim's `update_weight`: expert `wrong` evicted too early.
    fn penalise(&mut self, wrong: usize, t: u64) {
        let r = self.discount.powf(t as f64);
        let (w, other) = (self.weights[wrong], self.weights[1 - wrong]);
        let w = w * (-LEARNING_RATE * r).exp() + 1e-10;
        let s = w + other + 2e-10;
        self.weights[wrong] = w / s;
        self.weights[1 - wrong] = (other + 1e-10) / s;
    }
}

impl Policy for LeCaR {
    fn name(&self) -> String {
        "LeCaR".into()
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn occupancy(&self) -> u64 {
        self.used
    }
    fn len(&self) -> usize {
        self.lru.len()
    }
    fn contains(&self, key: Key) -> bool {
        matches!(self.slot(key), Some(Slot::Resident(_)))
    }
    fn warm(&self, key: Key) {
        match self.slot(key) {
            Some(Slot::Resident(i)) => self.items.prefetch(i),
            Some(Slot::Ghost(g)) => self.ghosts.prefetch(g),
            None => {}
        }
    }
    warm_index!();
    fn lookup(&mut self, a: &Access) -> bool {
        match self.slot(a.key) {
            None => false,
            Some(Slot::Ghost(g)) => {
                self.index.remove(&a.key);
                let ghost = self.drop_ghost(g);
                self.penalise(ghost.expert as usize, a.vtime.saturating_sub(ghost.evicted_at));
                false
            }
            Some(Slot::Resident(i)) => {
                self.items.move_to_front(&mut self.lru, i);
                let emptied = self.freq_unlink(i);
                let old = self.items.get(i).freq;
                let freq = old.saturating_add(1);
                self.items.get_mut(i).freq = freq;
                self.max_freq = self.max_freq.max(freq);
                self.freq_push(i);
                if emptied && old == self.min_freq {
                    self.min_freq = freq;
                }
                true
            }
        }
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        let i = self.items.alloc(Item { key: a.key, size: a.size, freq: 1, lfu_prev: NIL, lfu_next: NIL });
        self.items.push_front(&mut self.lru, i);
        self.freq_push(i);
        self.min_freq = 1;
        self.used += u64::from(a.size);
        self.index.insert(a.key, Slot::Resident(i).encode());
    }
    fn evict(&mut self, now: &Access) -> Option<Key> {
        let lru = self.lru.tail()?;
        let lfu = self.by_freq.get(self.min_freq as usize).map_or(NIL, |&(first, _)| first);
        let (victim, expert) = if lfu == NIL || lru == lfu {
            (lru, None)
        } else {
            let r = (self.rng.next_u64() % 100) as f64 / 100.0;
            if r < self.weights[0] {
                (lru, Some(0u8))
            } else {
                (lfu, Some(1u8))
            }
        };
        let it = self.unlink_item(victim);
        let Some(expert) = expert else {
            self.index.remove(&it.key);
            return Some(it.key);
        };
        let e = expert as usize;
        let g = self.ghosts.alloc(Ghost { key: it.key, size: it.size, evicted_at: now.vtime, expert });
        self.ghosts.push_front(&mut self.ghost_lists[e], g);
        self.ghost_bytes[e] += u64::from(it.size);
        self.index.insert(it.key, Slot::Ghost(g).encode());
        while self.ghost_bytes[e] > self.capacity / 2 {
            let Some(oldest) = self.ghost_lists[e].tail() else { break };
            let ghost = self.drop_ghost(oldest);
            self.index.remove(&ghost.key);
        }
        Some(it.key)
    }
    fn remove(&mut self, key: Key) -> bool {
        match self.index.remove(&key).map(Slot::decode) {
            Some(Slot::Resident(i)) => {
                self.unlink_item(i);
                true
            }
            Some(Slot::Ghost(g)) => {
                self.drop_ghost(g);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key, vtime: u64) -> Access {
        Access { key, size: 1, vtime, ..Access::default() }
    }

    #[test]
    fn agreeing_experts_evict_without_a_draw_and_ghost_hits_move_weight() {
        let mut c = LeCaR::new(2, 1).unwrap();
        let mut ev = Vec::new();
        let mut t = 0;
        let mut req = |c: &mut LeCaR, k: Key, ev: &mut Vec<Key>| {
            ev.clear();
            t += 1;
            c.access(&acc(k, t), ev)
        };
        req(&mut c, 1, &mut ev);
        req(&mut c, 2, &mut ev);
        req(&mut c, 3, &mut ev);
        // 1 is both least recent and (first) least frequent: no draw, no ghost.
        assert_eq!(ev, vec![1]);
        assert!(!c.index.contains_key(&1));
        req(&mut c, 2, &mut ev);
        req(&mut c, 2, &mut ev);
        req(&mut c, 3, &mut ev);
        // 2 (count 3) is least recent, 3 (count 2) least frequent: a draw decides.
        req(&mut c, 4, &mut ev);
        assert_eq!(ev.len(), 1);
        let gone = ev[0];
        assert!(gone == 2 || gone == 3);
        assert!(matches!(c.slot(gone), Some(Slot::Ghost(_))));
        assert_eq!(c.weights, [0.5, 0.5]);
        req(&mut c, gone, &mut ev);
        assert!(c.weights[if gone == 2 { 0 } else { 1 }] < 0.5, "the expert that evicted it loses weight");
        assert!((c.weights[0] + c.weights[1] - 1.0).abs() < 1e-9);
        assert!(LeCaR::new(2, 0).is_err());
    }
}

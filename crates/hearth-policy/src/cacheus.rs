//! Cacheus (Rodriguez et al., "Learning cache replacement with CACHEUS",
//! FAST'21): LeCaR's regret-weighted choice between two experts, with
//! experts that resist scans and churn and a learning rate that tunes
//! itself.
//! - SR-LRU: residents are split into SR (new and demoted items) and R
//!   (items hit since they entered); a hit in SR moves the item to R's MRU
//!   end, and R's LRU items are demoted to SR while R is over its budget
//!   (capacity - SR's target). Its victim is SR's LRU item (R's when SR is
//!   empty). Victims are remembered in a history H of up to the capacity in
//!   bytes, with their request counts; a miss found in H enters R. SR's
//!   target adapts: it grows by max(1, demoted / new) item sizes when a new
//!   item (evicted from SR unhit) returns from H, and shrinks by
//!   max(1, new / demoted) when a demoted item is hit in SR.
//! - CR-LFU: fewest requests, the most recent arrival at that count among
//!   equals (so a churning working set keeps its older members); a count
//!   resumes from H.
//! - Each eviction draws r in [0, 1) (libCacheSim's generator, `seed=S`)
//!   and takes SR-LRU's victim if r < w_lru, else CR-LFU's. When the two
//!   differ, the victim is remembered in the chosen expert's ghost list
//!   (half the capacity in bytes each); a miss on it multiplies that
//!   expert's weight by e^-lr and renormalises.
//! - The learning rate starts at a random value in [0.001, 1) and is
//!   revised every N requests, N the number of resident items when the
//!   period began (the paper's cache size in entries): it moves in the
//!   direction that improved the period's hit rate, by lr x |its last
//!   change|, and after 10 periods without improvement restarts at random.
//!
//! libCacheSim 0.3.5's `Cacheus` measures that period in bytes (so its
//! learning rate never changes on real traces), resizes SR by single bytes
//! and evicts SR's overflow beyond the chosen victims, so the two differ
//! (see the libcachesim test). O(log n) per request (CR-LFU's heap).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use hearth_core::{key_map, Access, Key, KeyMap, List, Policy, Slab};

use crate::admission::Lehmer64;
use crate::SpecError;

const LRU: usize = 0;
const LFU: usize = 1;
/// Stamp of a freed slot: matches no heap entry (stamps count up from 0).
const FREED: u64 = u64::MAX;
/// Periods without improvement before the learning rate restarts.
const UNLEARN_LIMIT: u32 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Sr,
    R,
    History,
}

#[derive(Clone, Copy)]
struct Entry {
    key: Key,
    size: u32,
    /// Requests while resident (resumed from H).
    freq: u32,
    /// Identifies the entry's current CR-LFU heap entry.
    stamp: u64,
    place: Place,
    /// Entered SR on a cold miss and not hit since.
    new: bool,
    /// Demoted from R to SR and not hit since.
    demoted: bool,
}

#[derive(Clone, Copy)]
struct Ghost {
    key: Key,
    size: u32,
    expert: usize,
}

pub struct Cacheus {
    capacity: u64,
    used: u64,
    resident: usize,
    /// Residents and H, by key.
    index: KeyMap<u32>,
    slab: Slab<Entry>,
    /// MRU at the head: SR, R and H.
    lists: [List; 3],
    bytes: [u64; 3],
    sr_target: u64,
    /// New items in H and demoted items in SR.
    new_in_history: u64,
    demoted_in_sr: u64,
    /// CR-LFU: (count, newest first, slot), smallest first.
    heap: BinaryHeap<Reverse<(u32, u64, u32)>>,
    next_stamp: u64,
    ghost_index: KeyMap<u32>,
    ghosts: Slab<Ghost>,
    ghost_lists: [List; 2],
    ghost_bytes: [u64; 2],
    weights: [f64; 2],
    learning_rate: f64,
    previous_learning_rate: f64,
    previous_hit_rate: f64,
    unlearn: u32,
    period: u64,
    period_requests: u64,
    period_hits: u64,
    rng: Lehmer64,
}

fn list_of(place: Place) -> usize {
    place as usize
}

impl Cacheus {
    pub fn new(capacity: u64, seed: u64) -> Result<Self, SpecError> {
        if seed == 0 {
            return Err(SpecError::range("cacheus", "seed must not be 0 (the generator would stay at 0)"));
        }
        let mut rng = Lehmer64::new(seed);
        let learning_rate = random_learning_rate(&mut rng);
        Ok(Cacheus {
            capacity,
            used: 0,
            resident: 0,
            index: key_map(1024),
            slab: Slab::default(),
            lists: [List::new(); 3],
            bytes: [0; 3],
            sr_target: capacity / 2,
            new_in_history: 0,
            demoted_in_sr: 0,
            heap: BinaryHeap::new(),
            next_stamp: 0,
            ghost_index: key_map(1024),
            ghosts: Slab::default(),
            ghost_lists: [List::new(); 2],
            ghost_bytes: [0; 2],
            weights: [0.5, 0.5],
            learning_rate,
            previous_learning_rate: 0.0,
            previous_hit_rate: 0.0,
            unlearn: 0,
            period: 1,
            period_requests: 0,
            period_hits: 0,
            rng,
        })
    }

    fn push(&mut self, i: u32, place: Place) {
        let e = self.slab.get_mut(i);
        e.place = place;
        self.bytes[list_of(place)] += u64::from(e.size);
        self.slab.push_front(&mut self.lists[list_of(place)], i);
    }

    fn unlink(&mut self, i: u32) {
        let e = *self.slab.get(i);
        self.slab.unlink(&mut self.lists[list_of(e.place)], i);
        self.bytes[list_of(e.place)] -= u64::from(e.size);
    }

    /// Gives resident slot `i` a fresh CR-LFU heap entry.
    fn enqueue(&mut self, i: u32) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let e = self.slab.get_mut(i);
        e.stamp = stamp;
        self.heap.push(Reverse((e.freq, u64::MAX - stamp, i)));
        if self.heap.len() > 2 * self.resident + 64 {
            let slab = &self.slab;
            self.heap.retain(|Reverse((_, s, i))| Self::current(slab, *i, u64::MAX - s));
        }
    }

    fn current(slab: &Slab<Entry>, i: u32, stamp: u64) -> bool {
        let e = slab.get(i);
        e.stamp == stamp && e.place != Place::History
    }

    /// CR-LFU's victim, dropping stale heap entries.
    fn lfu_victim(&mut self) -> Option<u32> {
        while let Some(&Reverse((_, s, i))) = self.heap.peek() {
            if Self::current(&self.slab, i, u64::MAX - s) {
                return Some(i);
            }
            self.heap.pop();
        }
        None
    }

    /// Demotes R's LRU items (never `keep`) to SR while R is over its budget.
    fn balance_r(&mut self, keep: u32) {
        let budget = self.capacity - self.sr_target.min(self.capacity);
        while self.bytes[list_of(Place::R)] > budget {
            let Some(i) = self.lists[list_of(Place::R)].tail() else { break };
            if i == keep {
                break;
            }
            self.unlink(i);
            self.push(i, Place::Sr);
            let e = self.slab.get_mut(i);
            if !e.demoted {
                e.demoted = true;
                self.demoted_in_sr += 1;
            }
        }
    }

    /// Moves resident slot `i` to R's MRU end.
    fn move_to_r(&mut self, i: u32) {
        self.unlink(i);
        self.push(i, Place::R);
        self.balance_r(i);
    }

    fn ratio(numerator: u64, denominator: u64) -> u64 {
        (numerator / denominator.max(1)).max(1)
    }

    fn drop_history_tail(&mut self) {
        let Some(i) = self.lists[list_of(Place::History)].tail() else { return };
        self.unlink(i);
        let e = self.slab.release(i);
        if e.new {
            self.new_in_history -= 1;
        }
        self.index.remove(&e.key);
    }

    fn remember_ghost(&mut self, key: Key, size: u32, expert: usize) {
        let g = self.ghosts.alloc(Ghost { key, size, expert });
        self.ghosts.push_front(&mut self.ghost_lists[expert], g);
        self.ghost_bytes[expert] += u64::from(size);
        self.ghost_index.insert(key, g);
        while self.ghost_bytes[expert] > self.capacity / 2 {
            let Some(oldest) = self.ghosts.pop_back(&mut self.ghost_lists[expert]) else { break };
            let ghost = self.ghosts.release(oldest);
            self.ghost_bytes[expert] -= u64::from(ghost.size);
            self.ghost_index.remove(&ghost.key);
        }
    }

    fn forget_ghost(&mut self, key: Key) -> Option<usize> {
        let g = self.ghost_index.remove(&key)?;
        let ghost = *self.ghosts.get(g);
        self.ghosts.unlink(&mut self.ghost_lists[ghost.expert], g);
        self.ghosts.release(g);
        self.ghost_bytes[ghost.expert] -= u64::from(ghost.size);
        Some(ghost.expert)
    }

    /// Ends a learning-rate period: moves the rate the way that raised the
    /// hit rate, or restarts it after [`UNLEARN_LIMIT`] periods without gain.
    fn update_learning_rate(&mut self) {
        let hit_rate = self.period_hits as f64 / self.period_requests as f64;
        let hit_rate_change = hit_rate - self.previous_hit_rate;
        let rate_change = self.learning_rate - self.previous_learning_rate;
        self.previous_learning_rate = self.learning_rate;
        self.previous_hit_rate = hit_rate;
        if rate_change != 0.0 {
            let sign = if hit_rate_change / rate_change > 0.0 { 1.0 } else { -1.0 };
            let step = (self.learning_rate * rate_change).abs();
            self.learning_rate = (self.learning_rate + sign * step).clamp(0.001, 1.0);
            self.unlearn = 0;
        } else if hit_rate == 0.0 || hit_rate_change <= 0.0 {
            self.unlearn += 1;
            if self.unlearn >= UNLEARN_LIMIT {
                self.unlearn = 0;
                self.learning_rate = random_learning_rate(&mut self.rng);
            }
        }
        self.period = (self.resident as u64).max(1);
        self.period_requests = 0;
        self.period_hits = 0;
    }
}

/// libCacheSim's draw of a learning rate: 0.001 + a multiple of 0.001 below 1.
fn random_learning_rate(rng: &mut Lehmer64) -> f64 {
    0.001 + (rng.next_u64() % 1000) as f64 / 1000.0
}

impl Policy for Cacheus {
    fn name(&self) -> String {
        "Cacheus".into()
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
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).place != Place::History)
    }
    fn lookup(&mut self, a: &Access) -> bool {
        self.period_requests += 1;
        let hit = match self.index.get(&a.key).copied() {
            Some(i) if self.slab.get(i).place != Place::History => {
                self.period_hits += 1;
                self.slab.get_mut(i).freq = self.slab.get(i).freq.saturating_add(1);
                self.enqueue(i);
                let e = *self.slab.get(i);
                if e.place == Place::R {
                    self.slab.move_to_front(&mut self.lists[list_of(Place::R)], i);
                } else {
                    self.slab.get_mut(i).new = false;
                    if e.demoted {
                        // A demoted item was still wanted: R was too small.
                        let delta = Self::ratio(self.new_in_history, self.demoted_in_sr) * u64::from(e.size);
                        self.sr_target = self.sr_target.saturating_sub(delta);
                        self.slab.get_mut(i).demoted = false;
                        self.demoted_in_sr -= 1;
                    }
                    self.move_to_r(i);
                }
                true
            }
            _ => {
                if let Some(expert) = self.forget_ghost(a.key) {
                    // The expert that evicted it was wrong.
                    self.weights[expert] *= (-self.learning_rate).exp();
                    let total = self.weights[LRU] + self.weights[LFU];
                    self.weights[LRU] /= total;
                    self.weights[LFU] = 1.0 - self.weights[LRU];
                }
                false
            }
        };
        if self.period_requests >= self.period {
            self.update_learning_rate();
        }
        hit
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        match self.index.get(&a.key).copied() {
            Some(i) => {
                // Back from H: its count resumes, and it enters R.
                self.unlink(i);
                let e = *self.slab.get(i);
                if e.new {
                    // A new item evicted unhit came back: SR was too small.
                    self.new_in_history -= 1;
                    let delta = Self::ratio(self.demoted_in_sr, self.new_in_history) * u64::from(a.size);
                    self.sr_target = (self.sr_target + delta).min(self.capacity);
                }
                let freq = e.freq.saturating_add(1);
                *self.slab.get_mut(i) = Entry { size: a.size, freq, new: false, demoted: false, ..e };
                self.resident += 1;
                self.used += u64::from(a.size);
                self.enqueue(i);
                self.push(i, Place::R);
                self.balance_r(i);
            }
            None => {
                let entry =
                    Entry { key: a.key, size: a.size, freq: 1, stamp: 0, place: Place::Sr, new: true, demoted: false };
                let i = self.slab.alloc(entry);
                self.index.insert(a.key, i);
                self.resident += 1;
                self.used += u64::from(a.size);
                self.enqueue(i);
                self.push(i, Place::Sr);
            }
        }
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        let lru = self.lists[list_of(Place::Sr)].tail().or(self.lists[list_of(Place::R)].tail())?;
        let lfu = self.lfu_victim().unwrap_or(lru);
        let r = (self.rng.next_u64() % 100) as f64 / 100.0;
        let expert = if r < self.weights[LRU] { LRU } else { LFU };
        let victim = if expert == LRU { lru } else { lfu };
        self.unlink(victim);
        let e = *self.slab.get(victim);
        if e.demoted {
            self.demoted_in_sr -= 1;
            self.slab.get_mut(victim).demoted = false;
        }
        self.resident -= 1;
        self.used -= u64::from(e.size);
        // Into H with its count, for both experts to learn from.
        self.push(victim, Place::History);
        if e.new {
            self.new_in_history += 1;
        }
        while self.bytes[list_of(Place::History)] > self.capacity {
            self.drop_history_tail();
        }
        if lru != lfu {
            self.remember_ghost(e.key, e.size, expert);
        }
        Some(e.key)
    }
    fn remove(&mut self, key: Key) -> bool {
        self.forget_ghost(key);
        let Some(&i) = self.index.get(&key) else { return false };
        let e = *self.slab.get(i);
        self.unlink(i);
        // No heap entry may match a freed slot.
        self.slab.get_mut(i).stamp = FREED;
        self.slab.release(i);
        self.index.remove(&key);
        match e.place {
            Place::History => {
                if e.new {
                    self.new_in_history -= 1;
                }
                false
            }
            _ => {
                if e.demoted {
                    self.demoted_in_sr -= 1;
                }
                self.resident -= 1;
                self.used -= u64::from(e.size);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key) -> Access {
        Access { key, size: 1, ..Access::default() }
    }

    #[test]
    fn hits_move_to_r_and_victims_come_back_from_history_into_r() {
        let mut c = Cacheus::new(4, 1).unwrap();
        let mut ev = Vec::new();
        for k in 0..4 {
            c.access(&acc(k), &mut ev);
        }
        assert!(c.access(&acc(1), &mut ev));
        assert_eq!(c.slab.get(c.index[&1]).place, Place::R);
        c.access(&acc(9), &mut ev);
        let victim = ev[0];
        assert_ne!(victim, 1, "both experts prefer an unhit item over 1");
        assert_eq!(c.slab.get(c.index[&victim]).place, Place::History);
        ev.clear();
        c.access(&acc(victim), &mut ev);
        let back = c.slab.get(c.index[&victim]);
        assert_eq!((back.place, back.freq), (Place::R, 2), "its count resumes from H");
        assert!(c.occupancy() <= 4 && c.len() == 4);
    }

    #[test]
    fn a_ghost_hit_lowers_its_experts_weight() {
        let mut c = Cacheus::new(2, 1).unwrap();
        let mut ev = Vec::new();
        c.remember_ghost(7, 1, LFU);
        assert!(!c.access(&acc(7), &mut ev));
        assert!(c.weights[LRU] > c.weights[LFU]);
        assert!((c.weights[LRU] + c.weights[LFU] - 1.0).abs() < 1e-12);
        assert!(Cacheus::new(2, 0).is_err());
    }
}

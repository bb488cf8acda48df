//! Placement: *when* a block enters the storage cache, independent of the
//! replacement policy that later chooses what leaves.
//!
//! A storage cache sits under clients' buffer caches and sees only their
//! misses. Placing blocks when they are read (access-based, AC) fills the
//! cache with copies of what the client already holds. Eviction-based
//! placement (EV, Chen/Zhou/Li USENIX'03) places a block when the client
//! evicts it, which the server infers from the client content tracking
//! table ([`Cct`]); the block is then reloaded from the backend at low
//! priority, unless it has been accessed too rarely to be worth it. DEMOTE
//! (Wong/Wilkes USENIX'02) has the client send its evicted clean blocks.
//!
//! [`StorageCache`] is sans-I/O: it answers hit or miss and tells the driver
//! which reloads to issue; the simulator and the server both drive it.

mod cct;

pub use cct::{Cct, Observed, UntrackableBuffer, MAX_SLOTS};

use std::fmt;
use std::str::FromStr;

use hearth_core::{Access, Key, KeyMap, Op, Policy};
use serde::Serialize;

/// Reload threshold of plain `ev`: reload every evicted block, the pure
/// eviction-based placement. The EV paper found 32 best on its OLTP traces;
/// how many storage-level accesses a block gathers depends on trace length,
/// so the threshold is an option (`ev:32`) rather than a baked-in guess.
pub const DEFAULT_RELOAD_THRESHOLD: u32 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Placement {
    /// Place a block when a client reads or writes it.
    Access,
    /// Place a block when its client evicts it, reloading it from the backend
    /// unless the storage server saw fewer than `reload_threshold` accesses to it.
    Eviction { reload_threshold: u32 },
    /// Clients send evicted blocks; a block a client reads moves to the client.
    Demote,
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Access => write!(f, "AC"),
            Placement::Eviction { reload_threshold } => write!(f, "EV(t={reload_threshold})"),
            Placement::Demote => write!(f, "DEMOTE"),
        }
    }
}

/// A placement spec that names no placement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("bad reload threshold {threshold:?} in placement {spec:?}")]
    Threshold { threshold: String, spec: String },
    #[error("unknown placement {spec:?} (ac, ev, ev:THRESHOLD, demote)")]
    Unknown { spec: String },
}

impl FromStr for Placement {
    type Err = PlacementError;
    /// `ac`, `ev`, `ev:THRESHOLD` or `demote`.
    fn from_str(s: &str) -> Result<Self, PlacementError> {
        let (name, arg) = s.split_once(':').unwrap_or((s, ""));
        match (name.trim().to_ascii_lowercase().as_str(), arg.trim()) {
            ("ac" | "access", "") => Ok(Placement::Access),
            ("demote", "") => Ok(Placement::Demote),
            ("ev" | "eviction", "") => Ok(Placement::Eviction { reload_threshold: DEFAULT_RELOAD_THRESHOLD }),
            ("ev" | "eviction", t) => t
                .parse()
                .map(|reload_threshold| Placement::Eviction { reload_threshold })
                .map_err(|_| PlacementError::Threshold { threshold: t.to_string(), spec: s.to_string() }),
            _ => Err(PlacementError::Unknown { spec: s.to_string() }),
        }
    }
}

/// What the storage cache did, counted by kind of traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub reads: u64,
    pub read_hits: u64,
    pub writes: u64,
    /// Client evictions the cache learned of.
    pub client_evictions: u64,
    /// Blocks placed into the cache (by any route).
    pub placements: u64,
    /// Low-priority backend reads issued to place evicted blocks (EV).
    pub reloads: u64,
    /// Evicted blocks not reloaded because they were accessed too rarely (EV).
    pub reloads_skipped: u64,
    /// Blocks clients sent to the cache on eviction (DEMOTE network traffic).
    pub demotes: u64,
}

impl Stats {
    pub fn read_hit_ratio(&self) -> f64 {
        if self.reads == 0 {
            0.0
        } else {
            self.read_hits as f64 / self.reads as f64
        }
    }
}

/// The answer to a demand request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demand {
    Hit,
    /// Not resident; `place` asks the driver to place it once fetched.
    Miss {
        place: bool,
    },
}

/// What the driver must do after a client eviction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionAction {
    /// Nothing: the block was already cached, or is not worth placing.
    None,
    /// Read the block from the backend at low priority; it is already placed.
    Reload(Key),
    /// The client's copy of the block is placed (DEMOTE): store the data it sent.
    StoreDemoted(Key),
}

/// A replacement policy plus a placement policy: the storage cache's decisions.
pub struct StorageCache {
    policy: Box<dyn Policy>,
    placement: Placement,
    /// Storage-level accesses per block, for EV's reload threshold.
    accesses: KeyMap<u32>,
    stats: Stats,
    /// Victims of the last insertion, for drivers that hold block data.
    evicted: Vec<Key>,
}

impl StorageCache {
    pub fn new(policy: Box<dyn Policy>, placement: Placement) -> Self {
        StorageCache { policy, placement, accesses: KeyMap::default(), stats: Stats::default(), evicted: Vec::new() }
    }

    pub fn placement(&self) -> Placement {
        self.placement
    }
    pub fn policy(&self) -> &dyn Policy {
        self.policy.as_ref()
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Blocks the last call pushed out of the cache (their data can be dropped).
    pub fn evicted(&self) -> &[Key] {
        &self.evicted
    }

    /// A client's demand read or write of `a.key`, placing the block at
    /// once when the placement says so (the simulator's one-step form of
    /// [`demand`](Self::demand) + [`place`](Self::place)). Returns whether a
    /// read hit.
    pub fn access(&mut self, a: &Access) -> bool {
        match self.demand(a) {
            Demand::Hit => true,
            Demand::Miss { place } => {
                if place {
                    self.place(a);
                }
                false
            }
        }
    }

    /// Looks up a client's demand read or write. On a miss, `place` says
    /// whether the driver should [`place`](Self::place) the block once it
    /// has the data. A hit on a write means the block is resident.
    pub fn demand(&mut self, a: &Access) -> Demand {
        self.evicted.clear();
        let is_read = a.op != Op::Write;
        if is_read {
            self.stats.reads += 1;
        } else {
            self.stats.writes += 1;
        }
        let hit = match self.placement {
            Placement::Access => self.policy.lookup(a),
            Placement::Eviction { .. } => {
                let c = self.accesses.entry(a.key).or_insert(0);
                *c = c.saturating_add(1);
                // Placement and recency are set at eviction time; a copy the
                // client now holds is not refreshed here.
                self.policy.contains(a.key)
            }
            // Exclusive: a block a client reads moves up to the client.
            Placement::Demote => is_read && self.policy.remove(a.key),
        };
        if self.placement != Placement::Access && self.policy.contains(a.key) {
            self.policy.observe_next_access(a);
        }
        if is_read && hit {
            self.stats.read_hits += 1;
        }
        if hit {
            return Demand::Hit;
        }
        let fits = u64::from(a.size) <= self.policy.capacity();
        // Only access-based placement places on a miss (lookup said not resident).
        Demand::Miss { place: fits && self.placement == Placement::Access }
    }

    /// Places a block after a [`Demand::Miss`] that asked for it; victims
    /// are in [`evicted`](Self::evicted).
    pub fn place(&mut self, a: &Access) {
        self.evicted.clear();
        self.policy.insert(a, &mut self.evicted);
        if self.policy.contains(a.key) {
            self.stats.placements += 1;
        }
    }

    /// Evicts until `room` bytes beside what the policy holds fit in its
    /// capacity: room a prefetch partition borrows from the cache (as the
    /// simulator's prefetch cache does). The victims are [`evicted`](Self::evicted).
    pub fn make_room(&mut self, room: u64, now: &Access) {
        self.evicted.clear();
        while self.policy.occupancy() + room > self.policy.capacity() {
            match self.policy.evict(now) {
                Some(victim) => self.evicted.push(victim),
                None => break,
            }
        }
    }

    /// Drops `key` (invalidation after a failed or racing write).
    pub fn remove(&mut self, key: Key) -> bool {
        self.policy.remove(key)
    }

    /// The client evicted `key`. `now` gives the time and size of the block.
    pub fn client_evicted(&mut self, key: Key, now: &Access) -> EvictionAction {
        self.evicted.clear();
        self.stats.client_evictions += 1;
        let a = Access { key, ..*now };
        match self.placement {
            Placement::Access => EvictionAction::None,
            Placement::Eviction { reload_threshold } => {
                if self.policy.lookup(&a) {
                    return EvictionAction::None;
                }
                let seen = self.accesses.get(&key).copied().unwrap_or(0);
                if seen < reload_threshold || u64::from(a.size) > self.policy.capacity() {
                    self.stats.reloads_skipped += 1;
                    return EvictionAction::None;
                }
                self.policy.insert(&a, &mut self.evicted);
                self.stats.placements += 1;
                self.stats.reloads += 1;
                EvictionAction::Reload(key)
            }
            Placement::Demote => {
                self.stats.demotes += 1;
                if self.policy.lookup(&a) || u64::from(a.size) > self.policy.capacity() {
                    return EvictionAction::None;
                }
                self.policy.insert(&a, &mut self.evicted);
                self.stats.placements += 1;
                EvictionAction::StoreDemoted(key)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(key: Key, op: Op) -> Access {
        Access { key, size: 1, vtime: 0, next_access: hearth_core::NEVER, op, ctx: 0 }
    }

    fn cache(placement: Placement, cap: u64) -> StorageCache {
        StorageCache::new(hearth_policy::build("lru", cap).unwrap(), placement)
    }

    #[test]
    fn access_placement_places_on_read() {
        let mut c = cache(Placement::Access, 2);
        assert!(!c.access(&acc(1, Op::Read)));
        assert!(c.access(&acc(1, Op::Read)));
        assert_eq!(c.client_evicted(1, &acc(1, Op::Read)), EvictionAction::None);
        assert_eq!((c.stats().reads, c.stats().read_hits, c.stats().placements), (2, 1, 1));
    }

    #[test]
    fn eviction_placement_waits_for_the_client_and_honours_the_threshold() {
        let mut c = cache(Placement::Eviction { reload_threshold: 2 }, 2);
        assert!(!c.access(&acc(1, Op::Read)));
        assert!(!c.access(&acc(1, Op::Read)), "reads do not place under EV");
        assert!(!c.access(&acc(2, Op::Read)));
        // Block 1 was seen twice: reloaded. Block 2 once: skipped.
        assert_eq!(c.client_evicted(1, &acc(0, Op::Read)), EvictionAction::Reload(1));
        assert_eq!(c.client_evicted(2, &acc(0, Op::Read)), EvictionAction::None);
        assert!(c.access(&acc(1, Op::Read)));
        assert!(!c.access(&acc(2, Op::Read)));
        // An eviction of a block already cached only refreshes it: no reload.
        assert_eq!(c.client_evicted(1, &acc(0, Op::Read)), EvictionAction::None);
        let s = c.stats();
        assert_eq!((s.reloads, s.reloads_skipped, s.placements, s.client_evictions), (1, 1, 1, 3));
    }

    #[test]
    fn demote_is_exclusive() {
        let mut c = cache(Placement::Demote, 2);
        assert!(!c.access(&acc(5, Op::Read)));
        assert_eq!(c.client_evicted(5, &acc(0, Op::Read)), EvictionAction::StoreDemoted(5));
        assert!(c.access(&acc(5, Op::Read)));
        // The hit moved the block to the client.
        assert!(!c.policy().contains(5));
        assert_eq!(c.stats().demotes, 1);
    }

    #[test]
    fn placement_parses() {
        assert_eq!("ac".parse(), Ok(Placement::Access));
        assert_eq!("ev:8".parse(), Ok(Placement::Eviction { reload_threshold: 8 }));
        assert_eq!("EV".parse(), Ok(Placement::Eviction { reload_threshold: DEFAULT_RELOAD_THRESHOLD }));
        assert!("ev:x".parse::<Placement>().is_err());
        assert!("lru".parse::<Placement>().is_err());
    }
}

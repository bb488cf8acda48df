//! Two-level simulation: client buffer caches above one storage cache.
//!
//! The trace is taken as the clients' own requests. Each client (the
//! access's `ctx`, or one client for all) runs a buffer cache of fixed-size
//! slots; its misses go to the storage cache tagged with the buffer address
//! the data lands in, exactly what a storage server sees on the wire. Under
//! EV the storage cache learns evictions only through its client content
//! tracking table; under DEMOTE the client sends each evicted block.

use hearth_core::{key_map, Access, Key, KeyMap, Policy};
use hearth_placement::{Cct, EvictionAction, Observed, Placement, Stats, StorageCache};
use serde::Serialize;

use crate::device::{ClassStats, Device, DeviceQueue};
use crate::SimResult;

/// One client's buffer cache: a replacement policy plus the slot each
/// cached block occupies, so requests can carry buffer addresses.
struct ClientCache {
    policy: Box<dyn Policy>,
    slot_of: KeyMap<u64>,
    free_slots: Vec<u64>,
    next_slot: u64,
    evicted: Vec<Key>,
}

impl ClientCache {
    fn new(policy: Box<dyn Policy>) -> Self {
        ClientCache { policy, slot_of: key_map(1024), free_slots: Vec::new(), next_slot: 0, evicted: Vec::new() }
    }

    /// Runs one request; on a miss returns the slot the block was read into.
    fn access(&mut self, a: &Access) -> Option<u64> {
        self.evicted.clear();
        if self.policy.access(a, &mut self.evicted) {
            return None;
        }
        for v in &self.evicted {
            let slot = self.slot_of.remove(v).expect("every cached block has a slot");
            self.free_slots.push(slot);
        }
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.next_slot += 1;
            self.next_slot - 1
        });
        if self.policy.contains(a.key) {
            self.slot_of.insert(a.key, slot);
        } else {
            // Too large to cache: the buffer is used and freed at once.
            self.free_slots.push(slot);
        }
        Some(slot)
    }
}

#[derive(Clone, Debug)]
pub struct HierarchyConfig {
    /// Policy spec and capacity of each client's buffer cache.
    pub client_policy: String,
    pub client_bytes: u64,
    /// One client per distinct `Access::ctx` (otherwise one client in all).
    pub per_client: bool,
    pub storage_policy: String,
    pub storage_bytes: u64,
    pub placement: Placement,
    /// Client buffer (page) size, the unit of buffer addresses.
    pub slot_bytes: u64,
    /// Time storage misses and reloads on one backing device, with storage
    /// requests arriving every `interarrival_ns`.
    pub timing: Option<Timing>,
}

#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub device: Device,
    pub interarrival_ns: u64,
}

/// Backing-device times of a timed run.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceReport {
    pub demand: ClassStats,
    pub reloads: ClassStats,
    pub max_demand_delay_by_reloads_ns: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct HierarchyResult {
    pub placement: String,
    pub client_requests: u64,
    pub client_hits: u64,
    /// The storage cache's view; `result.requests` counts storage reads and writes.
    pub storage: Stats,
    pub result: SimResult,
    /// Storage-level requests between two accesses of a block (AC's idle distance), log2 buckets.
    pub reuse_distance: Vec<u64>,
    /// Storage-level requests from a block's client eviction to its next access (EV's idle distance).
    pub eviction_distance: Vec<u64>,
    pub device: Option<DeviceReport>,
}

fn add_log2(hist: &mut Vec<u64>, v: u64) {
    let b = (64 - v.leading_zeros()) as usize;
    if hist.len() <= b {
        hist.resize(b + 1, 0);
    }
    hist[b] += 1;
}

/// Runs the trace through client caches and the storage cache.
pub fn run_hierarchy(accesses: &[Access], cfg: &HierarchyConfig) -> Result<HierarchyResult, String> {
    let storage_policy = hearth_policy::build(&cfg.storage_policy, cfg.storage_bytes)?;
    hearth_policy::build(&cfg.client_policy, cfg.client_bytes)?;
    let mut storage = StorageCache::new(storage_policy, cfg.placement);
    let mut clients: KeyMap<(ClientCache, Cct)> = key_map(16);
    let (mut client_hits, mut storage_requests, mut bytes, mut hit_bytes) = (0u64, 0u64, 0u64, 0u64);
    // Idle distances, measured in storage-level requests.
    let mut last_access = key_map::<u64>(accesses.len() / 8);
    let mut evicted_at = key_map::<u64>(1024);
    let (mut reuse_distance, mut eviction_distance) = (Vec::new(), Vec::new());
    let mut device = cfg.timing.map(|t| DeviceQueue::new(t.device));

    for a in accesses {
        let client_id = if cfg.per_client { u64::from(a.ctx) } else { 0 };
        let (client, cct) = match clients.get_mut(&client_id) {
            Some(c) => c,
            None => {
                let policy = hearth_policy::build(&cfg.client_policy, cfg.client_bytes)?;
                clients.entry(client_id).or_insert((ClientCache::new(policy), Cct::new(cfg.slot_bytes)))
            }
        };
        let Some(slot) = client.access(a) else {
            client_hits += 1;
            continue;
        };
        let now = storage_requests;
        storage_requests += 1;
        let t_ns = cfg.timing.map_or(0, |t| now * t.interarrival_ns);
        // The storage server's view: a request for `a.key` into buffer `slot`.
        match cfg.placement {
            Placement::Demote => {
                // The client ships its victims; no table needed.
                for &v in &client.evicted {
                    storage.client_evicted(v, a);
                    evicted_at.insert(v, now);
                }
            }
            _ => {
                if let Observed::Replaced(old) = cct.record(slot * cfg.slot_bytes, a.key)? {
                    evicted_at.insert(old, now);
                    if let EvictionAction::Reload(_) = storage.client_evicted(old, a) {
                        // The block is placed now; its data arrives when the
                        // low-priority read completes.
                        if let Some(d) = device.as_mut() {
                            d.background(t_ns, u64::from(a.size));
                        }
                    }
                }
            }
        }
        if let Some(prev) = last_access.insert(a.key, now) {
            add_log2(&mut reuse_distance, now - prev);
        }
        if let Some(ev) = evicted_at.remove(&a.key) {
            add_log2(&mut eviction_distance, now - ev);
        }
        bytes += u64::from(a.size);
        if storage.access(a) {
            hit_bytes += u64::from(a.size);
        } else if let Some(d) = device.as_mut() {
            d.demand(t_ns, u64::from(a.size));
        }
    }
    let device = device.map(|mut d| {
        d.drain();
        DeviceReport {
            demand: d.demand.clone(),
            reloads: d.background_stats.clone(),
            max_demand_delay_by_reloads_ns: d.max_demand_delay_by_background_ns,
        }
    });
    let stats = storage.stats().clone();
    let result = SimResult {
        policy: storage.policy().name(),
        cache_bytes: cfg.storage_bytes,
        requests: storage_requests,
        hits: stats.read_hits,
        bytes,
        hit_bytes,
    };
    Ok(HierarchyResult {
        placement: cfg.placement.to_string(),
        client_requests: accesses.len() as u64,
        client_hits,
        storage: stats,
        result,
        reuse_distance,
        eviction_distance,
        device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;

    fn acc(keys: &[u64]) -> Vec<Access> {
        keys.iter()
            .enumerate()
            .map(|(i, &key)| Access { key, size: 1, vtime: i as u64, next_access: hearth_core::NEVER, op: Op::Read, ctx: 0 })
            .collect()
    }

    fn cfg(placement: Placement, client: u64, storage: u64) -> HierarchyConfig {
        HierarchyConfig {
            client_policy: "lru".into(),
            client_bytes: client,
            per_client: false,
            storage_policy: "lru".into(),
            storage_bytes: storage,
            placement,
            slot_bytes: 4096,
            timing: None,
        }
    }

    #[test]
    fn storage_sees_only_client_misses_and_ev_learns_evictions() {
        // Client holds 2 blocks. 1 2 1 3 (evicts 2) 2 (evicts 1) 1 (evicts 3)
        let trace = acc(&[1, 2, 1, 3, 2, 1]);
        let ac = run_hierarchy(&trace, &cfg(Placement::Access, 2, 2)).unwrap();
        assert_eq!(ac.client_hits, 1);
        assert_eq!(ac.result.requests, 5);
        // AC storage LRU(2) sees 1 2 3 2 1: hits on 2 only.
        assert_eq!(ac.storage.read_hits, 1);

        let ev = run_hierarchy(&trace, &cfg(Placement::Eviction { reload_threshold: 0 }, 2, 2)).unwrap();
        // EV learns 2 is evicted when 3 reuses its buffer, so the later read
        // of 2 hits; likewise 1. The client's last eviction (3) is reloaded
        // too, pushing out 2, which EV did not refresh when it was read.
        assert_eq!(ev.storage.client_evictions, 3);
        assert_eq!(ev.storage.reloads, 3);
        assert_eq!(ev.storage.read_hits, 2);
        assert_eq!(ev.eviction_distance.iter().sum::<u64>(), 2);
    }

    #[test]
    fn infinite_client_cache_leaves_only_cold_misses_and_no_evictions() {
        let trace = acc(&[1, 2, 3, 1, 2, 3, 4, 1]);
        for placement in [Placement::Access, Placement::Eviction { reload_threshold: 0 }, Placement::Demote] {
            let r = run_hierarchy(&trace, &cfg(placement, 1 << 40, 2)).unwrap();
            assert_eq!(r.result.requests, 4, "{placement}: only first accesses reach storage");
            assert_eq!(r.storage.read_hits, 0);
            assert_eq!(r.storage.client_evictions, 0);
        }
    }

    #[test]
    fn every_placement_works_with_every_policy() {
        // A skewed trace with writes, enough to fill both levels many times.
        let mut x = 7u64;
        let trace: Vec<Access> = (0..20_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = (x % 600).min(x % 97 + (i % 3) * 200);
                let op = if x % 5 == 0 { Op::Write } else { Op::Read };
                Access { key, size: 4096, vtime: i, next_access: hearth_core::NEVER, op, ctx: 0 }
            })
            .collect();
        let mut trace = trace;
        hearth_trace::fill_next_access(&mut trace);
        for policy in hearth_policy::names() {
            for placement in [Placement::Access, Placement::Eviction { reload_threshold: 0 }, Placement::Eviction { reload_threshold: 3 }, Placement::Demote] {
                let mut c = cfg(placement, 50 * 4096, 120 * 4096);
                c.storage_policy = policy.to_string();
                let r = run_hierarchy(&trace, &c).unwrap();
                let s = &r.storage;
                let what = format!("{policy} {placement}");
                assert_eq!(r.client_hits + r.result.requests, trace.len() as u64, "{what}");
                assert_eq!(s.reads + s.writes, r.result.requests, "{what}");
                assert!(s.read_hits <= s.reads, "{what}");
                assert!(s.read_hits > 0, "{what}: a storage cache larger than the client's must hit");
                match placement {
                    // AC learns evictions too, but ignores them.
                    Placement::Access => assert_eq!((s.reloads, s.demotes), (0, 0), "{what}"),
                    Placement::Eviction { reload_threshold } => {
                        assert_eq!(s.demotes, 0, "{what}");
                        assert_eq!(s.reloads, s.placements, "{what}: EV places only by reloading");
                        assert!(s.reloads + s.reloads_skipped <= s.client_evictions, "{what}");
                        assert_eq!(reload_threshold == 0, s.reloads_skipped == 0, "{what}");
                    }
                    Placement::Demote => assert_eq!(s.demotes, s.client_evictions, "{what}"),
                }
            }
        }
    }
}

//! Two-level simulation: client buffer caches above one storage cache.
//!
//! The trace is taken as the clients' own requests. Each client (the
//! access's `ctx`, or one client for all) runs a buffer cache of fixed-size
//! slots; its misses go to the storage cache tagged with the buffer address
//! the data lands in, exactly what a storage server sees on the wire. Under
//! EV the storage cache learns evictions only through its client content
//! tracking table; under DEMOTE the client sends each evicted block.
//!
//! **What OPT means here.** Belady's OPT evicts the block whose next *use*
//! is furthest away, where a use is a request the reported hit ratio counts.
//! Below a client cache that is a storage-level read: the storage cache
//! sees only client misses, and a write replaces its block whole, so a
//! cached copy helps only a read that comes before the next write. Every
//! `next_access` the storage policy is given — for a demand, an EV reload or
//! a DEMOTE placement — is that block's next storage-level read before an
//! overwrite (see [`StorageFuture`]); placements (reloads, demotions, write
//! misses under AC) are free and are not uses. The client trace's own
//! next-use times, which count client hits, never reach the storage policy.
//! A recorded storage-level trace is replayed with the same oracle, so it
//! gives the two-level run's answer, and on a read-only block sequence OPT
//! equals the single-level simulator's OPT (which counts every request as a
//! use, as libCacheSim does, because its hit ratio counts write hits).

mod future;

use hearth_core::{key_map, Access, Key, KeyMap, Op, Policy, NEVER};
use hearth_placement::{Cct, EvictionAction, Observed, Placement, Stats, StorageCache};
use hearth_policy::PolicySpec;
use hearth_trace::buffered::BufferedAccess;
use hearth_trace::TraceError;
use serde::Serialize;

use crate::device::{ClassStats, Device, DeviceQueue};
use crate::source::{AccessStream, SourceError, Streamed};
use crate::{HierarchyError, SimResult};
pub use future::StorageFuture;

/// A client trace that can be read from the start as often as a run needs:
/// a streamed trace file or workload (memory independent of its length),
/// or accesses already in memory.
pub trait Replay: Sync {
    fn pass(&self) -> Result<AccessStream<'_>, SourceError>;
}

impl Replay for [Access] {
    fn pass(&self) -> Result<AccessStream<'_>, SourceError> {
        Ok(Box::new(self.iter().copied().map(Ok)))
    }
}

impl Replay for Vec<Access> {
    fn pass(&self) -> Result<AccessStream<'_>, SourceError> {
        self[..].pass()
    }
}

impl Replay for Streamed<'_> {
    fn pass(&self) -> Result<AccessStream<'_>, SourceError> {
        self.accesses()
    }
}

/// One pass over a storage-level trace.
pub type BufferedStream<'a> = Box<dyn Iterator<Item = Result<BufferedAccess, TraceError>> + 'a>;

/// A storage-level trace with buffer addresses, readable from the start as
/// often as a run needs.
pub trait StorageReplay: Sync {
    fn pass(&self) -> Result<BufferedStream<'_>, TraceError>;
}

impl StorageReplay for [BufferedAccess] {
    fn pass(&self) -> Result<BufferedStream<'_>, TraceError> {
        Ok(Box::new(self.iter().copied().map(Ok)))
    }
}

impl StorageReplay for Vec<BufferedAccess> {
    fn pass(&self) -> Result<BufferedStream<'_>, TraceError> {
        self[..].pass()
    }
}

/// A storage-level trace file (`hearth_trace::buffered`), streamed.
pub struct BufferedFile(pub std::path::PathBuf);

impl StorageReplay for BufferedFile {
    fn pass(&self) -> Result<BufferedStream<'_>, TraceError> {
        Ok(Box::new(hearth_trace::buffered::open(&self.0)?))
    }
}

/// The oracle a storage policy needs: for an offline one (OPT), built from
/// one pass over the storage-level requests `requests` opens; for any
/// other, nothing (no pass).
fn storage_future<I: Iterator<Item = Result<(Key, Op), TraceError>>>(
    policy: &PolicySpec,
    requests: impl FnOnce() -> Result<I, HierarchyError>,
) -> Result<StorageFuture, HierarchyError> {
    if !policy.is_offline() {
        return Ok(StorageFuture::blind());
    }
    Ok(StorageFuture::new(requests()?, &std::env::temp_dir())?)
}

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
    pub client_policy: PolicySpec,
    pub client_bytes: u64,
    /// One client per distinct `Access::ctx` (otherwise one client in all).
    pub per_client: bool,
    pub storage_policy: PolicySpec,
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

/// The client side: one buffer cache per client, handing out buffer slots.
pub struct ClientCaches {
    policy: PolicySpec,
    bytes: u64,
    per_client: bool,
    caches: KeyMap<ClientCache>,
    hits: u64,
}

/// A client miss on its way to the storage server.
pub struct ClientMiss<'a> {
    pub client: u64,
    /// The buffer slot the block is read into.
    pub slot: u64,
    /// Blocks the client evicted to make room.
    pub evicted: &'a [Key],
}

impl ClientCaches {
    pub fn new(policy: &PolicySpec, bytes: u64, per_client: bool) -> Self {
        ClientCaches { policy: policy.clone(), bytes, per_client, caches: key_map(16), hits: 0 }
    }

    /// Runs one client request; a miss goes on to storage.
    pub fn access(&mut self, a: &Access) -> Option<ClientMiss<'_>> {
        let client = if self.per_client { u64::from(a.ctx) } else { 0 };
        let (policy, bytes) = (&self.policy, self.bytes);
        let cache = self.caches.entry(client).or_insert_with(|| ClientCache::new(policy.build(bytes)));
        match cache.access(a) {
            None => {
                self.hits += 1;
                None
            }
            Some(slot) => Some(ClientMiss { client, slot, evicted: &cache.evicted }),
        }
    }

    pub fn hits(&self) -> u64 {
        self.hits
    }
}

/// The storage server's side: a client content tracking table per client,
/// the placement core, idle-distance histograms and the device model.
struct StorageSide {
    cfg: HierarchyConfig,
    storage: StorageCache,
    ccts: KeyMap<Cct>,
    requests: u64,
    bytes: u64,
    hit_bytes: u64,
    last_access: KeyMap<u64>,
    evicted_at: KeyMap<u64>,
    reuse_distance: Vec<u64>,
    eviction_distance: Vec<u64>,
    device: Option<DeviceQueue>,
    future: StorageFuture,
}

impl StorageSide {
    fn new(cfg: &HierarchyConfig, future: StorageFuture) -> Result<Self, HierarchyError> {
        let policy = cfg.storage_policy.build(cfg.storage_bytes);
        Ok(StorageSide {
            cfg: cfg.clone(),
            storage: StorageCache::new(policy, cfg.placement),
            ccts: key_map(16),
            requests: 0,
            bytes: 0,
            hit_bytes: 0,
            last_access: key_map(1 << 16),
            evicted_at: key_map(1024),
            reuse_distance: Vec::new(),
            eviction_distance: Vec::new(),
            device: cfg.timing.map(|t| DeviceQueue::new(t.device)),
            future,
        })
    }

    /// A request reaching the storage server from `client`, with the client
    /// buffer it uses (if known) and, under DEMOTE, the blocks the client
    /// ships with it.
    fn request(&mut self, a: &Access, client: u64, buffer: Option<u64>, demoted: &[Key]) -> Result<(), HierarchyError> {
        let now = self.requests;
        self.requests += 1;
        // The storage server's clock counts its own requests (MQ's lifetimes
        // are in these units), not the client's; so do next-use times.
        // Evictions learned with this request are placed before it is
        // served, so their next use may be this very request.
        let a = &Access { vtime: now, next_access: NEVER, ..*a };
        let t_ns = self.cfg.timing.map_or(0, |t| now * t.interarrival_ns);
        for &old in demoted {
            self.client_evicted(old, a, now, t_ns);
        }
        if self.cfg.placement != Placement::Demote {
            if let Some(addr) = buffer {
                let slot_bytes = self.cfg.slot_bytes;
                let cct = self.ccts.entry(client).or_insert_with(|| Cct::new(slot_bytes));
                if let Observed::Replaced(old) = cct.record(addr, a.key)? {
                    self.client_evicted(old, a, now, t_ns);
                }
            }
        }
        let a = &Access { next_access: self.future.advance(now, a.key)?, ..*a };
        if let Some(prev) = self.last_access.insert(a.key, now) {
            add_log2(&mut self.reuse_distance, now - prev);
        }
        if let Some(ev) = self.evicted_at.remove(&a.key) {
            add_log2(&mut self.eviction_distance, now - ev);
        }
        self.bytes += u64::from(a.size);
        if self.storage.access(a) {
            self.hit_bytes += u64::from(a.size);
        } else if let Some(d) = self.device.as_mut() {
            d.demand(t_ns, u64::from(a.size));
        }
        Ok(())
    }

    /// The storage server learned that its client evicted `old`.
    fn client_evicted(&mut self, old: Key, a: &Access, now: u64, t_ns: u64) {
        self.evicted_at.insert(old, now);
        let a = &Access { next_access: self.future.next_use(old), ..*a };
        if let EvictionAction::Reload(_) = self.storage.client_evicted(old, a) {
            // The block is placed now; its data arrives when the
            // low-priority read completes.
            if let Some(d) = self.device.as_mut() {
                d.background(t_ns, u64::from(a.size));
            }
        }
    }

    fn finish(self, client_requests: u64, client_hits: u64) -> HierarchyResult {
        let stats = self.storage.stats().clone();
        let result = SimResult {
            policy: self.storage.policy().name(),
            cache_bytes: self.cfg.storage_bytes,
            requests: self.requests,
            hits: stats.read_hits,
            bytes: self.bytes,
            hit_bytes: self.hit_bytes,
            interval_miss_ratios: Vec::new(),
            train_seconds: None,
        };
        let device = self.device.map(|mut d| {
            d.drain();
            DeviceReport {
                demand: d.demand.clone(),
                reloads: d.background_stats.clone(),
                max_demand_delay_by_reloads_ns: d.max_demand_delay_by_background_ns,
            }
        });
        HierarchyResult {
            placement: self.cfg.placement.to_string(),
            client_requests,
            client_hits,
            storage: stats,
            result,
            reuse_distance: self.reuse_distance,
            eviction_distance: self.eviction_distance,
            device,
        }
    }
}

/// Runs the trace through client caches and the storage cache, streaming
/// it: one pass, or two under an offline storage policy (the first records
/// the storage-level sequence its next uses are read from).
pub fn run_hierarchy(trace: &(impl Replay + ?Sized), cfg: &HierarchyConfig) -> Result<HierarchyResult, HierarchyError> {
    // The client caches do not depend on the storage cache, so a first pass
    // sees what the run below will send to storage.
    let future =
        storage_future(&cfg.storage_policy, || Ok(storage_trace(trace, cfg)?.map(|r| r.map(|r| (r.block, r.op)))))?;
    let mut clients = ClientCaches::new(&cfg.client_policy, cfg.client_bytes, cfg.per_client);
    let mut storage = StorageSide::new(cfg, future)?;
    let mut client_requests = 0;
    for a in trace.pass()? {
        let a = a?;
        client_requests += 1;
        let Some(miss) = clients.access(&a) else { continue };
        // The storage server's view: a request for `a.key` into buffer `slot`.
        let demoted = if cfg.placement == Placement::Demote { miss.evicted } else { &[] };
        storage.request(&a, miss.client, Some(miss.slot * cfg.slot_bytes), demoted)?;
    }
    Ok(storage.finish(client_requests, clients.hits()))
}

/// Runs a storage-level trace that already carries client buffer addresses
/// (see `hearth_trace::buffered`) through the storage cache; the client
/// caches are the trace's. `cfg`'s client fields are unused.
pub fn run_storage_trace(
    trace: &(impl StorageReplay + ?Sized),
    cfg: &HierarchyConfig,
) -> Result<HierarchyResult, HierarchyError> {
    if cfg.placement == Placement::Demote {
        return Err(HierarchyError::DemoteWithoutEvictions);
    }
    let future = storage_future(&cfg.storage_policy, || Ok(trace.pass()?.map(|r| r.map(|r| (r.block, r.op)))))?;
    let mut storage = StorageSide::new(cfg, future)?;
    let size = u32::try_from(cfg.slot_bytes).map_err(|_| HierarchyError::BlockSize { bytes: cfg.slot_bytes })?;
    for (vtime, r) in trace.pass()?.enumerate() {
        let r = r?;
        let a = Access { key: r.block, size, vtime: vtime as u64, next_access: NEVER, op: r.op, ctx: r.client };
        storage.request(&a, u64::from(r.client), r.buffer, &[])?;
    }
    let n = storage.requests;
    Ok(storage.finish(n, 0))
}

/// What the storage server sees below the client caches, with buffer
/// addresses, streamed: the input of [`run_storage_trace`].
pub fn storage_trace<'a>(
    trace: &'a (impl Replay + ?Sized),
    cfg: &HierarchyConfig,
) -> Result<impl Iterator<Item = Result<BufferedAccess, TraceError>> + 'a, HierarchyError> {
    let mut clients = ClientCaches::new(&cfg.client_policy, cfg.client_bytes, cfg.per_client);
    let slot_bytes = cfg.slot_bytes;
    Ok(trace.pass()?.filter_map(move |a| {
        let a = match a {
            Ok(a) => a,
            Err(e) => return Some(Err(e)),
        };
        let miss = clients.access(&a)?;
        let client = u32::try_from(miss.client).expect("client ids come from u32 contexts");
        Some(Ok(BufferedAccess { client, op: a.op, block: a.key, buffer: Some(miss.slot * slot_bytes) }))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(keys: &[u64]) -> Vec<Access> {
        keys.iter()
            .enumerate()
            .map(|(i, &key)| Access {
                key,
                size: 1,
                vtime: i as u64,
                next_access: hearth_core::NEVER,
                op: Op::Read,
                ctx: 0,
            })
            .collect()
    }

    fn cfg(placement: Placement, client: u64, storage: u64) -> HierarchyConfig {
        HierarchyConfig {
            client_policy: "lru".parse().unwrap(),
            client_bytes: client,
            per_client: false,
            storage_policy: "lru".parse().unwrap(),
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
                let op = if x.is_multiple_of(5) { Op::Write } else { Op::Read };
                Access { key, size: 4096, vtime: i, next_access: hearth_core::NEVER, op, ctx: 0 }
            })
            .collect();
        let mut trace = trace;
        hearth_trace::fill_next_access(&mut trace);
        for policy in hearth_policy::names() {
            for placement in [
                Placement::Access,
                Placement::Eviction { reload_threshold: 0 },
                Placement::Eviction { reload_threshold: 3 },
                Placement::Demote,
            ] {
                let mut c = cfg(placement, 50 * 4096, 120 * 4096);
                c.storage_policy = policy.parse().unwrap();
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

    #[test]
    fn a_recorded_storage_trace_replays_to_the_same_result() {
        // Blocks of the slot size, as a storage-level trace records them.
        let trace: Vec<Access> = acc(&[1, 2, 3, 1, 4, 2, 5, 1, 3, 2, 6, 1, 4, 3, 2, 1, 7, 1, 2, 3])
            .into_iter()
            .map(|a| Access { size: 4096, ..a })
            .collect();
        for placement in [
            Placement::Access,
            Placement::Eviction { reload_threshold: 0 },
            Placement::Eviction { reload_threshold: 2 },
        ] {
            let c = cfg(placement, 3 * 4096, 3 * 4096);
            let live = run_hierarchy(&trace, &c).unwrap();
            let recorded: Vec<_> = storage_trace(&trace, &c).unwrap().collect::<Result<_, _>>().unwrap();
            assert_eq!(recorded.len() as u64, live.result.requests);
            let replayed = run_storage_trace(&recorded, &c).unwrap();
            assert_eq!(replayed.storage, live.storage, "{placement}");
            assert_eq!(replayed.eviction_distance, live.eviction_distance, "{placement}");
            assert!(live.storage.read_hits > 0, "{placement}: the case should exercise hits");
        }
    }
}

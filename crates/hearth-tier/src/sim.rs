//! The discrete-event tiering simulator.
//!
//! A demand request is looked up, block by block, in the OS cache (LRU),
//! the prefetch cache (FIFO), then the fast device, then the slow device.
//! Blocks that must come from a device are read in runs of consecutive
//! blocks (a read spans a gap of blocks served elsewhere when transferring
//! the gap costs less than the device's latency, i.e. less than a second
//! I/O); a read from the slow device brings `read_ahead_blocks` more
//! blocks into the OS cache, as the kernel's read-ahead would. A request's
//! response time is the latest completion among its parts. Writes go
//! straight to the device that holds the block (write-through).
//!
//! Each device is a [`DeviceQueue`]: demand before background work
//! (prefetches, LRU fills of the fast device), non-preemptive. The event
//! queue carries request arrivals and prefetch completions; before each
//! event at `t` every device starts the background work that begins before
//! `t`, which is exact because all demand arriving before `t` is already
//! queued.

use hearth_core::{key_map, Access, Key, KeyMap, Op, Policy, NEVER};
use hearth_estimate::device::{Device, DeviceQueue};
use rustc_hash::FxHashSet;
use serde::Serialize;

use crate::events::EventQueue;
use crate::extent::Extent;
use crate::graph::AccessGraph;
use crate::TierError;

/// What the fast device holds.
#[derive(Clone, Debug)]
pub enum FastUse {
    /// No fast device: everything lives on the slow one.
    Unused,
    /// A fixed set of blocks placed there before the run (a partition plan).
    Partition(FxHashSet<u64>),
    /// An LRU cache of this many bytes, filled on slow-device reads.
    LruCache(u64),
}

/// Correlation-directed prefetching on the access graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CdpConfig {
    /// 1 = the successors of the request just served (CDP); k > 1 also
    /// follows successors of successors up to k hops (CCDP-k).
    pub depth: u32,
    /// At most this many prefetch reads per demand request, and no new one
    /// while this many wait in the slow device's queue.
    pub max_per_demand: u32,
    /// CDP-slack: prefetch only after a demand request that the slow device
    /// did not serve, so prefetches use the slow device's idle time.
    pub slack: bool,
}

impl Default for CdpConfig {
    fn default() -> Self {
        CdpConfig { depth: 1, max_per_demand: 2, slack: false }
    }
}

#[derive(Clone, Debug)]
pub struct TierConfig {
    pub block_size: u32,
    pub fast: Device,
    pub slow: Device,
    pub os_cache_bytes: u64,
    pub read_ahead_blocks: u32,
    pub prefetch_cache_bytes: u64,
    /// Added per request to the trace's own spacing: request `i` arrives at
    /// `trace time - first trace time + i * think_ns`.
    pub think_ns: u64,
    pub fast_use: FastUse,
    pub cdp: Option<CdpConfig>,
    /// Requests before this index warm the caches and queues but are not
    /// counted (the training part of a train/test split).
    pub measure_from: usize,
}

impl TierConfig {
    /// The thesis's setup: SSD over HDD, 256 MiB OS and prefetch caches,
    /// 8-block read-ahead, no think time, nothing on the fast device.
    pub fn new(block_size: u32) -> TierConfig {
        TierConfig {
            block_size,
            fast: Device::SSD,
            slow: Device::HDD,
            os_cache_bytes: 256 << 20,
            read_ahead_blocks: 8,
            prefetch_cache_bytes: 256 << 20,
            think_ns: 0,
            fast_use: FastUse::Unused,
            cdp: None,
            measure_from: 0,
        }
    }
}

/// Counts over the measured requests.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TierStats {
    pub requests: u64,
    pub total_response_ns: u64,
    pub max_response_ns: u64,
    /// Demand blocks by where they were found.
    pub blocks_os_cache: u64,
    pub blocks_prefetch_cache: u64,
    /// Blocks whose prefetch was already under way (the demand waits for it).
    pub blocks_prefetch_in_flight: u64,
    pub blocks_fast: u64,
    pub blocks_slow: u64,
    /// Demand I/Os (reads and writes) sent to each device.
    pub fast_ios: u64,
    pub slow_ios: u64,
    /// Prefetch reads issued and the blocks they covered.
    pub prefetches: u64,
    pub prefetched_blocks: u64,
}

impl TierStats {
    pub fn mean_response_ms(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.total_response_ns as f64 / self.requests as f64 / 1e6
        }
    }
    fn blocks(&self) -> u64 {
        self.blocks_os_cache
            + self.blocks_prefetch_cache
            + self.blocks_prefetch_in_flight
            + self.blocks_fast
            + self.blocks_slow
    }
    /// Share of demand blocks the fast device served, in percent.
    pub fn fast_percent(&self) -> f64 {
        100.0 * self.blocks_fast as f64 / self.blocks().max(1) as f64
    }
    /// Share of demand blocks the slow device served, in percent.
    pub fn slow_percent(&self) -> f64 {
        100.0 * self.blocks_slow as f64 / self.blocks().max(1) as f64
    }
    /// Prefetched blocks a demand request used, in percent of those fetched.
    pub fn prefetch_accuracy_percent(&self) -> f64 {
        100.0 * (self.blocks_prefetch_cache + self.blocks_prefetch_in_flight) as f64
            / self.prefetched_blocks.max(1) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    PrefetchDone { tag: u64 },
    Arrive { index: usize },
}

// Completions first, so that data arriving at `t` is there for a request at `t`.
const PRIORITY_COMPLETION: u8 = 0;
const PRIORITY_ARRIVAL: u8 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    Queued { tag: u64 },
    Started { tag: u64, done: u64 },
}

impl InFlight {
    fn tag(self) -> u64 {
        match self {
            InFlight::Queued { tag } | InFlight::Started { tag, .. } => tag,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Fast,
    Slow,
}

struct Tier<'a> {
    cfg: &'a TierConfig,
    graph: Option<&'a AccessGraph>,
    os_cache: Box<dyn Policy>,
    /// Blocks in the OS cache whose data arrives later (a read in progress).
    os_ready_at: KeyMap<u64>,
    prefetch_cache: Box<dyn Policy>,
    fast_lru: Option<Box<dyn Policy>>,
    fast: DeviceQueue,
    slow: DeviceQueue,
    in_flight: KeyMap<InFlight>,
    /// Block range of each prefetch read not yet completed, by tag.
    prefetch_reads: KeyMap<(u64, u32)>,
    next_tag: u64,
    events: EventQueue<Event>,
    evicted: Vec<Key>,
    started: Vec<(u64, u64)>,
    candidates: Vec<(u64, u32)>,
    /// Where each block of the request being served comes from (`None`: a cache).
    sources: Vec<Option<Source>>,
    stats: TierStats,
    measuring: bool,
}

/// Replays `extents` through the tiers and returns the counts of the
/// measured part. `graph` is needed when `cfg.cdp` is set.
pub fn simulate(cfg: &TierConfig, extents: &[Extent], graph: Option<&AccessGraph>) -> Result<TierStats, TierError> {
    if cfg.block_size == 0 {
        return Err(TierError::ZeroBlockSize);
    }
    if cfg.cdp.is_some() && graph.is_none() {
        return Err(TierError::CdpWithoutGraph);
    }
    // The OS and fast-device caches are LRU, the prefetch cache FIFO: fixed
    // parts of the model, not settings, so built directly.
    let lru = |bytes| -> Box<dyn Policy> { Box::new(hearth_policy::Lru::new(bytes)) };
    let mut tier = Tier {
        cfg,
        graph,
        os_cache: lru(cfg.os_cache_bytes),
        os_ready_at: key_map(1024),
        prefetch_cache: Box::new(hearth_policy::Fifo::new(cfg.prefetch_cache_bytes)),
        fast_lru: match cfg.fast_use {
            FastUse::LruCache(bytes) => Some(lru(bytes)),
            _ => None,
        },
        fast: DeviceQueue::new(cfg.fast),
        slow: DeviceQueue::new(cfg.slow),
        in_flight: key_map(1024),
        prefetch_reads: key_map(64),
        next_tag: 0,
        events: EventQueue::default(),
        evicted: Vec::new(),
        started: Vec::new(),
        candidates: Vec::new(),
        sources: Vec::new(),
        stats: TierStats::default(),
        measuring: false,
    };
    tier.run(extents);
    Ok(tier.stats)
}

impl Tier<'_> {
    fn run(&mut self, extents: &[Extent]) {
        let Some(first) = extents.first() else { return };
        // Arrivals are pushed one at a time: the next when the previous pops.
        let arrival = |i: usize, previous: u64| {
            let trace = extents[i].time_ns.saturating_sub(first.time_ns);
            // A trace whose clock steps back keeps its request order.
            (trace + i as u64 * self.cfg.think_ns).max(previous)
        };
        self.events.push(arrival(0, 0), PRIORITY_ARRIVAL, Event::Arrive { index: 0 });
        while let Some(t) = self.events.peek_time() {
            self.fast.advance(t);
            self.slow.advance(t);
            self.note_started_prefetches();
            let (now, event) = self.events.pop().expect("peeked");
            match event {
                Event::Arrive { index } => {
                    if index + 1 < extents.len() {
                        let next = arrival(index + 1, now);
                        self.events.push(next, PRIORITY_ARRIVAL, Event::Arrive { index: index + 1 });
                    }
                    self.measuring = index >= self.cfg.measure_from;
                    self.demand(now, &extents[index]);
                }
                Event::PrefetchDone { tag } => self.prefetch_done(tag),
            }
        }
    }

    fn access(&self, key: u64, op: Op) -> Access {
        Access { key, size: self.cfg.block_size, vtime: 0, next_access: NEVER, op, ctx: 0 }
    }

    fn on_fast_device(&self, block: u64) -> bool {
        match &self.cfg.fast_use {
            FastUse::Unused => false,
            FastUse::Partition(blocks) => blocks.contains(&block),
            FastUse::LruCache(_) => self.fast_lru.as_ref().is_some_and(|c| c.contains(block)),
        }
    }

    fn count(&mut self, field: fn(&mut TierStats) -> &mut u64) {
        if self.measuring {
            *field(&mut self.stats) += 1;
        }
    }

    /// Puts `block` in the OS cache, its data there from `ready` on.
    fn fill_os_cache(&mut self, block: u64, ready: u64, now: u64) {
        if self.os_cache.capacity() < u64::from(self.cfg.block_size) {
            return;
        }
        let a = self.access(block, Op::Read);
        if !self.os_cache.contains(block) {
            self.os_cache.insert(&a, &mut self.evicted);
            for key in self.evicted.drain(..) {
                self.os_ready_at.remove(&key);
            }
        }
        if ready > now {
            self.os_ready_at.insert(block, ready);
        }
    }

    fn demand(&mut self, now: u64, e: &Extent) {
        let mut done = now;
        let mut used_slow = false;
        self.sources.clear();
        for block in e.block_range() {
            let source = if e.write { Some(self.write_target(block)) } else { self.read_source(block, now, &mut done) };
            self.sources.push(source);
        }
        for device in [Source::Fast, Source::Slow] {
            // Spans of blocks for `device`, as block indices in the request.
            let mut span: Option<(usize, usize)> = None;
            for i in 0..self.sources.len() {
                if self.sources[i] != Some(device) {
                    continue;
                }
                span = match span {
                    Some((first, last))
                        if i == last + 1 || (!e.write && self.read_through_is_cheaper(device, i - last - 1)) =>
                    {
                        Some((first, i))
                    }
                    Some(finished) => {
                        done = done.max(self.issue(now, e, device, finished, &mut used_slow));
                        Some((i, i))
                    }
                    None => Some((i, i)),
                };
            }
            if let Some(last_span) = span {
                done = done.max(self.issue(now, e, device, last_span, &mut used_slow));
            }
        }
        if self.measuring {
            let response = done - now;
            self.stats.requests += 1;
            self.stats.total_response_ns += response;
            self.stats.max_response_ns = self.stats.max_response_ns.max(response);
        }
        if let Some(cdp) = self.cfg.cdp {
            if !(cdp.slack && used_slow) {
                self.prefetch_successors(now, e.start, cdp);
            }
        }
    }

    /// Where a write of `block` goes; the OS cache keeps a copy and any
    /// prefetched copy is now stale.
    fn write_target(&mut self, block: u64) -> Source {
        let a = self.access(block, Op::Write);
        if !self.os_cache.lookup(&a) {
            self.fill_os_cache(block, 0, 0);
        }
        self.prefetch_cache.remove(block);
        self.in_flight.remove(&block);
        let on_fast = match self.fast_lru.as_mut() {
            Some(lru) => lru.lookup(&a),
            None => self.on_fast_device(block),
        };
        if on_fast {
            self.count(|s| &mut s.blocks_fast);
            Source::Fast
        } else {
            self.count(|s| &mut s.blocks_slow);
            Source::Slow
        }
    }

    /// Finds `block` for a read: `None` when a cache holds it (raising
    /// `done` if its data is still on the way), else the device to read.
    fn read_source(&mut self, block: u64, now: u64, done: &mut u64) -> Option<Source> {
        let a = self.access(block, Op::Read);
        if self.os_cache.lookup(&a) {
            if let Some(&ready) = self.os_ready_at.get(&block) {
                if ready > now {
                    *done = (*done).max(ready);
                } else {
                    self.os_ready_at.remove(&block);
                }
            }
            self.count(|s| &mut s.blocks_os_cache);
            return None;
        }
        if self.prefetch_cache.remove(block) {
            self.fill_os_cache(block, now, now);
            self.count(|s| &mut s.blocks_prefetch_cache);
            return None;
        }
        match self.in_flight.remove(&block) {
            Some(InFlight::Started { done: ready, .. }) => {
                *done = (*done).max(ready);
                self.fill_os_cache(block, ready, now);
                self.count(|s| &mut s.blocks_prefetch_in_flight);
                return None;
            }
            // A prefetch still waiting in the queue is too late to help.
            Some(InFlight::Queued { .. }) | None => {}
        }
        let on_fast = match self.fast_lru.as_mut() {
            Some(lru) => lru.lookup(&a),
            None => self.on_fast_device(block),
        };
        if on_fast {
            self.count(|s| &mut s.blocks_fast);
            Some(Source::Fast)
        } else {
            self.count(|s| &mut s.blocks_slow);
            Some(Source::Slow)
        }
    }

    /// Whether reading `gap` unwanted blocks costs less than a second I/O:
    /// then one read spans both parts of the request.
    fn read_through_is_cheaper(&self, device: Source, gap: usize) -> bool {
        let d = match device {
            Source::Fast => self.cfg.fast,
            Source::Slow => self.cfg.slow,
        };
        let transfer = d.service_ns(gap as u64 * u64::from(self.cfg.block_size)) - d.latency_ns;
        transfer < d.latency_ns
    }

    /// Sends blocks `first..=last` of request `e` to `device` as one I/O
    /// (blocks in between that other places serve are read and dropped);
    /// returns its completion time.
    fn issue(
        &mut self,
        now: u64,
        e: &Extent,
        device: Source,
        (first, last): (usize, usize),
        used_slow: &mut bool,
    ) -> u64 {
        let bs = u64::from(self.cfg.block_size);
        let start = e.start + first as u64;
        let len = (last - first + 1) as u64;
        match device {
            Source::Fast => {
                self.count(|s| &mut s.fast_ios);
                let done = now + self.fast.demand(now, len * bs);
                if !e.write {
                    for i in first..=last {
                        if self.sources[i] == Some(device) {
                            self.fill_os_cache(e.start + i as u64, done, now);
                        }
                    }
                }
                done
            }
            Source::Slow => {
                self.count(|s| &mut s.slow_ios);
                *used_slow = true;
                let read_ahead = if e.write { 0 } else { u64::from(self.cfg.read_ahead_blocks) };
                let done = now + self.slow.demand(now, (len + read_ahead) * bs);
                if !e.write {
                    for i in first..=last {
                        if self.sources[i] == Some(device) {
                            self.fill_os_cache(e.start + i as u64, done, now);
                        }
                    }
                    // Read-ahead blocks arrive with the demand read; blocks the
                    // fast device or a cache already holds are left alone.
                    for block in start + len..start + len + read_ahead {
                        if !(self.os_cache.contains(block) || self.on_fast_device(block)) {
                            self.fill_os_cache(block, done, now);
                        }
                    }
                    if self.fast_lru.as_ref().is_some_and(|lru| lru.capacity() >= bs) {
                        // Copy the demanded blocks to the fast cache in the background.
                        let mut copied = 0;
                        for i in first..=last {
                            if self.sources[i] == Some(device) {
                                let a = self.access(e.start + i as u64, Op::Read);
                                self.fast_lru.as_mut().expect("checked").insert(&a, &mut self.evicted);
                                copied += 1;
                            }
                        }
                        self.evicted.clear();
                        self.fast.background(now, copied * bs);
                    }
                }
                done
            }
        }
    }

    /// Whether a prefetch of `block` would be wasted.
    fn needs_no_prefetch(&self, block: u64) -> bool {
        self.os_cache.contains(block)
            || self.prefetch_cache.contains(block)
            || self.in_flight.contains_key(&block)
            || self.on_fast_device(block)
    }

    fn prefetch_successors(&mut self, now: u64, from: u64, cdp: CdpConfig) {
        let Some(graph) = self.graph else { return };
        let bs = u64::from(self.cfg.block_size);
        let mut issued = 0;
        // Breadth-first over the successor lists: hop 1 first, strongest first.
        self.candidates.clear();
        self.candidates.push((from, 0));
        let mut next = 0;
        while next < self.candidates.len() && issued < cdp.max_per_demand {
            let (node, hop) = self.candidates[next];
            next += 1;
            if hop == cdp.depth {
                continue;
            }
            for succ in graph.successors(node) {
                // A backlog of prefetches could not start before the next
                // demand requests: a new one would only arrive late.
                if issued == cdp.max_per_demand || self.slow.background_waiting() >= cdp.max_per_demand as usize {
                    break;
                }
                if self.candidates.iter().any(|&(seen, _)| seen == succ.start) {
                    continue;
                }
                self.candidates.push((succ.start, hop + 1));
                // Read the span from the first to the last block still needed.
                let range = succ.start..succ.start + u64::from(succ.blocks);
                let Some(first) = range.clone().find(|&b| !self.needs_no_prefetch(b)) else {
                    continue;
                };
                let last = range.rev().find(|&b| !self.needs_no_prefetch(b)).expect("first exists");
                let tag = self.next_tag;
                self.next_tag += 1;
                let len = last - first + 1;
                self.slow.background_tagged(now, len * bs, tag);
                self.prefetch_reads.insert(tag, (first, len as u32));
                for block in first..=last {
                    if !self.needs_no_prefetch(block) {
                        self.in_flight.insert(block, InFlight::Queued { tag });
                    }
                }
                issued += 1;
                if self.measuring {
                    self.stats.prefetches += 1;
                    self.stats.prefetched_blocks += len;
                }
            }
        }
    }

    /// Records the completion times of prefetch reads the slow device started.
    fn note_started_prefetches(&mut self) {
        self.slow.take_started(&mut self.started);
        for i in 0..self.started.len() {
            let (tag, done) = self.started[i];
            let (first, len) = self.prefetch_reads[&tag];
            for block in first..first + u64::from(len) {
                if let Some(f) = self.in_flight.get_mut(&block) {
                    if f.tag() == tag {
                        *f = InFlight::Started { tag, done };
                    }
                }
            }
            self.events.push(done, PRIORITY_COMPLETION, Event::PrefetchDone { tag });
        }
        self.started.clear();
    }

    fn prefetch_done(&mut self, tag: u64) {
        let (first, len) = self.prefetch_reads.remove(&tag).expect("a prefetch completes once");
        for block in first..first + u64::from(len) {
            if self.in_flight.get(&block).is_some_and(|f| f.tag() == tag) {
                self.in_flight.remove(&block);
                let a = self.access(block, Op::Read);
                if self.prefetch_cache.capacity() >= u64::from(self.cfg.block_size) {
                    self.prefetch_cache.insert(&a, &mut self.evicted);
                }
                self.evicted.clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    // Bandwidth so high that transfer time rounds to zero: service = latency.
    const FAST: Device = Device { latency_ns: MS, bytes_per_sec: u64::MAX };
    const SLOW: Device = Device { latency_ns: 10 * MS, bytes_per_sec: u64::MAX };

    fn read(time_ns: u64, start: u64) -> Extent {
        Extent { time_ns, start, blocks: 1, write: false }
    }

    /// No caches, no read-ahead: every block comes from a device.
    fn bare(fast_use: FastUse) -> TierConfig {
        TierConfig {
            fast: FAST,
            slow: SLOW,
            os_cache_bytes: 0,
            read_ahead_blocks: 0,
            prefetch_cache_bytes: 0,
            fast_use,
            ..TierConfig::new(4096)
        }
    }

    #[test]
    fn two_devices_queue_independently() {
        let cfg = bare(FastUse::Partition([1].into_iter().collect()));
        let trace = [read(0, 1), read(0, 2), read(0, 3), read(MS / 2, 1)];
        let s = simulate(&cfg, &trace, None).unwrap();
        // fast: 1 ms; slow: 10 ms; slow again behind it: 20 ms; fast at 0.5 ms
        // behind the first fast read (busy until 1 ms): 1.5 ms.
        assert_eq!(s.total_response_ns, MS + 10 * MS + 20 * MS + 3 * MS / 2);
        assert_eq!(s.max_response_ns, 20 * MS);
        assert_eq!((s.blocks_fast, s.blocks_slow, s.requests), (2, 2, 4));
    }

    #[test]
    fn think_time_spreads_arrivals_and_warm_up_is_not_counted() {
        let mut cfg = bare(FastUse::Unused);
        cfg.think_ns = 5 * MS;
        // Arrivals at 0, 5 and 10 ms; each needs 10 ms of the slow device.
        let trace = [read(0, 1), read(0, 2), read(0, 3)];
        let s = simulate(&cfg, &trace, None).unwrap();
        assert_eq!(s.total_response_ns, 10 * MS + 15 * MS + 20 * MS);
        cfg.measure_from = 2;
        let s = simulate(&cfg, &trace, None).unwrap();
        assert_eq!((s.requests, s.total_response_ns, s.blocks_slow), (1, 20 * MS, 1));
    }

    #[test]
    fn read_ahead_data_is_not_there_before_the_read_completes() {
        let cfg = TierConfig { os_cache_bytes: 1 << 20, read_ahead_blocks: 2, ..bare(FastUse::Unused) };
        // Block 5 reads 5..8 from the slow device (done at 10 ms). Block 6 at
        // 1 ms is in the OS cache but waits until 10 ms; block 7 at 20 ms is
        // there; block 8 was not read ahead.
        let trace = [read(0, 5), read(MS, 6), read(20 * MS, 7), read(20 * MS, 8)];
        let s = simulate(&cfg, &trace, None).unwrap();
        assert_eq!(s.total_response_ns, 10 * MS + 9 * MS + 10 * MS);
        assert_eq!((s.blocks_os_cache, s.blocks_slow), (2, 2));
    }

    #[test]
    fn fast_lru_cache_fills_on_slow_reads_and_evicts() {
        let cfg = bare(FastUse::LruCache(4096));
        let trace = [read(0, 1), read(20 * MS, 1), read(30 * MS, 2), read(50 * MS, 1)];
        let s = simulate(&cfg, &trace, None).unwrap();
        // slow 10, fast 1 (the background copy finished at 11 ms), slow 10
        // (evicting 1 from the one-block cache), slow 10.
        assert_eq!(s.total_response_ns, 31 * MS);
        assert_eq!((s.blocks_fast, s.blocks_slow), (1, 3));
    }

    #[test]
    fn correlated_prefetch_runs_behind_demand_and_saves_time() {
        let history = [read(0, 100), read(0, 200), read(0, 100), read(0, 200)];
        let graph = AccessGraph::build(&history, 1);
        let mut cfg = TierConfig {
            os_cache_bytes: 1 << 20,
            prefetch_cache_bytes: 1 << 20,
            cdp: Some(CdpConfig::default()),
            ..bare(FastUse::Unused)
        };
        // 100 at 0 (slow, 10 ms) queues a prefetch of 200, which starts when
        // the demand read ends (10 ms) and ends at 20 ms. 300 at 12 ms waits
        // behind the prefetch in service: done at 30 ms. 200 at 15 ms waits
        // for its prefetch: 5 ms.
        let trace = [read(0, 100), read(12 * MS, 300), read(15 * MS, 200)];
        let s = simulate(&cfg, &trace, Some(&graph)).unwrap();
        assert_eq!(s.total_response_ns, 10 * MS + 18 * MS + 5 * MS);
        assert_eq!((s.prefetches, s.blocks_prefetch_in_flight, s.blocks_slow), (1, 1, 2));
        // Later, 200 is found in the prefetch cache.
        let trace = [read(0, 100), read(25 * MS, 200)];
        let s = simulate(&cfg, &trace, Some(&graph)).unwrap();
        assert_eq!((s.total_response_ns, s.blocks_prefetch_cache), (10 * MS, 1));
        // CDP-slack: the slow device served 100, so nothing is prefetched.
        cfg.cdp = Some(CdpConfig { slack: true, ..CdpConfig::default() });
        let s = simulate(&cfg, &trace, Some(&graph)).unwrap();
        assert_eq!((s.prefetches, s.total_response_ns), (0, 20 * MS));
    }

    #[test]
    fn prefetching_skips_blocks_on_the_fast_device_and_chains() {
        // 1 -> 2 -> 3 -> 4, each seen twice.
        let history = [read(0, 1), read(0, 2), read(0, 3), read(0, 4), read(0, 1), read(0, 2), read(0, 3), read(0, 4)];
        let graph = AccessGraph::build(&history, 1);
        let mut cfg = TierConfig {
            os_cache_bytes: 1 << 20,
            prefetch_cache_bytes: 1 << 20,
            cdp: Some(CdpConfig { depth: 3, max_per_demand: 2, slack: false }),
            ..bare(FastUse::Partition([2].into_iter().collect()))
        };
        // From 1: hop 1 is 2 (on the fast device, skipped), hop 2 is 3,
        // hop 3 is 4: two prefetches, both used later.
        let trace = [read(0, 1), read(100 * MS, 3), read(100 * MS, 4)];
        let s = simulate(&cfg, &trace, Some(&graph)).unwrap();
        assert_eq!((s.prefetches, s.blocks_prefetch_cache), (2, 2));
        assert_eq!(s.total_response_ns, 10 * MS);
        // Depth 1 stops at the skipped block.
        cfg.cdp = Some(CdpConfig { depth: 1, ..CdpConfig::default() });
        let s = simulate(&cfg, &trace[..1], Some(&graph)).unwrap();
        assert_eq!(s.prefetches, 0);
    }

    #[test]
    fn a_read_spans_a_gap_only_when_that_beats_a_second_io() {
        let five = [Extent { time_ns: 0, start: 0, blocks: 5, write: false }];
        // Block 2 is on the fast device. Transfer is free on SLOW, so blocks
        // 0..5 are one slow read (10 ms) beside the fast one (1 ms).
        let cfg = bare(FastUse::Partition([2].into_iter().collect()));
        let s = simulate(&cfg, &five, None).unwrap();
        assert_eq!(s.total_response_ns, 10 * MS);
        assert_eq!((s.blocks_fast, s.blocks_slow), (1, 4));
        assert_eq!((s.slow_ios, s.fast_ios), (1, 1));
        // At 4096 B/s a block takes 1 s to transfer, far more than the 1 ms
        // latency: two reads of two blocks, the second queued behind the
        // first: (1 ms + 2 s) + (1 ms + 2 s). Reading through would be 5 s.
        let crawl = Device { latency_ns: MS, bytes_per_sec: 4096 };
        let cfg = TierConfig { slow: crawl, ..cfg };
        let s = simulate(&cfg, &five, None).unwrap();
        assert_eq!(s.total_response_ns, 2 * (MS + 2_000 * MS));
        assert_eq!((s.slow_ios, s.fast_ios), (2, 1));
    }

    #[test]
    fn writes_go_to_the_device_that_holds_the_block() {
        let cfg = bare(FastUse::Partition([1].into_iter().collect()));
        let w = |t, b| Extent { time_ns: t, start: b, blocks: 1, write: true };
        let s = simulate(&cfg, &[w(0, 1), w(20 * MS, 2)], None).unwrap();
        assert_eq!(s.total_response_ns, 11 * MS);
        assert_eq!((s.blocks_fast, s.blocks_slow), (1, 1));
    }
}

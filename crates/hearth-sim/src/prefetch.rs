//! Prefetching simulation: replays a context-tagged trace through a
//! storage cache with a prefetch partition and one prefetcher, optionally
//! timing backend reads on a device where prefetches run at low priority.
//!
//! Counters start after a warm-up share of the I/Os (default 30%), which is
//! also the training part offline miners (C-Miner*) learn from, so every
//! scheme is measured on the same requests. Writes are demand accesses of
//! the cache but never read from the device (whole-block writes, write-back),
//! and, as in the server, prefetchers see only the reads.

use hearth_core::{Key, Op};
use hearth_prefetch::account::{Account, Accountant, Fate};
use hearth_prefetch::ceiling::{Oracle, Predictable};
use hearth_prefetch::cminer;
use hearth_prefetch::quickmine::{self, LiftStats, QuickMine};
use hearth_prefetch::{Class, Demand, GateStats, PrefetchCache, PrefetchError, PrefetchSpec, Prefetcher, Stats};
use hearth_trace::ctx::CtxEvent;
use serde::Serialize;

use crate::device::{Device, DeviceQueue};

#[derive(Clone, Debug)]
pub struct Setup {
    pub cache_bytes: u64,
    /// How much of the cache prefetched blocks may hold.
    pub partition: PartitionShare,
    pub block_size: u32,
    /// Main-cache policy (`lru`).
    pub main_policy: hearth_policy::PolicySpec,
    /// Share of I/Os before counting starts (and offline training ends).
    pub warmup: f64,
    pub device: Option<Device>,
    /// Keep the miss account (`hearth_prefetch::account`): why each
    /// predictable miss was missed. Costs memory (every rule ever mined).
    pub explain: bool,
}

/// How much of the cache prefetched blocks may hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PartitionShare {
    /// At most this share of the cache (0.04); see [`PrefetchCache::new`].
    Fixed(f64),
    /// Sized as the traffic goes, from this share and never below it
    /// ([`PrefetchCache::adaptive`]).
    Adaptive(f64),
}

impl PartitionShare {
    /// The share the partition starts at.
    pub fn start(self) -> f64 {
        match self {
            PartitionShare::Fixed(share) | PartitionShare::Adaptive(share) => share,
        }
    }
}

/// Device-time results: read latency as clients see it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Timing {
    pub mean_read_ns: f64,
    pub demand_reads: u64,
    pub prefetch_reads: u64,
    /// Longest time a demand read waited because a prefetch was in service.
    pub max_demand_delay_by_prefetch_ns: u64,
}

/// Where the read misses left after prefetching (after the warm-up) go,
/// sorted by the ceiling's oracle (`hearth_prefetch::ceiling`, lookahead
/// [`REMAINING_LOOKAHEAD`]) as the trace so far shows them.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Remaining {
    /// In-context predictable, and prefetched since the block's last demand
    /// but dropped from the partition unused before this one.
    pub in_context_dropped: u64,
    /// In-context predictable and not prefetched since its last demand.
    pub in_context_not_prefetched: u64,
    /// Not predictable in context (another context, seen elsewhere, first touch).
    pub not_in_context: u64,
}

/// The oracle's lookahead for [`Remaining`]: the ceiling's default.
pub const REMAINING_LOOKAHEAD: u32 = 3;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Outcome {
    pub scheme: String,
    pub spec: String,
    pub stats: Stats,
    /// Rules (or graph edges) the prefetcher held at the end.
    pub rules: usize,
    pub timing: Option<Timing>,
    pub remaining: Remaining,
    /// With [`Setup::explain`]: why each predictable miss was missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<Account>,
    /// What the scheme's net-benefit gate did after the warm-up, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<GateStats>,
    /// What the scheme's lift of off hit lookups did after the warm-up, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lift: Option<LiftStats>,
}

/// Index of the event at which `share` of the I/Os have been seen.
pub fn warmup_split(events: &[CtxEvent], share: f64) -> usize {
    let ios = events.iter().filter(|e| matches!(e, CtxEvent::Io { .. })).count();
    let target = (ios as f64 * share.clamp(0.0, 1.0)) as usize;
    let mut seen = 0;
    for (i, e) in events.iter().enumerate() {
        if seen == target {
            return i;
        }
        if matches!(e, CtxEvent::Io { .. }) {
            seen += 1;
        }
    }
    events.len()
}

/// Replays `events` with the prefetcher `spec`.
pub fn simulate(events: &[CtxEvent], spec: &PrefetchSpec, setup: &Setup) -> Result<Outcome, PrefetchError> {
    let split = warmup_split(events, setup.warmup);
    let mut prefetcher = spec.build(setup.block_size, &events[..split])?;
    let shape = hearth_prefetch::CacheShape {
        policy: setup.main_policy.clone(),
        total_bytes: setup.cache_bytes,
        prefetch_fraction: setup.partition.start(),
        block_size: setup.block_size,
    };
    let mut cache = PrefetchCache::with_shape(&shape)?;
    if let PartitionShare::Adaptive(_) = setup.partition {
        cache = cache.adaptive();
    }
    prefetcher.shape_cache(&shape)?;
    // The throttle's shadow queue: as many blocks as the partition starts with.
    let partition_blocks = cache.partition_limit() / u64::from(setup.block_size);
    let mut accountant = setup.explain.then(|| Accountant::new(prefetcher.as_mut(), partition_blocks as usize));
    let mut device = setup.device.map(DeviceQueue::new);
    let bytes = u64::from(setup.block_size);
    // Background request number of each prefetched block, to tell whether
    // the device has started reading it.
    let mut prefetch_seq: hearth_core::KeyMap<u64> = hearth_core::KeyMap::default();
    let mut issued_to_device = 0u64;
    let (mut read_ns, mut reads, mut demand_reads, mut prefetch_reads) = (0u64, 0u64, 0u64, 0u64);
    let mut out: Vec<Key> = Vec::with_capacity(32);
    let mut spare: Vec<Key> = Vec::with_capacity(8);
    let mut oracle = Oracle::new(REMAINING_LOOKAHEAD)?;
    let mut remaining = Remaining::default();
    // Blocks prefetched and dropped unused since their last demand.
    let mut dropped: hearth_core::KeyMap<()> = hearth_core::KeyMap::default();
    // The gate's counters at the split, to count only after the warm-up.
    let mut gate_at_split = GateStats::default();
    let mut lift_at_split = LiftStats::default();
    for (i, e) in events.iter().enumerate() {
        if i == split {
            cache.reset_stats();
            gate_at_split = prefetcher.gate_stats().unwrap_or_default();
            lift_at_split = prefetcher.lift_stats().unwrap_or_default();
            accountant.iter_mut().for_each(Accountant::start_counting);
            (read_ns, reads, demand_reads, prefetch_reads) = (0, 0, 0, 0);
        }
        match *e {
            CtxEvent::Begin { ctx, class, .. } => {
                oracle.event(e, false);
                accountant.iter_mut().for_each(|a| a.begin(ctx));
                prefetcher.begin(ctx, class)
            }
            CtxEvent::End { ctx, .. } => {
                oracle.event(e, false);
                accountant.iter_mut().for_each(|a| a.end(ctx));
                prefetcher.end(ctx)
            }
            CtxEvent::Io { time_ns, ctx, op, block } => {
                let class = cache.demand(block, op);
                // Outcomes the demand caused; those after it, prefetches landing did.
                let at_demand = cache.pending_outcomes();
                accountant.iter_mut().for_each(Accountant::demand);
                prefetcher.demand_seen(block, op);
                cache.drain_displaced(|k| prefetcher.displaced(k));
                let counted = i >= split && class == Class::Miss && op == Op::Read;
                let was_dropped = dropped.remove(&block).is_some();
                let verdict = oracle.event(e, counted);
                match verdict {
                    Some(Predictable::InContext) if was_dropped => remaining.in_context_dropped += 1,
                    Some(Predictable::InContext) => remaining.in_context_not_prefetched += 1,
                    Some(_) => remaining.not_in_context += 1,
                    None => {}
                }
                let started =
                    |q: &DeviceQueue, b: Key| prefetch_seq.get(&b).is_some_and(|&s| s < q.background_stats.requests);
                if let (Some(a), Op::Read) = (accountant.as_mut(), op) {
                    let late =
                        i >= split && class == Class::Promote && device.as_ref().is_some_and(|q| !started(q, block));
                    a.read(ctx, block, class, verdict, late, prefetcher.as_ref());
                }
                if let (Some(q), Op::Read) = (device.as_mut(), op) {
                    let wait = match class {
                        Class::Hit => 0,
                        Class::Promote if started(q, block) => 0,
                        Class::Promote | Class::Miss => {
                            demand_reads += 1;
                            q.demand(time_ns, bytes)
                        }
                    };
                    read_ns += wait;
                    reads += 1;
                }
                out.clear();
                spare.clear();
                if op == Op::Read {
                    let demand = Demand { block, ctx, time_ns, op, class };
                    let (cached, in_spare) = (|k| cache.contains_outside_spare(k), |k| cache.is_spare(k));
                    prefetcher.access_tiered(&demand, &cached, &in_spare, &mut out);
                    prefetcher.take_spare(&mut spare);
                    accountant.iter_mut().for_each(|a| a.lookup(ctx, prefetcher.as_ref()));
                }
                // Base prefetches first; spare ones only into the room they leave.
                let base = out.iter().map(|&k| (k, false));
                for (k, is_spare) in base.chain(spare.iter().map(|&k| (k, true))) {
                    let issued = if is_spare { cache.prefetch_spare(k) } else { cache.prefetch(k) };
                    if issued {
                        accountant.iter_mut().for_each(|a| a.issued(ctx, k, i >= split));
                        if let Some(q) = device.as_mut() {
                            q.background(time_ns, bytes);
                            prefetch_seq.insert(k, issued_to_device);
                            issued_to_device += 1;
                            prefetch_reads += 1;
                        }
                    }
                }
                let mut nth = 0;
                cache.drain_outcomes(|k, used| {
                    prefetch_seq.remove(&k);
                    if !used {
                        dropped.insert(k, ());
                    }
                    let fate = match (used, nth < at_demand) {
                        (true, _) => Fate::Used,
                        (false, true) => Fate::DroppedAtDemand,
                        (false, false) => Fate::PushedOut,
                    };
                    nth += 1;
                    accountant.iter_mut().for_each(|a| a.outcome(k, fate));
                    prefetcher.outcome(k, used)
                });
            }
        }
    }
    let timing = device.map(|q| Timing {
        mean_read_ns: if reads == 0 { 0.0 } else { read_ns as f64 / reads as f64 },
        demand_reads,
        prefetch_reads,
        max_demand_delay_by_prefetch_ns: q.max_demand_delay_by_background_ns,
    });
    Ok(Outcome {
        scheme: prefetcher.name(),
        spec: spec.to_string(),
        stats: cache.stats(),
        rules: prefetcher.rule_count(),
        timing,
        remaining,
        account: accountant.map(Accountant::finish),
        gate: prefetcher.gate_stats().map(|g| g.since(&gate_at_split)),
        lift: prefetcher.lift_stats().map(|l| l.since(&lift_at_split)),
    })
}

/// Rule counts of mining the same trace with and without contexts.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MiningComparison {
    pub lookahead: usize,
    pub aware_prefixes: usize,
    pub aware_rules: usize,
    pub oblivious_prefixes: usize,
    pub oblivious_rules: usize,
    /// C-Miner* over per-context sequences vs fixed segments of the
    /// interleaved stream (same segment length, gap, support, confidence).
    pub cminer_aware: cminer::MineStats,
    pub cminer_oblivious: cminer::MineStats,
}

/// Mines every I/O of `events` (no cache bound) per context and over the
/// interleaved stream, with QuickMine's rules (lookahead `g`) and C-Miner*'s.
pub fn compare_mining(
    events: &[CtxEvent],
    g: usize,
    cminer_cfg: &cminer::Config,
) -> Result<MiningComparison, PrefetchError> {
    let count = |context_aware: bool| -> Result<(usize, usize), PrefetchError> {
        // No prefix bound; 64 suffixes per prefix is far more than the
        // lookahead ever offers a repeatable prefix.
        let cfg = quickmine::Config {
            max_prefixes: usize::MAX,
            max_suffixes: 64,
            grace: 0,
            degree: 0,
            throttle: false,
            context_aware,
            on_promote: false,
            ..quickmine::Config::paper(g)
        };
        let mut q = QuickMine::new(cfg)?;
        let mut out = Vec::new();
        for e in events {
            match *e {
                CtxEvent::Begin { ctx, class, .. } => q.begin(ctx, class),
                CtxEvent::End { ctx, .. } => q.end(ctx),
                CtxEvent::Io { time_ns, ctx, op, block } => {
                    q.access(&Demand { block, ctx, time_ns, op, class: Class::Hit }, &|_| true, &mut out)
                }
            }
        }
        Ok((q.rule_cache().prefixes(), q.rule_cache().rules()))
    };
    let (aware_prefixes, aware_rules) = count(true)?;
    let (oblivious_prefixes, oblivious_rules) = count(false)?;

    let mut per_context: hearth_core::KeyMap<Vec<Key>> = hearth_core::KeyMap::default();
    let mut sequences: Vec<Vec<Key>> = Vec::new();
    let mut stream = Vec::new();
    for e in events {
        match *e {
            CtxEvent::Begin { ctx, .. } => {
                per_context.insert(u64::from(ctx), Vec::new());
            }
            CtxEvent::End { ctx, .. } => sequences.extend(per_context.remove(&u64::from(ctx))),
            CtxEvent::Io { ctx, block, .. } => {
                per_context.entry(u64::from(ctx)).or_default().push(block);
                stream.push(block);
            }
        }
    }
    sequences.extend(per_context.into_values());
    let segment = cminer_cfg.segment.max(1);
    let aware_segments = sequences.iter().flat_map(|s| s.chunks(segment));
    let cminer_aware = cminer::mine(aware_segments, cminer_cfg).stats;
    let cminer_oblivious = cminer::mine(stream.chunks(segment), cminer_cfg).stats;
    Ok(MiningComparison {
        lookahead: g,
        aware_prefixes,
        aware_rules,
        oblivious_prefixes,
        oblivious_rules,
        cminer_aware,
        cminer_oblivious,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_trace::workload::{generate, Kind, WorkloadConfig};

    fn setup(cache_bytes: u64) -> Setup {
        Setup {
            cache_bytes,
            partition: PartitionShare::Fixed(0.04),
            block_size: 4096,
            main_policy: "lru".parse().unwrap(),
            warmup: 0.3,
            device: None,
            explain: false,
        }
    }

    /// A repeated multi-context workload where every context of a class
    /// reads the same blocks: context-aware mining must turn most misses
    /// into promotes, and prefetches must not delay demand reads by more
    /// than one service time.
    /// Three clients interleave; class c reads 1000c.. in one of five fixed orders.
    fn three_repeating_classes() -> Vec<CtxEvent> {
        let (mut events, mut t) = (Vec::new(), 0);
        for round in 0..300u32 {
            for c in 0..3u32 {
                events.push(CtxEvent::Begin { time_ns: t, ctx: round * 3 + c, class: c });
            }
            for step in 0..8u64 {
                for c in 0..3u32 {
                    t += 1_000_000;
                    let block = u64::from(c) * 1000 + (step * 37 + u64::from(round % 5) * 101) % 400;
                    events.push(CtxEvent::Io { time_ns: t, ctx: round * 3 + c, op: Op::Read, block });
                }
            }
            for c in 0..3u32 {
                events.push(CtxEvent::End { time_ns: t, ctx: round * 3 + c });
            }
        }
        events
    }

    /// The remaining misses add up to the read misses; without prefetching
    /// none was dropped, and these repeating contexts are predictable once
    /// seen; with a one-block partition QuickMine's prefetches are pushed
    /// out by the next ones before their demand.
    #[test]
    fn remaining_misses_are_sorted_by_predictability_and_drops() {
        let events = three_repeating_classes();
        let none = simulate(&events, &"none".parse().unwrap(), &setup(4096 * 100)).unwrap();
        let r = &none.remaining;
        assert_eq!(r.in_context_dropped, 0);
        assert_eq!(r.in_context_not_prefetched + r.not_in_context, none.stats.misses);
        assert!(r.in_context_not_prefetched > 9 * r.not_in_context, "{r:?}");
        let tight = Setup { partition: PartitionShare::Fixed(0.01), ..setup(4096 * 100) };
        let qm = simulate(&events, &"quickmine".parse().unwrap(), &tight).unwrap();
        let r = &qm.remaining;
        assert!(r.in_context_dropped > 0, "{r:?}");
        assert_eq!(r.in_context_dropped + r.in_context_not_prefetched + r.not_in_context, qm.stats.misses);
    }

    #[test]
    fn quickmine_learns_repeated_contexts_and_prefetches_stay_low_priority() {
        let events = three_repeating_classes();
        let device = Device { latency_ns: 500_000, bytes_per_sec: u64::MAX };
        // A 20-block prefetch partition (20%): three clients with five blocks
        // ahead each fit.
        let s = Setup { device: Some(device), partition: PartitionShare::Fixed(0.2), ..setup(4096 * 100) };
        let none = simulate(&events, &"none".parse().unwrap(), &s).unwrap();
        let qm = simulate(&events, &"quickmine".parse().unwrap(), &s).unwrap();
        assert!(none.stats.miss_rate() > 0.9, "the cache is far smaller than the 120 distinct blocks per 5 rounds");
        assert!(qm.stats.miss_rate() < none.stats.miss_rate() / 2.0, "{:?} vs {:?}", qm.stats, none.stats);
        assert!(qm.stats.accuracy() > 0.5, "{:?}", qm.stats);
        let (tn, tq) = (none.timing.unwrap(), qm.timing.unwrap());
        assert!(tq.mean_read_ns < tn.mean_read_ns);
        assert!(tq.max_demand_delay_by_prefetch_ns <= device.service_ns(4096));
    }

    #[test]
    fn generated_workload_runs_every_scheme_and_counts_rules() {
        let cfg = WorkloadConfig { kind: Kind::Rubis, clients: 20, transactions: 400, seed: 1 };
        let events = generate(&cfg).unwrap();
        for spec in ["none", "seq", "run", "cminer", "borg", "quickmine"] {
            let o = simulate(&events, &spec.parse().unwrap(), &setup(4096 * 500)).unwrap();
            let s = &o.stats;
            assert_eq!(s.hits + s.promotes + s.misses, s.accesses, "{spec}");
            assert!(s.used <= s.issued && s.wasted <= s.issued, "{spec}");
        }
        let c = compare_mining(
            &events,
            5,
            &cminer::Config { segment: 64, max_gap: 4, min_support: 2, min_confidence: 0.3 },
        )
        .unwrap();
        assert!(c.aware_rules > 0 && c.oblivious_rules > c.aware_rules, "{c:?}");
    }

    fn footprint_bytes(events: &[CtxEvent]) -> u64 {
        let mut blocks: hearth_core::KeyMap<()> = hearth_core::KeyMap::default();
        for e in events {
            if let CtxEvent::Io { block, .. } = e {
                blocks.insert(*block, ());
            }
        }
        blocks.len() as u64 * 4096
    }

    /// The claim in small: at 100 clients, context-aware mining cuts
    /// misses where the context-oblivious schemes cannot, on both the
    /// TPC-W-like and the RUBiS-like mix.
    #[test]
    fn quickmine_beats_context_oblivious_schemes_at_100_clients() {
        for (kind, least) in [(Kind::TpcW, 0.2), (Kind::Rubis, 0.1)] {
            let events = generate(&WorkloadConfig { kind, clients: 100, transactions: 3000, seed: 1 }).unwrap();
            let s = setup(footprint_bytes(&events) / 4);
            let none = simulate(&events, &"none".parse().unwrap(), &s).unwrap().stats.miss_rate();
            let cut =
                |spec: &str| (none - simulate(&events, &spec.parse().unwrap(), &s).unwrap().stats.miss_rate()) / none;
            let quickmine = cut("quickmine");
            assert!(quickmine > least, "{kind:?}: QuickMine cut {quickmine}");
            for spec in ["seq", "run", "cminer", "borg"] {
                let c = cut(spec);
                assert!(c < quickmine / 3.0, "{kind:?}: {spec} cut {c} vs QuickMine {quickmine}");
            }
        }
    }

    #[test]
    fn quickmine_does_no_harm_on_dbt2() {
        let events = generate(&WorkloadConfig { kind: Kind::Dbt2, clients: 100, transactions: 1500, seed: 1 }).unwrap();
        let s = setup(footprint_bytes(&events) / 10);
        let none = simulate(&events, &"none".parse().unwrap(), &s).unwrap().stats.miss_rate();
        let quickmine = simulate(&events, &"quickmine".parse().unwrap(), &s).unwrap().stats.miss_rate();
        assert!(quickmine <= none * 1.01, "QuickMine {quickmine} vs none {none}");
    }
}

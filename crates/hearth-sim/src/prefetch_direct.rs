//! `hearth sim --prefetch`: every policy at every size with one prefetcher
//! that inserts into the cache itself, as libCacheSim's `cachesim
//! --prefetch` does ([`hearth_prefetch::direct`]): a hit on a prefetched
//! object is a hit. One pass over the trace feeds every (policy, size) run.

use hearth_prefetch::direct::DirectCache;
use hearth_prefetch::{CacheShape, PrefetchError, PrefetchSpec, Prefetcher, Stats};
use hearth_trace::TraceError;
use serde::Serialize;

use crate::source::Progress;
use crate::{SimResult, Simulation, SourceError, TraceSource};

/// The unit object ids count in, in object mode: libCacheSim's OBL takes
/// them as 512-byte sectors, and so do the block-counting prefetchers
/// (`seq`'s window, `run`'s trigger) here.
pub const OBJECT_UNIT: u32 = 512;

#[derive(Debug, thiserror::Error)]
pub enum DirectError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Prefetch(#[from] PrefetchError),
    #[error("{0} learns offline from a context trace's warm-up (or shadows a prefetch partition): use `hearth prefetch sim`")]
    NotDirect(String),
}

/// One policy at one size, with its prefetcher's counts (after the warm-up).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DirectRun {
    #[serde(flatten)]
    pub result: SimResult,
    pub prefetcher: String,
    /// Prefetched objects inserted.
    pub prefetches: u64,
    /// Hits on prefetched objects not demanded before.
    pub prefetch_hits: u64,
    /// Prefetched objects evicted for good before any demand.
    pub prefetch_wasted: u64,
}

struct Runner {
    cache: DirectCache,
    prefetcher: Box<dyn Prefetcher>,
    result: SimResult,
    at_warmup: Stats,
}

/// Runs `sim`'s policies and sizes over `source` with the prefetcher `spec`.
pub fn simulate(
    source: &TraceSource,
    sim: &Simulation,
    spec: &PrefetchSpec,
    progress: &dyn Progress,
) -> Result<Vec<DirectRun>, DirectError> {
    if matches!(spec.name(), "cminer" | "qm-select") {
        return Err(DirectError::NotDirect(spec.name().to_string()));
    }
    let prepared = sim.prepare(source, progress)?;
    let block_size = prepared.trace.block_size();
    let mut runners = Vec::new();
    for job in prepared.jobs(&sim.policies) {
        let mut prefetcher = spec.build(block_size.unwrap_or(OBJECT_UNIT), &[])?;
        prefetcher.shape_cache(&CacheShape {
            policy: job.policy.clone(),
            total_bytes: job.cache_bytes,
            prefetch_fraction: 0.0,
            block_size: block_size.unwrap_or(1),
        })?;
        let policy = job.policy.build(job.cache_bytes);
        let result = SimResult {
            policy: job.policy.label(&policy.name()),
            cache_bytes: job.cache_bytes,
            requests: 0,
            hits: 0,
            bytes: 0,
            hit_bytes: 0,
            interval_miss_ratios: Vec::new(),
            train_seconds: None,
        };
        runners.push(Runner {
            cache: DirectCache::new(policy, block_size),
            prefetcher,
            result,
            at_warmup: Stats::default(),
        });
    }
    let warmup = prepared.counting.warmup;
    let jobs = runners.len() as u64;
    progress.begin("simulating", prepared.trace.known_accesses().map(|n| n * jobs));
    let mut seen = 0u64;
    for a in prepared.trace.accesses()? {
        let a = a?;
        seen += 1;
        for r in &mut runners {
            let hit = r.cache.request(&a, r.prefetcher.as_mut()) != hearth_prefetch::Class::Miss;
            if seen == warmup {
                r.at_warmup = r.cache.stats().clone();
            }
            if seen > warmup {
                r.result.count(a.size, hit);
            }
        }
        if seen.is_multiple_of(1 << 16) {
            progress.advance((1 << 16) * jobs);
        }
    }
    progress.advance(seen % (1 << 16) * jobs);
    progress.end();
    let runs: Vec<DirectRun> = runners
        .into_iter()
        .map(|r| {
            let (now, then) = (r.cache.stats(), &r.at_warmup);
            DirectRun {
                result: r.result,
                prefetcher: r.prefetcher.name(),
                prefetches: now.issued - then.issued,
                prefetch_hits: now.used - then.used,
                prefetch_wasted: now.wasted - then.wasted,
            }
        })
        .collect();
    if runs.first().is_none_or(|r| r.result.requests == 0 && warmup == 0) {
        return Err(SourceError::NoRequests(prepared.trace.trace().clone()).into());
    }
    Ok(runs)
}

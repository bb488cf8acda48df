//! The functional simulator: replay a trace against replacement policies at
//! several cache sizes and count hits.
//!
//! [`stream::run_streaming`] reads a trace once, in chunks, and feeds every
//! (policy, size) job from the same chunks: memory does not grow with the
//! trace's length. [`Trace`] holds a whole trace in memory (40 bytes an
//! access) for the studies that need random access to it (two-level runs,
//! warmup) and as the reference the streaming path is tested against.
//!
//! Front ends (the `hearth` command line, the Python package) share
//! [`source`] (opening a trace or a `synth:` workload, the first pass),
//! [`run`] (policy lists, warm-up, [`simulate`]) and [`sweep`] (sweep files).
//!
//! The sans-I/O estimators (stack distances and SHARDS, key sampling, the
//! device model, [`SimResult`]) are `hearth-estimate`'s, below this crate so
//! that the server uses them without the simulator; they are re-exported
//! where this crate always had them.

mod error;
pub mod hierarchy;
pub mod minisim;
pub mod mrc;
pub mod pace;
pub mod prefetch;
pub mod prefetch_direct;
pub mod run;
pub mod scan;
mod size;
pub mod source;
pub mod stream;
pub mod sweep;

pub use error::HierarchyError;
pub use hearth_estimate::{device, parallel_map, SettingError, SimResult};
pub use run::{simulate, Simulation, TraceRun};
pub use size::{mrc_grid, parse_sizes, CacheSize, DEFAULT_SIZES, MRC_SIZES};
pub use source::{SourceError, TraceInput, TraceSource};

use hearth_core::{key_map, Access, Key, Policy};
use hearth_policy::PolicySpec;
use hearth_trace::{Mode, Request, TraceError};

/// A trace loaded for simulation.
pub struct Trace {
    pub accesses: Vec<Access>,
    /// Distinct keys requested.
    pub unique_keys: u64,
    /// Bytes of all distinct keys (each counted with its first size).
    pub footprint_bytes: u64,
    pub mode: Mode,
}

impl Trace {
    /// Reads a whole trace and prepares it (next-use times, footprint).
    pub fn load(reader: impl Iterator<Item = Result<Request, TraceError>>, mode: Mode) -> Result<Trace, TraceError> {
        let accesses = hearth_trace::accesses(reader, mode).collect::<Result<Vec<_>, _>>()?;
        Ok(Trace::from_accesses(accesses, mode))
    }

    /// Prepares accesses that are already in memory (synthetic workloads, tests).
    pub fn from_accesses(mut accesses: Vec<Access>, mode: Mode) -> Trace {
        hearth_trace::fill_next_access(&mut accesses);
        let mut seen = key_map::<()>(accesses.len() / 4);
        let mut footprint_bytes = 0;
        for a in &accesses {
            if seen.insert(a.key, ()).is_none() {
                footprint_bytes += u64::from(a.size);
            }
        }
        Trace { unique_keys: seen.len() as u64, footprint_bytes, accesses, mode }
    }

    /// Size of one block in block mode; objects have no fixed unit.
    pub fn block_size(&self) -> Option<u32> {
        match self.mode {
            Mode::Block { block_size } => Some(block_size),
            Mode::Object => None,
        }
    }
}

/// How often (in requests) a running job reports progress.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Replays `accesses` through `policy` and counts hits. `progress` receives
/// the number of requests done since its previous call.
pub fn replay(
    policy: &mut dyn Policy,
    accesses: impl IntoIterator<Item = Access>,
    progress: &(dyn Fn(u64) + Sync),
) -> SimResult {
    let mut evicted: Vec<Key> = Vec::with_capacity(64);
    let (mut requests, mut hits, mut bytes, mut hit_bytes) = (0u64, 0u64, 0u64, 0u64);
    for a in accesses {
        evicted.clear();
        let size = u64::from(a.size);
        requests += 1;
        bytes += size;
        if policy.access(&a, &mut evicted) {
            hits += 1;
            hit_bytes += size;
        }
        if requests % PROGRESS_EVERY == 0 {
            progress(PROGRESS_EVERY);
        }
    }
    progress(requests % PROGRESS_EVERY);
    SimResult {
        policy: policy.name(),
        cache_bytes: policy.capacity(),
        requests,
        hits,
        bytes,
        hit_bytes,
        interval_miss_ratios: Vec::new(),
        train_seconds: policy.training_time().map(|t| t.as_secs_f64()),
    }
}

/// One simulation to run: a policy spec (see `hearth_policy::build`) at a capacity.
#[derive(Clone, Debug)]
pub struct Job {
    pub policy: PolicySpec,
    pub cache_bytes: u64,
}

/// Runs every job over the trace on `threads` threads and returns results in
/// job order.
pub fn run_jobs(trace: &Trace, jobs: &[Job], threads: usize, progress: &(dyn Fn(u64) + Sync)) -> Vec<SimResult> {
    parallel_map(jobs, threads, |job| {
        let mut policy = job.policy.build(job.cache_bytes);
        replay(policy.as_mut(), trace.accesses.iter().copied(), progress)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;

    fn acc(keys: &[u64]) -> Vec<Access> {
        keys.iter()
            .enumerate()
            .map(|(i, &key)| Access { key, size: 1, vtime: i as u64, next_access: 0, op: Op::Read, ctx: 0 })
            .collect()
    }

    #[test]
    fn counts_hits_bytes_and_footprint() {
        let trace = Trace::from_accesses(acc(&[1, 2, 1, 3, 1, 2]), Mode::Object);
        assert_eq!(trace.unique_keys, 3);
        assert_eq!(trace.footprint_bytes, 3);
        // next_access was filled by the first pass.
        assert_eq!(trace.accesses[0].next_access, 2);
        let jobs = [
            Job { policy: "lru".parse().unwrap(), cache_bytes: 2 },
            Job { policy: "lru".parse().unwrap(), cache_bytes: 3 },
        ];
        let r = run_jobs(&trace, &jobs, 2, &|_| {});
        // Capacity 2: 1 2 [1 hit] 3 (evicts 2) [1 hit] 2 (miss) => 2 hits.
        assert_eq!((r[0].requests, r[0].hits, r[0].hit_bytes), (6, 2, 2));
        // Capacity 3 holds everything: only the 3 cold misses.
        assert_eq!(r[1].hits, 3);
        assert!((r[1].hit_ratio() - 0.5).abs() < 1e-12);
    }
}

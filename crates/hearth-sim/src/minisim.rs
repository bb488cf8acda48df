//! Miniature simulation (Waldspurger et al., ATC '17): run any policy on a
//! spatial sample of the items at rate R with its cache scaled by R; its
//! miss ratio estimates the full-size cache's. Every grid point runs in the
//! same streaming pass, so a whole curve of any policy costs about R of one
//! full simulation per point.

use std::collections::BTreeMap;

use hearth_trace::sample;

use crate::source::{SourceError, Streamed};
use crate::stream::{run_streaming, Counting};
use crate::{Job, SimResult};

/// Fewest objects a miniature cache holds. A policy part sized as a share
/// of the cache has to hold an object for the miniature to behave as the
/// full cache does: LIRS's HIR queue is 1% of the cache and LIRS never
/// admits an object larger than it, so a LIRS miniature of fewer than 100
/// objects admits nothing at all where the full cache works normally. 100
/// is one over the smallest default part share of any registered policy
/// (LIRS's 1%), fixed before any error was measured. In object mode the
/// objects counted are of the trace's largest size: a miniature of 100
/// objects of its mean size still turns away every object above the mean
/// that the full cache's part takes. A grid point whose cache × R holds
/// fewer runs at twice the rate, again until it holds enough or the rate
/// reaches 1 (a full simulation); doubling lets points share passes (one
/// per distinct rate).
pub const MIN_MINIATURE_OBJECTS: u64 = 100;

/// Runs `jobs` on the items kept at `rate` (0, 1], each cache scaled by its
/// point's rate (whole blocks in block mode, at least one; see
/// [`MIN_MINIATURE_OBJECTS`]). Results carry the full-size cache and the
/// whole stream's requests; misses are the sample's scaled by one over the
/// rate (SHARDS_adj, as [`crate::mrc::Shards`] counts), in job order.
/// An object is a block in block mode; in object mode, the trace's largest
/// object when a first pass measured it, else one byte.
pub fn run_miniature(
    trace: &Streamed,
    jobs: &[Job],
    rate: f64,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, SourceError> {
    if !(rate > 0.0 && rate <= 1.0) {
        return Err(crate::SettingError::SamplingRate { rate }.into());
    }
    let unit = u64::from(trace.block_size().unwrap_or(1));
    let sizes: Vec<u64> = jobs.iter().map(|j| j.cache_bytes).collect();
    per_raised_rate(trace, &sizes, rate, |rate, members| {
        let group: Vec<&Job> = members.iter().map(|&i| &jobs[i]).collect();
        run_sampled(trace, &group, rate, unit, threads, progress)
    })
}

/// Runs `pass(rate, members)` once per sampling rate that `cache_bytes`
/// need (see [`MIN_MINIATURE_OBJECTS`]): `members` are the indices of the
/// sizes sampled at that rate, and `pass` returns their results in that
/// order. The results come back in the order of `cache_bytes`.
fn per_raised_rate<T>(
    trace: &Streamed,
    cache_bytes: &[u64],
    rate: f64,
    mut pass: impl FnMut(f64, &[usize]) -> Result<Vec<T>, SourceError>,
) -> Result<Vec<T>, SourceError> {
    let mut results: Vec<Option<T>> = cache_bytes.iter().map(|_| None).collect();
    for (rate, members) in raised_rates(trace, cache_bytes, rate, ObjectSize::Largest) {
        for (i, r) in members.iter().zip(pass(rate, &members)?) {
            results[*i] = Some(r);
        }
    }
    Ok(results.into_iter().map(|r| r.expect("every size is in a group")).collect())
}

/// Which size an object is taken to have in object mode, for
/// [`MIN_MINIATURE_OBJECTS`].
#[derive(Clone, Copy)]
pub(crate) enum ObjectSize {
    /// The trace's mean: what a count of objects goes by (SHARDS).
    Mean,
    /// The trace's largest: what a part of the cache must hold (miniatures).
    Largest,
}

/// The sampling rates `cache_bytes` need (see [`MIN_MINIATURE_OBJECTS`]),
/// lowest first, each with the indices of the sizes sampled at it.
pub(crate) fn raised_rates(
    trace: &Streamed,
    cache_bytes: &[u64],
    rate: f64,
    object: ObjectSize,
) -> Vec<(f64, Vec<usize>)> {
    let object = object_bytes(trace, object);
    let mut by_rate: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, &bytes) in cache_bytes.iter().enumerate() {
        by_rate.entry(doublings(bytes, rate, object)).or_default().push(i);
    }
    by_rate.into_iter().map(|(doubled, members)| ((rate * f64::from(1u32 << doubled)).min(1.0), members)).collect()
}

/// The size of an object, for [`MIN_MINIATURE_OBJECTS`]: a block in block
/// mode; in object mode, the trace's mean or largest object size when a
/// first pass measured it, else one byte.
fn object_bytes(trace: &Streamed, object: ObjectSize) -> u64 {
    match (trace.block_size(), &trace.scan, object) {
        (Some(block), _, _) => u64::from(block),
        (None, Some(scan), ObjectSize::Mean) if scan.unique_keys > 0 => {
            (scan.footprint_bytes / scan.unique_keys).max(1)
        }
        (None, Some(scan), ObjectSize::Largest) => scan.largest_object_bytes.max(1),
        (None, _, _) => 1,
    }
}

/// How many times `rate` doubles before a cache of `cache_bytes` scaled by
/// it holds [`MIN_MINIATURE_OBJECTS`] objects of `object` bytes (or the
/// rate reaches 1).
fn doublings(cache_bytes: u64, rate: f64, object: u64) -> u32 {
    let wanted = (MIN_MINIATURE_OBJECTS * object) as f64;
    let mut doubled = 0;
    while rate * f64::from(1u32 << doubled) < 1.0 && cache_bytes as f64 * rate * f64::from(1u32 << doubled) < wanted {
        doubled += 1;
    }
    doubled
}

/// One pass over the sample at `rate` for `jobs`.
fn run_sampled(
    trace: &Streamed,
    jobs: &[&Job],
    rate: f64,
    unit: u64,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, SourceError> {
    let scaled: Vec<Job> = jobs
        .iter()
        .map(|j| Job {
            policy: j.policy.clone(),
            cache_bytes: ((j.cache_bytes as f64 * rate / unit as f64).round() as u64).max(1) * unit,
        })
        .collect();
    let mut sampled = trace.sampled_accesses(sample::threshold(rate))?;
    let (mut kept, mut kept_bytes) = (0u64, 0u64);
    let counted = sampled.by_ref().inspect(|a| {
        if let Ok(a) = a {
            kept += 1;
            kept_bytes += u64::from(a.size);
        }
    });
    let results = run_streaming(counted, &scaled, Counting::default(), threads, progress)?;
    let skipped = sampled.skipped();
    let (requests, bytes) = (kept + skipped.requests, kept_bytes + skipped.bytes);
    let up = |n: u64| (n as f64 / rate).round() as u64;
    Ok(results
        .into_iter()
        .zip(jobs)
        .map(|(r, job)| SimResult {
            cache_bytes: job.cache_bytes,
            requests,
            hits: requests.saturating_sub(up(r.requests - r.hits)),
            bytes,
            hit_bytes: bytes.saturating_sub(up(r.bytes - r.hit_bytes)),
            ..r
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Needs, TraceSource};
    use hearth_core::{Access, Op, NEVER};

    /// `accesses`, with their next uses, as an oracleGeneral file in `dir`.
    fn oracle_general_file(dir: &std::path::Path, mut accesses: Vec<Access>) -> TraceSource {
        hearth_trace::fill_next_access(&mut accesses);
        let path = dir.join("trace.oracleGeneral.bin");
        hearth_trace::write_oracle_general(&path, &accesses).unwrap();
        TraceSource::new(&path)
    }

    #[test]
    fn rate_one_is_the_full_simulation_and_small_rates_come_close() {
        // Skewed over 100,000 blocks (density ~ 1/sqrt(key)), with no item
        // hot enough alone (the hottest gets 0.3%) to swing a 10% sample.
        let mut x = 7u64;
        let accesses: Vec<Access> = (0..400_000u64)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = ((x >> 11) as f64 / (1u64 << 53) as f64).max(1e-12);
                let key = (100_000f64 * u * u) as u64;
                Access { key, size: 1, vtime: i, next_access: NEVER, op: Op::Read, ctx: 0 }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let source = oracle_general_file(dir.path(), accesses);
        let trace = Streamed::open(&source, Needs::default(), &()).unwrap();
        let jobs: Vec<Job> = [1000u64, 5000, 20_000]
            .iter()
            .map(|&cache_bytes| Job { policy: "arc".parse().unwrap(), cache_bytes })
            .collect();
        let full = run_streaming(trace.accesses().unwrap(), &jobs, Counting::default(), 2, &|_| {}).unwrap();
        let same = run_miniature(&trace, &jobs, 1.0, 2, &|_| {}).unwrap();
        assert_eq!(same, full);
        let mini = run_miniature(&trace, &jobs, 0.1, 2, &|_| {}).unwrap();
        for (m, f) in mini.iter().zip(&full) {
            assert_eq!(m.cache_bytes, f.cache_bytes);
            assert!((m.miss_ratio() - f.miss_ratio()).abs() < 0.03, "{m:?} vs {f:?}");
        }
        assert!(run_miniature(&trace, &jobs, 0.0, 1, &|_| {}).is_err());
    }

    #[test]
    fn small_miniatures_run_at_a_doubled_rate_until_they_hold_enough_objects() {
        // 1% of 10,000 blocks is 100 blocks: enough.
        assert_eq!(doublings(10_000 * 4096, 0.01, 4096), 0);
        // 1% of 1,000 blocks is 10: 16% gives 160.
        assert_eq!(doublings(1000 * 4096, 0.01, 4096), 4);
        // A cache of 50 blocks can never hold 100: it runs in full.
        assert_eq!(doublings(50 * 4096, 0.01, 4096), 7);
        assert_eq!(doublings(50 * 4096, 1.0, 4096), 0);
    }

    #[test]
    fn in_object_mode_miniatures_count_the_largest_objects_and_shards_the_mean() {
        // 1,000 objects of 100 bytes and one of 1,000: mean 100 bytes (whole).
        let accesses: Vec<Access> = (0..1001u64)
            .map(|key| {
                let size = if key == 1000 { 1000 } else { 100 };
                Access { key, size, vtime: key, next_access: NEVER, op: Op::Read, ctx: 0 }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let source = oracle_general_file(dir.path(), accesses);
        let trace = Streamed::open(&source, Needs { totals: true, ..Needs::default() }, &()).unwrap();
        // At 1%, a 990 KB cache scales to 9.9 KB: 99 objects of the mean
        // size (one doubling to hold 100) but 9.9 of the largest (four: 158).
        assert_eq!(raised_rates(&trace, &[990_000], 0.01, ObjectSize::Mean), vec![(0.02, vec![0])]);
        assert_eq!(raised_rates(&trace, &[990_000], 0.01, ObjectSize::Largest), vec![(0.16, vec![0])]);
    }

    #[test]
    fn a_lirs_miniature_of_a_small_cache_admits_as_the_full_cache_does() {
        // LIRS at 2,000 blocks has a 20-block HIR queue; at 1% without the
        // minimum it would be 0.2 blocks, too small for any block.
        let mut source = TraceSource::new("synth:zipf:20000:0.9");
        source.requests = 200_000;
        let trace = Streamed::open(&source, Needs::default(), &()).unwrap();
        let jobs = [Job { policy: "lirs".parse().unwrap(), cache_bytes: 2000 * 4096 }];
        let full = run_streaming(trace.accesses().unwrap(), &jobs, Counting::default(), 1, &|_| {}).unwrap();
        let mini = run_miniature(&trace, &jobs, 0.01, 1, &|_| {}).unwrap();
        assert!(full[0].miss_ratio() < 0.9, "{:?}", full[0]);
        assert!((mini[0].miss_ratio() - full[0].miss_ratio()).abs() < 0.05, "{:?} vs {:?}", mini[0], full[0]);
    }
}

//! Miniature simulation (Waldspurger et al., ATC '17): run any policy on a
//! spatial sample of the items at rate R with its cache scaled by R; its
//! miss ratio estimates the full-size cache's. Every grid point runs in the
//! same streaming pass, so a whole curve of any policy costs about R of one
//! full simulation per point.

use hearth_core::Access;
use hearth_trace::sample;
use hearth_trace::TraceError;

use crate::stream::{run_streaming, Counting, StreamError};
use crate::{Job, SimResult};

/// Runs `jobs` on the items kept at `rate` (0, 1], each cache scaled by the
/// rate (whole `unit`s, at least one). Results carry the full-size cache and
/// the whole stream's requests; misses are the sample's scaled by 1/rate
/// (SHARDS_adj, as [`crate::mrc::Shards`] counts), in job order.
pub fn run_miniature(
    accesses: impl Iterator<Item = Result<Access, TraceError>>,
    jobs: &[Job],
    rate: f64,
    unit: u64,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, StreamError> {
    if !(rate > 0.0 && rate <= 1.0) {
        return Err(crate::SettingError::SamplingRate { rate }.into());
    }
    let threshold = sample::threshold(rate);
    let scaled: Vec<Job> = jobs
        .iter()
        .map(|j| Job {
            policy: j.policy.clone(),
            cache_bytes: ((j.cache_bytes as f64 * rate / unit as f64).round() as u64).max(1) * unit,
        })
        .collect();
    let (mut requests, mut bytes) = (0u64, 0u64);
    let sampled = accesses
        .inspect(|a| {
            if let Ok(a) = a {
                requests += 1;
                bytes += u64::from(a.size);
            }
        })
        .filter(|a| a.as_ref().map_or(true, |a| sample::keeps(a.key, threshold)));
    let results = run_streaming(sampled, &scaled, Counting::default(), threads, progress)?;
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
    use hearth_core::Op;

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
                Access { key, size: 1, vtime: i, next_access: 0, op: Op::Read, ctx: 0 }
            })
            .collect();
        let jobs: Vec<Job> =
            [1000u64, 5000, 20_000].iter().map(|&cache_bytes| Job { policy: "arc".into(), cache_bytes }).collect();
        let full = run_streaming(accesses.iter().copied().map(Ok), &jobs, Counting::default(), 2, &|_| {}).unwrap();
        let same = run_miniature(accesses.iter().copied().map(Ok), &jobs, 1.0, 1, 2, &|_| {}).unwrap();
        assert_eq!(same, full);
        let mini = run_miniature(accesses.iter().copied().map(Ok), &jobs, 0.1, 1, 2, &|_| {}).unwrap();
        for (m, f) in mini.iter().zip(&full) {
            assert_eq!(m.cache_bytes, f.cache_bytes);
            assert!((m.miss_ratio() - f.miss_ratio()).abs() < 0.03, "{m:?} vs {f:?}");
        }
        assert!(run_miniature(std::iter::empty(), &jobs, 0.0, 1, 1, &|_| {}).is_err());
    }
}

//! SHARDS over a trace: the hot keys a stratified sample tracks exactly,
//! and every rate a curve's sizes need drawn in one read
//! ([`shards_pass`]).

use hearth_estimate::mrc::{Shards, ShardsMode};
use hearth_estimate::sample::AlwaysKept;

use crate::minisim;
use crate::source::{SourceError, Streamed};
use crate::stream::run_pipelined;
use crate::SimResult;

/// Requests at the start of the trace among which the hot keys are the
/// most requested: a bounded first look, so choosing them costs the same
/// on any trace length.
pub const HOT_KEYS_FROM: usize = 1 << 20;

/// A SHARDS curve: one sample, or at a fixed rate one per rate its sizes
/// needed (see [`shards_pass`]).
pub struct ShardsCurve {
    rate: f64,
    results: Vec<SimResult>,
    sampled_keys: usize,
}

impl ShardsCurve {
    /// The rate asked for (fixed rate), or the one the sample ended at
    /// (fixed size).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Estimated LRU results, in the order of the sizes given.
    pub fn results(&self) -> Vec<SimResult> {
        self.results.clone()
    }

    /// Distinct keys of the smallest sample used (see
    /// [`TRUSTED_SAMPLE_KEYS`](super::TRUSTED_SAMPLE_KEYS)).
    pub fn sampled_keys(&self) -> usize {
        self.sampled_keys
    }
}

/// The `count` keys most requested among the first [`HOT_KEYS_FROM`]
/// requests of `trace` (ties: the lower key), as its passes hand keys out.
pub fn hot_keys(trace: &Streamed, count: usize) -> Result<AlwaysKept, SourceError> {
    if count == 0 {
        return Ok(AlwaysKept::default());
    }
    // Sorted and counted in runs: a hash map of up to 2^20 keys missed the
    // cache on nearly every request, and cost several times as much.
    let mut keys = Vec::with_capacity(HOT_KEYS_FROM);
    for a in trace.sampled_accesses(u64::MAX)?.take(HOT_KEYS_FROM) {
        keys.push(a?.key);
    }
    keys.sort_unstable();
    let mut busiest: Vec<(u64, u32)> = keys.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() as u32)).collect();
    let busier = |a: &(u64, u32), b: &(u64, u32)| b.1.cmp(&a.1).then(a.0.cmp(&b.0));
    if busiest.len() > count {
        busiest.select_nth_unstable_by(count, busier);
        busiest.truncate(count);
    }
    Ok(AlwaysKept::new(busiest.into_iter().map(|(key, _)| key)))
}

/// Runs SHARDS over `trace`. At a fixed rate, the sample is stratified on
/// `hot_keys` keys ([`hot_keys`]; 0 for SHARDS_adj), and a size whose
/// cache scaled by the rate would hold fewer than
/// [`MIN_MINIATURE_OBJECTS`](minisim::MIN_MINIATURE_OBJECTS) objects is
/// estimated from a sample at twice the rate, again until it holds enough
/// (the rule miniature simulations follow, for the same reason: a scaled
/// cache of a few objects sees every sampled distance in steps of 1/rate
/// objects, and one sampled hot item decides its curve). Every rate's
/// sample is drawn in one read of the trace ([`fixed_rate_passes`]), and
/// only sampled (and hot) accesses are decoded where the format allows
/// ([`Streamed::sampled_accesses_with`]). Fixed-size SHARDS lowers its
/// rate as it goes, so it reads every access once, unstratified.
/// `progress` receives accesses read.
pub fn shards_pass(
    trace: &Streamed,
    mode: ShardsMode,
    hot_keys: usize,
    cache_bytes: &[u64],
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ShardsCurve, SourceError> {
    let ShardsMode::FixedRate(rate) = mode else {
        let mut shards = Shards::new(mode, cache_bytes)?;
        run_pipelined(trace.accesses()?, |chunk| {
            chunk.iter().for_each(|a| shards.access(a));
            progress(chunk.len() as u64);
        })?;
        return Ok(ShardsCurve { rate: shards.rate(), results: shards.results(), sampled_keys: shards.sampled_keys() });
    };
    Shards::new(mode, cache_bytes)?; // checks the rate before any pass
    let hot = self::hot_keys(trace, hot_keys)?;
    let groups = minisim::raised_rates(trace, cache_bytes, rate, minisim::ObjectSize::Mean);
    let passes: Vec<(f64, Vec<u64>)> =
        groups.iter().map(|(rate, members)| (*rate, members.iter().map(|&i| cache_bytes[i]).collect())).collect();
    let samples = fixed_rate_passes(trace, &passes, &hot, progress)?;
    let mut results: Vec<Option<SimResult>> = vec![None; cache_bytes.len()];
    for ((_, members), shards) in groups.iter().zip(&samples) {
        for (&i, r) in members.iter().zip(shards.results()) {
            results[i] = Some(r);
        }
    }
    let sampled_keys = samples.iter().map(Shards::sampled_keys).min().unwrap_or(0);
    let results = results.into_iter().map(|r| r.expect("every size is in a group")).collect();
    Ok(ShardsCurve { rate, results, sampled_keys })
}

/// SHARDS at each (rate, sizes) of `passes`, stratified on `hot`, from one
/// read of the trace that decodes only the accesses the densest sample
/// keeps (and the hot ones) where it can. Thresholds nest, so every
/// sparser sample's accesses are among them: each is offered to every
/// sample, which records it or counts it as skipped, exactly as a pass of
/// its own would.
fn fixed_rate_passes(
    trace: &Streamed,
    passes: &[(f64, Vec<u64>)],
    hot: &AlwaysKept,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<Shards>, SourceError> {
    let by_next_use = |shards: Shards| if trace.records_next_access() { shards.by_next_use() } else { shards };
    let mut samples: Vec<Shards> = passes
        .iter()
        .map(|(rate, sizes)| Shards::stratified(*rate, sizes, hot).map(by_next_use))
        .collect::<Result<_, _>>()?;
    let Some(densest) = samples.iter().map(Shards::threshold).max() else {
        return Ok(samples);
    };
    let mut sampled = trace.sampled_accesses_with(densest, hot.clone())?;
    let (mut kept, mut reported) = (0u64, 0u64);
    sampled.for_each_batch(|batch| {
        // A sample at a time: each keeps its own state in cache.
        samples.iter_mut().for_each(|shards| shards.access_batch(batch));
        kept += batch.accesses.len() as u64;
        progress(kept + batch.skipped.requests - reported);
        reported = kept + batch.skipped.requests;
    })?;
    let skipped = sampled.skipped();
    progress(kept + skipped.requests - reported);
    samples.iter_mut().for_each(|shards| shards.skip(skipped.requests, skipped.bytes));
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrc::HOT_KEYS;
    use crate::source::{Needs, TraceSource};

    #[test]
    fn hot_keys_are_the_busiest_of_the_first_requests() {
        let source = TraceSource { requests: 50_000, ..TraceSource::new("synth:zipf:10000:1.2") };
        let trace = Streamed::open(&source, Needs::default(), &()).unwrap();
        let hot = hot_keys(&trace, 5).unwrap();
        let mut counts = std::collections::HashMap::<u64, u32>::new();
        for a in trace.accesses().unwrap() {
            *counts.entry(a.unwrap().key).or_default() += 1;
        }
        let mut busiest: Vec<(u64, u32)> = counts.into_iter().collect();
        busiest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut want: Vec<u64> = busiest.iter().take(5).map(|&(k, _)| k).collect();
        want.sort_unstable();
        assert_eq!(hot.keys(), want);
        assert!(hot_keys(&trace, 0).unwrap().is_empty());
    }

    #[test]
    fn small_caches_are_estimated_from_a_denser_sample() {
        let source = TraceSource { requests: 200_000, ..TraceSource::new("synth:zipf:200000:0.8") };
        let trace = Streamed::open(&source, Needs::default(), &()).unwrap();
        // At 1%, 100 blocks of 4 KiB need a 40 MiB cache: 4 MiB needs 16%.
        let (small, large) = (4 << 20, 64 << 20);
        let hot = hot_keys(&trace, HOT_KEYS).unwrap();
        let curve = shards_pass(&trace, ShardsMode::FixedRate(0.01), HOT_KEYS, &[small, large], &|_| {}).unwrap();
        let at = |rate: f64, size: u64| {
            let alone = fixed_rate_passes(&trace, &[(rate, vec![size])], &hot, &|_| {}).unwrap();
            alone[0].results().remove(0)
        };
        assert_eq!(curve.results(), vec![at(0.16, small), at(0.01, large)]);
        assert_eq!(curve.rate(), 0.01);
        assert_ne!(at(0.16, small), at(0.01, small), "the case should tell the rates apart");
    }
}

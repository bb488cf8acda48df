//! Live advice: what a bigger cache or another policy would buy on the
//! traffic an export serves, from the simulator's own estimators fed with
//! the export's reads as they happen.
//!
//! - A miss-ratio curve for LRU from 1/4 to 4 times the configured cache
//!   ([`MRC_POINTS`] sizes), by SHARDS with a fixed-size sample
//!   ([`hearth_sim::mrc::Shards`]): at most [`MRC_SAMPLE`] blocks tracked,
//!   so memory is bounded whatever the traffic.
//! - Miniature shadow caches (Waldspurger et al., ATC '17, as `hearth mrc -m
//!   mini` runs them): the configured policy and each what-if alternative,
//!   at the configured size scaled by a spatial sampling rate, fed the
//!   sampled blocks. The rate gives each shadow about [`SHADOW_BLOCKS`]
//!   blocks of cache (all of the traffic for caches up to that size), and
//!   never less than [`MIN_SHADOW_RATE`]. The configured policy's shadow is
//!   checked against the real cache: the difference is the prediction's
//!   error, reported beside the predictions.
//!
//! What the shadows see: every block of every READ that goes through the
//! cache (not reads bypassed by the sequential cutoff), since the start;
//! writes, client hints and prefetches are not modelled, so on traffic
//! with those the configured shadow and the real cache may part, which the
//! reported error shows. A request takes this module's own lock (never the
//! cache's) only if one of its blocks is sampled; the others are counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hearth_core::{Access, Key, Op, Policy, NEVER};
use hearth_sim::mrc::{Shards, ShardsMode};
use hearth_trace::sample;

/// Sizes on the live miss-ratio curve: k/4 of the cache for k = 1..=16.
pub const MRC_POINTS: u64 = 16;
/// Blocks the SHARDS sample tracks at most: twice the 8K that Waldspurger
/// et al. (FAST '15) find accurate for fixed-size SHARDS.
pub const MRC_SAMPLE: usize = 16 * 1024;
/// Blocks of cache a shadow aims for (it has more when the rate floor binds).
pub const SHADOW_BLOCKS: u64 = 16 * 1024;
/// The smallest share of the blocks the shadows sample.
pub const MIN_SHADOW_RATE: f64 = 0.01;
/// The alternatives shadowed when the configuration names none.
pub const DEFAULT_WHAT_IF: [&str; 5] = ["lru", "arc", "s3fifo", "wtinylfu", "mq"];

pub(crate) struct Advisor {
    block_size: u64,
    cache_bytes: u64,
    /// The configured policy's label, as its shadow is named.
    configured: String,
    shadow_rate: f64,
    shadow_threshold: u64,
    /// The SHARDS threshold as last seen under the lock (it only falls).
    mrc_threshold: AtomicU64,
    /// Block reads no estimator sampled, not yet told to the SHARDS totals.
    unsampled: AtomicU64,
    state: Mutex<State>,
}

struct State {
    mrc: Shards,
    shadows: Vec<Shadow>,
    /// Requests each estimator has taken, as its logical clock.
    mrc_vtime: u64,
    shadow_vtime: u64,
    evicted: Vec<Key>,
}

struct Shadow {
    spec: String,
    label: String,
    policy: Box<dyn Policy>,
    requests: u64,
    hits: u64,
}

/// What the advisor predicts now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Advice {
    /// LRU's estimated hit ratio at each size, smallest first.
    pub mrc: Vec<CurvePoint>,
    /// The share of blocks the SHARDS sample holds now (it only falls).
    pub mrc_sampling_rate: f64,
    /// Each shadow's predicted hit ratio at the configured size; the
    /// configured policy first.
    pub policies: Vec<PolicyPrediction>,
    pub shadow_sampling_rate: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CurvePoint {
    pub cache_bytes: u64,
    pub hit_ratio: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyPrediction {
    /// The policy's name and parameters, as `hearth sim` labels it.
    pub policy: String,
    /// The spec it was built from, as `-p` takes it.
    pub spec: String,
    pub configured: bool,
    pub hit_ratio: f64,
    /// Sampled block reads the prediction rests on.
    pub sampled_reads: u64,
}

impl Advisor {
    /// An advisor for a cache of `cache_bytes` in `block_size` blocks run by
    /// `configured`, shadowing it and `what_if` (policy specs, duplicates of
    /// the configured one dropped). `None` for a cache too small to advise on.
    pub(crate) fn new(
        configured: &str,
        cache_bytes: u64,
        block_size: u64,
        what_if: &[String],
    ) -> Result<Option<Advisor>, String> {
        let cache_blocks = cache_bytes / block_size;
        if cache_blocks == 0 {
            return Ok(None);
        }
        let sizes: Vec<u64> = (1..=MRC_POINTS).map(|k| (cache_blocks * k / 4).max(1) * block_size).collect();
        let mrc = Shards::new(ShardsMode::FixedSize(MRC_SAMPLE), &sizes)?;
        let shadow_rate = (SHADOW_BLOCKS as f64 / cache_blocks as f64).clamp(MIN_SHADOW_RATE, 1.0);
        let shadow_bytes = ((cache_blocks as f64 * shadow_rate).round() as u64).max(1) * block_size;
        let mut shadows: Vec<Shadow> = Vec::new();
        for spec in std::iter::once(configured).chain(what_if.iter().map(String::as_str)) {
            let policy = hearth_policy::build(spec, shadow_bytes)?;
            let label = hearth_policy::label(spec, &policy.name());
            if !shadows.iter().any(|s| s.label == label) {
                shadows.push(Shadow { spec: spec.to_string(), label, policy, requests: 0, hits: 0 });
            }
        }
        let configured_label = shadows[0].label.clone();
        Ok(Some(Advisor {
            block_size,
            cache_bytes,
            configured: configured_label,
            shadow_rate,
            shadow_threshold: sample::threshold(shadow_rate),
            mrc_threshold: AtomicU64::new(mrc.threshold()),
            unsampled: AtomicU64::new(0),
            state: Mutex::new(State { mrc, shadows, mrc_vtime: 0, shadow_vtime: 0, evicted: Vec::new() }),
        }))
    }

    /// Records a read of `blocks`, in order.
    pub(crate) fn observe_read(&self, blocks: std::ops::Range<u64>) {
        let any = self.mrc_threshold.load(Ordering::Relaxed).max(self.shadow_threshold);
        if !blocks.clone().any(|b| sample::keeps(b, any)) {
            self.unsampled.fetch_add(blocks.end - blocks.start, Ordering::Relaxed);
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let State { mrc, shadows, mrc_vtime, shadow_vtime, evicted } = &mut *state;
        let mut skipped = 0;
        for block in blocks {
            let size = self.block_size as u32;
            if sample::keeps(block, mrc.threshold()) {
                *mrc_vtime += 1;
                mrc.access(&Access { key: block, size, vtime: *mrc_vtime, next_access: NEVER, op: Op::Read, ctx: 0 });
            } else {
                skipped += 1;
            }
            if sample::keeps(block, self.shadow_threshold) {
                *shadow_vtime += 1;
                let a = Access { key: block, size, vtime: *shadow_vtime, next_access: NEVER, op: Op::Read, ctx: 0 };
                for s in shadows.iter_mut() {
                    evicted.clear();
                    s.requests += 1;
                    s.hits += u64::from(s.policy.access(&a, evicted));
                }
            }
        }
        mrc.skip(skipped, skipped * self.block_size);
        self.mrc_threshold.store(mrc.threshold(), Ordering::Relaxed);
    }

    pub(crate) fn cache_bytes(&self) -> u64 {
        self.cache_bytes
    }

    /// The predictions so far.
    pub(crate) fn advice(&self) -> Advice {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let unsampled = self.unsampled.swap(0, Ordering::Relaxed);
        state.mrc.skip(unsampled, unsampled * self.block_size);
        let mrc = state
            .mrc
            .results()
            .iter()
            .map(|r| CurvePoint {
                cache_bytes: r.cache_bytes,
                hit_ratio: if r.requests == 0 { 0.0 } else { r.hits as f64 / r.requests as f64 },
            })
            .collect();
        let policies = state
            .shadows
            .iter()
            .map(|s| PolicyPrediction {
                policy: s.label.clone(),
                spec: s.spec.clone(),
                configured: s.label == self.configured,
                hit_ratio: if s.requests == 0 { 0.0 } else { s.hits as f64 / s.requests as f64 },
                sampled_reads: s.requests,
            })
            .collect();
        Advice { mrc, mrc_sampling_rate: state.mrc.rate(), policies, shadow_sampling_rate: self.shadow_rate }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: u64 = 4096;

    #[test]
    fn a_loop_that_fits_hits_everywhere_above_its_size() {
        // 100 blocks read in a loop, with a 200-block cache: every policy
        // hits after the first pass; LRU needs at least 100 blocks.
        let advisor = Advisor::new("lru", 200 * BS, BS, &["arc".into(), "LRU".into()]).unwrap().unwrap();
        for _ in 0..50 {
            advisor.observe_read(0..100);
        }
        let advice = advisor.advice();
        assert_eq!(advice.policies.len(), 2, "LRU is shadowed once: {:?}", advice.policies);
        assert!(advice.policies[0].configured && advice.policies[0].policy == "LRU");
        for p in &advice.policies {
            assert!((p.hit_ratio - 0.98).abs() < 1e-9, "{p:?}");
            assert_eq!(p.sampled_reads, 5000, "a small cache samples everything");
        }
        assert_eq!(advice.mrc.len(), MRC_POINTS as usize);
        assert_eq!(advice.mrc[0].cache_bytes, 50 * BS);
        assert!(advice.mrc[0].hit_ratio < 0.01, "LRU at 50 blocks thrashes on a 100-block loop");
        assert!(advice.mrc[1].hit_ratio > 0.97, "and hits from 100 blocks on: {:?}", advice.mrc);
        assert_eq!(advice.mrc.last().unwrap().cache_bytes, 800 * BS);
    }

    #[test]
    fn a_large_cache_samples_its_shadows_and_bounds_the_curve() {
        let blocks = 4 * SHADOW_BLOCKS;
        let advisor = Advisor::new("lru", blocks * BS, BS, &[]).unwrap().unwrap();
        assert_eq!(advisor.advice().shadow_sampling_rate, 0.25);
        advisor.observe_read(0..10 * MRC_SAMPLE as u64);
        let advice = advisor.advice();
        let sampled = advice.policies[0].sampled_reads as f64;
        assert!((sampled / (10 * MRC_SAMPLE) as f64 - 0.25).abs() < 0.01, "{sampled}");
        assert!(
            advice.mrc_sampling_rate < 0.11,
            "the fixed-size sample lowered its rate: {}",
            advice.mrc_sampling_rate
        );
        assert!(Advisor::new("lru", BS - 1, BS, &[]).unwrap().is_none(), "no cache, no advice");
        assert!(Advisor::new("lru", 64 * BS, BS, &["nosuch".into()]).is_err());
    }
}

//! Live advice: what a bigger cache or another policy would buy on the
//! traffic an export serves, from the simulator's own estimators fed with
//! the export's reads as they happen.
//!
//! - A miss-ratio curve for LRU from 1/4 to 4 times the configured cache
//!   ([`MRC_POINTS`] sizes), by SHARDS with a fixed-size sample
//!   ([`hearth_estimate::mrc::Shards`]): at most [`MRC_SAMPLE`] blocks tracked,
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

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hearth_core::{Access, Key, Op, Policy, NEVER};
use hearth_estimate::mrc::{Shards, ShardsMode};
use hearth_estimate::sample;
use hearth_policy::PolicySpec;

/// Sizes on the live miss-ratio curve: k/4 of the cache for k = 1..=16.
pub const MRC_POINTS: u64 = 16;
/// Blocks the SHARDS sample tracks at most: twice the 8K that Waldspurger
/// et al. (FAST '15) find accurate for fixed-size SHARDS.
pub const MRC_SAMPLE: usize = 16 * 1024;
/// Blocks of cache a shadow aims for (it has more when the rate floor binds).
pub const SHADOW_BLOCKS: u64 = 16 * 1024;
/// The smallest share of the blocks the shadows sample.
pub const MIN_SHADOW_RATE: f64 = 0.01;
/// The windows the advice is also given over, besides since the start.
pub const WINDOWS: [(&str, Duration); 3] =
    [("1m", Duration::from_secs(60)), ("1h", Duration::from_secs(3600)), ("1d", Duration::from_secs(86_400))];
/// How often the counts are kept for the windows: on a timer beside the
/// metrics listener ([`Advisor::snapshot`]) and when advice is asked for, at
/// most this often; a day of them is a few thousand entries. The first is
/// taken when the advisor is made, so the windows of a young server hold
/// all its traffic, scraped or not.
pub const SNAPSHOT_EVERY: Duration = Duration::from_secs(15);
/// The alternatives shadowed when the configuration names none.
const DEFAULT_WHAT_IF: [&str; 5] = ["lru", "arc", "s3fifo", "wtinylfu", "mq"];

/// [`DEFAULT_WHAT_IF`], parsed.
pub fn default_what_if() -> Vec<PolicySpec> {
    DEFAULT_WHAT_IF.iter().map(|spec| spec.parse().expect("the default what-if policies are registered")).collect()
}

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
    /// Counts at past moments, oldest first, for the windows.
    history: VecDeque<Counts>,
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
    /// Block reads seen since the start.
    pub reads: u64,
    /// The same hit ratios over the last minute, hour and day (or as much
    /// of it as the server has run).
    pub windows: Vec<Window>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Window {
    pub last: &'static str,
    /// The span the figures cover (shorter while the server is young).
    pub seconds: f64,
    pub reads: u64,
    /// LRU's hit ratio at each curve size, as in [`Advice::mrc`].
    pub lru_hit_ratio: Vec<f64>,
    /// Each policy's, as in [`Advice::policies`].
    pub policy_hit_ratio: Vec<f64>,
}

/// Cumulative counts at one moment.
#[derive(Clone)]
struct Counts {
    at: Instant,
    reads: u64,
    lru_hits: Vec<u64>,
    /// (hits, sampled reads) per shadow.
    shadows: Vec<(u64, u64)>,
}

impl Counts {
    /// Hit ratios between `earlier` and `self`.
    fn window(&self, earlier: &Counts, last: &'static str) -> Window {
        let ratio = |hits: u64, reads: u64| if reads == 0 { 0.0 } else { hits as f64 / reads as f64 };
        let reads = self.reads - earlier.reads;
        Window {
            last,
            seconds: (self.at - earlier.at).as_secs_f64(),
            reads,
            lru_hit_ratio: self
                .lru_hits
                .iter()
                .zip(&earlier.lru_hits)
                .map(|(h, e)| ratio(h.saturating_sub(*e), reads))
                .collect(),
            policy_hit_ratio: self
                .shadows
                .iter()
                .zip(&earlier.shadows)
                .map(|(&(h, n), &(eh, en))| ratio(h - eh, n - en))
                .collect(),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CurvePoint {
    pub cache_bytes: u64,
    pub hit_ratio: f64,
    /// Estimated hits since the start (of [`Advice::reads`]).
    pub hits: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyPrediction {
    /// The policy's name and parameters, as `hearth sim` labels it.
    pub policy: String,
    /// The spec it was built from, as `-p` takes it.
    pub spec: String,
    pub configured: bool,
    pub hit_ratio: f64,
    /// Sampled block reads the prediction rests on, and their hits.
    pub sampled_reads: u64,
    pub sampled_hits: u64,
}

impl Advisor {
    /// An advisor for a cache of `cache_bytes` in `block_size` blocks run by
    /// `configured`, shadowing it and `what_if` (policy specs, duplicates of
    /// the configured one dropped). `None` for a cache too small to advise on.
    pub(crate) fn new(
        configured: &PolicySpec,
        cache_bytes: u64,
        block_size: u64,
        what_if: &[PolicySpec],
    ) -> Result<Option<Advisor>, crate::OpenError> {
        let cache_blocks = cache_bytes / block_size;
        if cache_blocks == 0 {
            return Ok(None);
        }
        let sizes: Vec<u64> = (1..=MRC_POINTS).map(|k| (cache_blocks * k / 4).max(1) * block_size).collect();
        let mrc = Shards::new(ShardsMode::FixedSize(MRC_SAMPLE), &sizes)?;
        let shadow_rate = (SHADOW_BLOCKS as f64 / cache_blocks as f64).clamp(MIN_SHADOW_RATE, 1.0);
        let shadow_bytes = ((cache_blocks as f64 * shadow_rate).round() as u64).max(1) * block_size;
        let mut shadows: Vec<Shadow> = Vec::new();
        for spec in std::iter::once(configured).chain(what_if) {
            let policy = spec.build(shadow_bytes);
            let label = spec.label(&policy.name());
            if !shadows.iter().any(|s| s.label == label) {
                shadows.push(Shadow { spec: spec.to_string(), label, policy, requests: 0, hits: 0 });
            }
        }
        let configured_label = shadows[0].label.clone();
        let start = Counts {
            at: Instant::now(),
            reads: 0,
            lru_hits: vec![0; sizes.len()],
            shadows: vec![(0, 0); shadows.len()],
        };
        Ok(Some(Advisor {
            block_size,
            cache_bytes,
            configured: configured_label,
            shadow_rate,
            shadow_threshold: sample::threshold(shadow_rate),
            mrc_threshold: AtomicU64::new(mrc.threshold()),
            unsampled: AtomicU64::new(0),
            state: Mutex::new(State {
                mrc,
                shadows,
                history: VecDeque::from([start]),
                mrc_vtime: 0,
                shadow_vtime: 0,
                evicted: Vec::new(),
            }),
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
        let State { mrc, shadows, mrc_vtime, shadow_vtime, evicted, .. } = &mut *state;
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
        self.advice_at(Instant::now())
    }

    /// Keeps the counts now for the windows (if the last kept are
    /// [`SNAPSHOT_EVERY`] old), so a window is as long as it says however
    /// seldom advice is asked for.
    pub(crate) fn snapshot(&self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (_, counts) = self.counts_at(&mut state, Instant::now());
        keep(&mut state.history, counts);
    }

    /// The SHARDS results and the cumulative counts at `now`.
    fn counts_at(&self, state: &mut State, now: Instant) -> (Vec<hearth_estimate::SimResult>, Counts) {
        let unsampled = self.unsampled.swap(0, Ordering::Relaxed);
        state.mrc.skip(unsampled, unsampled * self.block_size);
        let results = state.mrc.results();
        let counts = Counts {
            at: now,
            reads: results.first().map_or(0, |r| r.requests),
            lru_hits: results.iter().map(|r| r.hits).collect(),
            shadows: state.shadows.iter().map(|s| (s.hits, s.requests)).collect(),
        };
        (results, counts)
    }

    /// The predictions so far, with windows ending at `now`.
    fn advice_at(&self, now: Instant) -> Advice {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (results, counts) = self.counts_at(&mut state, now);
        let ratio = |hits: u64, reads: u64| if reads == 0 { 0.0 } else { hits as f64 / reads as f64 };
        let mrc = results
            .iter()
            .map(|r| CurvePoint { cache_bytes: r.cache_bytes, hit_ratio: ratio(r.hits, r.requests), hits: r.hits })
            .collect();
        let policies = state
            .shadows
            .iter()
            .map(|s| PolicyPrediction {
                policy: s.label.clone(),
                spec: s.spec.clone(),
                configured: s.label == self.configured,
                hit_ratio: ratio(s.hits, s.requests),
                sampled_reads: s.requests,
                sampled_hits: s.hits,
            })
            .collect();
        let history = &mut state.history;
        keep(history, counts.clone());
        let windows = WINDOWS
            .iter()
            .map(|&(last, span)| {
                // The newest snapshot at least `span` old, else the first (the advisor's start).
                let start =
                    history.iter().rev().find(|c| now.saturating_duration_since(c.at) >= span).or(history.front());
                counts.window(start.expect("the advisor's start is kept until a day has passed"), last)
            })
            .collect();
        Advice {
            mrc,
            mrc_sampling_rate: state.mrc.rate(),
            policies,
            shadow_sampling_rate: self.shadow_rate,
            reads: counts.reads,
            windows,
        }
    }
}

/// Adds `counts` to the history if its newest entry is [`SNAPSHOT_EVERY`]
/// old, and drops what no window needs: it keeps the newest entry at least a
/// day old and everything after it.
fn keep(history: &mut VecDeque<Counts>, counts: Counts) {
    let now = counts.at;
    if history.back().is_none_or(|last| now.saturating_duration_since(last.at) >= SNAPSHOT_EVERY) {
        history.push_back(counts);
    }
    while history.get(1).is_some_and(|next| now.saturating_duration_since(next.at) >= WINDOWS[2].1) {
        history.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: u64 = 4096;

    fn spec(text: &str) -> PolicySpec {
        text.parse().unwrap()
    }

    #[test]
    fn a_loop_that_fits_hits_everywhere_above_its_size() {
        // 100 blocks read in a loop, with a 200-block cache: every policy
        // hits after the first pass; LRU needs at least 100 blocks.
        let advisor = Advisor::new(&spec("lru"), 200 * BS, BS, &[spec("arc"), spec("LRU")]).unwrap().unwrap();
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
    fn windows_show_the_recent_traffic_alone() {
        let advisor = Advisor::new(&spec("lru"), 200 * BS, BS, &[]).unwrap().unwrap();
        let t0 = Instant::now();
        for _ in 0..10 {
            advisor.observe_read(0..100); // a loop that fits: hits after the first pass
        }
        // Past SNAPSHOT_EVERY after the start, so this scrape's counts are kept.
        let start = advisor.advice_at(t0 + Duration::from_secs(20));
        assert!((start.policies[0].hit_ratio - 0.9).abs() < 1e-9);
        for b in 1000..2000 {
            advisor.observe_read(b..b + 1); // then a scan: misses only
        }
        let later = advisor.advice_at(t0 + Duration::from_secs(90));
        assert!((later.policies[0].hit_ratio - 0.45).abs() < 1e-9, "since start: 900 hits of 2000");
        let minute = &later.windows[0];
        assert_eq!((minute.last, minute.reads), ("1m", 1000), "the last minute holds the scan alone");
        assert_eq!(minute.policy_hit_ratio[0], 0.0);
        assert!(minute.lru_hit_ratio.iter().all(|&r| r == 0.0));
        let day = &later.windows[2];
        assert_eq!(day.reads, 2000, "a young server's day is all it has run, before the first scrape too");
        assert!(day.seconds >= 90.0 && day.seconds < 100.0, "{}", day.seconds);
    }

    #[test]
    fn windows_count_from_the_start_and_from_snapshots_taken_without_scrapes() {
        let advisor = Advisor::new(&spec("lru"), 200 * BS, BS, &[]).unwrap().unwrap();
        let t0 = Instant::now();
        for _ in 0..10 {
            advisor.observe_read(0..100);
        }
        // Never asked for advice before: the windows still hold this traffic.
        let first = advisor.advice_at(t0 + Duration::from_secs(20));
        for w in &first.windows {
            assert_eq!(w.reads, 1000, "{w:?}");
            assert!((w.policy_hit_ratio[0] - 0.9).abs() < 1e-9, "{w:?}");
        }
        // A timer's snapshot at 2 minutes, then a scan and a scrape at 3:
        // the minute holds the scan alone, though the last scrape was 2:40 ago.
        {
            let mut state = advisor.state.lock().unwrap();
            let (_, counts) = advisor.counts_at(&mut state, t0 + Duration::from_secs(120));
            keep(&mut state.history, counts);
        }
        for b in 1000..1500 {
            advisor.observe_read(b..b + 1);
        }
        let minute = &advisor.advice_at(t0 + Duration::from_secs(180)).windows[0];
        assert_eq!((minute.reads, minute.seconds), (500, 60.0), "{minute:?}");
        assert_eq!(minute.policy_hit_ratio[0], 0.0);
        // Snapshots closer than SNAPSHOT_EVERY are not kept.
        let kept = advisor.state.lock().unwrap().history.len();
        advisor.snapshot();
        advisor.snapshot();
        assert!(advisor.state.lock().unwrap().history.len() <= kept + 1);
    }

    #[test]
    fn a_large_cache_samples_its_shadows_and_bounds_the_curve() {
        let blocks = 4 * SHADOW_BLOCKS;
        let advisor = Advisor::new(&spec("lru"), blocks * BS, BS, &[]).unwrap().unwrap();
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
        assert!(Advisor::new(&spec("lru"), BS - 1, BS, &[]).unwrap().is_none(), "no cache, no advice");
    }
}

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
/// Blocks the SHARDS sample tracks at most: the 8K that Waldspurger et al.
/// (FAST '15) find accurate for fixed-size SHARDS.
pub const MRC_SAMPLE: usize = 8 * 1024;
/// Blocks of cache a shadow aims for (it has more when the rate floor binds).
pub const SHADOW_BLOCKS: u64 = 4 * 1024;
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
    fn window(&self, earlier: &Counts, last: &'static str, shadow_rate: f64) -> Window {
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
                .map(|(&(h, n), &(eh, en))| adjusted_ratio(h - eh, n - en, reads, shadow_rate))
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

    /// Records a read of `blocks`, in order. Each block is hashed once,
    /// outside the lock, and only the sampled ones are walked under it (see
    /// docs/dev/advice-sampling.md).
    pub(crate) fn observe_read(&self, blocks: std::ops::Range<u64>) {
        let mrc_threshold = self.mrc_threshold.load(Ordering::Relaxed);
        let any = mrc_threshold.max(self.shadow_threshold);
        // Allocates only when something is sampled (the lock is taken then anyway).
        let sampled: Vec<(u64, u64)> =
            blocks.clone().map(|b| (b, sample::key_hash(b))).filter(|&(_, h)| kept(h, any)).collect();
        let total = blocks.end - blocks.start;
        if sampled.is_empty() {
            self.unsampled.fetch_add(total, Ordering::Relaxed);
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let State { mrc, shadows, mrc_vtime, shadow_vtime, evicted, .. } = &mut *state;
        let size = self.block_size as u32;
        let mut to_mrc = 0;
        for &(block, hash) in &sampled {
            if kept(hash, mrc.threshold()) {
                to_mrc += 1;
                *mrc_vtime += 1;
                mrc.access(&Access { key: block, size, vtime: *mrc_vtime, next_access: NEVER, op: Op::Read, ctx: 0 });
            }
            if kept(hash, self.shadow_threshold) {
                *shadow_vtime += 1;
                let a = Access { key: block, size, vtime: *shadow_vtime, next_access: NEVER, op: Op::Read, ctx: 0 };
                for s in shadows.iter_mut() {
                    evicted.clear();
                    s.requests += 1;
                    s.hits += u64::from(s.policy.access(&a, evicted));
                }
            }
        }
        let skipped = total - to_mrc;
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
                hit_ratio: adjusted_ratio(s.hits, s.requests, counts.reads, self.shadow_rate),
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
                counts.window(
                    start.expect("the advisor's start is kept until a day has passed"),
                    last,
                    self.shadow_rate,
                )
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

/// Whether a block of hash `hash` is in the sample under `threshold`
/// ([`sample::keeps`] with the hash already taken).
fn kept(hash: u64, threshold: u64) -> bool {
    threshold == u64::MAX || hash < threshold
}

/// A shadow's hit ratio from its `hits` of `sampled` block reads, out of
/// `reads` in all at sampling `rate`, adjusted as SHARDS-adj adjusts its
/// curve (Waldspurger et al., FAST '15): sampled reads short of (or past)
/// the `rate` share of all reads are taken as hits (or not), as the
/// difference is mostly a hot block that the hash left out (or took in).
fn adjusted_ratio(hits: u64, sampled: u64, reads: u64, rate: f64) -> f64 {
    let expected = reads as f64 * rate;
    if rate >= 1.0 || expected < 1.0 {
        return if sampled == 0 { 0.0 } else { hits as f64 / sampled as f64 };
    }
    ((hits as f64 + expected - sampled as f64) / expected).clamp(0.0, 1.0)
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

    /// A seeded trace of `blocks` block reads: requests of 1–64 contiguous
    /// blocks at starts with a skewed (roughly Zipf 0.9) popularity over
    /// 2^18 blocks, the popular ones scattered over the space.
    fn skewed_requests(blocks: u64) -> Vec<std::ops::Range<u64>> {
        const SPACE: u64 = 1 << 18;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            sample::key_hash(state)
        };
        let (mut requests, mut total) = (Vec::new(), 0);
        while total < blocks {
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let rank = (u.powi(10) * SPACE as f64) as u64;
            let start = rank.wrapping_mul(0x5851_f42d_4c95_7f2d) % SPACE;
            let len = 1 + next() % 64;
            requests.push(start..start + len);
            total += len;
        }
        requests
    }

    /// The hit ratio of `spec` at `bytes` on `requests`, every block simulated.
    fn exact_hit_ratio(spec: &PolicySpec, bytes: u64, requests: &[std::ops::Range<u64>]) -> f64 {
        let mut policy = spec.build(bytes);
        let (mut vtime, mut hits, mut evicted) = (0, 0u64, Vec::new());
        for block in requests.iter().flat_map(|r| r.clone()) {
            vtime += 1;
            let a = Access { key: block, size: BS as u32, vtime, next_access: NEVER, op: Op::Read, ctx: 0 };
            evicted.clear();
            hits += u64::from(policy.access(&a, &mut evicted));
        }
        hits as f64 / vtime as f64
    }

    #[test]
    fn sampled_estimates_match_exact_simulation() {
        // The accuracy criterion of docs/dev/advice-sampling.md: a cache of
        // 64k blocks, so both estimators sample; every shadow and every
        // curve point within 0.03 of the exact simulation.
        const TOLERANCE: f64 = 0.03;
        let cache_blocks = 1 << 16;
        let requests = skewed_requests(2_000_000);
        let what_if = default_what_if();
        let advisor = Advisor::new(&spec("lru"), cache_blocks * BS, BS, &what_if).unwrap().unwrap();
        for r in &requests {
            advisor.observe_read(r.clone());
        }
        let advice = advisor.advice();
        assert!(advice.shadow_sampling_rate < 1.0 && advice.mrc_sampling_rate < 1.0, "both sample");
        let mut errors = Vec::new();
        for p in &advice.policies {
            let exact = exact_hit_ratio(&spec(&p.spec), cache_blocks * BS, &requests);
            errors.push((p.policy.clone(), p.hit_ratio, exact));
        }
        for point in &advice.mrc {
            let exact = exact_hit_ratio(&spec("lru"), point.cache_bytes, &requests);
            errors.push((format!("LRU curve at {} blocks", point.cache_bytes / BS), point.hit_ratio, exact));
        }
        let worst = errors.iter().map(|(_, est, exact)| (est - exact).abs()).fold(0.0, f64::max);
        assert!(worst <= TOLERANCE, "worst error {worst:.4} > {TOLERANCE}: (estimate, exact) {errors:#?}");
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

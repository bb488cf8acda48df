//! The warmup experiment: split a timed block trace into periods (days),
//! restart the cache at the start of each period, warm it with each method,
//! and compare its per-interval hit rate with an always-warm cache.
//!
//! Period `d` is restarted from the requests of period `d - 1` (its history),
//! so the first period only serves as history. A period counts only if the
//! trace covers it to within one interval of its end.

use std::ops::Range;

use hearth_core::{key_map, Access, Op, Policy, NEVER};
use hearth_policy::PolicySpec;
use serde::Serialize;

use crate::converge::{load_reduction, t_converge, HitSeries, Thresholds};
use crate::select::{select, Method};
use crate::WarmupError;

/// One block request and when it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedAccess {
    pub time_ns: u64,
    pub block: u64,
}

/// How an experiment runs; sizes are in bytes.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// Replacement policy, e.g. `lru`.
    pub policy: PolicySpec,
    pub cache_sizes: Vec<u64>,
    pub block_size: u32,
    /// Length of a period between restarts (a day in Bonfire).
    pub period_ns: u64,
    /// Length of one hit-rate interval (a minute in Bonfire).
    pub interval_ns: u64,
    /// Region sizes to try for the pre-loading methods (4 KiB and 1 MiB in Bonfire).
    pub region_sizes: Vec<u64>,
    /// Warmup budget as a share of the previous period's working set (its
    /// distinct blocks); never more than the cache.
    pub budget_share: f64,
    /// Methods to compare; cold and always-warm always run (they are the references).
    pub methods: Vec<Method>,
    pub thresholds: Thresholds,
}

/// The result of one (cache size, method, region size, period) run.
/// Serialized with the period's totals beside its fields: `hits`,
/// `requests`, `hit_ratio` and `miss_ratio`.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub cache_bytes: u64,
    pub method: Method,
    /// Region size for pre-loading methods.
    pub region_bytes: Option<u64>,
    /// Index of the period (0 is the first period of the trace).
    pub period: usize,
    pub series: HitSeries,
    /// Interval at which the hit rate converged to always-warm's.
    pub converged: Option<usize>,
    /// Share of the cold cache's backend requests avoided during the cold
    /// cache's convergence period.
    pub load_reduction: f64,
    pub preload_bytes: u64,
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let (hits, requests) = (self.series.total_hits(), self.series.total_requests());
        let mut s = serializer.serialize_struct("Outcome", 12)?;
        s.serialize_field("cache_bytes", &self.cache_bytes)?;
        s.serialize_field("method", &self.method)?;
        s.serialize_field("region_bytes", &self.region_bytes)?;
        s.serialize_field("period", &self.period)?;
        s.serialize_field("series", &self.series)?;
        s.serialize_field("converged", &self.converged)?;
        s.serialize_field("load_reduction", &self.load_reduction)?;
        s.serialize_field("preload_bytes", &self.preload_bytes)?;
        s.serialize_field("hits", &hits)?;
        s.serialize_field("requests", &requests)?;
        s.serialize_field("hit_ratio", &self.hit_ratio())?;
        s.serialize_field("miss_ratio", &self.miss_ratio())?;
        s.end()
    }
}

impl Outcome {
    pub fn t_converge_ns(&self) -> Option<u64> {
        self.converged.map(|i| i as u64 * self.series.interval_ns)
    }
    pub fn hit_ratio(&self) -> f64 {
        self.series.total_hits() as f64 / self.series.total_requests().max(1) as f64
    }
    pub fn miss_ratio(&self) -> f64 {
        (self.series.total_requests() - self.series.total_hits()) as f64 / self.series.total_requests().max(1) as f64
    }
}

/// Index ranges of each whole period: period `k` holds the accesses in
/// `[t0 + k * period_ns, t0 + (k + 1) * period_ns)` where `t0` is the first
/// access's time. Accesses must be in time order.
pub fn split_periods(accesses: &[TimedAccess], period_ns: u64, interval_ns: u64) -> Vec<Range<usize>> {
    assert!(period_ns > 0, "period must be positive");
    let (Some(first), Some(last)) = (accesses.first(), accesses.last()) else { return Vec::new() };
    let t0 = first.time_ns;
    let mut periods = Vec::new();
    let mut start = 0;
    let mut k = 1u64;
    loop {
        let end_time = t0 + k * period_ns;
        if last.time_ns + interval_ns < end_time {
            break; // the trace stops before this period ends
        }
        let end = start + accesses[start..].partition_point(|a| a.time_ns < end_time);
        periods.push(start..end);
        start = end;
        k += 1;
    }
    periods
}

/// Runs the whole experiment on up to `threads` threads; `job_done` is
/// called once per finished job (for progress bars) out of [`job_count`].
pub fn run(
    trace: &[TimedAccess],
    exp: &Experiment,
    threads: usize,
    job_done: &(dyn Fn() + Sync),
) -> Result<Vec<Outcome>, WarmupError> {
    assert!(exp.interval_ns > 0 && exp.block_size > 0, "interval and block size must be positive");
    for &r in &exp.region_sizes {
        if r == 0 || r % u64::from(exp.block_size) != 0 {
            return Err(WarmupError::Region { region: r, block_size: exp.block_size });
        }
    }
    // Every run keeps one counter pair per interval.
    const MAX_INTERVALS: u64 = 10_000_000;
    if exp.period_ns.div_ceil(exp.interval_ns) > MAX_INTERVALS {
        return Err(WarmupError::TooManyIntervals {
            period: human(exp.period_ns),
            interval: human(exp.interval_ns),
            max: MAX_INTERVALS,
        });
    }
    let periods = split_periods(trace, exp.period_ns, exp.interval_ns);
    if periods.len() < 2 {
        return Err(WarmupError::TooFewPeriods { periods: periods.len(), period_secs: exp.period_ns / 1_000_000_000 });
    }
    let ctx = Context { trace, exp, periods: &periods, t0: trace[0].time_ns };
    let results = hearth_estimate::parallel_map(&jobs(exp, periods.len()), threads, |job| {
        let r = ctx.run(job);
        job_done();
        r
    });
    Ok(score(results.into_iter().collect::<Result<_, _>>()?, &ctx))
}

/// How many jobs [`run`] executes for a trace of `periods` whole periods.
pub fn job_count(exp: &Experiment, periods: usize) -> usize {
    jobs(exp, periods).len()
}

fn jobs(exp: &Experiment, periods: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    for &cache_bytes in &exp.cache_sizes {
        jobs.push(Job { cache_bytes, method: Method::AlwaysWarm, region_bytes: None, period: 0 });
        for period in 1..periods {
            // Cold always runs: it is the reference for load reduction.
            let methods = std::iter::once(Method::Cold)
                .chain(exp.methods.iter().copied().filter(|m| !matches!(m, Method::Cold | Method::AlwaysWarm)));
            for method in methods {
                if method.preloads() {
                    for &r in &exp.region_sizes {
                        jobs.push(Job { cache_bytes, method, region_bytes: Some(r), period });
                    }
                } else {
                    jobs.push(Job { cache_bytes, method, region_bytes: None, period });
                }
            }
        }
    }
    jobs
}

/// One unit of work: a method at a cache size for one period (always-warm
/// covers the whole trace at once).
#[derive(Clone, Copy, Debug)]
struct Job {
    cache_bytes: u64,
    method: Method,
    region_bytes: Option<u64>,
    period: usize,
}

struct Context<'a> {
    trace: &'a [TimedAccess],
    exp: &'a Experiment,
    periods: &'a [Range<usize>],
    t0: u64,
}

impl Context<'_> {
    fn intervals(&self) -> usize {
        self.exp.period_ns.div_ceil(self.exp.interval_ns) as usize
    }

    fn period_start(&self, period: usize) -> u64 {
        self.t0 + period as u64 * self.exp.period_ns
    }

    fn run(&self, job: &Job) -> Result<Outcome, WarmupError> {
        let mut cache = Cache::new(&self.exp.policy, job.cache_bytes, self.exp.block_size);
        if job.method == Method::AlwaysWarm {
            return Ok(self.always_warm(&mut cache, job));
        }
        let mut preload_bytes = 0;
        if let Some(region_bytes) = job.region_bytes {
            let history: Vec<u64> = self.trace[self.periods[job.period - 1].clone()].iter().map(|a| a.block).collect();
            let bs = u64::from(self.exp.block_size);
            let working_set = distinct(&history);
            let budget = ((working_set as f64 * self.exp.budget_share) as u64).min(job.cache_bytes / bs);
            let blocks = select(job.method, &history, region_bytes / bs, budget);
            preload_bytes = blocks.len() as u64 * bs;
            cache.preload(&blocks);
        }
        let start = self.period_start(job.period);
        let mut series = HitSeries::new(self.exp.interval_ns, self.intervals());
        for a in &self.trace[self.periods[job.period].clone()] {
            series.record(a.time_ns.saturating_sub(start), cache.access(a.block));
        }
        Ok(Outcome {
            cache_bytes: job.cache_bytes,
            method: job.method,
            region_bytes: job.region_bytes,
            period: job.period,
            series,
            converged: None,
            load_reduction: 0.0,
            preload_bytes,
        })
    }

    /// Replays the whole trace without restarts; the outcome's series holds
    /// every period's intervals back to back.
    fn always_warm(&self, cache: &mut Cache, job: &Job) -> Outcome {
        let per = self.intervals();
        let mut series = HitSeries::new(self.exp.interval_ns, per * self.periods.len());
        for (p, range) in self.periods.iter().enumerate() {
            let start = self.period_start(p);
            for a in &self.trace[range.clone()] {
                let hit = cache.access(a.block);
                let i = p * per + (a.time_ns.saturating_sub(start) / self.exp.interval_ns) as usize;
                if i < (p + 1) * per {
                    series.requests[i] += 1;
                    series.hits[i] += u64::from(hit);
                }
            }
        }
        Outcome {
            cache_bytes: job.cache_bytes,
            method: Method::AlwaysWarm,
            region_bytes: None,
            period: 0,
            series,
            converged: Some(0),
            load_reduction: 0.0,
            preload_bytes: 0,
        }
    }
}

/// Splits the always-warm runs per period and fills in convergence and load reduction.
fn score(runs: Vec<Outcome>, ctx: &Context) -> Vec<Outcome> {
    let per = ctx.intervals();
    let mut warm_by_size = Vec::new();
    let mut others = Vec::new();
    for o in runs {
        if o.method == Method::AlwaysWarm {
            warm_by_size.push(o);
        } else {
            others.push(o);
        }
    }
    let mut out = Vec::new();
    for warm in warm_by_size {
        let warm_period = |p: usize| HitSeries {
            interval_ns: warm.series.interval_ns,
            hits: warm.series.hits[p * per..(p + 1) * per].to_vec(),
            requests: warm.series.requests[p * per..(p + 1) * per].to_vec(),
        };
        for period in 1..ctx.periods.len() {
            let reference = warm_period(period);
            let mine: Vec<&Outcome> =
                others.iter().filter(|o| o.cache_bytes == warm.cache_bytes && o.period == period).collect();
            let cold = mine.iter().find(|o| o.method == Method::Cold);
            let cold_converged = cold.and_then(|c| t_converge(&c.series, &reference, ctx.exp.thresholds));
            for o in &mine {
                let mut o = (*o).clone();
                o.converged = t_converge(&o.series, &reference, ctx.exp.thresholds);
                o.load_reduction = cold.map_or(0.0, |c| load_reduction(&c.series, &o.series, cold_converged));
                out.push(o);
            }
            let load = cold.map_or(0.0, |c| load_reduction(&c.series, &reference, cold_converged));
            out.push(Outcome {
                cache_bytes: warm.cache_bytes,
                method: Method::AlwaysWarm,
                region_bytes: None,
                period,
                series: reference,
                converged: Some(0),
                load_reduction: load,
                preload_bytes: 0,
            });
        }
    }
    out
}

fn distinct(blocks: &[u64]) -> u64 {
    let mut seen = key_map::<()>(blocks.len() / 4);
    for &b in blocks {
        seen.insert(b, ());
    }
    seen.len() as u64
}

/// A policy of fixed-size blocks with its own logical clock.
struct Cache {
    policy: Box<dyn Policy>,
    block_size: u32,
    vtime: u64,
    evicted: Vec<u64>,
}

impl Cache {
    fn new(spec: &PolicySpec, bytes: u64, block_size: u32) -> Cache {
        Cache { policy: spec.build(bytes), block_size, vtime: 0, evicted: Vec::with_capacity(64) }
    }

    fn request(&self, block: u64) -> Access {
        Access { key: block, size: self.block_size, vtime: self.vtime, next_access: NEVER, op: Op::Read, ctx: 0 }
    }

    fn access(&mut self, block: u64) -> bool {
        let a = self.request(block);
        self.vtime += 1;
        self.evicted.clear();
        self.policy.access(&a, &mut self.evicted)
    }

    /// Inserts `blocks` (most important first) so that the most important
    /// ends up most recently inserted.
    fn preload(&mut self, blocks: &[u64]) {
        for &b in blocks.iter().rev() {
            if !self.policy.contains(b) && u64::from(self.block_size) <= self.policy.capacity() {
                let a = self.request(b);
                self.vtime += 1;
                self.evicted.clear();
                self.policy.insert(&a, &mut self.evicted);
            }
        }
    }
}

/// Nanoseconds as people read them (`30 min`).
fn human(ns: u64) -> String {
    hearth_core::format_duration(std::time::Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn periods_split_on_time_and_drop_the_unfinished_tail() {
        let t = |s: u64| TimedAccess { time_ns: 100 * S + s * S, block: s };
        let trace: Vec<_> = [0, 5, 9, 10, 19, 20, 22].into_iter().map(t).collect();
        // Periods of 10 s from t0 = 100 s: [0,10) [10,20) then [20,30) stops at 22 s.
        assert_eq!(split_periods(&trace, 10 * S, S), vec![0..3, 3..5]);
        // With 9 s intervals the last access (22 s) is within one interval of 30 s: the third counts.
        assert_eq!(split_periods(&trace, 10 * S, 9 * S), vec![0..3, 3..5, 5..7]);
    }

    /// Identical "days": each touches blocks 0..8 in order, one a second,
    /// then the same 8 again. A cache of 8 blocks pre-loaded with the
    /// previous day's blocks hits from the first request.
    #[test]
    fn preloaded_cache_matches_always_warm_and_cold_does_not() {
        let mut trace = Vec::new();
        // Day 3 only closes period 2 (a period counts once the trace reaches its end).
        for day in 0..4u64 {
            for i in 0..16u64 {
                trace.push(TimedAccess { time_ns: day * 100 * S + i * S, block: i % 8 });
            }
        }
        let exp = Experiment {
            policy: "lru".parse().unwrap(),
            cache_sizes: vec![8 * 4096],
            block_size: 4096,
            period_ns: 100 * S,
            interval_ns: S,
            region_sizes: vec![4096],
            budget_share: 1.0,
            methods: Method::ALL.to_vec(),
            thresholds: Thresholds { violation: 0.01, intervals: 3 },
        };
        let out = run(&trace, &exp, 2, &|| {}).unwrap();
        let get = |m: Method, p: usize| out.iter().find(|o| o.method == m && o.period == p).unwrap();
        for p in [1, 2] {
            let cold = get(Method::Cold, p);
            // Cold misses the first 8 seconds, then hits: converges at interval 8.
            assert_eq!(cold.converged, Some(8));
            assert_eq!(cold.series.total_hits(), 8);
            for m in [Method::LastK, Method::FirstK, Method::TopK] {
                let o = get(m, p);
                assert_eq!((o.converged, o.series.total_hits(), o.preload_bytes), (Some(0), 16, 8 * 4096), "{m}");
                // Cold sent 8 misses before converging; the warmed cache none.
                assert_eq!(o.load_reduction, 1.0);
            }
            assert_eq!(get(Method::AlwaysWarm, p).series.total_hits(), 16);
        }
        // Asked for Last-K alone, the references still run and load reduction still means something.
        let out = run(&trace, &Experiment { methods: vec![Method::LastK], ..exp }, 1, &|| {}).unwrap();
        let methods: Vec<Method> = out.iter().filter(|o| o.period == 1).map(|o| o.method).collect();
        assert_eq!(methods, vec![Method::Cold, Method::LastK, Method::AlwaysWarm]);
        assert!(out.iter().filter(|o| o.method == Method::LastK).all(|o| o.load_reduction == 1.0));
    }

    /// An LRU cache holds exactly the newest distinct blocks, so Last-K over
    /// single blocks with the whole cache as budget rebuilds the always-warm
    /// cache at each restart, and the two hit series must be identical.
    #[test]
    fn last_k_of_blocks_rebuilds_an_always_warm_lru_cache() {
        let mut x = 12345u64;
        let trace: Vec<TimedAccess> = (0..3000u64)
            .map(|i| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                // Skewed: block ids from the top bits, squared towards 0.
                let u = (x >> 40) as f64 / (1u64 << 24) as f64;
                TimedAccess { time_ns: i * S, block: (u * u * 400.0) as u64 }
            })
            .collect();
        let exp = Experiment {
            policy: "lru".parse().unwrap(),
            cache_sizes: vec![40 * 4096],
            block_size: 4096,
            period_ns: 1000 * S,
            interval_ns: 10 * S,
            region_sizes: vec![4096],
            budget_share: 1.0,
            methods: vec![Method::LastK],
            thresholds: Thresholds::default(),
        };
        let out = run(&trace, &exp, 1, &|| {}).unwrap();
        for p in [1, 2] {
            let get = |m: Method| out.iter().find(|o| o.method == m && o.period == p).unwrap();
            let (last, warm, cold) = (get(Method::LastK), get(Method::AlwaysWarm), get(Method::Cold));
            assert_eq!(last.preload_bytes, 40 * 4096);
            assert_eq!(last.series, warm.series, "period {p}");
            assert!(cold.series.total_hits() < warm.series.total_hits());
        }
    }

    #[test]
    fn a_trace_shorter_than_two_periods_is_refused() {
        let trace: Vec<_> = [0, 5, 12].map(|s| TimedAccess { time_ns: s * S, block: s }).to_vec();
        let exp = Experiment {
            policy: "lru".parse().unwrap(),
            cache_sizes: vec![4096],
            block_size: 4096,
            period_ns: 10 * S,
            interval_ns: S,
            region_sizes: vec![4096],
            budget_share: 1.0,
            methods: vec![Method::Cold],
            thresholds: Thresholds::default(),
        };
        assert!(run(&trace, &exp, 2, &|| {}).unwrap_err().to_string().contains("1 whole period"));
    }
}

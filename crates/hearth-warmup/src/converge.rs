//! Bonfire's warmup metrics over hit-rate time series.
//!
//! A warming cache is compared with an *always-warm* cache that saw the same
//! requests but was never restarted. Both hit rates are taken per fixed
//! interval (one minute by default).
//!
//! * An interval is a **violation** when the warming cache's hit rate is more
//!   than `ThV` (the violation threshold, in hit-rate points) below the
//!   always-warm cache's. Doing better than always-warm is never a violation.
//! * The cache has **converged** once `ThN` (the convergence threshold)
//!   consecutive intervals pass without a violation; `T_converge` is the start
//!   of that run, i.e. the moment from which the hit rate stays close. A
//!   single good minute in the middle of the warmup therefore does not count,
//!   and a single bad minute after a long good run does not undo it.
//! * **Server load reduction** is measured over the *cold* cache's
//!   convergence period `[0, T_converge(cold))`: the share of the cold cache's
//!   misses (requests sent to the backend) that the warmed cache avoided.
//!
//! Intervals with no requests carry no hit rate; they neither extend nor
//! break a run.

use serde::Serialize;

/// Hits and requests per interval, starting at the restart. Serialized with
/// `hit_ratio` and `miss_ratio` per interval beside the counts (null where an
/// interval saw no requests), as every machine output names its ratios.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HitSeries {
    pub interval_ns: u64,
    pub hits: Vec<u64>,
    pub requests: Vec<u64>,
}

impl Serialize for HitSeries {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let ratio = |part: &dyn Fn(usize) -> u64| -> Vec<Option<f64>> {
            (0..self.len()).map(|i| (self.requests[i] > 0).then(|| part(i) as f64 / self.requests[i] as f64)).collect()
        };
        let hit_ratio = ratio(&|i| self.hits[i]);
        let miss_ratio = ratio(&|i| self.requests[i] - self.hits[i]);
        let mut s = serializer.serialize_struct("HitSeries", 5)?;
        s.serialize_field("interval_ns", &self.interval_ns)?;
        s.serialize_field("hits", &self.hits)?;
        s.serialize_field("requests", &self.requests)?;
        s.serialize_field("hit_ratio", &hit_ratio)?;
        s.serialize_field("miss_ratio", &miss_ratio)?;
        s.end()
    }
}

impl HitSeries {
    /// An empty series of `intervals` intervals of `interval_ns` each.
    pub fn new(interval_ns: u64, intervals: usize) -> HitSeries {
        assert!(interval_ns > 0, "interval must be positive");
        HitSeries { interval_ns, hits: vec![0; intervals], requests: vec![0; intervals] }
    }

    /// Builds a series from per-interval hit rates, each over `requests_per_interval` requests
    /// (hand-made series in tests and examples).
    pub fn from_rates(interval_ns: u64, rates: &[f64], requests_per_interval: u64) -> HitSeries {
        let mut s = HitSeries::new(interval_ns, rates.len());
        for (i, r) in rates.iter().enumerate() {
            s.requests[i] = requests_per_interval;
            s.hits[i] = (r * requests_per_interval as f64).round() as u64;
        }
        s
    }

    /// Counts one request at `offset_ns` after the restart; requests past the last interval are ignored.
    pub fn record(&mut self, offset_ns: u64, hit: bool) {
        let i = (offset_ns / self.interval_ns) as usize;
        if let Some(r) = self.requests.get_mut(i) {
            *r += 1;
            self.hits[i] += u64::from(hit);
        }
    }

    pub fn len(&self) -> usize {
        self.requests.len()
    }

    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Hit rate of interval `i`, or `None` if it saw no requests.
    pub fn rate(&self, i: usize) -> Option<f64> {
        let r = *self.requests.get(i)?;
        (r > 0).then(|| self.hits[i] as f64 / r as f64)
    }

    /// Misses (backend requests) in intervals `[0, upto)`.
    pub fn misses_before(&self, upto: usize) -> u64 {
        let upto = upto.min(self.len());
        self.requests[..upto].iter().zip(&self.hits[..upto]).map(|(r, h)| r - h).sum()
    }

    pub fn total_hits(&self) -> u64 {
        self.hits.iter().sum()
    }

    pub fn total_requests(&self) -> u64 {
        self.requests.iter().sum()
    }

    /// The same counts over intervals `factor` times longer (for plotting).
    pub fn coarsen(&self, factor: usize) -> HitSeries {
        let factor = factor.max(1);
        let n = self.len().div_ceil(factor);
        let mut out = HitSeries::new(self.interval_ns * factor as u64, n);
        for i in 0..self.len() {
            out.hits[i / factor] += self.hits[i];
            out.requests[i / factor] += self.requests[i];
        }
        out
    }
}

/// The violation threshold `ThV` and convergence threshold `ThN`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// Largest tolerated shortfall of the hit rate below always-warm, as a
    /// fraction (0.05 = 5 points).
    pub violation: f64,
    /// Consecutive non-violating intervals that make a cache converged.
    pub intervals: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { violation: 0.05, intervals: 10 }
    }
}

/// The interval at which `warming` converges to `always_warm`, or `None` if
/// it never does within the series. Both series must share the interval.
pub fn t_converge(warming: &HitSeries, always_warm: &HitSeries, th: Thresholds) -> Option<usize> {
    assert_eq!(warming.interval_ns, always_warm.interval_ns, "series must share the interval length");
    let needed = th.intervals.max(1);
    let mut run_start = None;
    let mut run_len = 0;
    for i in 0..warming.len().min(always_warm.len()) {
        let (Some(w), Some(a)) = (warming.rate(i), always_warm.rate(i)) else { continue };
        if a - w > th.violation {
            run_start = None;
            run_len = 0;
            continue;
        }
        run_start.get_or_insert(i);
        run_len += 1;
        if run_len >= needed {
            return run_start;
        }
    }
    None
}

/// Share of the cold cache's backend requests in `[0, cold_converged)` that
/// `warmed` avoided (negative if it sent more). `cold_converged` is the cold
/// cache's convergence interval, or the whole series if it never converged.
pub fn load_reduction(cold: &HitSeries, warmed: &HitSeries, cold_converged: Option<usize>) -> f64 {
    let upto = cold_converged.unwrap_or(cold.len());
    let cold_misses = cold.misses_before(upto);
    if cold_misses == 0 {
        return 0.0;
    }
    (cold_misses as f64 - warmed.misses_before(upto) as f64) / cold_misses as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000_000_000;

    /// The shape of Bonfire's worked example: the warming cache climbs, first
    /// comes within ThV briefly (a lucky minute), falls back, then comes
    /// close for good with one dip that stays within ThV.
    #[test]
    fn converges_at_the_start_of_the_first_long_enough_close_run() {
        let warm = HitSeries::from_rates(MIN, &[0.80; 12], 1000);
        //             0     1     2     3     4     5     6     7     8     9     10    11
        let rates = [0.10, 0.30, 0.78, 0.50, 0.60, 0.72, 0.76, 0.77, 0.79, 0.80, 0.74, 0.80];
        let warming = HitSeries::from_rates(MIN, &rates, 1000);
        let th = Thresholds { violation: 0.05, intervals: 4 };
        // Interval 2 is close but alone (3 and 4 violate: 0.80-0.60 > 0.05);
        // 5 (0.72) violates too (0.08 short); from 6 on, 6,7,8,9 are within 0.05.
        assert_eq!(t_converge(&warming, &warm, th), Some(6));
        // With ThN = 1 the lucky minute counts.
        assert_eq!(t_converge(&warming, &warm, Thresholds { intervals: 1, ..th }), Some(2));
        // A looser ThV of 0.1 forgives interval 5 (0.08 short) but not 4 (0.2 short).
        assert_eq!(t_converge(&warming, &warm, Thresholds { violation: 0.1, ..th }), Some(5));
    }

    #[test]
    fn never_converges_when_no_run_is_long_enough() {
        let warm = HitSeries::from_rates(MIN, &[0.5; 6], 100);
        let warming = HitSeries::from_rates(MIN, &[0.5, 0.5, 0.1, 0.5, 0.5, 0.1], 100);
        assert_eq!(t_converge(&warming, &warm, Thresholds { violation: 0.05, intervals: 3 }), None);
    }

    #[test]
    fn beating_always_warm_is_not_a_violation_and_idle_intervals_are_neutral() {
        let mut warm = HitSeries::from_rates(MIN, &[0.5, 0.5, 0.5, 0.5], 100);
        let mut warming = HitSeries::from_rates(MIN, &[0.2, 0.9, 0.0, 0.6], 100);
        // Interval 2 is idle in both.
        warm.requests[2] = 0;
        warm.hits[2] = 0;
        warming.requests[2] = 0;
        assert_eq!(t_converge(&warming, &warm, Thresholds { violation: 0.01, intervals: 2 }), Some(1));
    }

    #[test]
    fn load_reduction_counts_misses_over_the_cold_convergence_period() {
        let cold = HitSeries::from_rates(MIN, &[0.0, 0.5, 0.8, 0.8], 100);
        let warmed = HitSeries::from_rates(MIN, &[0.6, 0.7, 0.8, 0.8], 100);
        // Cold converged at interval 2: cold missed 100 + 50, warmed 40 + 30.
        let r = load_reduction(&cold, &warmed, Some(2));
        assert!((r - (150.0 - 70.0) / 150.0).abs() < 1e-12, "{r}");
        // Without convergence the whole series counts: 150+20+20 vs 70+20+20.
        let r = load_reduction(&cold, &warmed, None);
        assert!((r - 80.0 / 190.0).abs() < 1e-12, "{r}");
    }

    #[test]
    fn record_and_coarsen_keep_counts() {
        let mut s = HitSeries::new(10, 3);
        for (t, hit) in [(0, true), (9, false), (10, true), (25, true), (30, true)] {
            s.record(t, hit);
        }
        assert_eq!((s.hits.clone(), s.requests.clone()), (vec![1, 1, 1], vec![2, 1, 1]));
        let c = s.coarsen(2);
        assert_eq!((c.interval_ns, c.hits, c.requests), (20, vec![2, 1], vec![3, 1]));
    }
}

//! One streamed simulation of a trace, as `hearth sim` runs it and the
//! Python package's `hearth.sim`: policies × cache sizes, with a warm-up and
//! interval miss ratios, the trace read in chunks.

use serde::Serialize;

use crate::scan::Scan;
use crate::size::CacheSize;
use crate::source::{Needs, Progress, SourceError, Streamed, TraceSource};
use crate::stream::{run_streaming_paced, Counting};
use crate::{Job, SettingError, SimResult};
use hearth_policy::PolicySpec;

/// Requests that fill the cache but are not counted: a number of accesses
/// or a share of the trace's (`10%`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Warmup {
    Accesses(u64),
    Share(f64),
}

impl std::str::FromStr for Warmup {
    type Err = SettingError;
    fn from_str(s: &str) -> Result<Warmup, SettingError> {
        if let Some(p) = s.strip_suffix('%') {
            let pct: f64 = p.trim().parse().map_err(|e: std::num::ParseFloatError| SettingError::WarmupPercentage {
                input: s.into(),
                reason: e.to_string(),
            })?;
            if !(0.0..100.0).contains(&pct) {
                return Err(SettingError::WarmupShare { input: s.into() });
            }
            return Ok(Warmup::Share(pct / 100.0));
        }
        s.trim().parse().map(Warmup::Accesses).map_err(|_| SettingError::Warmup { input: s.into() })
    }
}

impl Warmup {
    /// Accesses to replay uncounted, of a trace of `total` accesses.
    pub fn accesses(self, total: u64) -> u64 {
        match self {
            Warmup::Accesses(n) => n,
            Warmup::Share(f) => (total as f64 * f).round() as u64,
        }
    }
}

/// What to simulate on each trace.
#[derive(Clone, Debug, Default)]
pub struct Simulation {
    /// Policies, run in this order at each size.
    pub policies: Vec<PolicySpec>,
    pub sizes: Vec<CacheSize>,
    pub warmup: Option<Warmup>,
    /// Also keep the miss ratio of every N counted requests.
    pub interval: Option<u64>,
}

impl Simulation {
    /// What the passes need first: totals for shares, next uses for OPT.
    pub fn needs(&self) -> Needs {
        Needs {
            totals: self.sizes.iter().any(|s| matches!(s, CacheSize::Footprint(_)))
                || matches!(self.warmup, Some(Warmup::Share(_))),
            next_access: self.policies.iter().any(PolicySpec::is_offline),
        }
    }

    /// Opens `source` (with its first pass if needed) and resolves the
    /// sizes and the warm-up against it.
    pub fn prepare<'a>(&self, source: &'a TraceSource, progress: &dyn Progress) -> Result<Prepared<'a>, SourceError> {
        let trace = Streamed::open(source, self.needs(), progress)?;
        let cache_bytes = self.sizes.iter().map(|&s| trace.resolve(s)).collect::<Result<Vec<u64>, SettingError>>()?;
        let counting = Counting {
            warmup: self.warmup.map_or(0, |w| w.accesses(trace.accesses_counted())),
            interval: self.interval,
        };
        Ok(Prepared { trace, cache_bytes, counting })
    }
}

/// A trace opened for a [`Simulation`], its sizes in bytes.
pub struct Prepared<'a> {
    pub trace: Streamed<'a>,
    /// The simulation's sizes, in order, in bytes.
    pub cache_bytes: Vec<u64>,
    pub counting: Counting,
}

impl Prepared<'_> {
    /// `(size index, policy index)` of every run, sizes outer, policies
    /// inner: the order of `hearth sim`'s results.
    pub fn order(&self, policies: usize) -> impl Iterator<Item = (usize, usize)> {
        let sizes = self.cache_bytes.len();
        (0..sizes).flat_map(move |s| (0..policies).map(move |p| (s, p)))
    }

    /// The jobs of `policies` at every size, in [`Prepared::order`].
    pub fn jobs(&self, policies: &[PolicySpec]) -> Vec<Job> {
        self.order(policies.len())
            .map(|(s, p)| Job { policy: policies[p].clone(), cache_bytes: self.cache_bytes[s] })
            .collect()
    }

    /// Fails when the trace held no requests to count.
    pub fn check(&self, results: &[SimResult]) -> Result<(), SourceError> {
        if results.first().is_none_or(|r| r.requests == 0 && self.counting.warmup == 0) {
            return Err(SourceError::NoRequests(self.trace.trace().clone()));
        }
        Ok(())
    }
}

/// One trace's results.
pub struct TraceRun {
    /// The trace as named.
    pub trace: String,
    /// The first pass, if one ran.
    pub scan: Option<Scan>,
    /// Sizes outer, policies inner.
    pub results: Vec<SimResult>,
}

/// A result tagged with its trace: a row of `hearth sim --json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    pub trace: String,
    #[serde(flatten)]
    pub result: SimResult,
}

impl TraceRun {
    pub fn rows(&self) -> impl Iterator<Item = Row> + '_ {
        self.results.iter().map(|r| Row { trace: self.trace.clone(), result: r.clone() })
    }
}

/// Runs `sim` over `source` on up to `threads` threads, streaming the trace:
/// every policy at every size, results sizes outer and policies inner.
pub fn simulate(
    source: &TraceSource,
    sim: &Simulation,
    threads: usize,
    progress: &dyn Progress,
) -> Result<TraceRun, SourceError> {
    let prepared = sim.prepare(source, progress)?;
    let jobs = prepared.jobs(&sim.policies);
    let accesses = prepared.trace.known_accesses();
    progress.begin("simulating", accesses.map(|n| n * jobs.len() as u64));
    let report = |n, left: Option<std::time::Duration>| {
        progress.advance(n);
        if let Some(left) = left {
            progress.remaining(left);
        }
    };
    let results = run_streaming_paced(
        prepared.trace.accesses()?,
        &jobs,
        prepared.counting,
        threads,
        accesses.unwrap_or(0),
        &report,
    )?;
    progress.end();
    prepared.check(&results)?;
    let Prepared { trace, .. } = prepared;
    Ok(TraceRun { trace: source.trace.display().to_string(), scan: trace.scan, results })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_sizes;

    #[test]
    fn warmup_parses_counts_and_shares() {
        assert_eq!("1000".parse(), Ok(Warmup::Accesses(1000)));
        assert_eq!("10%".parse(), Ok(Warmup::Share(0.1)));
        assert_eq!(Warmup::Share(0.1).accesses(1005), 101);
        assert!("x%".parse::<Warmup>().unwrap_err().to_string().contains("bad percentage"));
        assert!("100%".parse::<Warmup>().unwrap_err().to_string().contains("[0%, 100%)"));
        assert!("lots".parse::<Warmup>().unwrap_err().to_string().contains("neither a count"));
    }

    #[test]
    fn simulate_streams_every_policy_at_every_size_in_order() {
        let mut source = TraceSource::new("synth:zipf:2000:0.8");
        source.requests = 20_000;
        let sim = Simulation {
            policies: hearth_policy::parse_list("lru,opt").unwrap(),
            sizes: parse_sizes("10%,100blocks").unwrap(),
            warmup: Some(Warmup::Share(0.1)),
            interval: None,
        };
        let run = simulate(&source, &sim, 2, &()).unwrap();
        let got: Vec<(&str, u64)> = run.results.iter().map(|r| (r.policy.as_str(), r.cache_bytes)).collect();
        let tenth = CacheSize::Footprint(0.1).resolve(run.scan.as_ref().unwrap().footprint_bytes, Some(4096)).unwrap();
        assert_eq!(got, vec![("LRU", tenth), ("OPT", tenth), ("LRU", 100 * 4096), ("OPT", 100 * 4096)]);
        assert!(run.results.iter().all(|r| r.requests == 18_000));
        assert!(run.results[1].hits >= run.results[0].hits, "OPT bounds LRU");
        // The same numbers as one in-memory run of the counted accesses' jobs.
        let alone = simulate(
            &source,
            &Simulation { policies: hearth_policy::parse_list("lru").unwrap(), ..sim.clone() },
            1,
            &(),
        )
        .unwrap();
        assert_eq!(alone.results[0], run.results[0]);
        let rows: Vec<Row> = run.rows().collect();
        assert_eq!(rows[0].trace, "synth:zipf:2000:0.8");

        let empty = TraceSource { requests: 0, ..source };
        let err = simulate(&empty, &Simulation { warmup: None, ..sim }, 1, &()).err().unwrap();
        assert_eq!(err.to_string(), "synth:zipf:2000:0.8 holds no requests");
    }
}

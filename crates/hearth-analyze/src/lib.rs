//! What a trace looks like to a cache: how many distinct blocks it touches,
//! how reads and writes mix, how large requests are, how far apart re-uses
//! are (in distinct blocks: the LRU stack distance; in requests: the temporal
//! distance) and how skewed the popularity is.

mod hist;
mod plots;

pub use hist::Log2Hist;
pub use plots::write_plots;

use hearth_core::{key_map, Access, Op};
// Stack distances are an estimator, shared with warmup; re-exported where
// this crate always had them.
pub use hearth_estimate::for_each_reuse;
use hearth_trace::{Mode, Request, TraceError};
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Report {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub others: u64,
    /// Cache-level accesses (blocks in block mode, objects in object mode).
    pub accesses: u64,
    pub unique_keys: u64,
    pub footprint_bytes: u64,
    /// Request sizes in bytes.
    pub request_sizes: Log2Hist,
    /// LRU stack distance of each re-access, in distinct keys between the two uses.
    pub reuse_distance: Log2Hist,
    /// Requests between two uses of the same key.
    pub temporal_distance: Log2Hist,
    /// First accesses (infinite distance).
    pub cold_accesses: u64,
    /// The MQ study's skew curve: (% of keys, % of accesses they receive),
    /// keys taken from most to least accessed.
    pub frequency_curve: Vec<(f64, f64)>,
}

/// Reads requests, splits them per `mode` and characterises them.
pub fn analyze<I>(requests: I, mode: Mode) -> Result<Report, TraceError>
where
    I: Iterator<Item = Result<Request, TraceError>>,
{
    let mut r = Report {
        requests: 0,
        reads: 0,
        writes: 0,
        others: 0,
        accesses: 0,
        unique_keys: 0,
        footprint_bytes: 0,
        request_sizes: Log2Hist::default(),
        reuse_distance: Log2Hist::default(),
        temporal_distance: Log2Hist::default(),
        cold_accesses: 0,
        frequency_curve: Vec::new(),
    };
    let mut counted = Vec::new();
    let requests = requests.inspect(|req| {
        if let Ok(req) = req {
            r.requests += 1;
            match req.op {
                Op::Read => r.reads += 1,
                Op::Write => r.writes += 1,
                Op::Other => r.others += 1,
            }
            r.request_sizes.add(u64::from(req.len));
        }
    });
    for a in hearth_trace::accesses(requests, mode) {
        counted.push(a?);
    }
    distances(&counted, &mut r);
    Ok(r)
}

/// Fills the per-access parts of the report.
fn distances(accesses: &[Access], r: &mut Report) {
    r.accesses = accesses.len() as u64;
    let mut counts = key_map::<u64>(accesses.len() / 4);
    for_each_reuse(accesses, |i, reuse| {
        let a = &accesses[i];
        *counts.entry(a.key).or_insert(0) += 1;
        match reuse {
            Some((stack, temporal)) => {
                r.reuse_distance.add(stack);
                r.temporal_distance.add(temporal);
            }
            None => {
                r.cold_accesses += 1;
                r.footprint_bytes += u64::from(a.size);
            }
        }
    });
    r.unique_keys = counts.len() as u64;
    let mut counts: Vec<u64> = counts.into_values().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    r.frequency_curve = skew_curve(&counts, accesses.len() as u64);
}

/// Samples the cumulative share of accesses at up to ~200 points of key share.
fn skew_curve(sorted_counts: &[u64], total: u64) -> Vec<(f64, f64)> {
    let n = sorted_counts.len();
    if n == 0 || total == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(200);
    let mut curve = vec![(0.0, 0.0)];
    let mut sum = 0u64;
    for (i, c) in sorted_counts.iter().enumerate() {
        sum += c;
        if (i + 1) % step == 0 || i + 1 == n {
            curve.push((100.0 * (i + 1) as f64 / n as f64, 100.0 * sum as f64 / total as f64));
        }
    }
    curve
}

impl Report {
    /// Human-readable summary.
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 };
        let _ = writeln!(s, "requests          {}", self.requests);
        let _ = writeln!(
            s,
            "  reads / writes  {} ({:.1}%) / {} ({:.1}%), other {}",
            self.reads,
            pct(self.reads, self.requests),
            self.writes,
            pct(self.writes, self.requests),
            self.others
        );
        let _ = writeln!(s, "cache accesses    {}", self.accesses);
        let _ = writeln!(s, "unique keys       {}", self.unique_keys);
        let _ = writeln!(s, "footprint         {}", hearth_core::format_bytes(self.footprint_bytes));
        let _ =
            writeln!(s, "cold accesses     {} ({:.1}%)", self.cold_accesses, pct(self.cold_accesses, self.accesses));
        for (name, h) in [
            ("request size (bytes)", &self.request_sizes),
            ("reuse distance (distinct keys)", &self.reuse_distance),
            ("temporal distance (requests)", &self.temporal_distance),
        ] {
            let _ = writeln!(s, "\n{name}:\n{}", h.render_text());
        }
        let _ = writeln!(s, "\nskew: share of accesses to the most accessed keys");
        for want in [1.0, 5.0, 10.0, 20.0, 50.0] {
            if let Some(&(k, a)) = self.frequency_curve.iter().find(|(k, _)| *k >= want) {
                let _ = writeln!(s, "  top {k:5.1}% of keys -> {a:5.1}% of accesses");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(keys: &[u64]) -> Report {
        let reqs = keys
            .iter()
            .map(|&k| Ok(Request { time_ns: 0, client: 0, op: Op::Read, offset: k, len: 1, next_access: None }));
        analyze(reqs, Mode::Object).unwrap()
    }

    #[test]
    fn distances_on_a_hand_worked_sequence() {
        // a b c a b b: a re-used over {b,c} (2), b over {c,a} (2), b over {} (0).
        let r = report(&[1, 2, 3, 1, 2, 2]);
        assert_eq!((r.accesses, r.unique_keys, r.cold_accesses), (6, 3, 3));
        assert_eq!(r.reuse_distance.count(0), 1);
        assert_eq!(r.reuse_distance.bucket_of(2), r.reuse_distance.bucket_of(3));
        assert_eq!(r.reuse_distance.count(r.reuse_distance.bucket_of(2)), 2);
        // temporal: 3, 3, 1
        assert_eq!(r.temporal_distance.count(r.temporal_distance.bucket_of(1)), 1);
        assert_eq!(r.temporal_distance.count(r.temporal_distance.bucket_of(3)), 2);
        // Key 2 gets 3 of 6 accesses: top third of keys -> 50%.
        assert_eq!(r.frequency_curve[1], (100.0 / 3.0, 50.0));
        assert_eq!(*r.frequency_curve.last().unwrap(), (100.0, 100.0));
    }
}

//! `hearth top`: a running server at a glance, from its metrics address —
//! per export, read IOPS, hit ratio, read latency (p50/p99 from the
//! histogram), the live LRU miss-ratio curve as a sparkline and the
//! what-if table of `GET /advice`. Refreshes every interval until Ctrl-C;
//! `--once` prints one view (rates over the first interval) and exits.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

#[derive(Args, Debug)]
pub struct TopArgs {
    /// The server's metrics address, as `hearth serve --metrics` printed it (127.0.0.1:9109 or
    /// http://127.0.0.1:9109/metrics).
    address: String,
    /// Time between refreshes, e.g. 1s.
    #[arg(long, default_value = "1s", value_parser = crate::units::duration)]
    interval: Duration,
    /// Print one view and exit.
    #[arg(long)]
    once: bool,
}

pub fn run(args: TopArgs) -> anyhow::Result<()> {
    let base =
        args.address.trim_start_matches("http://").trim_end_matches("/metrics").trim_end_matches('/').to_string();
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5))).build().into();
    let get = |path: &str| -> anyhow::Result<String> {
        let url = format!("http://{base}{path}");
        let mut response = agent.get(&url).call().with_context(|| format!("reading {url}"))?;
        response.body_mut().read_to_string().with_context(|| format!("reading {url}"))
    };
    let mut before = Sample::parse(&get("/metrics")?);
    let mut at = Instant::now();
    loop {
        std::thread::sleep(args.interval);
        let now = Sample::parse(&get("/metrics")?);
        let advice: serde_json::Value = serde_json::from_str(&get("/advice")?).context("the /advice answer")?;
        let view = render(&before, &now, at.elapsed(), &advice);
        if args.once {
            print!("{view}");
            return Ok(());
        }
        // Clear the screen and draw from the top left.
        print!("\x1b[2J\x1b[H{view}");
        before = now;
        at = Instant::now();
    }
}

/// One scrape of /metrics: `name{labels}` -> value.
struct Sample(HashMap<String, f64>);

impl Sample {
    fn parse(text: &str) -> Sample {
        Sample(
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.rsplit_once(' '))
                .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
                .collect(),
        )
    }

    fn get(&self, name: &str, labels: &str) -> f64 {
        self.0.get(&format!("{name}{{{labels}}}")).copied().unwrap_or(0.0)
    }

    /// The latency below which `q` of the reads in `self - before` finished.
    fn read_latency_quantile(&self, before: &Sample, export: &str, q: f64) -> Option<f64> {
        let prefix = format!("hearth_request_duration_seconds_bucket{{export=\"{export}\",op=\"read\",le=\"");
        let mut buckets: Vec<(f64, f64)> = self
            .0
            .iter()
            .filter_map(|(k, v)| {
                let bound = k.strip_prefix(&prefix)?.strip_suffix("\"}")?;
                let bound = if bound == "+Inf" { f64::INFINITY } else { bound.parse().ok()? };
                Some((bound, v - before.0.get(k).copied().unwrap_or(0.0)))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total = buckets.last()?.1;
        (total > 0.0).then(|| buckets.iter().find(|(_, n)| *n >= q * total).map_or(f64::INFINITY, |b| b.0))
    }
}

fn seconds(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.is_infinite() => "slow".into(),
        Some(s) if s < 1e-3 => format!("≤{:.0} µs", s * 1e6),
        Some(s) => format!("≤{:.1} ms", s * 1e3),
    }
}

/// ▁..█ for each hit ratio, scaled from 0 to 1.
fn sparkline(ratios: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    ratios.iter().map(|r| BARS[((r.clamp(0.0, 1.0) * 7.0).round()) as usize]).collect()
}

fn render(before: &Sample, now: &Sample, took: Duration, advice: &serde_json::Value) -> String {
    let mut out = String::new();
    let exports = advice["exports"].as_array().cloned().unwrap_or_default();
    if exports.is_empty() {
        let _ = writeln!(out, "no export gives advice (a cache of 0, or --what-if none)");
    }
    for e in &exports {
        let name = e["export"].as_str().unwrap_or("?");
        let labels = format!("export=\"{name}\"");
        let reads = now.get("hearth_requests_total", &format!("{labels},op=\"read\""))
            - before.get("hearth_requests_total", &format!("{labels},op=\"read\""));
        let hits = now.get("hearth_cache_hits_total", &labels) - before.get("hearth_cache_hits_total", &labels);
        let misses = now.get("hearth_cache_misses_total", &labels) - before.get("hearth_cache_misses_total", &labels);
        let interval_hits =
            if hits + misses > 0.0 { format!("{:.1}%", 100.0 * hits / (hits + misses)) } else { "-".into() };
        let _ = writeln!(
            out,
            "export {name}: cache {}, {:.0} reads/s, hits {interval_hits} now, {:.1}% since start; read latency p50 {}, p99 {}",
            hearth_core::format_bytes(e["cache_bytes"].as_u64().unwrap_or(0)),
            reads / took.as_secs_f64(),
            100.0 * e["measured_hit_ratio"].as_f64().unwrap_or(0.0),
            seconds(now.read_latency_quantile(before, name, 0.5)),
            seconds(now.read_latency_quantile(before, name, 0.99)),
        );
        let curve = e["mrc"].as_array().cloned().unwrap_or_default();
        let ratios: Vec<f64> = curve.iter().map(|p| p["hit_ratio"].as_f64().unwrap_or(0.0)).collect();
        let size = |p: Option<&serde_json::Value>| {
            hearth_core::format_bytes(p.and_then(|p| p["cache_bytes"].as_u64()).unwrap_or(0))
        };
        let _ = writeln!(
            out,
            "  LRU hit ratio by cache size  {} .. {}  {}  {:.1}% .. {:.1}%",
            size(curve.first()),
            size(curve.last()),
            sparkline(&ratios),
            100.0 * ratios.first().copied().unwrap_or(0.0),
            100.0 * ratios.last().copied().unwrap_or(0.0),
        );
        let _ = writeln!(out, "  {:<24} {:>10} {:>14}", "what if (same size)", "hit ratio", "sampled reads");
        for p in e["policies"].as_array().cloned().unwrap_or_default() {
            let mark = if p["configured"] == true { " (now)" } else { "" };
            let _ = writeln!(
                out,
                "  {:<24} {:>9.1}% {:>14}",
                format!("{}{mark}", p["policy"].as_str().unwrap_or("?")),
                100.0 * p["hit_ratio"].as_f64().unwrap_or(0.0),
                p["sampled_reads"].as_u64().unwrap_or(0)
            );
        }
    }
    out
}

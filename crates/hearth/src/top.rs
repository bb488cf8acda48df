//! `hearth top`: a running server at a glance, from its metrics address —
//! per export, its cache mode and size, dirty blocks, read and write rates,
//! hit ratio, read latency (p50/p99 from the histogram), the live LRU
//! miss-ratio curve as a sparkline and the what-if table of `GET /advice`,
//! laid out to fit an 80-column terminal. Refreshes every interval until
//! Ctrl-C; `--once` prints one view (rates over the first interval) and exits.

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
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = crate::units::duration)]
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

    /// The export's cache mode (through, around, back, pass), from `hearth_cache_mode`.
    fn cache_mode(&self, export: &str) -> Option<&str> {
        let prefix = format!("hearth_cache_mode{{export=\"{export}\",mode=\"");
        self.0.iter().filter(|(_, &v)| v == 1.0).find_map(|(k, _)| k.strip_prefix(&prefix)?.strip_suffix("\"}"))
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

/// The terminal width the view is laid out for.
const COLUMNS: usize = 80;

/// Writes `pieces` joined by spaces, broken between pieces (never inside
/// one: "p50 ≤100 µs," stays whole) into lines of at most [`COLUMNS`]
/// characters, each line after the first indented by `indent`; a piece
/// longer than a line (a long export name) is cut with an ellipsis.
fn fit(out: &mut String, indent: usize, pieces: &[String]) {
    let room = COLUMNS - indent;
    let mut line = String::new();
    for piece in pieces {
        let piece: String = if piece.chars().count() > room {
            piece.chars().take(room - 1).chain(['…']).collect()
        } else {
            piece.clone()
        };
        let width = line.chars().count();
        if width > indent && width + 1 + piece.chars().count() > COLUMNS {
            out.push_str(&line);
            out.push('\n');
            line = " ".repeat(indent);
        } else if !line.trim().is_empty() {
            line.push(' ');
        }
        line.push_str(&piece);
    }
    out.push_str(&line);
    out.push('\n');
}

fn render(before: &Sample, now: &Sample, took: Duration, advice: &serde_json::Value) -> String {
    let mut out = String::new();
    let exports = advice["exports"].as_array().cloned().unwrap_or_default();
    if exports.is_empty() {
        let _ = writeln!(out, "no export gives advice (a cache of 0, or --what-if none)");
    }
    let secs = took.as_secs_f64();
    for e in &exports {
        let name = e["export"].as_str().unwrap_or("?");
        let labels = format!("export=\"{name}\"");
        let rise = |metric: &str, labels: &str| now.get(metric, labels) - before.get(metric, labels);
        let reads = rise("hearth_requests_total", &format!("{labels},op=\"read\""));
        let writes = rise("hearth_requests_total", &format!("{labels},op=\"write\""));
        let written = rise("hearth_bytes_total", &format!("{labels},direction=\"write\""));
        let hits = rise("hearth_cache_hits_total", &labels);
        let misses = rise("hearth_cache_misses_total", &labels);
        let interval_hits =
            if hits + misses > 0.0 { format!("{:.1}%", 100.0 * hits / (hits + misses)) } else { "-".into() };
        let dirty = now.get("hearth_cache_blocks", &format!("{labels},state=\"dirty\""));
        let cache = hearth_core::format_bytes(e["cache_bytes"].as_u64().unwrap_or(0));
        let mode = now.cache_mode(name).unwrap_or("?");
        fit(
            &mut out,
            2,
            &[
                format!("export {name}:"),
                format!("cache {cache},"),
                format!("mode {mode},"),
                format!("{dirty:.0} dirty blocks"),
            ],
        );
        fit(
            &mut out,
            4,
            &[
                format!("  reads {:.0}/s,", reads / secs),
                format!("p50 {},", seconds(now.read_latency_quantile(before, name, 0.5))),
                format!("p99 {};", seconds(now.read_latency_quantile(before, name, 0.99))),
                format!("writes {:.0}/s,", writes / secs),
                format!("{}/s", hearth_core::format_bytes((written / secs) as u64)),
            ],
        );
        let since_start = 100.0 * e["measured_hit_ratio"].as_f64().unwrap_or(0.0);
        fit(&mut out, 4, &[format!("  hit ratio {interval_hits} now,"), format!("{since_start:.1}% since start")]);
        let curve = e["mrc"].as_array().cloned().unwrap_or_default();
        let ratios: Vec<f64> = curve.iter().map(|p| p["hit_ratio"].as_f64().unwrap_or(0.0)).collect();
        let size = |p: Option<&serde_json::Value>| {
            hearth_core::format_bytes(p.and_then(|p| p["cache_bytes"].as_u64()).unwrap_or(0))
        };
        fit(
            &mut out,
            4,
            &[
                "  LRU hit ratio by cache size,".into(),
                format!("{} .. {}:", size(curve.first()), size(curve.last())),
                sparkline(&ratios),
                format!(
                    "{:.1}% .. {:.1}%",
                    100.0 * ratios.first().copied().unwrap_or(0.0),
                    100.0 * ratios.last().copied().unwrap_or(0.0)
                ),
            ],
        );
        let _ = writeln!(out, "  {:<40} {:>10} {:>14}", "what if (same size)", "hit ratio", "sampled reads");
        for p in e["policies"].as_array().cloned().unwrap_or_default() {
            let mark = if p["configured"] == true { " (now)" } else { "" };
            let mut label = format!("{}{mark}", p["policy"].as_str().unwrap_or("?"));
            // A label too long for its column (`MQ:m=8,lifetime=5000,...`) gets a line of its own.
            if label.chars().count() > 40 {
                fit(&mut out, 4, &[format!("  {label}")]);
                label.clear();
            }
            let _ = writeln!(
                out,
                "  {label:<40} {:>9.1}% {:>14}",
                100.0 * p["hit_ratio"].as_f64().unwrap_or(0.0),
                p["sampled_reads"].as_u64().unwrap_or(0)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two scrapes a second apart of a write-back export with a long name.
    fn scrapes(name: &str) -> (Sample, Sample) {
        let page = |reads: u64, writes: u64, written: u64, dirty: u64| {
            Sample::parse(&format!(
                "# TYPE hearth_requests_total counter\n\
                 hearth_requests_total{{export=\"{name}\",op=\"read\"}} {reads}\n\
                 hearth_requests_total{{export=\"{name}\",op=\"write\"}} {writes}\n\
                 hearth_bytes_total{{export=\"{name}\",direction=\"write\"}} {written}\n\
                 hearth_cache_hits_total{{export=\"{name}\"}} {}\n\
                 hearth_cache_misses_total{{export=\"{name}\"}} {}\n\
                 hearth_cache_mode{{export=\"{name}\",mode=\"back\"}} 1\n\
                 hearth_cache_blocks{{export=\"{name}\",state=\"dirty\"}} {dirty}\n\
                 hearth_request_duration_seconds_bucket{{export=\"{name}\",op=\"read\",le=\"0.0001\"}} {}\n\
                 hearth_request_duration_seconds_bucket{{export=\"{name}\",op=\"read\",le=\"0.01\"}} {reads}\n\
                 hearth_request_duration_seconds_bucket{{export=\"{name}\",op=\"read\",le=\"+Inf\"}} {reads}\n",
                reads * 9 / 10,
                reads / 10,
                reads / 2,
            ))
        };
        (page(1_000_000, 500_000, 1 << 40, 10), page(1_123_456, 600_000, (1 << 40) + (2 << 30), 123_456))
    }

    fn advice(name: &str) -> serde_json::Value {
        let curve: Vec<_> = (1..=16u64)
            .map(|k| serde_json::json!({"cache_bytes": k * (1 << 30), "hit_ratio": k as f64 / 20.0}))
            .collect();
        let policy = |p: &str, configured| serde_json::json!({"policy": p, "configured": configured, "hit_ratio": 0.987, "sampled_reads": 123_456_789u64});
        serde_json::json!({"exports": [{
            "export": name, "cache_bytes": 4u64 << 30, "measured_hit_ratio": 0.9123, "mrc": curve,
            "policies": [policy("MQ:m=8,lifetime=5000,history=bytes,queues=8", true), policy("LRU", false)],
        }]})
    }

    #[test]
    fn the_view_fits_80_columns_and_shows_writes_dirty_blocks_and_the_mode() {
        for name in ["vm-disk-0", "a-very-long-export-name-for-the-database-volume-of-the-accounting-team-2026-q4"] {
            let (before, now) = scrapes(name);
            let view = render(&before, &now, Duration::from_secs(1), &advice(name));
            for line in view.lines() {
                assert!(line.chars().count() <= COLUMNS, "{} columns: {line:?}\n{view}", line.chars().count());
            }
            assert!(view.contains("mode back, 123456 dirty blocks"), "{view}");
            assert!(view.contains("reads 123456/s, p50 ≤100 µs, p99 ≤10.0 ms; writes 100000/s, 2 GiB/s"), "{view}");
            assert!(view.contains("hit ratio 90.0% now, 91.2% since start"), "{view}");
            assert_eq!(view.chars().filter(|c| ('▁'..='█').contains(c)).count(), 16, "{view}");
            // Lines are broken between words: every piece is whole on one line.
            for piece in ["5.0% .. 80.0%", "1 GiB .. 16 GiB:", "MQ:m=8,lifetime=5000,history=bytes,queues=8 (now)"] {
                assert!(view.lines().any(|l| l.contains(piece)), "{piece:?} broken:\n{view}");
            }
        }
        let (before, now) = scrapes("x");
        let long = render(&before, &now, Duration::from_secs(1), &advice(&"x".repeat(100)));
        assert!(long.lines().next().unwrap().ends_with('…'), "{long}");
    }

    #[test]
    fn fit_breaks_between_pieces_and_indents() {
        let mut out = String::new();
        let pieces: Vec<String> = (0..12).map(|i| format!("piece-{i:02}")).collect();
        fit(&mut out, 4, &pieces);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(lines[0].len() <= COLUMNS && lines[1].starts_with("    piece-"), "{out}");
        assert_eq!(out.split_whitespace().count(), 12);
    }
}

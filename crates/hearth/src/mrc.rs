//! `hearth mrc`: miss-ratio curves in one pass over the trace — exact LRU
//! from stack distances, SHARDS-sampled LRU, miniature simulation of any
//! policy — and, for reference, the full simulations they replace.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use hearth_core::format_bytes;
use hearth_policy::{PolicyList, PolicySpec};
use hearth_sim::mrc::{exact_pass, shards_pass, ShardsMode, HOT_KEYS, TRUSTED_SAMPLE_KEYS};
use hearth_sim::source::{Needs, Streamed};
use hearth_sim::stream::{run_streaming, Counting};
use hearth_sim::{mrc_grid, parse_sizes, CacheSize, Job, SimResult};
use hearth_trace::sample::KeyRenaming;

use crate::out_paths;
use crate::output_args::{JsonCsv, Quiet, Threads};
use crate::progress;
use crate::trace_args::TraceArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// LRU at every size from one pass of stack distances (equals full LRU simulations).
    Exact,
    /// LRU from stack distances of a spatial sample of the items (SHARDS).
    Shards,
    /// Each policy run on a spatial sample of the items with its cache scaled by the rate.
    Mini,
    /// Each policy run in full at every size (the reference; one streamed pass for all).
    Full,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Exact => "exact",
            Method::Shards => "shards",
            Method::Mini => "mini",
            Method::Full => "full",
        }
    }
}

#[derive(Args, Debug)]
pub struct MrcArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Methods to run, comma-separated: exact, shards, mini, full.
    #[arg(short, long, alias = "method", value_delimiter = ',', default_value = "exact")]
    methods: Vec<Method>,
    /// Policies for mini and full (exact and shards are LRU's), comma-separated.
    #[arg(short, long, default_value = "lru")]
    policies: Vec<PolicyList>,
    /// Sampling rate for shards and mini: a share (1%) or a fraction (0.01).
    #[arg(long, value_name = "PERCENT", default_value = "1%")]
    rate: String,
    /// Fixed-size SHARDS: track at most N items, lowering the rate as needed (instead of --rate).
    #[arg(long, value_name = "N")]
    shards_items: Option<usize>,
    /// Fixed-rate SHARDS tracks the N keys most requested in the trace's first 2^20 requests
    /// exactly and samples the others (a stratified sample; 128, the default, is the measured
    /// setting: about half SHARDS_adj's error at 1%, at 1.8 to 2.3 times its time, GUIDE §1). 0 is
    /// the paper's SHARDS_adj.
    #[arg(long, value_name = "N", default_value_t = HOT_KEYS)]
    shards_hot_keys: usize,
    /// Draw N of the sample for shards and mini: their keys are renamed (k -> a*k+b, a bijection
    /// from N) before hashing, so another set of keys is sampled. 0 is the sample `hearth trace
    /// sample` writes; the spread of a curve over draws is its sampling error.
    #[arg(long, value_name = "N", default_value_t = 0)]
    sample_seed: u64,
    /// Cache sizes (as for `hearth sim`). Default: 40 sizes from 0.1% to 100% of the footprint,
    /// evenly spaced on a log scale.
    #[arg(short, long, allow_hyphen_values = true)]
    sizes: Option<String>,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    output: JsonCsv,
    /// Write the curves to PATH.svg and PATH.png.
    #[arg(long, value_name = "PATH", value_parser = out_paths::plot)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    quiet: Quiet,
}

/// One method's curve for one policy.
#[derive(serde::Serialize)]
struct Curve {
    method: &'static str,
    /// The sampling rate the points were measured at (1 for exact and full).
    rate: f64,
    /// The draw of the sample (`--sample-seed`), when a sampled curve's is not 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    sample_seed: Option<u64>,
    /// Keys a fixed-rate SHARDS curve tracked exactly (`--shards-hot-keys`).
    #[serde(skip_serializing_if = "Option::is_none")]
    hot_keys: Option<usize>,
    seconds: f64,
    points: Vec<SimResult>,
    /// The draw its rows name in the table and CSV: every sampled curve's, 0 included, so that
    /// rows of several runs (`--sample-seed 1`, `2`, ...) put together still say which is which.
    #[serde(skip)]
    drawn_with: Option<u64>,
}

impl Curve {
    fn label(&self) -> String {
        let policy = self.points.first().map_or("", |p| p.policy.as_str());
        let seed = self.sample_seed.map_or(String::new(), |s| format!(" seed {s}"));
        match self.method {
            "exact" | "full" => format!("{policy} {}", self.method),
            m => format!("{policy} {m} {}%{seed}", self.rate * 100.0),
        }
    }
}

pub fn run(args: MrcArgs) -> anyhow::Result<()> {
    let threads = args.threads.count();
    let rate = hearth_trace::sample::parse_rate(&args.rate).context("--rate")?;
    let sizes = match &args.sizes {
        Some(spec) => parse_sizes(spec).context("--sizes")?,
        None => mrc_grid(),
    };
    let policies = PolicyList::concat(&args.policies);
    let simulates = args.methods.iter().any(|m| matches!(m, Method::Mini | Method::Full));
    let needs = Needs {
        totals: sizes.iter().any(|s| matches!(s, CacheSize::Footprint(_))),
        next_access: simulates && policies.iter().any(PolicySpec::is_offline),
    };
    let source = args.trace.source();
    let mut trace = Streamed::open(&source, needs, &progress::Bars::new(args.quiet.quiet))?;
    let cache_bytes = sizes.iter().map(|&s| trace.resolve(s)).collect::<Result<Vec<u64>, _>>()?;
    let jobs: Vec<Job> =
        policies.iter().flat_map(|p| cache_bytes.iter().map(|&c| Job { policy: p.clone(), cache_bytes: c })).collect();

    let mut curves = Vec::new();
    for &method in &args.methods {
        let bar = progress::counter(&format!("{} curve", method.name()), args.quiet.quiet);
        let started = Instant::now();
        let sampled = matches!(method, Method::Shards | Method::Mini);
        trace.set_renaming(if sampled { KeyRenaming::for_seed(args.sample_seed) } else { KeyRenaming::IDENTITY });
        let (rate, results) = match method {
            Method::Exact => (1.0, exact_pass(&trace, &cache_bytes, &|n| bar.inc(n))?),
            Method::Shards => {
                let mode = args.shards_items.map_or(ShardsMode::FixedRate(rate), ShardsMode::FixedSize);
                let shards = shards_pass(&trace, mode, args.shards_hot_keys, &cache_bytes, &|n| bar.inc(n))?;
                if shards.sampled_keys() < TRUSTED_SAMPLE_KEYS {
                    let unstratified = args.shards_items.is_none() && args.shards_hot_keys == 0;
                    let stratify = if unstratified {
                        format!(", or stratify it (--shards-hot-keys {HOT_KEYS})")
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "warning: the SHARDS sample holds {} distinct keys, fewer than the {TRUSTED_SAMPLE_KEYS} \
                         its curve is trusted with; raise --rate (or --shards-items){stratify}",
                        shards.sampled_keys()
                    );
                }
                (shards.rate(), shards.results())
            }
            Method::Mini => {
                let results = hearth_sim::minisim::run_miniature(&trace, &jobs, rate, threads, &|n| bar.inc(n))?;
                (rate, results)
            }
            Method::Full => {
                let results = run_streaming(trace.accesses()?, &jobs, Counting::default(), threads, &|n| bar.inc(n))?;
                (1.0, results)
            }
        };
        bar.finish_and_clear();
        let seconds = started.elapsed().as_secs_f64();
        if results.first().is_some_and(|r| r.requests == 0) {
            anyhow::bail!("{} holds no requests", args.trace.trace.display());
        }
        if !args.quiet.quiet {
            eprintln!("{}: {} sizes in {seconds:.2} s", method.name(), cache_bytes.len());
        }
        // Mini and full return every policy's points, policy after policy.
        for points in results.chunks(cache_bytes.len()) {
            let sample_seed = (sampled && args.sample_seed != 0).then_some(args.sample_seed);
            let stratified = method == Method::Shards && args.shards_items.is_none();
            let hot_keys = stratified.then_some(args.shards_hot_keys);
            let drawn_with = sampled.then_some(args.sample_seed);
            curves.push(Curve {
                method: method.name(),
                rate,
                sample_seed,
                hot_keys,
                seconds,
                points: points.to_vec(),
                drawn_with,
            });
        }
    }
    report(&args, &curves)
}

fn report(args: &MrcArgs, curves: &[Curve]) -> anyhow::Result<()> {
    let out = std::io::stdout();
    let mut out = out.lock();
    if args.output.json() {
        serde_json::to_writer_pretty(&mut out, curves)?;
        writeln!(out)?;
    } else {
        let csv = args.output.csv;
        if csv {
            writeln!(
                out,
                "method,rate,seed,policy,cache_bytes,requests,hits,hit_ratio,miss_ratio,byte_hit_ratio,byte_miss_ratio"
            )?;
        } else {
            writeln!(
                out,
                "{:<8} {:>7} {:>4} {:<8} {:>12} {:>10} {:>15}",
                "method", "rate", "seed", "policy", "cache", "miss ratio", "byte miss ratio"
            )?;
        }
        for c in curves {
            // Exact and full curves sample nothing: an empty CSV cell, a dash in the table.
            let seed = c.drawn_with.map(|s| s.to_string());
            for p in &c.points {
                let byte_miss_ratio = 1.0 - p.byte_hit_ratio();
                if csv {
                    let (m, r, pol, cb, rq, h) = (c.method, c.rate, &p.policy, p.cache_bytes, p.requests, p.hits);
                    let (hr, mr, bhr) = (p.hit_ratio(), p.miss_ratio(), p.byte_hit_ratio());
                    let seed = seed.as_deref().unwrap_or("");
                    writeln!(out, "{m},{r},{seed},{pol},{cb},{rq},{h},{hr:.6},{mr:.6},{bhr:.6},{byte_miss_ratio:.6}")?;
                } else {
                    let size = format_bytes(p.cache_bytes);
                    let rate = format!("{}%", c.rate * 100.0);
                    writeln!(
                        out,
                        "{:<8} {rate:>7} {:>4} {:<8} {size:>12} {:>10.4} {byte_miss_ratio:>15.4}",
                        c.method,
                        seed.as_deref().unwrap_or("-"),
                        p.policy,
                        p.miss_ratio()
                    )?;
                }
            }
        }
        if !csv {
            write_errors(&mut out, curves)?;
        }
    }
    if let Some(path) = &args.plot {
        let title = format!("Miss-ratio curve: {}", args.trace.name());
        let mut chart = hearth_plot::Chart::lines(&title, "cache size (MiB)", "miss ratio");
        chart.log_x = true;
        for c in curves {
            let points =
                c.points.iter().map(|p| (p.cache_bytes as f64 / (1u64 << 20) as f64, p.miss_ratio())).collect();
            chart = chart.series(&c.label(), points);
        }
        for f in hearth_plot::render(&chart, path)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// With full simulations in the run, how far each other curve of the same
/// policy is from them: mean and largest absolute miss-ratio error.
fn write_errors(out: &mut impl Write, curves: &[Curve]) -> std::io::Result<()> {
    for reference in curves.iter().filter(|c| c.method == "full") {
        let policy = &reference.points[0].policy;
        for c in curves.iter().filter(|c| c.method != "full" && &c.points[0].policy == policy) {
            let errors: Vec<f64> =
                c.points.iter().zip(&reference.points).map(|(p, r)| (p.miss_ratio() - r.miss_ratio()).abs()).collect();
            let mean = errors.iter().sum::<f64>() / errors.len() as f64;
            let max = errors.iter().copied().fold(0.0, f64::max);
            writeln!(
                out,
                "{}: mean absolute error {mean:.4}, max {max:.4} against full simulation ({:.2} s vs {:.2} s)",
                c.label(),
                c.seconds,
                reference.seconds
            )?;
        }
    }
    Ok(())
}

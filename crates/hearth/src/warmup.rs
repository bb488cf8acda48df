//! `hearth warmup`: Bonfire-style cache warmup studies.
//!
//! `hearth warmup sim TRACE` restarts a cache at the start of every period
//! (day), warms it cold, with Last-K, First-K or Top-K, and reports how long
//! each takes to converge to an always-warm cache and how much backend load
//! it saves. `synth:bonfire` is a 4-day Zipf(0.4) workload over 50 GiB with
//! a daily pattern (see `hearth_warmup::synth`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use hearth_core::format_bytes;
use hearth_policy::PolicySpec;
use hearth_sim::parse_sizes;
use hearth_warmup::reaccess;
use hearth_warmup::synth::DailyZipf;
use hearth_warmup::{Experiment, Method, Outcome, Thresholds, TimedAccess};

use crate::out_paths;
use crate::output_args::{Json, Quiet, Threads};
use crate::progress;
use crate::trace_args::TraceArgs;
use crate::units;

/// `Thresholds::default().violation` (0.05) as the flag writes it.
const THV_DEFAULT: &str = "5%";

/// The trace name of the built-in multi-day workload.
const BONFIRE_SYNTH: &str = "synth:bonfire";

#[derive(Subcommand, Debug)]
pub enum WarmupCmd {
    /// Simulate restarts with cold, Last-K, First-K, Top-K and always-warm caches.
    #[command(after_help = "TRACE may also be synth:bonfire: Zipf 0.4 over 50 GiB with a daily pattern, --days days.")]
    Sim(WarmupSimArgs),
    /// Recover a server's warmup log (`hearth serve --warmup-log`) and show what a
    /// `hearth serve --warmup-preload` start would pre-load, without changing the log.
    Inspect(WarmupInspectArgs),
}

#[derive(Args, Debug)]
pub struct WarmupInspectArgs {
    /// The logging volume (file or block device).
    log: PathBuf,
    /// The export's cache block size.
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = hearth_core::parse_bytes)]
    block_size: u64,
    /// What the warmup log holds, as the server was started with (serve's --warmup-mode).
    #[arg(long, value_enum, default_value = "metadata")]
    warmup_mode: hearth_server::warmup::WarmupMode,
    /// Old spelling of --warmup-mode, refused: --mode is block or object caching.
    #[arg(long, hide = true, value_parser = units::moved("--mode", "--warmup-mode", "--mode is block or object caching"))]
    mode: Option<String>,
    /// Most bytes to pre-load (serve's --warmup-budget; the server caps it at its cache size).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = hearth_core::parse_bytes)]
    warmup_budget: u64,
    /// Old spelling of --warmup-budget, refused: --budget is warmup sim's share of the working set.
    #[arg(long, hide = true, value_parser = units::moved("--budget", "--warmup-budget", "--budget is warmup sim's share of the working set"))]
    budget: Option<String>,
    /// The export's backing file (serve's --path): logged data is distrusted if it changed after
    /// the log.
    #[arg(long)]
    path: Option<PathBuf>,
    /// Old name of --path.
    #[arg(long, hide = true, conflicts_with = "path", value_parser = units::renamed::<PathBuf>("--backend", "--path"))]
    backend: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct WarmupSimArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Days of `synth:bonfire` to generate.
    #[arg(long, default_value_t = 4)]
    days: u32,
    /// Cache sizes: bytes (2GiB), blocks (5000blocks) or share of the footprint (10%).
    #[arg(short, long, default_value = "10%,50%", allow_hyphen_values = true)]
    sizes: String,
    /// Replacement policy of the cache.
    #[arg(long, default_value = "lru")]
    policy: PolicySpec,
    /// Time between restarts, e.g. 30m or 1d; Bonfire restarts daily.
    #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = units::duration_or_seconds("--period"))]
    period: Duration,
    /// Length of one hit-rate interval.
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = units::duration_or_seconds("--interval"))]
    interval: Duration,
    /// Region sizes for the pre-loading methods.
    #[arg(long, value_name = "SIZES", value_delimiter = ',', default_value = "4KiB,1MiB", value_parser = hearth_core::parse_bytes)]
    regions: Vec<u64>,
    /// Warmup budget as a percentage of the previous period's working set (capped at the cache size).
    #[arg(long, value_name = "PERCENT", default_value = "100%",
          value_parser = units::share("--budget", units::BareShare::Percent))]
    budget: f64,
    /// Methods to run (cold, last-k, first-k, top-k, always-warm).
    #[arg(long, value_delimiter = ',', default_value = "cold,last-k,first-k,top-k,always-warm")]
    methods: Vec<Method>,
    /// Violation threshold ThV: how far below always-warm (in hit-rate percentage points) an interval
    /// may be.
    #[arg(long, value_name = "PERCENT", default_value = THV_DEFAULT,
          value_parser = units::share("--thv", units::BareShare::Fraction))]
    thv: f64,
    /// Convergence threshold ThN: consecutive intervals without violation that mean converged.
    #[arg(long, default_value_t = Thresholds::default().intervals)]
    thn: usize,
    /// Sequential read throughput of the pre-load, for the pre-load time estimate.
    #[arg(long, value_name = "RATE", default_value = "200MiB/s", value_parser = units::rate("--seq-throughput"))]
    seq_throughput: u64,
    /// Write hit-rate-over-time plots (SVG + PNG), one per cache size and region size, into DIR.
    #[arg(long, value_name = "DIR", value_parser = out_paths::dir)]
    plots: Option<PathBuf>,
    /// Also print the re-access analysis of the trace.
    #[arg(long)]
    reaccess: bool,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    quiet: Quiet,
}

pub fn run(cmd: WarmupCmd) -> anyhow::Result<()> {
    match cmd {
        WarmupCmd::Sim(args) => sim(args),
        WarmupCmd::Inspect(args) => inspect(args),
    }
}

fn inspect(args: WarmupInspectArgs) -> anyhow::Result<()> {
    use hearth_server::warmup::{WarmupLog, WarmupSettings};
    let mode = args.warmup_mode;
    let len = std::fs::metadata(&args.log).with_context(|| format!("warmup log {}", args.log.display()))?.len();
    if len == 0 && std::fs::metadata(&args.log)?.is_file() {
        anyhow::bail!("warmup log {} is empty", args.log.display());
    }
    let block_size = u32::try_from(args.block_size).context("--block-size")?;
    let settings = WarmupSettings {
        log: args.log.clone(),
        mode,
        budget: args.warmup_budget,
        staging: 0,
        log_size: len,
        preload: true,
    };
    let mut log = WarmupLog::open(&settings, block_size)?;
    if log.recovered().is_none() {
        anyhow::bail!("{}", log.warning.unwrap_or_default());
    }
    if let Some(backend) = args.path.as_ref().or(args.backend.as_ref()) {
        log.check_backend(Some(backend)).with_context(|| format!("--path {}", backend.display()))?;
    }
    let rec = log.recovered().expect("a log without a warning is recovered");
    let l = rec.layout;
    let unique: std::collections::HashSet<u64> = rec.blocks.iter().map(|b| b.lba).collect();
    println!(
        "{}: {}-byte blocks {} data, {} slots of {} bytes",
        args.log.display(),
        l.block_size,
        if l.with_data { "with" } else { "without" },
        l.slot_count,
        l.slot_size
    );
    println!(
        "{} block records ({} blocks), next record {}, {}, {} empty and {} corrupt slots",
        rec.blocks.len(),
        unique.len(),
        rec.next_seq,
        if rec.sealed { "sealed" } else { "not sealed" },
        rec.empty_slots,
        rec.corrupt_slots
    );
    let plan = log.plan().expect("recovered");
    println!(
        "pre-load within {}: {} blocks, {} from the log, {} from the backend",
        format_bytes(args.warmup_budget),
        plan.items.len(),
        plan.from_log(),
        plan.items.len() - plan.from_log()
    );
    for w in [&log.warning, &plan.warning].into_iter().flatten() {
        println!("warning: {w}");
    }
    Ok(())
}

/// Loads a block trace with its timestamps, or generates `synth:bonfire`.
pub fn load_timed(trace: &TraceArgs, days: u32) -> anyhow::Result<(Vec<TimedAccess>, u32)> {
    if trace.trace.synth() == BONFIRE_SYNTH.strip_prefix("synth:") {
        let w = DailyZipf { days, seed: trace.seed, ..DailyZipf::default() };
        if u64::from(w.block_size) != trace.block_size {
            anyhow::bail!("{BONFIRE_SYNTH} uses {}-byte blocks; drop --block-size", w.block_size);
        }
        return Ok((w.generate()?, w.block_size));
    }
    let (requests, mode) = trace.open()?;
    let hearth_trace::Mode::Block { block_size } = mode else {
        anyhow::bail!("{}: warmup studies need a block trace (this is an object trace)", trace.trace.display());
    };
    let accesses = hearth_warmup::timed_accesses(requests, block_size)?;
    if accesses.is_empty() {
        anyhow::bail!("{} holds no requests", trace.trace.display());
    }
    Ok((accesses, block_size))
}

fn sim(args: WarmupSimArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.budget > 0.0, "--budget must be above 0%");
    anyhow::ensure!(!args.period.is_zero() && !args.interval.is_zero(), "--period and --interval must be above 0s");
    let (trace, block_size) = load_timed(&args.trace, args.days)?;
    let footprint = {
        let mut blocks: Vec<u64> = trace.iter().map(|a| a.block).collect();
        blocks.sort_unstable();
        blocks.dedup();
        blocks.len() as u64 * u64::from(block_size)
    };
    let cache_sizes = parse_sizes(&args.sizes)
        .context("--sizes")?
        .into_iter()
        .map(|s| s.resolve(footprint, Some(block_size)))
        .collect::<Result<Vec<_>, _>>()?;
    let exp = Experiment {
        policy: args.policy.clone(),
        cache_sizes,
        block_size,
        period_ns: args.period.as_nanos() as u64,
        interval_ns: args.interval.as_nanos() as u64,
        region_sizes: args.regions.clone(),
        budget_share: args.budget,
        methods: args.methods.clone(),
        thresholds: Thresholds { violation: args.thv, intervals: args.thn },
    };
    let span_ns = trace.last().map_or(0, |l| l.time_ns - trace[0].time_ns);
    eprintln!(
        "{}: {} block accesses over {}, footprint {}",
        args.trace.trace.display(),
        trace.len(),
        human(span_ns),
        format_bytes(footprint)
    );
    if args.reaccess {
        print!("{}", reaccess::analyze(&trace, block_size, 1 << 20).render_text());
        println!();
    }
    let periods = hearth_warmup::sim::split_periods(&trace, exp.period_ns, exp.interval_ns).len();
    let bar =
        progress::bar(hearth_warmup::sim::job_count(&exp, periods) as u64, "simulating restarts", args.quiet.quiet);
    let threads = args.threads.count();
    let outcomes = hearth_warmup::sim::run(&trace, &exp, threads, &|| bar.inc(1))?;
    bar.finish_and_clear();
    drop(trace);

    let out = std::io::stdout();
    let mut out = out.lock();
    if args.json.json {
        serde_json::to_writer(&mut out, &outcomes)?;
        writeln!(out)?;
    } else {
        write_table(&mut out, &args, &exp, periods, &outcomes)?;
    }
    if let Some(dir) = &args.plots {
        for chart in charts(&exp, &outcomes, &args.trace.name()) {
            let (name, chart) = chart;
            for f in hearth_plot::render(&chart, &dir.join(name))? {
                eprintln!("wrote {}", f.display());
            }
        }
    }
    Ok(())
}

/// Table key: cache size, method order, region.
type RowKey = (u64, usize, Option<u64>);

fn rows(outcomes: &[Outcome]) -> BTreeMap<RowKey, Vec<&Outcome>> {
    let mut rows: BTreeMap<RowKey, Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        let order = Method::ALL.iter().position(|m| *m == o.method).unwrap_or(0);
        rows.entry((o.cache_bytes, order, o.region_bytes)).or_default().push(o);
    }
    rows
}

fn write_table(
    out: &mut impl Write,
    args: &WarmupSimArgs,
    exp: &Experiment,
    periods: usize,
    outcomes: &[Outcome],
) -> std::io::Result<()> {
    writeln!(
        out,
        "restarts every {} ({} periods evaluated after 1 of history); {} intervals; ThV {:.1}%, ThN {}; policy {}; budget {:.0}% of the previous working set",
        human(exp.period_ns),
        periods.saturating_sub(1),
        human(exp.interval_ns),
        100.0 * exp.thresholds.violation,
        exp.thresholds.intervals,
        exp.policy,
        100.0 * exp.budget_share
    )?;
    writeln!(out, "T_converge: mean over the periods that converged (converged/evaluated); load reduction: backend requests saved during the cold cache's convergence period")?;
    writeln!(
        out,
        "{:>10} {:<12} {:>8} {:>11} {:>10} {:>9} {:>16} {:>10}",
        "cache", "method", "region", "preload", "preload s", "hit ratio", "T_converge", "load red."
    )?;
    let mut last_size = None;
    for ((cache, _, region), runs) in rows(outcomes) {
        if last_size.is_some_and(|s| s != cache) {
            writeln!(out)?;
        }
        last_size = Some(cache);
        let n = runs.len() as f64;
        let converged: Vec<u64> = runs.iter().filter_map(|o| o.t_converge_ns()).collect();
        let t = if converged.is_empty() {
            format!("never (0/{})", runs.len())
        } else {
            format!(
                "{} ({}/{})",
                human(converged.iter().sum::<u64>() / converged.len() as u64),
                converged.len(),
                runs.len()
            )
        };
        let preload = runs.iter().map(|o| o.preload_bytes).sum::<u64>() / runs.len() as u64;
        writeln!(
            out,
            "{:>10} {:<12} {:>8} {:>11} {:>10.1} {:>9.4} {:>16} {:>9.1}%",
            format_bytes(cache),
            runs[0].method.name(),
            region.map_or("-".to_string(), format_bytes),
            format_bytes(preload),
            preload as f64 / args.seq_throughput.max(1) as f64,
            runs.iter().map(|o| o.hit_ratio()).sum::<f64>() / n,
            t,
            100.0 * runs.iter().map(|o| o.load_reduction).sum::<f64>() / n,
        )?;
    }
    Ok(())
}

/// One chart per (cache size, region size): hit rate over time since the
/// first restart, every evaluated period back to back.
fn charts(exp: &Experiment, outcomes: &[Outcome], trace: &str) -> Vec<(String, hearth_plot::Chart)> {
    let per_period = exp.period_ns.div_ceil(exp.interval_ns) as usize;
    // At most 24 points per period (hourly bins for a day): finer bins
    // show every short burst and hide the warmup trend.
    let factor = per_period.div_ceil(24).max(1);
    let hours = |i: usize| (i * factor) as f64 * exp.interval_ns as f64 / 3.6e12;
    let mut charts = Vec::new();
    for &cache in &exp.cache_sizes {
        for &region in &exp.region_sizes {
            // No dots: the renderer treats what follows one as an extension.
            let file_part = |b: u64| format_bytes(b).replace(' ', "").replace('.', "_");
            let name = format!("warmup_{}_{}", file_part(cache), file_part(region));
            let title = format!(
                "Hit rate after restarts: {trace}, {} cache, {} regions",
                format_bytes(cache),
                format_bytes(region)
            );
            let mut chart = hearth_plot::Chart::lines(&title, "hours since the first restart", "hit rate per interval");
            // The five methods run together for long stretches: each its own dashes and markers.
            chart.distinct = true;
            let mut restarts = Vec::new();
            // Always-warm first, so the warming caches are drawn over it.
            for method in [Method::AlwaysWarm, Method::Cold, Method::LastK, Method::FirstK, Method::TopK] {
                let mut runs: Vec<&Outcome> = outcomes
                    .iter()
                    .filter(|o| {
                        o.cache_bytes == cache
                            && o.method == method
                            && (!method.preloads() || o.region_bytes == Some(region))
                    })
                    .collect();
                if runs.is_empty() {
                    continue;
                }
                runs.sort_by_key(|o| o.period);
                let mut points = Vec::new();
                for (k, o) in runs.iter().enumerate() {
                    let s = o.series.coarsen(factor);
                    let base = k * s.len();
                    if restarts.len() <= k {
                        restarts.push(hours(base));
                    }
                    points.extend((0..s.len()).filter_map(|i| s.rate(i).map(|r| (hours(base + i), r))));
                }
                chart = chart.series(method.name(), points);
            }
            charts.push((name, chart.marks("restart", restarts)));
        }
    }
    charts
}

/// Nanoseconds in the largest unit that fits (`5.7 min`).
fn human(ns: u64) -> String {
    hearth_core::format_duration(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thv_default_is_the_library_default() {
        assert_eq!(units::percent(THV_DEFAULT), Ok(Thresholds::default().violation));
    }
}

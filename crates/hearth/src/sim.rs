//! `hearth sim`: replay a trace against policies at cache sizes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use hearth_core::format_bytes;
use hearth_placement::Placement;
use hearth_policy::{PolicyList, PolicySpec};
use hearth_sim::device::Device;
use hearth_sim::hierarchy::{BufferedFile, HierarchyConfig, HierarchyResult, StorageReplay, Timing};
use hearth_sim::run::{Row, Warmup};
use hearth_sim::source::{Needs, Streamed};
use hearth_sim::{
    parse_sizes, simulate, Job, SimResult, Simulation, TraceInput, TraceRun, TraceSource, DEFAULT_SIZES, MRC_SIZES,
};

use crate::out_paths;
use crate::output_args::{JsonCsv, Quiet, Threads};
use crate::progress;
use crate::trace_args::TraceArgs;
use crate::units;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// More traces to run the same policies and sizes on (same format options); results are tagged
    /// with their trace.
    #[arg(value_name = "MORE_TRACES")]
    more_traces: Vec<TraceInput>,
    /// Policies to run, comma-separated, with optional parameters (`lfu:aging=1000`) and admission
    /// (`lru+tinylfu`); `classic`, `modern`, `learned` and `all` stand for groups (see `hearth
    /// policies`). The default leaves out `learned`: GL-Cache and LRB train models during the run,
    /// which takes minutes on the bundled trace where the others take seconds.
    #[arg(short, long, default_value = "classic,modern")]
    policies: Vec<PolicyList>,
    /// Cache sizes, comma-separated: bytes (64MiB), blocks (5000blocks), objects (5000objects, with
    /// --ignore-obj-size or a trace without sizes), share of footprint (5%), or a byte range with step
    /// (128MiB..1GiB/128MiB). Default: 1%,5%,10%,25% (the MRC grid with --mrc).
    #[arg(short, long, allow_hyphen_values = true)]
    sizes: Option<String>,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    output: JsonCsv,
    /// Write a miss-ratio-curve plot to PATH.svg and PATH.png.
    #[arg(long, value_name = "PATH", value_parser = out_paths::plot)]
    mrc: Option<PathBuf>,
    /// Requests that fill the cache but are not counted: a number (1000000) or a share of the
    /// trace (10%).
    #[arg(long, value_name = "N|P%", value_parser = units::warmup)]
    warmup: Option<Warmup>,
    /// Also keep the miss ratio of each window of N counted requests (in --json, and plotted with
    /// --window-plot).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    window: Option<u64>,
    /// Old name of --window (--interval is a duration, as in `top` and `warmup sim`).
    #[arg(long, hide = true, conflicts_with = "window",
          value_parser = units::renamed::<u64>("--interval", "--window"))]
    interval: Option<u64>,
    /// Write the miss ratio of each window to PATH.svg and PATH.png.
    #[arg(long, value_name = "PATH", value_parser = out_paths::plot)]
    window_plot: Option<PathBuf>,
    /// Old name of --window-plot.
    #[arg(long, hide = true, conflicts_with = "window_plot",
          value_parser = units::renamed_plot("--interval-plot", "--window-plot"))]
    interval_plot: Option<PathBuf>,
    /// Prefetch with SCHEME (`obl`, `pg`, `mithril`, or another of `hearth prefetch schemes`),
    /// inserting prefetched objects into the cache itself as libCacheSim's `cachesim --prefetch`
    /// does (a hit on one is a hit); the results add prefetch counts.
    #[arg(long, value_name = "SCHEME")]
    prefetch: Option<hearth_prefetch::PrefetchSpec>,
    #[command(flatten)]
    quiet: Quiet,
    #[command(flatten)]
    hierarchy: HierarchyArgs,
}

impl SimArgs {
    /// The window, by either spelling.
    fn window(&self) -> Option<u64> {
        self.window.or(self.interval)
    }

    /// The window plot, by either spelling.
    fn window_plot(&self) -> Option<&PathBuf> {
        self.window_plot.as_ref().or(self.interval_plot.as_ref())
    }

    /// The trace options once for each trace named.
    fn sources(&self) -> impl Iterator<Item = TraceSource> + '_ {
        let first = self.trace.source();
        std::iter::once(self.trace.trace.clone())
            .chain(self.more_traces.iter().cloned())
            .map(move |t| first.with_trace(t))
    }
}

/// Two-level runs: client buffer caches above the storage cache.
#[derive(Args, Debug)]
struct HierarchyArgs {
    /// Put a client buffer cache of SIZE (bytes, blocks or % of footprint; LRU unless :POLICY) above
    /// the storage cache; the storage cache then sees only client misses.
    #[arg(long, value_name = "SIZE[:POLICY]", value_parser = client_cache)]
    client_cache: Option<(String, PolicySpec)>,
    /// Storage-cache placements to compare (with --client-cache, or on a storage-level trace with buffer
    /// addresses): ac, ev, ev:RELOAD_THRESHOLD, demote.
    #[arg(long, value_delimiter = ',', default_value = "ac,ev")]
    placement: Vec<Placement>,
    /// One client cache per trace client (host/disk/pid) instead of one for all requests.
    #[arg(long, requires = "client_cache")]
    per_client: bool,
    /// Time storage misses and EV reloads on an HDD (5.4 ms, 163 MB/s) receiving one storage request
    /// every DURATION (e.g. 8ms); reloads run at low priority.
    #[arg(long, value_name = "DURATION", requires = "client_cache", value_parser = units::duration)]
    interarrival: Option<Duration>,
    /// Old spelling of --interarrival, in microseconds.
    #[arg(long, hide = true, requires = "client_cache", conflicts_with = "interarrival",
          value_parser = units::unit_in_name("--interarrival-us", "--interarrival", "us"))]
    interarrival_us: Option<Duration>,
    /// Also write the storage-level trace the client caches produce, with buffer addresses, to PATH
    /// (`hearth sim PATH --placement ...` replays it).
    #[arg(long, value_name = "PATH", requires = "client_cache")]
    export_storage_trace: Option<PathBuf>,
    /// Write the idle-distance histograms (AC reuse distance vs EV eviction distance) to PATH.svg/.png.
    #[arg(long, value_name = "PATH", requires = "client_cache", value_parser = out_paths::plot)]
    idle_plot: Option<PathBuf>,
}

pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let threads = args.threads.count();
    let buffered = args.trace.trace.file().filter(|f| hearth_trace::buffered::is_buffered_trace(f));
    anyhow::ensure!(
        args.prefetch.is_none() || (args.hierarchy.client_cache.is_none() && buffered.is_none()),
        "--prefetch runs one cache level: drop --client-cache (or use a trace without buffer addresses)"
    );
    if let Some(buffered) = buffered {
        return run_storage_level(&args, buffered, threads);
    }
    if let Some(client) = &args.hierarchy.client_cache {
        return run_hierarchy(&args, client, threads);
    }
    let sizes_spec =
        args.sizes.clone().unwrap_or_else(|| if args.mrc.is_some() { MRC_SIZES } else { DEFAULT_SIZES }.into());
    let sizes = parse_sizes(&sizes_spec).context("--sizes")?;
    let policies = PolicyList::concat(&args.policies);
    let window = args.window();
    anyhow::ensure!(window.is_some() || args.window_plot().is_none(), "--window-plot needs --window N");
    let sim = Simulation { policies, sizes, warmup: args.warmup, interval: window };
    let progress = progress::Bars::new(args.quiet.quiet);
    if let Some(spec) = &args.prefetch {
        anyhow::ensure!(
            window.is_none() && args.mrc.is_none(),
            "--prefetch reports miss ratios and prefetch counts only: drop --window and --mrc"
        );
        let mut runs = Vec::new();
        for source in args.sources() {
            let trace = source.trace.display().to_string();
            runs.push((trace, hearth_sim::prefetch_direct::simulate(&source, &sim, spec, &progress)?));
        }
        return crate::sim_prefetch::report(&runs, args.output.json(), args.output.csv);
    }
    let mut runs = Vec::new();
    for source in args.sources() {
        runs.push(simulate(&source, &sim, threads, &progress)?);
    }
    report(&args, &sim, &runs)
}

fn report(args: &SimArgs, sim: &Simulation, runs: &[TraceRun]) -> anyhow::Result<()> {
    let out = std::io::stdout();
    let mut out = out.lock();
    let tagged = || runs.iter().flat_map(TraceRun::rows);
    if args.output.json() {
        serde_json::to_writer_pretty(&mut out, &tagged().collect::<Vec<_>>())?;
        writeln!(out)?;
    } else if args.output.csv {
        write_csv(&mut out, tagged())?;
    } else {
        for (i, run) in runs.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            write_table(&mut out, run)?;
        }
    }
    if let Some(path) = &args.mrc {
        let files = write_mrc(runs, sim, path)?;
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    if let (Some(path), Some(every)) = (args.window_plot(), args.window()) {
        let files = hearth_plot::render(&window_chart(runs, every), path)?;
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// The CSV of `sim --csv` and `sweep`: counts, then the ratios as fractions,
/// then a learned policy's training time in seconds (empty for other
/// policies, so every row has the same columns).
pub fn write_csv(out: &mut impl Write, rows: impl IntoIterator<Item = Row>) -> std::io::Result<()> {
    writeln!(
        out,
        "trace,policy,cache_bytes,requests,hits,bytes,hit_bytes,hit_ratio,miss_ratio,byte_hit_ratio,byte_miss_ratio,train_seconds"
    )?;
    for Row { trace, result: r } in rows {
        let train_seconds = r.train_seconds.map_or(String::new(), |s| format!("{s:.6}"));
        writeln!(
            out,
            "{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{}",
            csv_field(&trace),
            csv_field(&r.policy),
            r.cache_bytes,
            r.requests,
            r.hits,
            r.bytes,
            r.hit_bytes,
            r.hit_ratio(),
            r.miss_ratio(),
            r.byte_hit_ratio(),
            r.byte_miss_ratio(),
            train_seconds
        )?;
    }
    Ok(())
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn write_table(out: &mut impl Write, run: &TraceRun) -> std::io::Result<()> {
    let counted = run.results.first().map_or(0, |r| r.requests);
    match &run.scan {
        Some(scan) => writeln!(
            out,
            "{}: {} accesses ({counted} counted), {} unique keys, footprint {}",
            run.trace,
            scan.accesses,
            scan.unique_keys,
            format_bytes(scan.footprint_bytes)
        )?,
        None => writeln!(out, "{}: {counted} accesses counted", run.trace)?,
    }
    // As wide as the longest name (`MQ:m=4,lifetime=100`), so the columns line up.
    let width = run.results.iter().map(|r| r.policy.len()).max().unwrap_or(0).max(10);
    writeln!(
        out,
        "{:<width$} {:>12} {:>12} {:>12} {:>10} {:>10} {:>14}",
        "policy", "cache", "requests", "hits", "hit ratio", "miss ratio", "byte hit ratio"
    )?;
    let mut last_size = None;
    for r in &run.results {
        if last_size.is_some_and(|s| s != r.cache_bytes) {
            writeln!(out)?;
        }
        last_size = Some(r.cache_bytes);
        writeln!(
            out,
            "{:<width$} {:>12} {:>12} {:>12} {:>10.4} {:>10.4} {:>14.4}",
            r.policy,
            format_bytes(r.cache_bytes),
            r.requests,
            r.hits,
            r.hit_ratio(),
            r.miss_ratio(),
            r.byte_hit_ratio()
        )?;
    }
    Ok(())
}

/// A series label: the policy, and the trace when there are several.
fn label(runs: &[TraceRun], run: &TraceRun, r: &SimResult) -> String {
    if runs.len() > 1 {
        format!("{} ({})", r.policy, run.trace)
    } else {
        r.policy.clone()
    }
}

/// Above this many curves the miss-ratio curves are drawn one panel per
/// policy family (as `-p all` gives 28), so each can be told apart.
const CURVES_PER_PLOT: usize = 8;

/// Writes the miss-ratio curves to `path`.svg and .png: one plot, or one
/// panel per policy family when there are too many curves for one.
fn write_mrc(
    runs: &[TraceRun],
    sim: &Simulation,
    path: &std::path::Path,
) -> Result<Vec<PathBuf>, hearth_plot::PlotError> {
    let traces = trace_names(runs);
    let mut chart = hearth_plot::Chart::lines(&format!("Miss-ratio curve: {traces}"), "cache size (MiB)", "miss ratio");
    chart.log_x = sim.sizes.len() > 2;
    let curves = mrc_curves(runs, &sim.policies);
    let families: Vec<&str> = hearth_policy::families()
        .into_iter()
        .filter(|&f| curves.iter().any(|(family, ..)| *family == Some(f)))
        .collect();
    if curves.len() <= CURVES_PER_PLOT || families.len() < 2 {
        for (_, name, points) in curves {
            chart = chart.series(&name, points);
        }
        return hearth_plot::render(&chart, path);
    }
    let panels: Vec<hearth_plot::Chart> = families
        .iter()
        .map(|&f| {
            let mut panel = hearth_plot::Chart { title: f.into(), ..chart.clone() };
            for (_, name, points) in curves.iter().filter(|(family, ..)| *family == Some(f)) {
                panel = panel.series(name, points.clone());
            }
            panel
        })
        .collect();
    let columns = panels.len().min(2);
    let title = format!("Miss-ratio curves by policy family: {traces}");
    hearth_plot::render_facets(&hearth_plot::Facets { title, columns, panels }, path)
}

/// A curve of the MRC plot: the policy's family, the curve's label and its
/// (MiB, miss ratio) points.
type Curve = (Option<&'static str>, String, Vec<(f64, f64)>);

/// One curve per trace and policy.
fn mrc_curves(runs: &[TraceRun], specs: &[PolicySpec]) -> Vec<Curve> {
    let mut curves = Vec::new();
    for run in runs {
        // Results come size by size, policies in `specs` order within each.
        for (p, spec) in specs.iter().enumerate() {
            let mine: Vec<&SimResult> = run.results.iter().skip(p).step_by(specs.len()).collect();
            let Some(first) = mine.first() else { continue };
            let points = mine.iter().map(|r| (r.cache_bytes as f64 / (1u64 << 20) as f64, r.miss_ratio())).collect();
            curves.push((Some(spec.family()), label(runs, run, first), points));
        }
    }
    curves
}

/// The traces of a run, as plot titles name them.
fn trace_names(runs: &[TraceRun]) -> String {
    runs.iter().map(|r| crate::trace_args::short_name(&r.trace)).collect::<Vec<_>>().join(", ")
}

/// Miss ratio over the trace, one series per (policy, size).
fn window_chart(runs: &[TraceRun], every: u64) -> hearth_plot::Chart {
    let title = format!("Miss ratio over time: {}", trace_names(runs));
    let mut chart = hearth_plot::Chart::lines(&title, &format!("requests (windows of {every})"), "miss ratio");
    for run in runs {
        for r in &run.results {
            let points =
                r.interval_miss_ratios.iter().enumerate().map(|(i, &m)| ((i as u64 * every) as f64, m)).collect();
            chart = chart.series(&format!("{} {}", label(runs, run, r), format_bytes(r.cache_bytes)), points);
        }
    }
    chart
}

/// Two-level runs stream the trace: a first pass measures the footprint
/// (and next uses for an offline client policy), then every configuration
/// reads the trace on its own, so memory does not grow with its length.
/// `--client-cache SIZE[:POLICY]`: the size as written (resolved against
/// the trace later) and the policy, LRU unless given.
fn client_cache(arg: &str) -> Result<(String, PolicySpec), hearth_policy::SpecError> {
    let (size, policy) = arg.split_once(':').unwrap_or((arg, "lru"));
    Ok((size.to_string(), policy.parse()?))
}

fn run_hierarchy(args: &SimArgs, (size, client_policy): &(String, PolicySpec), threads: usize) -> anyhow::Result<()> {
    anyhow::ensure!(args.more_traces.is_empty(), "two-level runs take one trace");
    let source = args.trace.source();
    let needs = Needs { totals: true, next_access: client_policy.is_offline() };
    let trace = Streamed::open(&source, needs, &progress::Bars::new(args.quiet.quiet))?;
    if trace.accesses_counted() == 0 {
        anyhow::bail!("{} holds no requests", args.trace.trace.display());
    }
    let (footprint, block_size) = (trace.footprint_bytes(), trace.block_size());
    let sizes_spec = args.sizes.clone().unwrap_or_else(|| DEFAULT_SIZES.into());
    let mut jobs = Vec::new();
    for size in parse_sizes(&sizes_spec).context("--sizes")? {
        let cache_bytes = size.resolve(footprint, block_size)?;
        jobs.extend(PolicyList::concat(&args.policies).into_iter().map(|policy| Job { policy, cache_bytes }));
    }
    let h = &args.hierarchy;
    let [client_size] = parse_sizes(size).context("--client-cache")?[..] else {
        anyhow::bail!("--client-cache takes one size, got {size:?}");
    };
    let client_bytes = client_size.resolve(footprint, block_size)?;
    let slot_bytes = u64::from(block_size.unwrap_or(4096));
    let configs = hierarchy_configs(h, &jobs, client_policy, client_bytes, slot_bytes);
    if let Some(path) = &h.export_storage_trace {
        let recorded = hearth_sim::hierarchy::storage_trace(&trace, &configs[0])?;
        let (mut written, mut failed) = (0u64, None);
        // Written as they come; the first trace error stops the file and is returned.
        let accesses = recorded.map_while(|r| match r {
            Ok(a) => {
                written += 1;
                Some(a)
            }
            Err(e) => {
                failed = Some(e);
                None
            }
        });
        hearth_trace::buffered::write(path, accesses)?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        eprintln!("wrote {} ({written} storage-level accesses with buffer addresses)", path.display());
    }
    let bar = progress::bar(configs.len() as u64, "simulating two levels", args.quiet.quiet);
    let results = hearth_sim::parallel_map(&configs, threads, |cfg| {
        let r = hearth_sim::hierarchy::run_hierarchy(&trace, cfg);
        bar.inc(1);
        r
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    bar.finish_and_clear();
    let header = format!(
        "client cache {} ({client_policy}{}): {} of {} requests hit in the client",
        format_bytes(client_bytes),
        if h.per_client { ", one per client" } else { "" },
        results.first().map_or(0, |r| r.client_hits),
        results.first().map_or(0, |r| r.client_requests)
    );
    report_hierarchy(args, &header, &results)
}

/// A storage-level trace with client buffer addresses (`hearth_trace::buffered`):
/// the clients' caches are already in the trace, so only the storage cache
/// runs. Streamed: a first pass counts the accesses and distinct blocks.
fn run_storage_level(args: &SimArgs, path: &Path, threads: usize) -> anyhow::Result<()> {
    let trace = BufferedFile(path.to_path_buf());
    let mut blocks = hearth_core::key_map::<()>(1 << 16);
    let mut accesses = 0u64;
    for a in trace.pass()? {
        blocks.insert(a?.block, ());
        accesses += 1;
    }
    let block_size = args.trace.block_size;
    let footprint = blocks.len() as u64 * block_size;
    drop(blocks);
    let sizes_spec = args.sizes.clone().unwrap_or_else(|| DEFAULT_SIZES.into());
    let mut jobs = Vec::new();
    for size in parse_sizes(&sizes_spec).context("--sizes")? {
        let cache_bytes = size.resolve(footprint, Some(block_size as u32))?;
        jobs.extend(PolicyList::concat(&args.policies).into_iter().map(|policy| Job { policy, cache_bytes }));
    }
    // No client cache: its policy is never built.
    let no_client = "lru".parse().expect("lru is registered");
    let configs = hierarchy_configs(&args.hierarchy, &jobs, &no_client, 0, block_size);
    let results =
        hearth_sim::parallel_map(&configs, threads, |cfg| hearth_sim::hierarchy::run_storage_trace(&trace, cfg))
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
    let header = format!(
        "{}: storage-level trace, {} accesses, footprint {}",
        path.display(),
        accesses,
        format_bytes(footprint)
    );
    report_hierarchy(args, &header, &results)
}

fn hierarchy_configs(
    h: &HierarchyArgs,
    jobs: &[Job],
    client_policy: &PolicySpec,
    client_bytes: u64,
    slot_bytes: u64,
) -> Vec<HierarchyConfig> {
    jobs.iter()
        .flat_map(|job| {
            h.placement.iter().map(move |&placement| HierarchyConfig {
                client_policy: client_policy.clone(),
                client_bytes,
                per_client: h.per_client,
                storage_policy: job.policy.clone(),
                storage_bytes: job.cache_bytes,
                placement,
                slot_bytes,
                timing: h
                    .interarrival
                    .or(h.interarrival_us)
                    .map(|every| Timing { device: Device::HDD, interarrival_ns: every.as_nanos() as u64 }),
            })
        })
        .collect()
}

fn report_hierarchy(args: &SimArgs, header: &str, results: &[HierarchyResult]) -> anyhow::Result<()> {
    if args.output.json() {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        println!("{header}");
        println!(
            "{:<8} {:<9} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>8} {:>11}",
            "policy",
            "placement",
            "storage",
            "requests",
            "read hits",
            "hit ratio",
            "reloads",
            "skipped",
            "demotes",
            "miss ms"
        );
        for r in results {
            let ms = r.device.as_ref().map_or("-".to_string(), |d| format!("{:.2}", d.demand.mean_response_ns() / 1e6));
            println!(
                "{:<8} {:<9} {:>10} {:>10} {:>10} {:>9.4} {:>9} {:>9} {:>8} {:>11}",
                r.result.policy,
                r.placement,
                format_bytes(r.result.cache_bytes),
                r.result.requests,
                r.storage.read_hits,
                r.storage.read_hit_ratio(),
                r.storage.reloads,
                r.storage.reloads_skipped,
                r.storage.demotes,
                ms
            );
        }
    }
    if let Some(path) = &args.hierarchy.idle_plot {
        let first = results.first().context("no results to plot")?;
        let mut chart = idle_chart(first);
        chart.title = format!("{}: {}", chart.title, args.trace.name());
        let files = hearth_plot::render(&chart, path)?;
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// The EV paper's Figure 2: how long blocks sit idle before their next
/// storage access, counted from the previous access (AC) or from the client's
/// eviction (EV). Shorter idle distances are easier to cache.
fn idle_chart(r: &HierarchyResult) -> hearth_plot::Chart {
    let n = r.reuse_distance.len().max(r.eviction_distance.len());
    let labels = (0..n).map(hearth_analyze::Log2Hist::label).collect();
    let share = |h: &[u64]| {
        let total = h.iter().sum::<u64>().max(1) as f64;
        (0..n).map(|i| (i as f64, 100.0 * h.get(i).copied().unwrap_or(0) as f64 / total)).collect()
    };
    hearth_plot::Chart::bars(
        "Idle distance at the storage cache",
        "storage requests (log2 bucket)",
        "% of re-accesses",
        labels,
    )
    .series("AC: reuse distance", share(&r.reuse_distance))
    .series("EV: eviction distance", share(&r.eviction_distance))
}

//! `hearth tier`: hybrid fast/slow storage studies — simulate partitioning
//! and correlation-directed prefetching, write partition plans, run sweeps.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use hearth_core::{format_duration, format_rate, parse_bytes};
use hearth_sim::device::Device;
use hearth_tier::devices::DeviceFile;
use hearth_tier::plan::Plan;
use hearth_tier::synth::{chains, ChainsConfig};
use hearth_tier::{extents, CdpConfig, Experiment, Extent, Partitioner, Scheme, TierConfig, TierStats};

use crate::out_paths;
use crate::output_args::Json;
use crate::trace_args::TraceArgs;
use crate::units;

const CHAINS_HELP: &str = "TRACE may also be synth:chains: popular chains of scattered extents read in order, with one-off noise (long-range reuse, non-sequential correlation).";

#[derive(Subcommand, Debug)]
pub enum TierCmd {
    /// Replay a trace on an OS cache, a prefetch cache, a fast and a slow device: train on the first
    /// part, measure the rest, for each fast-device scheme.
    #[command(after_help = CHAINS_HELP)]
    Sim(SimArgs),
    /// Write a partition plan (the blocks for the fast device) learned from a trace or from a two-tier
    /// export's access log; it learns from the --train share (use --train 100% for the whole trace).
    Plan(PlanArgs),
    /// The thesis's sweeps: latency and bandwidth ratio, fast capacity, partitioning vs LRU, CDP
    /// variants; tables on stdout, CSV and plots in a directory.
    #[command(after_help = CHAINS_HELP)]
    Sweep(SweepArgs),
}

#[derive(Args, Debug)]
struct Setup {
    #[command(flatten)]
    trace: TraceArgs,
    /// TOML file of user devices (`[device.NAME] latency_ns = .., bytes_per_sec = ..`).
    #[arg(long)]
    devices: Option<PathBuf>,
    /// Fast device: hdd, ssd, nvme or a name from --devices.
    #[arg(long, default_value = "ssd")]
    fast: String,
    /// Slow device: hdd, ssd, nvme or a name from --devices.
    #[arg(long, default_value = "hdd")]
    slow: String,
    /// Size of the fast device: bytes (512MiB), blocks (5000blocks) or share of the trace footprint
    /// (10%).
    #[arg(long, value_name = "SIZE", default_value = "10%", allow_hyphen_values = true)]
    fast_size: String,
    /// Old name of --fast-size.
    #[arg(long, hide = true, conflicts_with = "fast_size",
          value_parser = units::renamed::<String>("--fast-capacity", "--fast-size"))]
    fast_capacity: Option<String>,
    /// OS page cache: bytes, blocks or share of the footprint.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", allow_hyphen_values = true)]
    os_cache: String,
    /// FIFO prefetch cache: bytes, blocks or share of the footprint.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", allow_hyphen_values = true)]
    prefetch_cache: String,
    /// Blocks the OS reads ahead on a slow-device read.
    #[arg(long, default_value_t = 8)]
    read_ahead: u32,
    /// Time added between consecutive requests on top of the trace's own spacing, e.g. 10ms.
    #[arg(long, value_name = "DURATION", default_value = "0ms", value_parser = units::duration)]
    think: Duration,
    /// Old spelling of --think, in milliseconds.
    #[arg(long, hide = true, conflicts_with = "think", value_parser = units::unit_in_name("--think-ms", "--think", "ms"))]
    think_ms: Option<Duration>,
    /// Share of the trace (from its start) used for training; the rest is measured.
    #[arg(long, value_name = "PERCENT", default_value = "50%",
          value_parser = units::share("--train", units::BareShare::Fraction))]
    train: f64,
    /// Requests this close (in requests) are linked in the access graph.
    #[arg(long, value_name = "N", default_value_t = 4)]
    window: usize,
}

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    setup: Setup,
    /// Fast-device schemes, comma-separated: slow (no fast device), lru, freq, borg.
    #[arg(long, value_delimiter = ',', default_value = "slow,lru,freq,borg")]
    schemes: Vec<Scheme>,
    /// Prefetching on top, comma-separated: none, cdp, slack (CDP-slack), ccdpK (chains of K hops).
    #[arg(long, value_delimiter = ',', default_value = "none")]
    cdp: Vec<String>,
    /// Prefetch reads per demand request, at most.
    #[arg(long, default_value_t = 2)]
    cdp_max: u32,
    #[command(flatten)]
    json: Json,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    setup: Setup,
    /// Where to write the plan (JSON).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    /// freq (most accessed blocks) or borg (most connected extents of the access graph).
    #[arg(long, default_value = "borg")]
    method: Partitioner,
}

#[derive(Args, Debug)]
pub struct SweepArgs {
    #[command(flatten)]
    setup: Setup,
    /// Directory for CSV tables and plots (SVG and PNG).
    #[arg(short, long, value_name = "PATH", value_parser = out_paths::dir)]
    output: PathBuf,
}

pub fn run(cmd: TierCmd) -> anyhow::Result<()> {
    match cmd {
        TierCmd::Sim(args) => sim(args),
        TierCmd::Plan(args) => plan(args),
        TierCmd::Sweep(args) => sweep(args),
    }
}

/// A loaded trace with its training done, and the base configuration.
struct Loaded {
    exp: Experiment,
    base: TierConfig,
    capacity_blocks: u64,
}

/// Bytes (`64MiB`), blocks (`5000blocks`) or a share of `footprint_bytes` (`10%`).
fn size_or_share(spec: &str, footprint_bytes: u64, block_size: u32, what: &str) -> anyhow::Result<u64> {
    let t = spec.trim();
    if let Some(pct) = t.strip_suffix('%') {
        let p: f64 = pct.trim().parse().with_context(|| format!("{what}: {spec:?} is not a percentage"))?;
        if !(0.0..=100.0).contains(&p) {
            bail!("{what}: {spec:?} must be between 0% and 100%");
        }
        Ok((footprint_bytes as f64 * p / 100.0) as u64)
    } else if let Some(n) = t.strip_suffix("blocks").or_else(|| t.strip_suffix("blk")) {
        let n: u64 = n.trim().parse().with_context(|| format!("{what}: {spec:?} is not a block count"))?;
        Ok(n * u64::from(block_size))
    } else {
        parse_bytes(t).with_context(|| format!("{what}: {spec:?}"))
    }
}

fn load(setup: &Setup) -> anyhow::Result<Loaded> {
    let block_size = u32::try_from(setup.trace.block_size)
        .ok()
        .filter(|&b| b > 0)
        .context("--block-size must be between 1 B and 4 GiB")?;
    let extents: Vec<Extent> = if setup.trace.trace.synth() == Some("chains") {
        let cfg = ChainsConfig { block_size, seed: setup.trace.seed, ..ChainsConfig::default() };
        let requests = chains(&cfg, setup.trace.requests)?;
        extents(requests.into_iter().map(Ok::<_, std::convert::Infallible>), block_size)?
    } else {
        let (requests, mode) = setup.trace.open()?;
        if mode == hearth_trace::Mode::Object {
            bail!("{}: tiering needs a block trace (byte offsets), not an object trace", setup.trace.trace.display());
        }
        extents(requests, block_size)?
    };
    let exp = Experiment::new(extents, setup.train, setup.window)?;
    let devices = match &setup.devices {
        Some(path) => DeviceFile::load(path)?,
        None => DeviceFile::default(),
    };
    let footprint = exp.footprint_blocks * u64::from(block_size);
    let base = TierConfig {
        fast: devices.get(&setup.fast).context("--fast")?,
        slow: devices.get(&setup.slow).context("--slow")?,
        os_cache_bytes: size_or_share(&setup.os_cache, footprint, block_size, "--os-cache")?,
        prefetch_cache_bytes: size_or_share(&setup.prefetch_cache, footprint, block_size, "--prefetch-cache")?,
        read_ahead_blocks: setup.read_ahead,
        think_ns: setup.think_ms.unwrap_or(setup.think).as_nanos() as u64,
        ..TierConfig::new(block_size)
    };
    let fast_size = setup.fast_capacity.as_ref().unwrap_or(&setup.fast_size);
    let capacity_blocks = size_or_share(fast_size, footprint, block_size, "--fast-size")? / u64::from(block_size);
    Ok(Loaded { exp, base, capacity_blocks })
}

/// `none`, `cdp`, `slack`, `ccdpK` (K hops).
fn parse_cdp(spec: &str, max_per_demand: u32) -> anyhow::Result<Option<CdpConfig>> {
    let base = CdpConfig { max_per_demand, ..CdpConfig::default() };
    Ok(match spec.to_ascii_lowercase().as_str() {
        "none" => None,
        "cdp" => Some(base),
        "slack" | "cdp-slack" => Some(CdpConfig { slack: true, ..base }),
        other => match other.strip_prefix("ccdp").and_then(|k| k.trim_start_matches('-').parse::<u32>().ok()) {
            Some(depth) if depth >= 1 => Some(CdpConfig { depth, ..base }),
            _ => bail!("--cdp: unknown variant {spec:?}: use none, cdp, slack or ccdpK (K >= 1)"),
        },
    })
}

fn cdp_name(cdp: Option<CdpConfig>) -> String {
    match cdp {
        None => "none".into(),
        Some(c) if c.slack => "CDP-slack".into(),
        Some(c) if c.depth == 1 => "CDP".into(),
        Some(c) => format!("CCDP-{}", c.depth),
    }
}

fn describe(l: &Loaded) -> String {
    let bs = u64::from(l.base.block_size);
    format!(
        "{} requests ({} trained, {} measured), footprint {}, fast device {} ({}, {}), slow device {}, {}, OS cache {}, prefetch cache {}",
        l.exp.extents.len(),
        l.exp.test_from,
        l.exp.extents.len() - l.exp.test_from,
        hearth_core::format_bytes(l.exp.footprint_blocks * bs),
        hearth_core::format_bytes(l.capacity_blocks * bs),
        human_latency(l.base.fast),
        format_rate(l.base.fast.bytes_per_sec),
        human_latency(l.base.slow),
        format_rate(l.base.slow.bytes_per_sec),
        hearth_core::format_bytes(l.base.os_cache_bytes),
        hearth_core::format_bytes(l.base.prefetch_cache_bytes),
    )
}

fn human_latency(d: Device) -> String {
    format_duration(Duration::from_nanos(d.latency_ns))
}

/// The table's columns, aligned as `hearth sim`'s: a header line, then one line per run.
fn header() -> String {
    format!(
        "{:<15} {:<9} {:>9} {:>7} {:>7} {:>13} {:>10} {:>8}",
        "scheme", "prefetch", "mean ms", "fast %", "slow %", "slow I/Os/req", "prefetches", "useful %"
    )
}

fn row(scheme: &str, cdp: &str, s: &TierStats) -> String {
    format!(
        "{scheme:<15} {cdp:<9} {:>9.3} {:>7.1} {:>7.1} {:>13.2} {:>10} {:>8.1}",
        s.mean_response_ms(),
        s.fast_percent(),
        s.slow_percent(),
        s.slow_ios as f64 / s.requests.max(1) as f64,
        s.prefetches,
        s.prefetch_accuracy_percent()
    )
}

fn sim(args: SimArgs) -> anyhow::Result<()> {
    let l = load(&args.setup)?;
    let cdps = args.cdp.iter().map(|c| parse_cdp(c, args.cdp_max)).collect::<anyhow::Result<Vec<_>>>()?;
    let mut results = Vec::new();
    for &scheme in &args.schemes {
        for &cdp in &cdps {
            let stats = l.exp.run(&l.base, scheme, l.capacity_blocks, cdp)?;
            results.push((scheme, cdp, stats));
        }
    }
    if args.json.json {
        let json: Vec<_> = results
            .iter()
            .map(|(scheme, cdp, s)| {
                serde_json::json!({
                    "scheme": scheme.name(), "prefetch": cdp_name(*cdp), "mean_response_ms": s.mean_response_ms(),
                    "fast_percent": s.fast_percent(), "slow_percent": s.slow_percent(), "stats": s,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        println!("{}\n\n{}", describe(&l), header());
        for (scheme, cdp, s) in &results {
            println!("{}", row(scheme.name(), &cdp_name(*cdp), s));
        }
    }
    Ok(())
}

fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let l = load(&args.setup)?;
    let blocks = l.exp.partition(args.method, l.capacity_blocks);
    let method = match args.method {
        Partitioner::Frequency => "freq",
        Partitioner::Connectivity => "borg",
    };
    let plan = Plan::from_blocks(l.base.block_size, method, l.capacity_blocks, blocks);
    plan.save(&args.output)?;
    eprintln!(
        "wrote {}: {} blocks in {} runs ({method}, trained on {} requests)",
        args.output.display(),
        blocks.len(),
        plan.runs.len(),
        l.exp.test_from
    );
    Ok(())
}

const RATIOS: [u64; 8] = [1, 2, 4, 8, 16, 32, 64, 128];
const CAPACITY_PERCENTS: [u64; 6] = [5, 10, 20, 30, 40, 50];
const COMPARED: [Scheme; 4] = [
    Scheme::SlowOnly,
    Scheme::LruCache,
    Scheme::Partition(Partitioner::Frequency),
    Scheme::Partition(Partitioner::Connectivity),
];

/// One table: rows of x, one column per series.
struct Table {
    name: &'static str,
    title: String,
    x_label: &'static str,
    y_label: &'static str,
    log_x: bool,
    xs: Vec<String>,
    series: Vec<(String, Vec<f64>)>,
}

impl Table {
    /// The title, then aligned columns as `hearth sim` prints them (the CSV
    /// in the output directory is the machine-readable copy).
    fn text(&self) -> String {
        let x_width = self.xs.iter().map(String::len).chain([self.x_label.len()]).max().unwrap_or(0);
        let widths: Vec<usize> = self.series.iter().map(|(name, _)| name.len().max(9)).collect();
        let mut out = format!("{}\n{:<x_width$}", self.title, self.x_label);
        for ((name, _), width) in self.series.iter().zip(&widths) {
            let _ = write!(out, "  {name:>width$}");
        }
        out.push('\n');
        for (i, x) in self.xs.iter().enumerate() {
            let _ = write!(out, "{x:<x_width$}");
            for ((_, ys), width) in self.series.iter().zip(&widths) {
                let _ = write!(out, "  {:>width$.3}", ys[i]);
            }
            out.push('\n');
        }
        out
    }

    fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let mut csv = self.x_label.to_string();
        for (name, _) in &self.series {
            let _ = write!(csv, ",{name}");
        }
        csv.push('\n');
        for (i, x) in self.xs.iter().enumerate() {
            csv.push_str(x);
            for (_, ys) in &self.series {
                let _ = write!(csv, ",{}", ys[i]);
            }
            csv.push('\n');
        }
        let path = dir.join(format!("{}.csv", self.name));
        std::fs::write(&path, csv).with_context(|| format!("writing {}", path.display()))?;
        let chart = if self.log_x || self.xs.iter().all(|x| x.parse::<f64>().is_ok()) {
            let mut c = hearth_plot::Chart::lines(&self.title, self.x_label, self.y_label);
            c.log_x = self.log_x;
            // A saturated slow device makes some means explode (6 s against
            // 5 ms): a log axis keeps the others readable.
            let ys = || self.series.iter().flat_map(|(_, ys)| ys.iter().copied()).filter(|&y| y > 0.0);
            c.log_y = ys().fold(0.0, f64::max) > 20.0 * ys().fold(f64::INFINITY, f64::min);
            for (name, ys) in &self.series {
                let points = self.xs.iter().zip(ys).map(|(x, &y)| (x.parse().expect("numeric x"), y)).collect();
                c = c.series(name, points);
            }
            c
        } else {
            let mut c = hearth_plot::Chart::bars(&self.title, self.x_label, self.y_label, self.xs.clone());
            for (name, ys) in &self.series {
                c = c.series(name, ys.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect());
            }
            c
        };
        for f in hearth_plot::render(&chart, &dir.join(self.name))? {
            eprintln!("wrote {}", f.display());
        }
        Ok(())
    }
}

fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    let l = load(&args.setup)?;
    std::fs::create_dir_all(&args.output).with_context(|| format!("creating {}", args.output.display()))?;
    println!("{}\n", describe(&l));
    let run = |cfg: &TierConfig, scheme, capacity, cdp| l.exp.run(cfg, scheme, capacity, cdp);
    let fast = l.base.fast;
    let mut tables = Vec::new();

    // Slow device = fast device slowed by a ratio, in latency or in bandwidth.
    for (name, what, slowed) in [
        (
            "latency_ratio",
            "latency",
            (|d: Device, r: u64| Device { latency_ns: d.latency_ns * r, ..d }) as fn(Device, u64) -> Device,
        ),
        ("bandwidth_ratio", "bandwidth", |d: Device, r: u64| Device { bytes_per_sec: d.bytes_per_sec / r, ..d }),
    ] {
        let mut series = Vec::new();
        for scheme in COMPARED {
            let mut ys = Vec::new();
            for r in RATIOS {
                let cfg = TierConfig { slow: slowed(fast, r), ..l.base.clone() };
                ys.push(run(&cfg, scheme, l.capacity_blocks, None)?.mean_response_ms());
            }
            series.push((scheme.name().to_string(), ys));
        }
        tables.push(Table {
            name,
            title: format!("Mean response time vs slow/fast {what} ratio"),
            x_label: "ratio",
            y_label: "mean response (ms)",
            log_x: true,
            xs: RATIOS.iter().map(u64::to_string).collect(),
            series,
        });
    }

    // Fast capacity as a share of the footprint.
    let mut response = Vec::new();
    let mut on_fast = Vec::new();
    for scheme in &COMPARED[1..] {
        let (mut ys, mut fs) = (Vec::new(), Vec::new());
        for pct in CAPACITY_PERCENTS {
            let s = run(&l.base, *scheme, l.exp.footprint_blocks * pct / 100, None)?;
            ys.push(s.mean_response_ms());
            fs.push(s.fast_percent());
        }
        response.push((scheme.name().to_string(), ys));
        on_fast.push((scheme.name().to_string(), fs));
    }
    let slow_only = run(&l.base, Scheme::SlowOnly, 0, None)?.mean_response_ms();
    response.push(("slow-only".into(), vec![slow_only; CAPACITY_PERCENTS.len()]));
    let xs: Vec<String> = CAPACITY_PERCENTS.iter().map(u64::to_string).collect();
    tables.push(Table {
        name: "capacity_response",
        title: "Mean response time vs fast capacity".into(),
        x_label: "fast capacity (% of footprint)",
        y_label: "mean response (ms)",
        log_x: false,
        xs: xs.clone(),
        series: response,
    });
    tables.push(Table {
        name: "capacity_fast_share",
        title: "Demand blocks served by the fast device vs fast capacity".into(),
        x_label: "fast capacity (% of footprint)",
        y_label: "% of demand blocks",
        log_x: false,
        xs,
        series: on_fast,
    });

    // CDP variants over the slow device alone and over a BORG partition.
    let variants = ["none", "cdp", "slack", "ccdp2", "ccdp4"];
    let mut series = Vec::new();
    for scheme in [Scheme::SlowOnly, Scheme::Partition(Partitioner::Connectivity)] {
        let mut ys = Vec::new();
        for v in variants {
            ys.push(run(&l.base, scheme, l.capacity_blocks, parse_cdp(v, 2)?)?.mean_response_ms());
        }
        series.push((scheme.name().to_string(), ys));
    }
    tables.push(Table {
        name: "cdp_variants",
        title: "Mean response time by prefetching variant (at most 2 per demand)".into(),
        x_label: "prefetching",
        y_label: "mean response (ms)",
        log_x: false,
        xs: variants.iter().map(|v| cdp_name(parse_cdp(v, 2).expect("known variant"))).collect(),
        series,
    });

    let trace = args.setup.trace.name();
    for t in &mut tables {
        t.title = format!("{}: {trace}", t.title);
        println!("{}", t.text());
        t.write(&args.output)?;
    }
    Ok(())
}

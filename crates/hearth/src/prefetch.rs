//! `hearth prefetch`: generate context-tagged workloads, characterise them,
//! and compare prefetchers on them in the simulator.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use hearth_core::{format_bytes, KeyMap};
use hearth_policy::PolicySpec;
use hearth_prefetch::{cminer, PrefetchSpec};
use hearth_sim::device::Device;
use hearth_sim::parse_sizes;
use hearth_sim::prefetch::{compare_mining, simulate, Outcome, PartitionShare, Setup, REMAINING_LOOKAHEAD};
use hearth_sim::run::Warmup;
use hearth_trace::ctx::{read_ctx_trace, write_ctx_trace, CtxEvent};
use hearth_trace::workload::{generate, template_names, Kind, WorkloadConfig};

use crate::out_paths;
use crate::output_args::Json;
use crate::units;

#[derive(Subcommand, Debug)]
pub enum PrefetchCmd {
    /// Generate a context-tagged workload and write it as a .ctx trace.
    Gen {
        #[command(flatten)]
        source: Source,
        /// Output file.
        #[arg(short, long, value_name = "PATH")]
        output: PathBuf,
    },
    /// Sequential run length, interference and context length of a workload,
    /// and with --ceiling the most any prefetcher could cut at each cache size.
    Analyze {
        #[command(flatten)]
        source: Source,
        #[command(flatten)]
        ceiling: CeilingArgs,
        #[command(flatten)]
        explain: crate::prefetch_explain::ExplainArgs,
        #[command(flatten)]
        json: Json,
    },
    /// Replay a workload through the cache with each prefetcher and compare.
    Sim(SimArgs),
    /// Repeat `sim` on the generated workload at several client counts.
    Sweep {
        #[command(flatten)]
        sim: SimArgs,
        /// Client counts to generate the workload with (replaces --clients).
        #[arg(long, value_delimiter = ',', default_value = "10,25,50,100")]
        sweep_clients: Vec<u32>,
    },
    /// Drive a live server with the workload (one connection per concurrent
    /// context, contexts sent as hints) and report the read latency clients saw.
    Replay(crate::replay::ReplayArgs),
    /// List the prefetchers and their parameters.
    Schemes,
}

/// Where events come from: a .ctx trace, or the generator.
#[derive(Args, Debug)]
pub struct Source {
    /// A context-tagged trace (.ctx, .gz/.zst allowed); otherwise --workload is generated.
    #[arg(value_name = "TRACE")]
    trace: Option<PathBuf>,
    /// Old spelling of the TRACE argument.
    #[arg(long = "trace", hide = true, conflicts_with = "trace",
          value_parser = units::renamed::<PathBuf>("--trace", "the TRACE argument"))]
    trace_flag: Option<PathBuf>,
    /// Generate this workload: tpcw, rubis, dbt2, docstore, fileserver, lsm, mailstore or graph.
    #[arg(long, default_value = "tpcw")]
    workload: Kind,
    /// Concurrent clients of the generated workload.
    #[arg(long, default_value_t = 100)]
    clients: u32,
    /// Contexts (transactions) to generate.
    #[arg(long, default_value_t = 20_000)]
    transactions: u64,
    /// Seed of the generated workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl Source {
    /// The trace named, by either spelling.
    fn trace(&self) -> Option<&PathBuf> {
        self.trace.as_ref().or(self.trace_flag.as_ref())
    }

    pub fn events(&self) -> anyhow::Result<(Vec<CtxEvent>, String)> {
        if let Some(path) = self.trace() {
            return Ok((read_ctx_trace(path)?, path.display().to_string()));
        }
        let cfg = WorkloadConfig {
            kind: self.workload,
            clients: self.clients,
            transactions: self.transactions,
            seed: self.seed,
        };
        let name = format!(
            "{:?}-like, {} clients, {} contexts, seed {}",
            self.workload, self.clients, self.transactions, self.seed
        );
        Ok((generate(&cfg)?, name))
    }
}

/// The ceiling oracle's settings (see `hearth_prefetch::ceiling`).
#[derive(Args, Debug)]
pub struct CeilingArgs {
    /// Cache sizes to sort misses at: bytes (64MiB), blocks (5000blocks) or shares of the footprint (10%).
    #[arg(long, value_name = "SIZES")]
    ceiling: Option<String>,
    /// Predict up to this many reads ahead of a context's demand.
    #[arg(long, default_value_t = 3)]
    lookahead: u32,
    #[command(flatten)]
    replay: ReplayCache,
}

/// The cache a workload is replayed through, the same for `sim` and `analyze --ceiling`.
#[derive(Args, Debug)]
pub struct ReplayCache {
    /// Main-cache policy.
    #[arg(long, default_value = "lru")]
    policy: PolicySpec,
    /// I/Os that warm the cache (and train C-Miner*) but are not counted: a number (1000) or a
    /// share of the workload (30%).
    #[arg(long, value_name = "N|P%", default_value = "30%", value_parser = units::warmup)]
    warmup: Warmup,
    /// Cache block size; the workload's block numbers count in it.
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = hearth_core::parse_bytes)]
    block_size: u64,
}

impl ReplayCache {
    /// The warm-up as a share of the I/Os in `events`.
    fn warmup_share(&self, events: &[CtxEvent]) -> f64 {
        match self.warmup {
            Warmup::Share(f) => f,
            Warmup::Accesses(n) => {
                let ios = events.iter().filter(|e| matches!(e, CtxEvent::Io { .. })).count();
                // Half an I/O more, so that the split's rounding down lands on the n-th.
                ((n as f64 + 0.5) / ios.max(1) as f64).min(1.0)
            }
        }
    }

    fn block_size(&self) -> anyhow::Result<u32> {
        u32::try_from(self.block_size).ok().filter(|&b| b > 0).context("--block-size must be 1 B..4 GiB")
    }
}

impl CeilingArgs {
    /// The ceiling at each size asked for, in order; empty without --ceiling.
    fn run(&self, events: &[CtxEvent]) -> anyhow::Result<Vec<hearth_prefetch::ceiling::Ceiling>> {
        let Some(sizes) = &self.ceiling else { return Ok(Vec::new()) };
        let block_size = self.replay.block_size()?;
        let footprint = footprint(events, block_size);
        let split = hearth_sim::prefetch::warmup_split(events, self.replay.warmup_share(events));
        parse_sizes(sizes)
            .context("--ceiling")?
            .iter()
            .map(|size| -> anyhow::Result<_> {
                let bytes = size.resolve(footprint, Some(block_size))?;
                Ok(hearth_prefetch::ceiling::ceiling(
                    events,
                    split,
                    &self.replay.policy,
                    bytes,
                    block_size,
                    self.lookahead,
                )?)
            })
            .collect()
    }
}

/// Distinct blocks read or written, in bytes.
fn footprint(events: &[CtxEvent], block_size: u32) -> u64 {
    let mut distinct: KeyMap<()> = KeyMap::default();
    for e in events {
        if let CtxEvent::Io { block, .. } = e {
            distinct.insert(*block, ());
        }
    }
    distinct.len() as u64 * u64::from(block_size)
}

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    source: Source,
    /// Prefetchers to compare, separated by `;` (see `hearth prefetch schemes`).
    #[arg(long, value_delimiter = ';', default_value = "none;seq;run;cminer;borg;quickmine")]
    schemes: Vec<PrefetchSpec>,
    /// Old spelling of --schemes (-s is --sizes elsewhere).
    #[arg(short = 's', hide = true, conflicts_with = "schemes", value_delimiter = ';')]
    schemes_short: Vec<PrefetchSpec>,
    /// Cache size: bytes (64MiB), blocks (5000blocks) or share of the footprint (10%).
    #[arg(long, value_name = "SIZE", default_value = "10%", allow_hyphen_values = true)]
    cache_size: String,
    /// Old name of --cache-size.
    #[arg(long, hide = true, conflicts_with = "cache_size",
          value_parser = units::renamed::<String>("--cache", "--cache-size"))]
    cache: Option<String>,
    /// Share of the cache for prefetched blocks.
    #[arg(long, value_name = "PERCENT", default_value = "4%",
          value_parser = units::share("--prefetch-fraction", units::BareShare::Fraction))]
    prefetch_fraction: f64,
    /// Size the prefetch partition as the traffic goes, never below --prefetch-fraction.
    ///
    /// SARC's rule between the main cache and the partition: a demand miss on a prefetch the
    /// partition pushed out lately grows it a block, one on a block the main cache gave up while
    /// the partition held room shrinks it a block; at most half the cache.
    #[arg(long)]
    adaptive_partition: bool,
    #[command(flatten)]
    replay: ReplayCache,
    /// Time reads on a device with this latency (e.g. 100us) and 500 MB/s; prefetches at low priority.
    #[arg(long, value_name = "DURATION", value_parser = units::duration)]
    device_latency: Option<Duration>,
    /// Old spelling of --device-latency, in microseconds.
    #[arg(long, hide = true, conflicts_with = "device_latency",
          value_parser = units::unit_in_name("--device-latency-us", "--device-latency", "us"))]
    device_latency_us: Option<Duration>,
    /// Also count rules of context-aware vs context-oblivious mining on the trace.
    #[arg(long)]
    rules: bool,
    /// Write a bar chart of miss and promote rates per scheme to PATH.svg/.png.
    #[arg(long, value_name = "PATH", value_parser = out_paths::plot)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    json: Json,
}

impl SimArgs {
    /// The cache size, by either spelling.
    fn cache_size(&self) -> &str {
        self.cache.as_deref().unwrap_or(&self.cache_size)
    }

    /// The schemes, by either spelling (noting the old one once: clap
    /// parses each of its `;`-separated specs on its own).
    fn schemes(&self) -> &[PrefetchSpec] {
        if self.schemes_short.is_empty() {
            return &self.schemes;
        }
        units::note("-s is deprecated: use --schemes");
        &self.schemes_short
    }
}

pub fn run(cmd: PrefetchCmd) -> anyhow::Result<()> {
    match cmd {
        PrefetchCmd::Gen { source, output } => {
            let (events, name) = source.events()?;
            write_ctx_trace(&output, &events)?;
            eprintln!("wrote {} events ({name}) to {}", events.len(), output.display());
            Ok(())
        }
        PrefetchCmd::Analyze { source, ceiling, explain, json } => {
            let (events, name) = source.events()?;
            let m = hearth_prefetch::metrics::analyze(&events);
            let ceilings = ceiling.run(&events)?;
            let warmup = ceiling.replay.warmup_share(&events);
            let explained =
                explain.run(&events, &ceilings, &ceiling.replay.policy, warmup, ceiling.replay.block_size()?)?;
            explain.plot(&explained, &name)?;
            if json.json {
                let mut v = serde_json::to_value(&m)?;
                v["ceiling"] = serde_json::to_value(&ceilings)?;
                if explain.explain.is_some() {
                    v["explain"] = serde_json::to_value(&explained)?;
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{name}");
                println!("I/Os {}  contexts {}  mean open contexts {:.1}", m.ios, m.contexts, m.mean_open_contexts);
                println!(
                    "mean sequential run: {:.3} (server stream), {:.3} (within contexts)",
                    m.mean_sequential_run, m.mean_sequential_run_in_context
                );
                println!(
                    "mean interference: {:.2} other I/Os between a context's consecutive I/Os",
                    m.mean_interference
                );
                println!("context length: mean {:.1}, max {}", m.mean_context_length, m.max_context_length);
                let names = if source.trace().is_none() { template_names(source.workload) } else { Vec::new() };
                for &(class, contexts, length) in &m.per_class {
                    let name = names.get(class as usize).copied().unwrap_or("");
                    println!("  class {class:>3} {name:<26} {contexts:>8} contexts, mean length {length:.1}");
                }
                if !ceilings.is_empty() {
                    print_ceilings(&ceilings, &ceiling, warmup);
                }
                crate::prefetch_explain::print(&explained, &names);
            }
            Ok(())
        }
        PrefetchCmd::Sim(args) => sim(args),
        PrefetchCmd::Sweep { sim, sweep_clients } => sweep(sim, &sweep_clients),
        PrefetchCmd::Replay(args) => crate::replay::run(args),
        PrefetchCmd::Schemes => {
            for (name, params, about) in hearth_prefetch::SCHEMES {
                let params: Vec<&str> = params.iter().map(|p| p.name).collect();
                println!("{name:<10} [{}] {about}", params.join(","));
            }
            Ok(())
        }
    }
}

fn print_ceilings(ceilings: &[hearth_prefetch::ceiling::Ceiling], args: &CeilingArgs, warmup: f64) {
    println!(
        "\nmisses by what could predict them ({}, warm-up {:.0}%, lookahead 1..{}; \"in ctx <=D\": in context and \
         ranked within the degree D a lookup fetches, ties in; \"ties out\": ties against the block):",
        args.replay.policy,
        warmup * 100.0,
        args.lookahead
    );
    let within = |c: &hearth_prefetch::ceiling::Ceiling| format!("in ctx <={}", c.degree);
    let within_heading = ceilings.first().map_or(String::new(), within);
    println!(
        "{:>10} {:>9} {:>11} {:>11} {:>9} {:>11} {:>11} {:>11} {:>9} {:>13} {:>13} {:>13}",
        "cache",
        "misses",
        "in context",
        within_heading,
        "ties out",
        "other ctx",
        "seen else",
        "first touch",
        "writes",
        "in-ctx cut %",
        "<=D cut %",
        "any-ctx cut %"
    );
    for c in ceilings {
        println!(
            "{:>10} {:>9} {:>11} {:>11} {:>9} {:>11} {:>11} {:>11} {:>9} {:>13.1} {:>13.1} {:>13.1}",
            format_bytes(c.cache_bytes),
            c.misses,
            c.in_context,
            c.in_context_within_degree,
            c.in_context_within_degree_ties_out,
            c.other_context,
            c.seen_elsewhere,
            c.first_touch,
            c.write_misses,
            c.in_context_cut(),
            c.within_degree_cut(),
            c.any_context_cut()
        );
    }
}

/// Runs every scheme of `args` over `events`; returns the footprint, the
/// cache size and the outcomes in scheme order.
fn run_schemes(events: &[CtxEvent], args: &SimArgs) -> anyhow::Result<(u64, u64, Vec<Outcome>)> {
    let block_size = args.replay.block_size()?;
    let footprint = footprint(events, block_size);
    let sizes = parse_sizes(args.cache_size()).context("--cache-size")?;
    let [size] = sizes.as_slice() else { anyhow::bail!("--cache-size takes one size, got {}", sizes.len()) };
    let cache_bytes = size.resolve(footprint, Some(block_size))?;
    let device = args
        .device_latency
        .or(args.device_latency_us)
        .map(|latency| Device { latency_ns: latency.as_nanos() as u64, bytes_per_sec: 500_000_000 });
    let setup = Setup {
        cache_bytes,
        partition: partition_share(args.prefetch_fraction, args.adaptive_partition),
        block_size,
        main_policy: args.replay.policy.clone(),
        warmup: args.replay.warmup_share(events),
        device,
        explain: false,
    };
    let schemes = args.schemes();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let outcomes: Vec<Outcome> = hearth_sim::parallel_map(schemes, threads, |spec| simulate(events, spec, &setup))
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok((footprint, cache_bytes, outcomes))
}

/// The outcomes as JSON, each one's stats with `hit_ratio` and `miss_ratio`
/// (fractions of the accesses counted; a prefetched block's first use is a
/// hit), named as in every command's JSON.
fn with_ratios(outcomes: &[Outcome]) -> serde_json::Result<Vec<serde_json::Value>> {
    outcomes
        .iter()
        .map(|o| {
            let mut v = serde_json::to_value(o)?;
            v["stats"]["hit_ratio"] = (1.0 - o.stats.miss_rate()).into();
            v["stats"]["miss_ratio"] = o.stats.miss_rate().into();
            Ok(v)
        })
        .collect()
}

/// Miss-rate cut of `o` relative to the `none` outcome, in percent.
fn miss_cut(outcomes: &[Outcome], o: &Outcome) -> Option<f64> {
    let base = outcomes.iter().find(|o| o.scheme == "none")?.stats.miss_rate();
    (base > 0.0).then(|| 100.0 * (base - o.stats.miss_rate()) / base)
}

fn sim(args: SimArgs) -> anyhow::Result<()> {
    let (events, name) = args.source.events()?;
    let (footprint, cache_bytes, outcomes) = run_schemes(&events, &args)?;
    let mining = if args.rules {
        let cfg = cminer::Config { segment: 64, max_gap: 4, min_support: 3, min_confidence: 0.3 };
        Some(compare_mining(&events, 5, &cfg)?)
    } else {
        None
    };

    let out = std::io::stdout();
    let mut out = out.lock();
    if args.json.json {
        let doc = serde_json::json!({ "workload": name, "cache_bytes": cache_bytes, "footprint_bytes": footprint, "results": with_ratios(&outcomes)?, "mining": mining });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        writeln!(
            out,
            "{name}: footprint {}, cache {} ({:.1}%), prefetch partition {}, warm-up {:.0}%",
            format_bytes(footprint),
            format_bytes(cache_bytes),
            100.0 * cache_bytes as f64 / footprint.max(1) as f64,
            describe_partition(partition_share(args.prefetch_fraction, args.adaptive_partition)),
            100.0 * args.replay.warmup_share(&events)
        )?;
        // The scheme column fits the longest name (variants spell their switches out).
        let w = outcomes.iter().map(|o| o.scheme.chars().count()).max().unwrap_or(0).max(24);
        // The hit ratio splits into the main cache's hits and first uses of prefetched blocks
        // (the JSON's `hit_ratio` is their sum), so neither column alone is headed "hit ratio".
        writeln!(
            out,
            "{:<w$} {:>11} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>10}",
            "scheme",
            "miss ratio%",
            "main hit%",
            "promote%",
            "miss-cut%",
            "issued",
            "accuracy",
            "coverage",
            "rules",
            "read µs"
        )?;
        for o in &outcomes {
            let s = &o.stats;
            let cut = miss_cut(&outcomes, o).map_or(String::from("-"), |c| format!("{c:.1}"));
            let latency = o.timing.as_ref().map_or(String::from("-"), |t| format!("{:.0}", t.mean_read_ns / 1000.0));
            writeln!(
                out,
                "{:<w$} {:>11.2} {:>9.2} {:>8.2} {:>9} {:>9} {:>9.3} {:>9.3} {:>8} {:>10}",
                o.scheme,
                100.0 * s.miss_rate(),
                100.0 * s.hit_rate(),
                100.0 * s.promote_rate(),
                cut,
                s.issued,
                s.accuracy(),
                s.coverage(),
                o.rules,
                latency
            )?;
        }
        writeln!(
            out,
            "read misses left, by the ceiling's oracle (lookahead {REMAINING_LOOKAHEAD}): in-context predictable \
             (prefetched but dropped unused / never prefetched), not predictable in context"
        )?;
        for o in &outcomes {
            let r = &o.remaining;
            writeln!(
                out,
                "  {:<w$} {:>9} / {:>9}  {:>9}",
                o.scheme, r.in_context_dropped, r.in_context_not_prefetched, r.not_in_context
            )?;
        }
        if let Some(m) = &mining {
            writeln!(out, "rules mined over the whole trace (lookahead {}):", m.lookahead)?;
            writeln!(
                out,
                "  QuickMine a&b->c  context-aware: {} prefixes, {} rules; context-oblivious: {} prefixes, {} rules",
                m.aware_prefixes, m.aware_rules, m.oblivious_prefixes, m.oblivious_rules
            )?;
            let c = |s: &cminer::MineStats| {
                format!(
                    "{} frequent pairs ({} closed), {} triples, {} rules",
                    s.frequent_pairs,
                    s.closed_pairs,
                    s.frequent_triples,
                    s.single_rules + s.double_rules
                )
            };
            writeln!(out, "  C-Miner* per-context sequences: {}", c(&m.cminer_aware))?;
            writeln!(out, "  C-Miner* interleaved segments:  {}", c(&m.cminer_oblivious))?;
        }
    }
    if let Some(path) = &args.plot {
        let labels: Vec<String> = outcomes.iter().map(|o| o.scheme.clone()).collect();
        let series =
            |f: &dyn Fn(&Outcome) -> f64| outcomes.iter().enumerate().map(|(i, o)| (i as f64, 100.0 * f(o))).collect();
        let title = format!("{name}, cache {}", format_bytes(cache_bytes));
        let chart = hearth_plot::Chart::bars(&title, "scheme", "% of accesses (the rest hit)", labels)
            .series("miss", series(&|o| o.stats.miss_rate()))
            .series("promote", series(&|o| o.stats.promote_rate()));
        let files = hearth_plot::render(&chart, path)?;
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

fn sweep(mut args: SimArgs, clients: &[u32]) -> anyhow::Result<()> {
    if args.source.trace().is_some() {
        anyhow::bail!("sweep generates its workload; a trace cannot be swept");
    }
    // Miss rate per scheme, one point per client count (plotted as rates:
    // the cuts of SEQ and RUN are negative).
    let mut rates: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    println!("miss-rate cut (%) vs no prefetching, {:?}-like, cache {}", args.source.workload, args.cache_size());
    for &n in clients {
        args.source.clients = n;
        let (events, _) = args.source.events()?;
        let (_, _, outcomes) = run_schemes(&events, &args)?;
        let mut row = format!("{n:>4} clients:");
        for o in &outcomes {
            let cut = miss_cut(&outcomes, o).unwrap_or(0.0);
            row += &format!(" {} {cut:.1}", o.scheme);
            let point = (f64::from(n), 100.0 * o.stats.miss_rate());
            match rates.iter_mut().find(|c| c.0 == o.scheme) {
                Some(c) => c.1.push(point),
                None => rates.push((o.scheme.clone(), vec![point])),
            }
        }
        println!("{row}");
    }
    if let Some(path) = &args.plot {
        let title = format!("{:?}-like, cache {}", args.source.workload, args.cache_size());
        let mut chart = hearth_plot::Chart::lines(&title, "concurrent clients", "miss rate (%)");
        for (scheme, points) in rates {
            chart = chart.series(&scheme, points);
        }
        for f in hearth_plot::render(&chart, path)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

/// The partition `--prefetch-fraction` and `--adaptive-partition` ask for.
pub(crate) fn partition_share(fraction: f64, adaptive: bool) -> PartitionShare {
    if adaptive {
        PartitionShare::Adaptive(fraction)
    } else {
        PartitionShare::Fixed(fraction)
    }
}

fn describe_partition(share: PartitionShare) -> String {
    match share {
        PartitionShare::Fixed(f) => format!("{:.0}%", 100.0 * f),
        PartitionShare::Adaptive(f) => format!("adaptive (from {:.0}%)", 100.0 * f),
    }
}

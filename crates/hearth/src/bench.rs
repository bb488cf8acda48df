//! `hearth bench sim`: requests per second of our policies next to
//! libCacheSim's, measured in the same run on the same trace (ratios, not
//! absolute numbers, are what survive a noisy machine).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use hearth_policy::{PolicyList, PolicySpec};
use hearth_sim::{replay, Trace};
use hearth_trace::{Format, Mode};

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Simulator throughput against libCacheSim (object mode, one cache size).
    Sim(SimBenchArgs),
    /// A pipelined NBD load generator: ops/s, MiB/s, latency and its own CPU per op.
    Serve(crate::bench_serve::ServeBenchArgs),
}

#[derive(Args, Debug)]
pub struct SimBenchArgs {
    /// An oracleGeneral trace (the format both simulators read natively) [default:
    /// shared/data/cloudPhysicsIO.oracleGeneral.bin beside the checkout the binary was built from].
    trace: Option<PathBuf>,
    /// Policies to compare, comma-separated: names libCacheSim knows too, with Hearth's parameters if
    /// any (libCacheSim runs the bare name). MQ as libCacheSim parameterises it is
    /// mq:lifetime=10000,history=bytes (likewise 2q:sizing=bytes, lfuda:formula=additive).
    #[arg(short, long, default_value = "lru,arc,mq:lifetime=10000,history=bytes")]
    policies: Vec<PolicyList>,
    /// Cache size in bytes, e.g. 256MiB.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = hearth_core::parse_bytes)]
    cache_size: u64,
    /// Runs per policy; the fastest counts.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// The peer script (libCacheSim's Python package must be importable by python3) [default:
    /// bench/libcachesim_peer.py in the checkout the binary was built from].
    #[arg(long, value_name = "PATH")]
    peer: Option<PathBuf>,
}

impl SimBenchArgs {
    /// The files named, or the defaults beside the checkout.
    fn paths(&self) -> (PathBuf, PathBuf) {
        let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        (
            self.trace.clone().unwrap_or_else(|| checkout.join("../shared/data/cloudPhysicsIO.oracleGeneral.bin")),
            self.peer.clone().unwrap_or_else(|| checkout.join("bench/libcachesim_peer.py")),
        )
    }
}

pub fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    match cmd {
        BenchCmd::Sim(args) => sim(args),
        BenchCmd::Serve(args) => crate::bench_serve::run(args),
    }
}

fn sim(args: SimBenchArgs) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; benchmark with `cargo run --release -- bench sim`");
    }
    let (trace_path, peer_script) = args.paths();
    if args.trace.is_none() && !trace_path.exists() {
        anyhow::bail!(
            "no trace named, and the default {} is not there (it is beside a development checkout); \
             convert the bundled one: hearth trace convert data/cloudPhysicsIO.csv.zst -o cp.oracleGeneral.bin, \
             then hearth bench sim cp.oracleGeneral.bin",
            trace_path.display()
        );
    }
    // libCacheSim runs the bare name (mq for mq:lifetime=10000,history=bytes).
    let specs = PolicyList::concat(&args.policies);
    let width = specs.iter().map(|spec| spec.to_string().len()).max().unwrap_or(6).max(6);
    let trace = Trace::load(hearth_trace::open(&trace_path, Some(Format::OracleGeneral))?, Mode::Object)?;
    let n = trace.accesses.len() as f64;

    let peer = Command::new("python3")
        .arg(&peer_script)
        .arg(&trace_path)
        .arg("ORACLE_GENERAL_TRACE")
        .arg(args.cache_size.to_string())
        .arg(args.repeat.to_string())
        .args(specs.iter().map(PolicySpec::name))
        .output()
        .context("running python3 for the libCacheSim peer")?;
    if !peer.status.success() {
        anyhow::bail!(
            "libCacheSim peer failed (is `pip install libcachesim` done?):\n{}",
            String::from_utf8_lossy(&peer.stderr)
        );
    }
    let peer: serde_json::Value = serde_json::from_slice(&peer.stdout).context("parsing the peer's JSON")?;

    println!(
        "{} requests, cache {}, best of {} runs; 'in memory' replays a loaded trace, 'end-to-end' reads the file \
         while simulating (as libCacheSim's process_trace does)",
        trace.accesses.len(),
        hearth_core::format_bytes(args.cache_size),
        args.repeat
    );
    println!(
        "{:<width$} {:>14} {:>14} {:>16} {:>8} {:>8} {:>10} {:>10}",
        "policy", "in memory", "end-to-end", "libCacheSim req/s", "ratio", "e2e ratio", "miss", "lcs miss"
    );
    for name in &specs {
        let build = || name.build(args.cache_size);
        // In memory: the policy alone.
        let mut best = f64::INFINITY;
        let mut result = None;
        for _ in 0..args.repeat {
            let mut policy = build();
            let start = Instant::now();
            result = Some(replay(policy.as_mut(), trace.accesses.iter().copied(), &|_| {}));
            best = best.min(start.elapsed().as_secs_f64());
        }
        // End to end, like libCacheSim's process_trace: read the file while simulating.
        let mut best_e2e = f64::INFINITY;
        for _ in 0..args.repeat {
            let mut policy = build();
            let start = Instant::now();
            let reader = hearth_trace::open(&trace_path, Some(Format::OracleGeneral))?;
            let stream = hearth_trace::accesses(reader, Mode::Object).map(|a| a.expect("the file read cleanly above"));
            replay(policy.as_mut(), stream, &|_| {});
            best_e2e = best_e2e.min(start.elapsed().as_secs_f64());
        }
        let result = result.expect("repeat >= 1");
        let (ours, e2e) = (n / best, n / best_e2e);
        let p = &peer[name.name()];
        let theirs = p["requests"].as_f64().unwrap_or(f64::NAN) / p["seconds"].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<width$} {:>14.0} {:>14.0} {:>16.0} {:>7.2}x {:>7.2}x {:>10.4} {:>10.4}",
            name,
            ours,
            e2e,
            theirs,
            ours / theirs,
            e2e / theirs,
            result.miss_ratio(),
            p["miss_ratio"].as_f64().unwrap_or(f64::NAN)
        );
    }
    Ok(())
}

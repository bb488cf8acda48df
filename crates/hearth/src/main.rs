//! `hearth`: a thin command line over the workspace crates. Each subcommand
//! lives in its own module and only parses arguments and prints results.

mod advise;
mod analyze;
mod bench;
mod bench_serve;
mod flags_dump;
mod generate;
mod mrc;
mod nbd_uri;
mod out_paths;
mod output_args;
mod pipe;
mod prefetch;
mod prefetch_explain;
mod progress;
mod replay;
mod serve;
mod sim;
mod sim_prefetch;
mod sweep;
mod tier;
mod top;
mod trace_args;
mod trace_cmd;
mod units;
mod warmup;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hearth",
    version,
    about = "A storage-server cache: simulator, analyzer and NBD server",
    after_help = "Every command writes sizes (64MiB, 5000blocks, 10%), shares (50%) and durations (500us, 2ms, 30m, 1d) \
                  the same way, and names one idea with one flag: docs/GUIDE.md, section 10 (Flag conventions)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
// Parsed once at start-up; boxing variants would only add noise.
#[allow(clippy::large_enum_variant)]
enum Cmd {
    /// Replay a trace against replacement policies at one or more cache sizes.
    Sim(sim::SimArgs),
    /// Run a sweep file (TOML: traces x policies x sizes) on a pool of threads into one table.
    Sweep(sweep::SweepArgs),
    /// Miss-ratio curves in one pass: exact LRU, SHARDS, miniature simulation of any policy.
    Mrc(mrc::MrcArgs),
    /// Characterise a trace: mix, sizes, reuse and temporal distances, skew.
    Analyze(analyze::AnalyzeArgs),
    /// What another policy or twice the cache would buy on a trace: the server's live advice, offline.
    Advise(advise::AdviseArgs),
    /// Benchmarks against peers measured in the same run.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Serve exports over NBD with the block cache in front of each backend.
    Serve(serve::ServeArgs),
    /// A running server at a glance: IOPS, hit ratio, latency, live miss-ratio curve, what-if policies.
    Top(top::TopArgs),
    /// Cache warmup studies (Bonfire): restart simulations with Last-K, First-K, Top-K.
    #[command(subcommand)]
    Warmup(warmup::WarmupCmd),
    /// Prefetching: generate context-tagged workloads, analyze them, compare prefetchers.
    #[command(subcommand)]
    Prefetch(prefetch::PrefetchCmd),
    /// Hybrid fast/slow storage: partitioning by long-range history, correlation-directed prefetching.
    #[command(subcommand)]
    Tier(tier::TierCmd),
    /// Look at, sample (SHARDS) and convert traces to oracleGeneral with next accesses, streaming.
    #[command(subcommand)]
    Trace(trace_cmd::TraceCmd),
    /// List the replacement policies.
    Policies,
    /// Write the man page or shell completions (man, complete-bash, complete-zsh, complete-fish, ...).
    Generate(generate::GenerateArgs),
    /// Every flag of every command as JSON lines (for the conventions test).
    #[command(name = "__flags", hide = true)]
    Flags,
}

fn main() -> ExitCode {
    pipe::exit_quietly_on_broken_pipe();
    match run(Cli::parse().cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if pipe::is_broken_stdout(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole chain of causes on one line.
            eprintln!("hearth: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: Cmd) -> anyhow::Result<()> {
    match cmd {
        Cmd::Sim(args) => sim::run(args),
        Cmd::Sweep(args) => sweep::run(args),
        Cmd::Mrc(args) => mrc::run(args),
        Cmd::Analyze(args) => analyze::run(args),
        Cmd::Advise(args) => advise::run(args),
        Cmd::Bench(cmd) => bench::run(cmd),
        Cmd::Serve(args) => serve::run(args),
        Cmd::Top(args) => top::run(args),
        Cmd::Warmup(cmd) => warmup::run(cmd),
        Cmd::Prefetch(cmd) => prefetch::run(cmd),
        Cmd::Tier(cmd) => tier::run(cmd),
        Cmd::Trace(cmd) => trace_cmd::run(cmd),
        Cmd::Generate(args) => generate::run(args, Cli::command()),
        Cmd::Flags => {
            flags_dump::print(&<Cli as clap::CommandFactory>::command());
            Ok(())
        }
        Cmd::Policies => {
            for (name, about) in hearth_policy::describe() {
                println!("{name:<8} {about}");
            }
            println!("\ngroups (a policy list may name them: -p classic,lirs):");
            for (group, members) in hearth_policy::groups() {
                println!("{group:<8} {}", members.join(","));
            }
            Ok(())
        }
    }
}

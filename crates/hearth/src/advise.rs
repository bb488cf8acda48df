//! `hearth advise`: the live advice of `hearth serve` (GET /advice) from a
//! trace instead of live traffic — the configured policy and the what-if
//! policies at the cache size and at twice it, run in full by the simulator
//! (`hearth sim`'s counting), and what a change would buy in hit-ratio points.

use anyhow::Context;
use clap::Args;
use hearth_policy::{PolicyList, PolicySpec};
use hearth_sim::{parse_sizes, simulate, CacheSize, SimResult, Simulation};

use crate::output_args::{Quiet, Threads};
use crate::progress;
use crate::trace_args::TraceArgs;

#[derive(Args, Debug)]
pub struct AdviseArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// The cache's size: bytes (8GiB), blocks (5000blocks) or share of the footprint (10%).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    cache_size: String,
    /// The policy the cache runs now (the server's default is mq).
    #[arg(long, default_value = "mq")]
    policy: PolicySpec,
    /// Alternatives to compare, comma-separated (default: the server's what-if policies).
    #[arg(short, long)]
    policies: Vec<PolicyList>,
    #[command(flatten)]
    threads: Threads,
    #[command(flatten)]
    quiet: Quiet,
}

pub fn run(args: AdviseArgs) -> anyhow::Result<()> {
    let size = match parse_sizes(&args.cache_size).context("--cache-size")?[..] {
        [size] => size,
        _ => anyhow::bail!("--cache-size: one size, not a list"),
    };
    let doubled = match size {
        CacheSize::Bytes(b) => CacheSize::Bytes(2 * b),
        CacheSize::Blocks(n) => CacheSize::Blocks(2 * n),
        CacheSize::Objects(n) => CacheSize::Objects(2 * n),
        CacheSize::Footprint(f) => CacheSize::Footprint(2.0 * f),
    };
    let what_if = if args.policies.is_empty() {
        hearth_server::advice::default_what_if()
    } else {
        PolicyList::concat(&args.policies)
    };
    let mut policies = vec![args.policy.clone()];
    for spec in what_if {
        if !policies.contains(&spec) {
            policies.push(spec);
        }
    }
    let threads = args.threads.count();
    let sim = Simulation { policies, sizes: vec![size, doubled], warmup: None, interval: None };
    let run = simulate(&args.trace.source(), &sim, threads, &progress::Bars::new(args.quiet.quiet))?;
    let per_size = run.results.len() / 2;
    let (now, twice) = run.results.split_at(per_size);
    print!("{}", advice(now, twice));
    Ok(())
}

fn hit_ratio(r: &SimResult) -> f64 {
    if r.requests == 0 {
        0.0
    } else {
        r.hits as f64 / r.requests as f64
    }
}

/// The table and the recommendation: `now` and `twice` hold the same
/// policies in the same order, the configured one first.
fn advice(now: &[SimResult], twice: &[SimResult]) -> String {
    use std::fmt::Write;
    let size = hearth_core::format_bytes(now[0].cache_bytes);
    let doubled = hearth_core::format_bytes(twice[0].cache_bytes);
    let width = now.iter().map(|r| r.policy.len()).max().unwrap_or(6).max(6);
    let mut out = String::new();
    // Each column is a hit ratio in percent at one size, and says so.
    let (head_now, head_twice) = (format!("hit ratio at {size}"), format!("hit ratio at {doubled}"));
    let column = head_now.len().max(head_twice.len()).max(12);
    let _ = writeln!(out, "{:<width$}  {head_now:>column$}  {head_twice:>column$}", "policy");
    let digits = column - 1;
    for (r, d) in now.iter().zip(twice) {
        let _ = writeln!(
            out,
            "{:<width$}  {:>digits$.2}%  {:>digits$.2}%",
            r.policy,
            100.0 * hit_ratio(r),
            100.0 * hit_ratio(d)
        );
    }
    let configured = &now[0];
    let best = now.iter().max_by(|a, b| hit_ratio(a).total_cmp(&hit_ratio(b))).expect("at least one policy");
    let gain = 100.0 * (hit_ratio(best) - hit_ratio(configured));
    let best_twice = &twice[now.iter().position(|r| std::ptr::eq(r, best)).expect("best is one of them")];
    let doubling = 100.0 * (hit_ratio(best_twice) - hit_ratio(best));
    let _ = writeln!(out);
    if std::ptr::eq(best, configured) {
        let _ = write!(out, "{} at {size}: hit ratio {:.1}%, the best of these", best.policy, 100.0 * hit_ratio(best));
    } else {
        let _ = write!(
            out,
            "{} at {size}: hit ratio {:.1}% ({gain:+.1} points over {})",
            best.policy,
            100.0 * hit_ratio(best),
            configured.policy
        );
    }
    let _ = writeln!(out, "; doubling to {doubled}: {doubling:+.1} points");
    let best_doubled = twice.iter().max_by(|a, b| hit_ratio(a).total_cmp(&hit_ratio(b))).expect("at least one policy");
    if best_doubled.policy != best.policy {
        let _ = writeln!(
            out,
            "at {doubled} {} would lead: hit ratio {:.1}% ({:+.1} points over {} there)",
            best_doubled.policy,
            100.0 * hit_ratio(best_doubled),
            100.0 * (hit_ratio(best_doubled) - hit_ratio(best_twice)),
            best.policy
        );
    }
    out
}

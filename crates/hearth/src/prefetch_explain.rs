//! `hearth prefetch analyze --explain SCHEME`: the miss account
//! (`hearth_prefetch::account`) of one scheme at each cache size of
//! `--ceiling`, beside the ceiling it is read against.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use hearth_core::format_bytes;
use hearth_prefetch::account::Account;
use hearth_prefetch::ceiling::Ceiling;
use hearth_sim::device::Device;
use hearth_sim::prefetch::{simulate, Setup};
use hearth_trace::ctx::CtxEvent;
use serde::Serialize;

use crate::{out_paths, units};

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Account for why SCHEME missed each miss the ceiling calls predictable in context, at each
    /// size of --ceiling (see `hearth prefetch schemes`).
    #[arg(long, value_name = "SCHEME", requires = "ceiling")]
    pub explain: Option<hearth_prefetch::PrefetchSpec>,
    /// With --explain: share of the cache for prefetched blocks.
    #[arg(long, value_name = "PERCENT", default_value = "4%",
          value_parser = units::share("--prefetch-fraction", units::BareShare::Fraction))]
    prefetch_fraction: f64,
    /// With --explain: size the prefetch partition as the traffic goes, never below
    /// --prefetch-fraction.
    #[arg(long, requires = "explain")]
    adaptive_partition: bool,
    /// With --explain: time reads on a device with this latency (e.g. 100us) and 500 MB/s, which
    /// the "too late" reason needs.
    #[arg(long, value_name = "DURATION", value_parser = units::duration)]
    device_latency: Option<Duration>,
    /// With --explain: write a bar chart of the reasons by cache size to PATH.svg/.png.
    #[arg(long, value_name = "PATH", value_parser = out_paths::plot, requires = "explain")]
    plot: Option<PathBuf>,
}

/// One cache size's account, with the ceiling it is read against.
#[derive(Serialize)]
pub struct Explained {
    pub scheme: String,
    pub cache_bytes: u64,
    /// Read misses without prefetching that are predictable in context.
    pub ceiling_in_context: u64,
    /// The scheme's misses (reads and writes), counted as `prefetch sim` counts them.
    pub misses: u64,
    pub account: Account,
    /// What the scheme's net-benefit gate did, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<hearth_prefetch::GateStats>,
    /// What the scheme's lift of off hit lookups did, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lift: Option<hearth_prefetch::quickmine::LiftStats>,
}

impl ExplainArgs {
    /// The account at each ceiling's cache size; empty without --explain.
    pub fn run(
        &self,
        events: &[CtxEvent],
        ceilings: &[Ceiling],
        policy: &hearth_policy::PolicySpec,
        warmup: f64,
        block_size: u32,
    ) -> anyhow::Result<Vec<Explained>> {
        let Some(spec) = &self.explain else { return Ok(Vec::new()) };
        let device =
            self.device_latency.map(|l| Device { latency_ns: l.as_nanos() as u64, bytes_per_sec: 500_000_000 });
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        hearth_sim::parallel_map(ceilings, threads, |c| -> anyhow::Result<Explained> {
            let setup = Setup {
                cache_bytes: c.cache_bytes,
                partition: crate::prefetch::partition_share(self.prefetch_fraction, self.adaptive_partition),
                block_size,
                main_policy: policy.clone(),
                warmup,
                device,
                explain: true,
            };
            let o = simulate(events, spec, &setup)?;
            Ok(Explained {
                scheme: o.scheme,
                cache_bytes: c.cache_bytes,
                ceiling_in_context: c.in_context,
                misses: o.stats.misses,
                account: o.account.expect("explain asks for the account"),
                gate: o.gate,
                lift: o.lift,
            })
        })
        .into_iter()
        .collect()
    }

    /// Writes the chart of `--plot`, if asked for.
    pub fn plot(&self, explained: &[Explained], name: &str) -> anyhow::Result<()> {
        let (Some(path), Some(first)) = (&self.plot, explained.first()) else { return Ok(()) };
        let sizes: Vec<String> = explained.iter().map(|e| format_bytes(e.cache_bytes)).collect();
        let title = format!("{name}: why {} missed predictable misses", first.scheme);
        let mut chart = hearth_plot::Chart::bars(&title, "cache size", "misses predictable in context", sizes);
        for (row, (reason, _)) in first.account.misses.rows().iter().enumerate() {
            let points = explained.iter().enumerate().map(|(i, e)| (i as f64, e.account.misses.rows()[row].1 as f64));
            chart = chart.series(reason, points.collect());
        }
        for f in hearth_plot::render(&chart, path)? {
            eprintln!("wrote {}", f.display());
        }
        Ok(())
    }
}

/// The account as a table: one column per cache size; then, per size, the
/// throttling rows (templates named from `names` where known).
pub fn print(explained: &[Explained], names: &[&str]) {
    let Some(first) = explained.first() else { return };
    println!("\nwhy {} missed the misses predictable in context (hearth_prefetch::account):", first.scheme);
    let cell = |f: &dyn Fn(&Explained) -> String| explained.iter().map(|e| format!("{:>12}", f(e))).collect::<String>();
    println!("{:<34}{}", "cache", cell(&|e| format_bytes(e.cache_bytes)));
    println!("{:<34}{}", "in context, no prefetching", cell(&|e| e.ceiling_in_context.to_string()));
    println!("{:<34}{}", "  left (read misses)", cell(&|e| e.account.predictable_misses.to_string()));
    let share = |part: u64, e: &Explained| {
        if e.ceiling_in_context == 0 {
            "-".to_string()
        } else {
            format!("{:.1}%", 100.0 * part as f64 / e.ceiling_in_context as f64)
        }
    };
    println!(
        "{:<34}{}",
        "  removed (share of the ceiling)",
        cell(&|e| share(e.ceiling_in_context.saturating_sub(e.account.predictable_misses), e))
    );
    for (row, (reason, _)) in first.account.misses.rows().iter().enumerate() {
        let label = if *reason == "too late" { "too late (promotes read on demand)" } else { reason };
        println!("{:<34}{}", format!("  {label}"), cell(&|e| e.account.misses.rows()[row].1.to_string()));
        if *reason == "evicted" {
            print_evicted_split(explained, &cell);
        }
        if *reason == "pollution" {
            print_pollution_split(explained, &cell);
        }
    }
    println!(
        "{:<34}{}",
        "wasted prefetches",
        cell(&|e| (e.account.wasted.dropped_before_use + e.account.wasted.mispredicted).to_string())
    );
    println!("{:<34}{}", "  dropped before use", cell(&|e| e.account.wasted.dropped_before_use.to_string()));
    println!("{:<34}{}", "  mispredicted", cell(&|e| e.account.wasted.mispredicted.to_string()));
    print_lift(explained, &cell);
    for e in explained {
        print_throttle(e, names);
    }
}

/// The lift's counters (`qm-hits-lift-margin`), if the scheme has one.
fn print_lift(explained: &[Explained], cell: &dyn Fn(&dyn Fn(&Explained) -> String) -> String) {
    if explained.iter().all(|e| e.lift.is_none()) {
        return;
    }
    type Count = fn(&hearth_prefetch::quickmine::LiftStats) -> u64;
    let rows: [(&str, Count); 8] = [
        ("lift: added prefetches asked", |l| l.added_asked),
        ("  used in time (saved)", |l| l.added_used),
        ("  used, claimed (not saved)", |l| l.added_claimed),
        ("  victims aged out", |l| l.victims),
        ("  victims missed (cost)", |l| l.victims_charged),
        ("  gate closings", |l| l.gate_closings),
        ("  gate openings", |l| l.gate_openings),
        ("  contexts blocked by the gate", |l| l.gate.blocked_lookups),
    ];
    for (label, count) in rows {
        println!("{:<34}{}", label, cell(&|e| e.lift.as_ref().map_or("-".to_string(), |l| count(l).to_string())));
    }
}

/// Per template and kind of lookup: the used share its throttle judges, its
/// lookups at degree 0, what their shadow would have saved, and the misses
/// called throttled (`hearth_prefetch::account::throttled`).
fn print_throttle(e: &Explained, names: &[&str]) {
    if e.account.throttle.is_empty() {
        return;
    }
    println!(
        "\nthrottling at {} (after the warm-up; shadow: what the degree-0 lookups would have prefetched):",
        format_bytes(e.cache_bytes)
    );
    println!(
        "{:<22}{:<26}{:>9}{:>9}{:>7}{:>12}{:>10}{:>10}{:>10}{:>11}{:>14}{:>14}",
        "template",
        "lookup",
        "issued",
        "used",
        "share",
        "at degree 0",
        "shadow",
        "used",
        "saved",
        "throttled",
        "top used/iss.",
        "shadow top"
    );
    for r in &e.account.throttle {
        let name = names.get(r.template as usize).map_or_else(|| r.template.to_string(), |n| n.to_string());
        let share = if r.issued == 0 { "-".to_string() } else { format!("{:.2}", r.used as f64 / r.issued as f64) };
        println!(
            "{:<22}{:<26}{:>9}{:>9}{:>7}{:>12}{:>10}{:>10}{:>10}{:>11}{:>14}{:>14}",
            name,
            r.kind.name(),
            r.issued,
            r.used,
            share,
            r.throttled_lookups,
            r.shadow_issued,
            r.shadow_used,
            r.shadow_saved,
            r.throttled_misses,
            format!("{}/{}", r.top_used, r.top_issued),
            format!("{}/{}", r.shadow_top_used, r.shadow_top_issued)
        );
    }
}

/// The rows under "evicted": each cause, then its rule kinds that any size has.
fn print_evicted_split(explained: &[Explained], cell: &dyn Fn(&dyn Fn(&Explained) -> String) -> String) {
    for (cause, (name, kinds)) in explained[0].account.evicted.rows().into_iter().enumerate() {
        println!("{:<34}{}", format!("    {name}"), cell(&|e| e.account.evicted.rows()[cause].1.total().to_string()));
        for (kind, (kind_name, _)) in kinds.rows().into_iter().enumerate() {
            let count = |e: &Explained| e.account.evicted.rows()[cause].1.rows()[kind].1;
            if explained.iter().any(|e| count(e) > 0) {
                println!("{:<34}{}", format!("      {kind_name}"), cell(&|e| count(e).to_string()));
            }
        }
    }
}

/// The rows under "pollution": each case, then the reasons the last three
/// would have had without the drop.
fn print_pollution_split(explained: &[Explained], cell: &dyn Fn(&dyn Fn(&Explained) -> String) -> String) {
    for (case, (name, _)) in explained[0].account.pollution.rows().into_iter().enumerate() {
        println!("{:<34}{}", format!("    {name}"), cell(&|e| e.account.pollution.rows()[case].1.to_string()));
    }
    for (reason, (name, _)) in explained[0].account.pollution.otherwise.rows().into_iter().enumerate() {
        let count = |e: &Explained| e.account.pollution.otherwise.rows()[reason].1;
        if explained.iter().any(|e| count(e) > 0) {
            println!("{:<34}{}", format!("      otherwise {name}"), cell(&|e| count(e).to_string()));
        }
    }
}

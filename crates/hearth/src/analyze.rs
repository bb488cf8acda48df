//! `hearth analyze`: characterise a trace as a cache sees it.

use std::path::{Path, PathBuf};

use clap::Args;
use hearth_plot::{render, Chart, PlotError};
use hearth_warmup::reaccess::{ReaccessReport, CATEGORIES, FRACTION_BUCKETS, GROUPS};

use crate::out_paths;
use crate::output_args::{Json, Quiet};
use crate::trace_args::TraceArgs;

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    json: Json,
    /// Write histogram and skew plots (SVG + PNG) into this directory.
    #[arg(long, value_name = "DIR", value_parser = out_paths::dir)]
    plots: Option<PathBuf>,
    /// Instead: the re-access analysis (hourly/daily re-accesses, reuse distance groups, spatial
    /// clustering per 1 MiB region) of a block trace; `synth:bonfire` is accepted too.
    #[arg(long)]
    reaccess: bool,
    #[command(flatten)]
    quiet: Quiet,
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<()> {
    if args.reaccess {
        return reaccess(&args);
    }
    let (reader, mode) = args.trace.open()?;
    let report = hearth_analyze::analyze(reader, mode)?;
    // As `sim` does: an all-zero report of nothing would read like a result.
    anyhow::ensure!(report.requests > 0, "{} holds no requests", args.trace.trace.display());
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    if let Some(dir) = &args.plots {
        let written = hearth_analyze::write_plots(&report, dir, &args.trace.name())?;
        note_written(&written, args.quiet.quiet);
    }
    Ok(())
}

fn reaccess(args: &AnalyzeArgs) -> anyhow::Result<()> {
    let (trace, block_size) = crate::warmup::load_timed(&args.trace, hearth_warmup::synth::DailyZipf::default().days)?;
    let report = hearth_warmup::reaccess::analyze(&trace, block_size, (1 << 20).max(u64::from(block_size)));
    if args.json.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    if let Some(dir) = &args.plots {
        note_written(&reaccess_plots(&report, dir, &args.trace.name())?, args.quiet.quiet);
    }
    Ok(())
}

/// Writes the re-access analysis charts under `dir`; returns the files written.
fn reaccess_plots(report: &ReaccessReport, dir: &Path, trace: &str) -> Result<Vec<PathBuf>, PlotError> {
    let share = |counts: &[u64]| {
        let total = counts.iter().sum::<u64>().max(1) as f64;
        counts.iter().enumerate().map(|(i, &n)| (i as f64, 100.0 * n as f64 / total)).collect::<Vec<_>>()
    };
    let names = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut reuse = Chart::bars(
        "Reuse distance of re-accesses",
        "distinct bytes between uses",
        "% of the category's re-accesses",
        names(&GROUPS),
    );
    let fractions: Vec<String> = (0..FRACTION_BUCKETS).map(|i| format!("{}%", i * 10)).collect();
    let mut clustering = Chart::bars(
        &format!("Re-accessed blocks per {} region", hearth_core::format_bytes(report.region_bytes)),
        "share of the region's blocks re-accessed (bucket lower bound)",
        "% of regions",
        fractions,
    );
    for (c, name) in CATEGORIES.iter().enumerate() {
        reuse = reuse.series(name, share(&report.reuse_groups[c]));
        clustering = clustering.series(name, share(&report.clustering[c]));
    }
    let charts = [
        (
            "reaccess_categories",
            Chart::bars("Time between re-accesses", "category", "% of re-accesses", names(&CATEGORIES))
                .series("re-accesses", share(&report.reaccesses)),
        ),
        (
            "reaccess_daily_hours",
            Chart::bars(
                "Daily re-accesses by hour of day",
                "hour (trace clock)",
                "% of daily re-accesses",
                (0..24).map(|h| format!("{h}")).collect(),
            )
            .series("daily", share(&report.daily_by_hour)),
        ),
        ("reaccess_reuse_distance", reuse),
        ("reaccess_clustering", clustering),
    ];
    let mut files = Vec::new();
    for (name, mut chart) in charts {
        chart.title = format!("{}: {trace}", chart.title);
        files.extend(render(&chart, &dir.join(name))?);
    }
    Ok(files)
}

fn note_written(files: &[PathBuf], quiet: bool) {
    if quiet {
        return;
    }
    for f in files {
        eprintln!("wrote {}", f.display());
    }
}

//! `hearth analyze`: characterise a trace as a cache sees it.

use std::path::PathBuf;

use clap::Args;

use crate::out_paths;
use crate::trace_args::TraceArgs;

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write histogram and skew plots (SVG + PNG) into this directory.
    #[arg(long, value_name = "DIR", value_parser = out_paths::dir)]
    plots: Option<PathBuf>,
    /// Instead: the re-access analysis (hourly/daily re-accesses, reuse distance groups, spatial
    /// clustering per 1 MiB region) of a block trace; `synth:bonfire` is accepted too.
    #[arg(long)]
    reaccess: bool,
    /// No notes on stderr (the plot files written).
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<()> {
    if args.reaccess {
        return reaccess(&args);
    }
    let (reader, mode) = args.trace.open()?;
    let report = hearth_analyze::analyze(reader, mode)?;
    // As `sim` does: an all-zero report of nothing would read like a result.
    anyhow::ensure!(report.requests > 0, "{} holds no requests", args.trace.trace.display());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    if let Some(dir) = &args.plots {
        let written = hearth_analyze::write_plots(&report, dir)?;
        note_written(&written, args.quiet);
    }
    Ok(())
}

fn reaccess(args: &AnalyzeArgs) -> anyhow::Result<()> {
    let (trace, block_size) = crate::warmup::load_timed(&args.trace, hearth_warmup::synth::DailyZipf::default().days)?;
    let report = hearth_warmup::reaccess::analyze(&trace, block_size, (1 << 20).max(u64::from(block_size)));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    if let Some(dir) = &args.plots {
        note_written(&report.write_plots(dir)?, args.quiet);
    }
    Ok(())
}

fn note_written(files: &[PathBuf], quiet: bool) {
    if quiet {
        return;
    }
    for f in files {
        eprintln!("wrote {}", f.display());
    }
}

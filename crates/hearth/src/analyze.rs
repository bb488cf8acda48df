//! `hearth analyze`: characterise a trace as a cache sees it.

use std::path::PathBuf;

use clap::Args;

use crate::trace_args::TraceArgs;

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Write histogram and skew plots (SVG + PNG) into this directory.
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<()> {
    let (reader, mode) = args.trace.open()?;
    let report = hearth_analyze::analyze(reader, mode)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_text());
    }
    if let Some(dir) = &args.plots {
        for f in hearth_analyze::write_plots(&report, dir).map_err(anyhow::Error::msg)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}

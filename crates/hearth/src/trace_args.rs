//! Trace options shared by every subcommand that reads a trace: the command
//! line's spelling of `hearth_sim::source::TraceSource`, which opens it.

use clap::{Args, ValueEnum};
use hearth_sim::source::{ModeChoice, OptionNames, Requests, TraceInput, TraceSource, DEFAULT_REQUESTS, DEFAULT_SEED};
use hearth_trace::{Columns, Format, Mode};

/// How errors name the options below.
pub const OPTION_NAMES: OptionNames =
    OptionNames { block_size: "--block-size", object_mode: "--mode object", ignore_obj_size: "--ignore-obj-size" };

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModeArg {
    /// Split each request into fixed-size blocks (a block cache).
    Block,
    /// One object per request, with its size (an object cache, as libCacheSim).
    Object,
}

impl From<ModeArg> for ModeChoice {
    fn from(m: ModeArg) -> ModeChoice {
        match m {
            ModeArg::Block => ModeChoice::Block,
            ModeArg::Object => ModeChoice::Object,
        }
    }
}

#[derive(Args, Clone, Debug)]
pub struct TraceArgs {
    /// Trace file: MSR/SNIA .csv, blkparse text, .vscsi, .spc, .oracleGeneral(.bin), one id per line .txt,
    /// CloudPhysics .csv, libCacheSim's .lcs (versions 1-8), Twitter's .twr and .twrNS, .valpin, or any
    /// CSV or binary layout with --columns; .gz and .zst are read transparently. Or a synthetic workload:
    /// synth:oltp, synth:zipf:BLOCKS:ALPHA, synth:uniform:BLOCKS, synth:loop:BLOCKS, synth:scan.
    pub trace: TraceInput,
    /// Requests to generate for a synth: workload.
    #[arg(long, default_value_t = DEFAULT_REQUESTS)]
    pub requests: usize,
    /// Seed for a synth: workload.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Trace format, when the file name does not tell (msr, blkparse, vscsi, spc, oracle, text, cpcsv, lcs,
    /// twr, twrns, valpin, csv, binary).
    #[arg(long)]
    pub format: Option<Format>,
    /// Which column holds what, for a CSV or binary trace of any layout, in libCacheSim's -t syntax
    /// ("time-col=1, obj-id-col=2, obj-size-col=3, delimiter=,, has-header=true"; binary: "obj-id-col=2,
    /// obj-size-col=3, format=<IQI") or Hearth's ("time=1,id=2,size=3,sep=tab,header"). Also op-col and
    /// tenant-col; without a size column every object has size 1.
    #[arg(long, value_name = "SPEC", alias = "trace-type-params", value_parser = columns)]
    pub columns: Option<Box<Columns>>,
    /// Count every object as size 1 (object mode), so that cache sizes count objects (5000objects), as
    /// libCacheSim's --ignore-obj-size.
    #[arg(long)]
    pub ignore_obj_size: bool,
    /// Block or object caching; object traces (oracle, text, lcs, twr, valpin, csv, binary) default to object mode.
    #[arg(long)]
    pub mode: Option<ModeArg>,
    /// Block size for block mode.
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = hearth_core::parse_bytes)]
    pub block_size: u64,
}

impl TraceArgs {
    /// The trace and its options, for `hearth_sim`.
    pub fn source(&self) -> TraceSource {
        TraceSource {
            trace: self.trace.clone(),
            format: self.format,
            columns: self.columns.as_deref().cloned(),
            ignore_obj_size: self.ignore_obj_size,
            mode: self.mode.map(ModeChoice::from),
            block_size: self.block_size,
            requests: self.requests,
            seed: self.seed,
            cancel: None,
            names: OPTION_NAMES,
        }
    }

    /// The trace as a plot's title names it: a file's name, a generator's spec.
    pub fn name(&self) -> String {
        short_name(&self.trace.to_string())
    }

    /// Opens the trace or generator (detecting a file's format unless given)
    /// and picks the mode.
    pub fn open(&self) -> anyhow::Result<(Requests, Mode)> {
        Ok(self.source().open()?)
    }
}

/// Boxed: the options are flattened into every subcommand's, and a layout is large.
fn columns(spec: &str) -> Result<Box<Columns>, hearth_trace::SettingError> {
    spec.parse().map(Box::new)
}

/// A trace's file name without its directories (`synth:zipf:1000:0.9` as is).
pub fn short_name(trace: &str) -> String {
    if trace.starts_with("synth:") {
        return trace.to_string();
    }
    std::path::Path::new(trace).file_name().map_or_else(|| trace.to_string(), |n| n.to_string_lossy().into_owned())
}

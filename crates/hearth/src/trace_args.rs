//! Trace options shared by every subcommand that reads a trace: the command
//! line's spelling of `hearth_sim::source::TraceSource`, which opens it.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hearth_sim::source::{ModeChoice, OptionNames, Requests, TraceSource, DEFAULT_REQUESTS, DEFAULT_SEED};
use hearth_trace::{Format, Mode};

/// How errors name the options below.
pub const OPTION_NAMES: OptionNames = OptionNames { block_size: "--block-size", object_mode: "--mode object" };

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
    /// CloudPhysics .csv; .gz and .zst are read transparently. Or a synthetic workload:
    /// synth:oltp, synth:zipf:BLOCKS:ALPHA, synth:uniform:BLOCKS, synth:loop:BLOCKS, synth:scan.
    pub trace: PathBuf,
    /// Requests to generate for a synth: workload.
    #[arg(long, default_value_t = DEFAULT_REQUESTS)]
    pub requests: usize,
    /// Seed for a synth: workload.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Trace format, when the file name does not tell (msr, blkparse, vscsi, spc, oracle, text, cpcsv).
    #[arg(long)]
    pub format: Option<Format>,
    /// Block or object caching; object traces (oracle, text) default to object mode.
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
            mode: self.mode.map(ModeChoice::from),
            block_size: self.block_size,
            requests: self.requests,
            seed: self.seed,
            cancel: None,
            names: OPTION_NAMES,
        }
    }

    /// Opens the trace or generator (detecting a file's format unless given)
    /// and picks the mode.
    pub fn open(&self) -> anyhow::Result<(Requests, Mode)> {
        Ok(self.source().open()?)
    }
}

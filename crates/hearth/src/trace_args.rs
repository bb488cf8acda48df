//! Trace options shared by every subcommand that reads a trace.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hearth_trace::{Format, Mode, TraceReader};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModeArg {
    /// Split each request into fixed-size blocks (a block cache).
    Block,
    /// One object per request, with its size (an object cache, as libCacheSim).
    Object,
}

#[derive(Args, Debug)]
pub struct TraceArgs {
    /// Trace file: MSR/SNIA .csv, blkparse text, .vscsi, .spc, .oracleGeneral(.bin), one id per line .txt,
    /// CloudPhysics .csv; .gz and .zst are read transparently.
    pub trace: PathBuf,
    /// Trace format, when the file name does not tell (msr, blkparse, vscsi, spc, oracle, text, cpcsv).
    #[arg(long)]
    pub format: Option<Format>,
    /// Block or object caching; object traces (oracle, text) default to object mode.
    #[arg(long)]
    pub mode: Option<ModeArg>,
    /// Block size for block mode.
    #[arg(long, default_value = "4KiB", value_parser = hearth_core::parse_bytes)]
    pub block_size: u64,
}

impl TraceArgs {
    /// Opens the trace (detecting its format unless given) and picks the mode.
    pub fn open(&self) -> anyhow::Result<(TraceReader, Mode)> {
        let reader = hearth_trace::open(&self.trace, self.format)?;
        let format = reader.format();
        let block_size = u32::try_from(self.block_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| anyhow::anyhow!("--block-size must be between 1 B and 4 GiB"))?;
        let mode = match self.mode {
            None => Mode::for_format(format, block_size),
            Some(ModeArg::Object) => Mode::Object,
            Some(ModeArg::Block) if format.is_object_trace() => {
                anyhow::bail!("{} is an object trace ({format}): its ids are not byte offsets, so use --mode object", self.trace.display())
            }
            Some(ModeArg::Block) => Mode::Block { block_size },
        };
        Ok((reader, mode))
    }
}

//! Trace options shared by every subcommand that reads a trace.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use hearth_trace::oltp::{Oltp, OltpConfig};
use hearth_trace::synth::{Pattern, Synth};
use hearth_trace::{Format, Mode, Request, TraceError};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModeArg {
    /// Split each request into fixed-size blocks (a block cache).
    Block,
    /// One object per request, with its size (an object cache, as libCacheSim).
    Object,
}

#[derive(Args, Clone, Debug)]
pub struct TraceArgs {
    /// Trace file: MSR/SNIA .csv, blkparse text, .vscsi, .spc, .oracleGeneral(.bin), one id per line .txt,
    /// CloudPhysics .csv; .gz and .zst are read transparently. Or a synthetic workload:
    /// synth:oltp, synth:zipf:BLOCKS:ALPHA, synth:uniform:BLOCKS, synth:loop:BLOCKS, synth:scan.
    pub trace: PathBuf,
    /// Requests to generate for a synth: workload.
    #[arg(long, default_value_t = 1_000_000)]
    pub requests: usize,
    /// Seed for a synth: workload.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
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

/// Requests from a trace file or a generator, read lazily.
pub type Requests = Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>;

impl TraceArgs {
    /// The trace file's format, as given or as its name tells (`None` for
    /// a synthetic workload or a name that does not tell).
    pub fn format(&self) -> Option<Format> {
        if self.trace.to_str().is_some_and(|s| s.starts_with("synth:")) {
            return None;
        }
        self.format.or_else(|| Format::detect(&self.trace))
    }

    /// Opens the trace or generator (detecting a file's format unless given)
    /// and picks the mode.
    pub fn open(&self) -> anyhow::Result<(Requests, Mode)> {
        let block_size = u32::try_from(self.block_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| anyhow::anyhow!("--block-size must be between 1 B and 4 GiB"))?;
        if let Some(spec) = self.trace.to_str().and_then(|s| s.strip_prefix("synth:")) {
            if matches!(self.mode, Some(ModeArg::Object)) {
                anyhow::bail!("synthetic workloads are block traces; drop --mode object");
            }
            let n = self.requests;
            let requests: Requests = if spec == "oltp" {
                let cfg = OltpConfig { seed: self.seed, ..OltpConfig::default() };
                Box::new(Oltp::new(cfg).map_err(anyhow::Error::msg)?.take(n).map(Ok))
            } else {
                let pattern: Pattern = spec.parse().map_err(anyhow::Error::msg)?;
                let synth = Synth::new(pattern, self.seed).map_err(anyhow::Error::msg)?.block_size(block_size);
                Box::new(synth.take(n).map(Ok))
            };
            return Ok((requests, Mode::Block { block_size }));
        }
        let reader = hearth_trace::open(&self.trace, self.format)?;
        let format = reader.format();
        let mode = match self.mode {
            None => Mode::for_format(format, block_size),
            Some(ModeArg::Object) => Mode::Object,
            Some(ModeArg::Block) if format.is_object_trace() => {
                anyhow::bail!(
                    "{} is an object trace ({format}): its ids are not byte offsets, so use --mode object",
                    self.trace.display()
                )
            }
            Some(ModeArg::Block) => Mode::Block { block_size },
        };
        Ok((Box::new(reader), mode))
    }
}

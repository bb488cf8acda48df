//! Opening a trace for a streamed run, with the CLI's rules.
//!
//! This is the glue `crates/hearth/src/{trace_args,streamed}.rs` holds for the
//! command line (synthetic workloads, format detection, the mode, the first
//! pass when one is needed). It lives in the CLI crate, so it is restated here
//! over public library APIs only; it belongs in `hearth-sim` (see the
//! package's README), after which both front ends would call it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hearth_core::Access;
use hearth_sim::scan::{scan, with_next_access, Scan};
use hearth_trace::oltp::{Oltp, OltpConfig};
use hearth_trace::synth::{Pattern, Synth};
use hearth_trace::{Format, Mode, Request, TraceError};

/// Why a call failed: a trace problem (file and place in it) or a bad
/// argument. Converted to a Python exception once the GIL is held again.
#[derive(Debug)]
pub enum Failure {
    Trace(TraceError),
    Arg(String),
}

impl From<TraceError> for Failure {
    fn from(e: TraceError) -> Self {
        Failure::Trace(e)
    }
}

impl From<hearth_sim::stream::StreamError> for Failure {
    fn from(e: hearth_sim::stream::StreamError) -> Self {
        match e {
            hearth_sim::stream::StreamError::Trace(t) => Failure::Trace(t),
            hearth_sim::stream::StreamError::Policy(m) => Failure::Arg(m),
        }
    }
}

pub fn arg(msg: impl Into<String>) -> Failure {
    Failure::Arg(msg.into())
}

/// Block or object caching, as `--mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    Block,
    Object,
}

/// A trace and how to read it (the CLI's `TraceArgs`).
#[derive(Clone, Debug)]
pub struct TraceSpec {
    pub trace: PathBuf,
    pub format: Option<Format>,
    pub mode: Option<ModeArg>,
    pub block_size: u64,
    pub requests: usize,
    pub seed: u64,
    /// Set to end every pass over the trace early (Ctrl-C in Python).
    pub cancel: Arc<AtomicBool>,
}

pub type Requests = Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>;
pub type AccessStream<'a> = Box<dyn Iterator<Item = Result<Access, TraceError>> + Send + 'a>;

impl TraceSpec {
    fn synth(&self) -> Option<&str> {
        self.trace.to_str().and_then(|s| s.strip_prefix("synth:"))
    }

    /// The file's format, as given or as its name tells.
    pub fn format(&self) -> Option<Format> {
        if self.synth().is_some() {
            return None;
        }
        self.format.or_else(|| Format::detect(&self.trace))
    }

    /// Opens the trace or generator and picks the mode; the requests stop
    /// early once `cancel` is set.
    pub fn open(&self) -> Result<(Requests, Mode), Failure> {
        let (requests, mode) = self.open_uncancelled()?;
        let cancel = Arc::clone(&self.cancel);
        Ok((Box::new(requests.take_while(move |_| !cancel.load(Ordering::Relaxed))), mode))
    }

    fn open_uncancelled(&self) -> Result<(Requests, Mode), Failure> {
        let block_size = u32::try_from(self.block_size)
            .ok()
            .filter(|&b| b > 0)
            .ok_or_else(|| arg("block_size must be between 1 B and 4 GiB"))?;
        if let Some(spec) = self.synth() {
            if self.mode == Some(ModeArg::Object) {
                return Err(arg("synthetic workloads are block traces; drop mode='object'"));
            }
            let n = self.requests;
            let requests: Requests = if spec == "oltp" {
                let cfg = OltpConfig { seed: self.seed, ..OltpConfig::default() };
                Box::new(Oltp::new(cfg).map_err(Failure::Arg)?.take(n).map(Ok))
            } else {
                let pattern: Pattern = spec.parse().map_err(Failure::Arg)?;
                let synth = Synth::new(pattern, self.seed).map_err(Failure::Arg)?.block_size(block_size);
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
                return Err(arg(format!(
                    "{} is an object trace ({format}): its ids are not byte offsets, so use mode='object'",
                    self.trace.display()
                )))
            }
            Some(ModeArg::Block) => Mode::Block { block_size },
        };
        Ok((Box::new(reader), mode))
    }

    /// oracleGeneral traces carry each request's next use; in object mode
    /// that is each access's.
    fn records_next_access(&self, mode: Mode) -> bool {
        mode == Mode::Object && self.format() == Some(Format::OracleGeneral)
    }
}

/// A trace ready to be streamed, after its first pass if one was needed.
pub struct Streamed<'a> {
    spec: &'a TraceSpec,
    pub mode: Mode,
    pub scan: Option<Scan>,
}

impl<'a> Streamed<'a> {
    /// Opens `spec`; runs the first pass when `totals` (footprint, access
    /// count) are needed or when `next_access` is and the trace lacks it.
    pub fn open(spec: &'a TraceSpec, totals: bool, next_access: bool) -> Result<Streamed<'a>, Failure> {
        let (requests, mode) = spec.open()?;
        let build_next = next_access && !spec.records_next_access(mode);
        if !totals && !build_next {
            return Ok(Streamed { spec, mode, scan: None });
        }
        let dir = std::env::temp_dir();
        let s = scan(hearth_trace::accesses(requests, mode), build_next.then_some(dir.as_path()), &|_| {})?;
        Ok(Streamed { spec, mode, scan: Some(s) })
    }

    /// A fresh pass over the accesses, with next uses when the first pass
    /// built them.
    pub fn accesses(&self) -> Result<AccessStream<'_>, Failure> {
        let (requests, _) = self.spec.open()?;
        let accesses = hearth_trace::accesses(requests, self.mode);
        Ok(match self.scan.as_ref().and_then(|s| s.next_access.as_ref()) {
            Some(column) => Box::new(with_next_access(accesses, column)?),
            None => Box::new(accesses),
        })
    }

    pub fn records_next_access(&self) -> bool {
        self.spec.records_next_access(self.mode) || self.scan.as_ref().is_some_and(|s| s.next_access.is_some())
    }

    pub fn block_size(&self) -> Option<u32> {
        match self.mode {
            Mode::Block { block_size } => Some(block_size),
            Mode::Object => None,
        }
    }

    pub fn footprint_bytes(&self) -> u64 {
        self.scan.as_ref().map_or(0, |s| s.footprint_bytes)
    }

    pub fn path(&self) -> &Path {
        &self.spec.trace
    }
}

/// `warmup`: a number of accesses or a share of the trace's (`"10%"`).
#[derive(Clone, Copy, Debug)]
pub enum Warmup {
    Accesses(u64),
    Share(f64),
}

impl Warmup {
    pub fn parse(s: &str) -> Result<Warmup, String> {
        if let Some(p) = s.strip_suffix('%') {
            let pct: f64 = p.trim().parse().map_err(|_| format!("warmup: bad percentage {s:?}"))?;
            if !(0.0..100.0).contains(&pct) {
                return Err(format!("warmup: warm-up share {s:?} must be in [0%, 100%)"));
            }
            return Ok(Warmup::Share(pct / 100.0));
        }
        s.trim()
            .parse()
            .map(Warmup::Accesses)
            .map_err(|_| format!("warmup: {s:?} is neither a count of requests nor a share like 10%"))
    }

    pub fn accesses(self, total: u64) -> u64 {
        match self {
            Warmup::Accesses(n) => n,
            Warmup::Share(f) => (total as f64 * f).round() as u64,
        }
    }
}

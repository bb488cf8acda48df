//! Opening a trace for streamed simulation: the first pass when one is
//! needed (footprint, next uses for OPT), then as many fresh passes as the
//! caller wants (a file is read again, a generator re-run from its seed).

use hearth_core::Access;
use hearth_sim::scan::{scan, with_next_access, Scan};
use hearth_trace::{Format, Mode, TraceError};

use crate::progress;
use crate::trace_args::TraceArgs;

/// Accesses of one pass over a trace.
pub type AccessStream<'a> = Box<dyn Iterator<Item = Result<Access, TraceError>> + Send + 'a>;

/// A trace ready to be streamed.
pub struct Streamed<'a> {
    args: &'a TraceArgs,
    pub mode: Mode,
    /// The first pass, if one was needed.
    pub scan: Option<Scan>,
}

/// What the caller needs before its pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    /// The footprint or the access count (sizes or warm-up as shares).
    pub totals: bool,
    /// Each access's next use (offline policies).
    pub next_access: bool,
}

impl<'a> Streamed<'a> {
    /// Opens the trace and runs the first pass if `needs` asks for anything
    /// the trace does not record itself.
    pub fn open(args: &'a TraceArgs, needs: Needs, quiet: bool) -> anyhow::Result<Streamed<'a>> {
        let (requests, mode) = args.open()?;
        let build_next = needs.next_access && !records_next_access(args, mode);
        if !needs.totals && !build_next {
            return Ok(Streamed { args, mode, scan: None });
        }
        let bar = progress::counter(if build_next { "reading (next uses for OPT)" } else { "reading" }, quiet);
        let dir = std::env::temp_dir();
        let accesses = hearth_trace::accesses(requests, mode);
        let scan = scan(accesses, build_next.then_some(dir.as_path()), &|n| bar.inc(n))?;
        bar.finish_and_clear();
        Ok(Streamed { args, mode, scan: Some(scan) })
    }

    /// A fresh pass over the trace's accesses, with next uses filled when
    /// the first pass built them.
    pub fn accesses(&self) -> anyhow::Result<AccessStream<'_>> {
        let (requests, _) = self.args.open()?;
        let accesses = hearth_trace::accesses(requests, self.mode);
        Ok(match self.scan.as_ref().and_then(|s| s.next_access.as_ref()) {
            Some(column) => Box::new(with_next_access(accesses, column)?),
            None => Box::new(accesses),
        })
    }

    /// Whether every access of a pass carries its next use (from the trace
    /// or the first pass's column).
    pub fn records_next_access(&self) -> bool {
        records_next_access(self.args, self.mode) || self.scan.as_ref().is_some_and(|s| s.next_access.is_some())
    }

    pub fn block_size(&self) -> Option<u32> {
        match self.mode {
            Mode::Block { block_size } => Some(block_size),
            Mode::Object => None,
        }
    }

    /// The footprint, which the first pass measured (callers ask for it
    /// through [`Needs::totals`]).
    pub fn footprint_bytes(&self) -> u64 {
        self.scan.as_ref().map_or(0, |s| s.footprint_bytes)
    }
}

/// oracleGeneral traces carry each request's next use; in object mode that
/// is each access's.
fn records_next_access(args: &TraceArgs, mode: Mode) -> bool {
    mode == Mode::Object && args.format() == Some(Format::OracleGeneral)
}

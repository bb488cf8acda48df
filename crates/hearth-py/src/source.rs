//! Traces from Python: the package's spelling of `hearth_sim::source`, which
//! opens a trace (a file or a `synth:` workload, its format and mode, the
//! first pass when one is needed) with the command line's rules. Nothing of
//! that is restated here; this only turns keyword arguments into a
//! `TraceSource` whose passes stop on Ctrl-C.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use hearth_sim::source::{ModeChoice, OptionNames};
use hearth_sim::{SourceError, TraceInput, TraceSource};
use hearth_trace::Format;

/// Why a call failed: what the libraries refused (a trace problem names its
/// file and the place in it), or a keyword argument, named in the text.
/// Converted to a Python exception once the GIL is held again.
#[derive(Debug)]
pub enum Failure {
    Source(SourceError),
    Argument(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Source(e) => e.fmt(f),
            Failure::Argument(m) => f.write_str(m),
        }
    }
}

/// Each error the libraries return, through the one they all convert to.
macro_rules! from_library {
    ($($error:ty),*) => {$(
        impl From<$error> for Failure {
            fn from(e: $error) -> Self {
                Failure::Source(e.into())
            }
        }
    )*};
}
from_library!(
    SourceError,
    hearth_trace::TraceError,
    hearth_trace::SettingError,
    hearth_policy::SpecError,
    hearth_sim::SettingError,
    hearth_sim::stream::StreamError
);

/// How errors name the keyword arguments.
pub const OPTION_NAMES: OptionNames = OptionNames { block_size: "block_size", object_mode: "mode='object'", ignore_obj_size: "ignore_obj_size" };

pub fn arg(msg: impl Into<String>) -> Failure {
    Failure::Argument(msg.into())
}

/// A trace and how to read it, from `sim`'s, `mrc`'s and `analyze`'s
/// keyword arguments, with a cancel flag set by Ctrl-C.
pub fn trace_source(
    trace: &str,
    format: Option<&str>,
    mode: Option<&str>,
    block_size: &str,
    requests: usize,
    seed: u64,
) -> Result<TraceSource, Failure> {
    let format = format.map(str::parse::<Format>).transpose()?;
    let mode = mode.map(str::parse::<ModeChoice>).transpose()?;
    let block_size = hearth_core::parse_bytes(block_size).map_err(|m| arg(format!("block_size: {m}")))?;
    Ok(TraceSource {
        trace: TraceInput::from(trace),
        format,
        columns: None,
        ignore_obj_size: false,
        mode,
        block_size,
        requests,
        seed,
        cancel: Some(Arc::new(AtomicBool::new(false))),
        names: OPTION_NAMES,
    })
}

/// The flag that ends a source's passes (every source made here has one).
pub fn cancel_flag(source: &TraceSource) -> &AtomicBool {
    source.cancel.as_deref().expect("trace_source sets a cancel flag")
}

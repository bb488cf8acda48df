//! The one error type every reader and writer returns.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Where in a file a problem was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The file as a whole (cannot open it, cannot tell its format, ...).
    File,
    /// A 1-based line of a text trace.
    Line(u64),
    /// A byte offset into a binary trace (after decompression).
    Byte(u64),
    /// A byte offset into the compressed file, where decompression failed:
    /// no line or record there was read.
    Compressed(u64),
}

/// A trace problem, naming the file, the place in it and what is wrong.
///
/// Displays as `<file>:<line>: <what>` for text formats,
/// `<file>: byte <offset>: <what>` for binary ones and
/// `<file>: compressed byte <offset>: <what>` when decompression fails.
///
/// Boxed so that `Result<Request, TraceError>`, returned once per record on
/// the hot path, stays small.
#[derive(Debug)]
pub struct TraceError(Box<Details>);

#[derive(Debug)]
struct Details {
    file: PathBuf,
    place: Place,
    what: String,
    io: Option<io::Error>,
}

impl TraceError {
    pub(crate) fn new(file: &Path, place: Place, what: impl Into<String>) -> Self {
        TraceError(Box::new(Details { file: file.to_path_buf(), place, what: what.into(), io: None }))
    }

    pub(crate) fn io(file: &Path, place: Place, doing: &str, err: io::Error) -> Self {
        let what = format!("{doing}: {err}");
        TraceError(Box::new(Details { file: file.to_path_buf(), place, what, io: Some(err) }))
    }

    /// A failed read at `place`, or, when decompression failed, at the
    /// offset in the compressed file that the decoder reports.
    pub(crate) fn read(file: &Path, place: Place, err: io::Error) -> Self {
        let compressed = err.get_ref().and_then(|e| e.downcast_ref::<CompressedAt>()).map(|c| c.offset);
        TraceError::io(file, compressed.map_or(place, Place::Compressed), "read error", err)
    }

    pub fn file(&self) -> &Path {
        &self.0.file
    }

    pub fn place(&self) -> Place {
        self.0.place
    }

    /// The 1-based line, for errors in text traces.
    pub fn line(&self) -> Option<u64> {
        match self.0.place {
            Place::Line(n) => Some(n),
            _ => None,
        }
    }

    /// The byte offset, for errors in binary traces and in compressed data.
    pub fn byte_offset(&self) -> Option<u64> {
        match self.0.place {
            Place::Byte(n) | Place::Compressed(n) => Some(n),
            _ => None,
        }
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.0.what
    }

    /// The I/O error behind this one, if an I/O call failed (for its kind or errno).
    pub fn io_error(&self) -> Option<&io::Error> {
        self.0.io.as_ref()
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.0.file.display();
        match self.0.place {
            Place::File => write!(f, "{file}: {}", self.0.what),
            Place::Line(n) => write!(f, "{file}:{n}: {}", self.0.what),
            Place::Byte(n) => write!(f, "{file}: byte {n}: {}", self.0.what),
            Place::Compressed(n) => write!(f, "{file}: compressed byte {n}: {}", self.0.what),
        }
    }
}

/// No `source()`: the message already ends with the I/O error's text, and
/// a chain printer (anyhow's `{:#}`) would repeat it. [`TraceError::io_error`]
/// gives the error itself.
impl std::error::Error for TraceError {}

/// A setting that cannot be used: a trace format's name, a synthetic
/// pattern (`zipf:0:0.9`), a workload or OLTP model, a sampling rate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("unknown trace format {name:?}; known formats: {known}")]
    UnknownFormat { name: String, known: String },
    #[error("unknown workload {name:?} (known: tpcw, rubis, dbt2, docstore, fileserver, lsm, mailstore, graph)")]
    UnknownWorkload { name: String },
    #[error("a workload needs at least one client")]
    NoClients,
    /// A pattern spelled wrong: `problem` says how, with the usage.
    #[error("{spec:?}: {problem}")]
    Pattern { spec: String, problem: String },
    #[error("{kind} needs at least one block")]
    NoBlocks { kind: &'static str },
    #[error("a mix needs at least one part")]
    EmptyMix,
    #[error("mix weights must be positive, got {weight}")]
    MixWeight { weight: f64 },
    #[error("invalid OLTP configuration: {config}")]
    Oltp { config: String },
    #[error("not a sampling rate: {input:?}; give a fraction (0.01) or a percentage (1%)")]
    NotASamplingRate { input: String },
    #[error("sampling rate {input:?} is not above 0 and at most 1 (100%)")]
    SamplingRate { input: String },
    /// A column specification of a CSV or binary trace.
    #[error("column specification {spec:?}: {problem}")]
    Columns { spec: String, problem: String },
    /// A random distribution refused its parameters.
    #[error("{distribution}: {reason}")]
    Distribution { distribution: &'static str, reason: String },
}

/// A context-trace event that breaks the format's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtxOrderError {
    #[error("time {time} goes back before {last}")]
    TimeGoesBack { time: u64, last: u64 },
    #[error("context {ctx} begins again before it ended")]
    BeginsAgain { ctx: u64 },
    #[error("I/O for context {ctx}, which is not open (no B line)")]
    NotOpen { ctx: u64 },
    #[error("end of context {ctx}, which is not open")]
    EndNotOpen { ctx: u64 },
}

/// A decompression failure and the compressed byte where it happened,
/// carried inside an `io::Error` through the buffered readers above the
/// decoder, so that the error names that place rather than a line or record
/// (a decoder may hold back everything it decoded until the frame ends).
#[derive(Debug)]
pub(crate) struct CompressedAt {
    pub(crate) offset: u64,
    pub(crate) what: &'static str,
}

impl fmt::Display for CompressedAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)
    }
}

impl std::error::Error for CompressedAt {}

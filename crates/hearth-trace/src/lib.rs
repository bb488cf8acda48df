//! Block and object I/O traces for Hearth: streaming, constant-memory readers
//! for the common trace formats (plain, `.gz` or `.zst`), the step that turns
//! requests into cache [`Access`](hearth_core::Access)es (from hearth-core,
//! with the [`Request`] record, re-exported here), writers, and synthetic
//! generators.
//!
//! ```no_run
//! use hearth_trace::{accesses, open, Mode};
//! # fn main() -> Result<(), hearth_trace::TraceError> {
//! let reader = open("trace.vscsi".as_ref(), None)?;
//! for access in accesses(reader, Mode::Block { block_size: 4096 }) {
//!     let access = access?;
//!     // feed a policy ...
//! }
//! # Ok(()) }
//! ```
//!
//! Object traces ([`Format::is_object_trace`]: oracleGeneral, text, lcs,
//! twr, valpin, and CSV or binary traces read through [`Columns`]) name
//! objects rather than byte ranges; read them with [`Mode::Object`]
//! ([`Format::mode`] picks the mode).
//!
//! Every reader stops at the first error, which names the file and the line
//! (text formats) or byte offset (binary formats) and the offending field.

pub mod buffered;
mod candidates;
mod columns;
pub mod ctx;
mod error;
mod input;
pub mod next_access;
pub mod oltp;
mod readers;
pub mod sample;
pub mod synth;
pub mod workload;
mod write;

use std::fmt;
use std::path::Path;
use std::str::FromStr;

pub use columns::{Columns, Layout};
pub use error::{CtxOrderError, Place, SettingError, TraceError};
pub use hearth_core::fill_next_access;
pub use next_access::{NextAccessFile, NextAccessReader};
// The record types and the request-to-access step are sans-I/O and live in
// hearth-core; re-exported where this crate always had them.
pub use hearth_core::{Accesses, Mode, Request};
pub use write::{write_oracle_general, write_text};

use input::{compression_of, open_input, Lines};

/// [`hearth_core::accesses`] with the readers' error: requests from a
/// generator (`gen.map(Ok)`) then need no annotation of their error type.
pub fn accesses<I: Iterator<Item = Result<Request, TraceError>>>(reqs: I, mode: Mode) -> Accesses<I> {
    hearth_core::accesses(reqs, mode)
}

/// A trace format. How each maps to [`Request`] fields:
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// MSR Cambridge / SNIA CSV (`msr`):
    /// `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    /// time = filetime ticks x 100 ns; client = (host, disk) numbered from 0
    /// in order of first appearance; offset/len in bytes.
    MsrCsv,
    /// blkparse default text output (`blkparse`): `Q` events become
    /// requests (see [`open_blkparse`] for another action); sectors of 512
    /// bytes; client = pid.
    Blkparse,
    /// VMware/CloudPhysics vscsi binary, record versions 1 (32 bytes) and 2
    /// (40 bytes), detected like libCacheSim does (`vscsi`). Microsecond
    /// timestamps; lbn in 512-byte sectors; op from the SCSI opcode; client 0.
    Vscsi,
    /// UMass SPC CSV `ASU,LBA,Size,Opcode,Timestamp` (`spc`): LBA in 512-byte
    /// sectors, seconds; client = ASU.
    Spc,
    /// libCacheSim oracleGeneral binary object trace (`oracle`): offset = object
    /// id, len = object size, seconds, `next_access` converted to 0-based.
    OracleGeneral,
    /// One object id per line (`text`): offset = id, len = 1, time 0.
    Text,
    /// CloudPhysics CSV `version,time,op,size,lbn` (`cpcsv`): seconds, op a
    /// hex SCSI opcode, lbn in 512-byte sectors; client 0.
    CloudPhysicsCsv,
    /// libCacheSim's `lcs` object trace, record versions 1 to 8 (`lcs`):
    /// offset = object id, len = size, seconds, op, client = tenant,
    /// `next_access` as oracleGeneral's.
    Lcs,
    /// Twitter's cache trace as libCacheSim stores it (`twr`): offset = object
    /// id, len = key size + value size, seconds, op; client 0.
    Twr,
    /// `twr` with a namespace per request, the client (`twrns`).
    TwrNs,
    /// libCacheSim's `valpin`: object ids only, size 1 (`valpin`).
    Valpin,
    /// A CSV object trace read through a column specification ([`Columns`],
    /// `csv`); see [`open_with`].
    Csv,
    /// A binary object trace read through a column specification with a
    /// record layout ([`Columns::layout`], `binary`); see [`open_with`].
    Binary,
}

impl Format {
    pub const ALL: [Format; 13] = [
        Format::MsrCsv,
        Format::Blkparse,
        Format::Vscsi,
        Format::Spc,
        Format::OracleGeneral,
        Format::Text,
        Format::CloudPhysicsCsv,
        Format::Lcs,
        Format::Twr,
        Format::TwrNs,
        Format::Valpin,
        Format::Csv,
        Format::Binary,
    ];

    /// The short name used on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Format::MsrCsv => "msr",
            Format::Blkparse => "blkparse",
            Format::Vscsi => "vscsi",
            Format::Spc => "spc",
            Format::OracleGeneral => "oracle",
            Format::Text => "text",
            Format::CloudPhysicsCsv => "cpcsv",
            Format::Lcs => "lcs",
            Format::Twr => "twr",
            Format::TwrNs => "twrns",
            Format::Valpin => "valpin",
            Format::Csv => "csv",
            Format::Binary => "binary",
        }
    }

    /// The format a file name implies, after stripping `.gz`/`.zst`:
    /// `.vscsi`, `.spc`, `.blkparse`, `.txt`, `.oracleGeneral[.bin]`, `.lcs`,
    /// `.twr`, `.twrNS`, `.valpin`. `.csv` is
    /// `None` because three formats use it ([`open`] looks inside instead).
    /// Only the name is examined.
    pub fn detect(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let name = compression_of(&name).1;
        let name = name.strip_suffix(".bin").unwrap_or(name);
        let extension = name.rsplit_once('.').map(|(_, ext)| ext)?;
        match extension {
            "vscsi" => Some(Format::Vscsi),
            "spc" => Some(Format::Spc),
            "blkparse" => Some(Format::Blkparse),
            "txt" => Some(Format::Text),
            "oraclegeneral" => Some(Format::OracleGeneral),
            "lcs" => Some(Format::Lcs),
            "twr" => Some(Format::Twr),
            "twrns" => Some(Format::TwrNs),
            "valpin" => Some(Format::Valpin),
            _ => None,
        }
    }

    /// Whether requests name objects (id and size) rather than byte ranges.
    pub fn is_object_trace(self) -> bool {
        !matches!(self, Format::MsrCsv | Format::Blkparse | Format::Vscsi | Format::Spc | Format::CloudPhysicsCsv)
    }

    /// The natural mode for this format: [`Mode::Object`] for object traces,
    /// blocks of `block_size` bytes otherwise.
    pub fn mode(self, block_size: u32) -> Mode {
        if self.is_object_trace() {
            Mode::Object
        } else {
            Mode::Block { block_size }
        }
    }

    /// Whether every request's size is 1 (the format records none), so that
    /// bytes and objects count alike.
    pub fn is_unit_sized(self) -> bool {
        matches!(self, Format::Text | Format::Valpin)
    }

    /// Whether each request records the index of the next request for the
    /// same object ([`Request::next_access`]).
    pub fn records_next_access(self) -> bool {
        matches!(self, Format::OracleGeneral | Format::Lcs)
    }

    /// Recognises a CSV format from its first non-empty line.
    fn sniff_csv(first_line: &str) -> Option<Format> {
        if first_line.starts_with("version,time,op,size,lbn") {
            return Some(Format::CloudPhysicsCsv);
        }
        if first_line.starts_with("Timestamp,Hostname") {
            return Some(Format::MsrCsv);
        }
        let fields: Vec<&str> = first_line.split(',').map(str::trim).collect();
        let numeric = |i: usize| fields.get(i).is_some_and(|f| !f.is_empty() && f.parse::<f64>().is_ok());
        let op_is = |names: &[&str]| fields.get(3).is_some_and(|f| names.iter().any(|n| f.eq_ignore_ascii_case(n)));
        if fields.len() >= 6 && numeric(0) && op_is(&["read", "write"]) {
            Some(Format::MsrCsv)
        } else if fields.len() >= 5 && numeric(0) && numeric(1) && op_is(&["r", "w"]) {
            Some(Format::Spc)
        } else {
            None
        }
    }
}

fn format_names() -> String {
    Format::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = SettingError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        let alias = match lower.as_str() {
            // libCacheSim's `cachesim` names too.
            "oraclegeneral" | "oraclegeneralbin" => "oracle",
            "valpintrace" => "valpin",
            "txt" => "text",
            "cloudphysics" => "cpcsv",
            "bin" => "binary",
            other => other,
        };
        Format::ALL
            .into_iter()
            .find(|f| f.name() == alias)
            .ok_or_else(|| SettingError::UnknownFormat { name: s.to_string(), known: format_names() })
    }
}

/// A trace being read: an iterator of requests that stops after the first
/// error.
pub struct TraceReader {
    format: Format,
    inner: Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>,
    failed: bool,
}

impl TraceReader {
    pub fn format(&self) -> Format {
        self.format
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.inner.next();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

/// Opens a trace for streaming. Without `format`, the format comes from the
/// file name ([`Format::detect`]) or, for `.csv`, from the first line; if
/// neither tells, the error lists the formats to choose from.
pub fn open(path: &Path, format: Option<Format>) -> Result<TraceReader, TraceError> {
    open_with(path, format, None)
}

/// [`open`], with a column specification for a [`Format::Csv`] or
/// [`Format::Binary`] trace. Given columns without a format, the trace is
/// binary when they have a layout (`format=`), CSV otherwise.
pub fn open_with(path: &Path, format: Option<Format>, columns: Option<&Columns>) -> Result<TraceReader, TraceError> {
    // Opened first: a missing file is said to be missing, whatever its name.
    let input = open_input(path)?;
    let by_columns = columns.map(|c| if c.layout.is_some() { Format::Binary } else { Format::Csv });
    let format = match format.or(by_columns).or_else(|| Format::detect(path)) {
        Some(format) => format,
        None => sniff(path)?,
    };
    let refuse = |what: String| Err(TraceError::new(path, error::Place::File, what));
    let columns = match (format, columns) {
        (Format::Csv | Format::Binary, None) => {
            return refuse(format!(
                "a {format} trace needs a column specification, e.g. \"obj-id-col=2, obj-size-col=3{}\"",
                if format == Format::Binary { ", format=<IQI" } else { "" }
            ))
        }
        (Format::Binary, Some(c)) if c.layout.is_none() => {
            return refuse("a binary trace's column specification needs its record layout (format=<IQI...)".into())
        }
        (Format::Csv | Format::Binary, Some(c)) => Some(c),
        (_, Some(_)) => return refuse(format!("a column specification is for csv and binary traces, not {format}")),
        (_, None) => None,
    };
    let inner: Box<dyn Iterator<Item = Result<Request, TraceError>> + Send> = match format {
        Format::MsrCsv => Box::new(readers::msr::MsrReader::new(Lines::new(path, input))),
        Format::Blkparse => {
            Box::new(readers::blkparse::BlkparseReader::new(Lines::new(path, input), readers::blkparse::DEFAULT_ACTION))
        }
        Format::Spc => Box::new(readers::spc::SpcReader::new(Lines::new(path, input))),
        Format::Text => Box::new(readers::text::TextReader::new(Lines::new(path, input))),
        Format::CloudPhysicsCsv => Box::new(readers::cpcsv::CpCsvReader::new(Lines::new(path, input))),
        Format::Vscsi => Box::new(readers::vscsi::VscsiReader::new(path, input)?),
        Format::OracleGeneral => Box::new(readers::oracle::OracleReader::new(path, input)),
        Format::Lcs => Box::new(readers::lcs::LcsReader::new(path, input)?),
        Format::Twr => Box::new(readers::twr::TwrReader::new(path, input, false)),
        Format::TwrNs => Box::new(readers::twr::TwrReader::new(path, input, true)),
        Format::Valpin => Box::new(readers::valpin::ValpinReader::new(path, input)),
        Format::Csv => Box::new(readers::columns_csv::ColumnCsvReader::new(path, input, columns.expect("checked"))),
        Format::Binary => Box::new(readers::binary::BinaryReader::new(path, input, columns.expect("checked"))),
    };
    Ok(TraceReader { format, inner, failed: false })
}

/// Opens a blkparse trace keeping the events of `action` (one of
/// `QGIDCMFAX`) instead of the default `Q`; see [`Format::Blkparse`].
pub fn open_blkparse(path: &Path, action: char) -> Result<TraceReader, TraceError> {
    let actions = readers::blkparse::IO_ACTIONS;
    if !actions.contains(action) {
        let what = format!("blkparse action {action:?} carries no sector range; use one of {actions}");
        return Err(TraceError::new(path, error::Place::File, what));
    }
    let lines = Lines::new(path, open_input(path)?);
    Ok(TraceReader {
        format: Format::Blkparse,
        inner: Box::new(readers::blkparse::BlkparseReader::new(lines, action)),
        failed: false,
    })
}

/// Tells the format of a `.csv` file from its first non-empty line.
fn sniff(path: &Path) -> Result<Format, TraceError> {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let unknown = |why: &str| {
        TraceError::new(
            path,
            error::Place::File,
            format!("cannot tell the trace format: {why}; name one of: {}", format_names()),
        )
    };
    if !compression_of(&name).1.to_ascii_lowercase().ends_with(".csv") {
        return Err(unknown("unknown file extension"));
    }
    let mut lines = Lines::new(path, open_input(path)?);
    while let Some(line) = lines.next_line()? {
        if !line.text.trim().is_empty() {
            return Format::sniff_csv(line.text)
                .ok_or_else(|| unknown("the first line of this .csv matches none of msr, spc, cpcsv"));
        }
    }
    Err(unknown("the .csv file is empty"))
}

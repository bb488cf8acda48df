//! CSV traces of any layout, read through a column specification
//! ([`Columns`]): the object id, and optionally time (decimal seconds), size
//! (bytes), op (`read`/`get`/`gets`, `write`/`set`/`add`/`replace`/`update`,
//! `delete`, or libCacheSim's operation code) and tenant (the client), each
//! from its column. Quoted fields are read as CSV quotes them (with the
//! `csv` crate, as libCacheSim reads them with libcsv).
//!
//! An id is a number (decimal, or hexadecimal after `0x`) or, when it does
//! not read as one (or `obj-id-is-num=false`), a 64-bit hash of its text:
//! the same key is always the same object. Without a size column every
//! object has size 1. Without `has-header`, the first line is taken for a
//! header when it has no more digits than letters, as libCacheSim guesses.

use std::hash::BuildHasher;
use std::path::{Path, PathBuf};

use hearth_core::Op;

use crate::columns::{Columns, Field};
use crate::error::{Place, TraceError};
use crate::input::{parse_seconds_ns, Input};
use crate::readers::cache_op;
use crate::Request;

pub(crate) struct ColumnCsvReader {
    path: PathBuf,
    reader: csv::Reader<Input>,
    record: csv::ByteRecord,
    columns: Columns,
    /// The first line is still to be read (perhaps a header).
    first: bool,
}

impl ColumnCsvReader {
    pub(crate) fn new(path: &Path, input: Input, columns: &Columns) -> Self {
        let reader =
            csv::ReaderBuilder::new().has_headers(false).flexible(true).delimiter(columns.delimiter).from_reader(input);
        ColumnCsvReader {
            path: path.to_path_buf(),
            reader,
            record: csv::ByteRecord::new(),
            columns: columns.clone(),
            first: true,
        }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            match self.reader.read_byte_record(&mut self.record) {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) => return Err(self.csv_error(e)),
            }
            if std::mem::take(&mut self.first) && self.columns.header.unwrap_or_else(|| looks_like_header(&self.record))
            {
                continue;
            }
            if self.record.len() == 1 && self.record[0].trim_ascii().is_empty() {
                continue;
            }
            return self.parse().map(Some);
        }
    }

    fn line(&self) -> u64 {
        self.record.position().map_or(0, |p| p.line())
    }

    fn csv_error(&self, e: csv::Error) -> TraceError {
        let line = e.position().map_or(self.line() + 1, |p| p.line());
        if !e.is_io_error() {
            return TraceError::new(&self.path, Place::Line(line), e.to_string());
        }
        match e.into_kind() {
            csv::ErrorKind::Io(io) => TraceError::read(&self.path, Place::Line(line), io),
            _ => unreachable!("checked to be an I/O error"),
        }
    }

    fn parse(&self) -> Result<Request, TraceError> {
        let c = &self.columns;
        let id = self.field(Field::Id, c.id, |text| match (c.id_is_num, parse_id(text)) {
            (Some(false), _) | (None, None) => Ok(rustc_hash::FxBuildHasher.hash_one(text)),
            (_, Some(id)) => Ok(id),
            (Some(true), None) => Err("expected a number (obj-id-is-num=true)".into()),
        })?;
        let time_ns = c.time.map_or(Ok(0), |col| self.field(Field::Time, col, parse_seconds_ns))?;
        let len = c
            .size
            .map_or(Ok(1), |col| self.field(Field::Size, col, |t| t.parse::<u32>().map_err(|e| e.to_string())))?;
        let op = c.op.map_or(Ok(Op::Read), |col| self.field(Field::Op, col, parse_op))?;
        let client = c
            .client
            .map_or(Ok(0), |col| self.field(Field::Client, col, |t| t.parse::<u32>().map_err(|e| e.to_string())))?;
        Ok(Request { time_ns, client, op, offset: id, len, next_access: None })
    }

    /// Column `column` of the line, parsed by `parse`; an error names the
    /// line, the column and the field.
    fn field<T>(
        &self,
        field: Field,
        column: usize,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, TraceError> {
        let at = |what: String| TraceError::new(&self.path, Place::Line(self.line()), what);
        let Some(raw) = self.record.get(column - 1) else {
            let n = self.record.len();
            return Err(at(format!("the line has {n} fields; {}={column} is past them", field.key())));
        };
        let text = std::str::from_utf8(raw)
            .map_err(|_| at(format!("field {column} ({}) is not UTF-8 text", field.key())))?
            .trim();
        parse(text).map_err(|why| at(format!("bad field {column} ({}) {text:?}: {why}", field.key())))
    }
}

/// libCacheSim's guess: a first line with no more digits than letters is a header.
fn looks_like_header(record: &csv::ByteRecord) -> bool {
    let bytes = || record.iter().flatten();
    bytes().filter(|b| b.is_ascii_digit()).count() <= bytes().filter(|b| b.is_ascii_alphabetic()).count()
}

/// A numeric id: decimal, or hexadecimal after `0x`.
fn parse_id(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn parse_op(text: &str) -> Result<Op, String> {
    if let Ok(code) = text.parse::<u32>() {
        return Ok(cache_op(code));
    }
    match text.to_ascii_lowercase().as_str() {
        "read" | "get" | "gets" => Ok(Op::Read),
        "write" | "set" | "add" | "replace" | "update" | "cas" | "append" | "prepend" | "incr" | "decr" => {
            Ok(Op::Write)
        }
        "delete" => Ok(Op::Other),
        _ => {
            Err("expected read, get, write, set, delete (or another libCacheSim operation) or an operation code".into())
        }
    }
}

impl Iterator for ColumnCsvReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

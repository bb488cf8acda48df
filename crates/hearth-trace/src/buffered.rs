//! Storage-level block traces that carry the client buffer address of each
//! request: what a storage server sees below a client's buffer cache, and
//! what eviction-based placement needs (the client content tracking table
//! learns evictions from reused buffer addresses).
//!
//! Text, one block access per line, with a header line:
//!
//! ```text
//! client,op,block,buffer
//! 0,R,1234,0x7f0000
//! 0,W,77,
//! ```
//!
//! `op` is `R` or `W`; `buffer` is a decimal or `0x` hexadecimal address,
//! or empty when unknown. `hearth sim --client-cache ... --export-storage-trace`
//! writes this format from any single-level trace.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use hearth_core::Op;

use crate::error::{Place, TraceError};
use crate::input::{open_input, CsvFields, Lines};

const HEADER: &str = "client,op,block,buffer";
const COLUMNS: &[&str] = &["client", "op", "block", "buffer"];

/// One block access as the storage server sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferedAccess {
    pub client: u32,
    pub op: Op,
    pub block: u64,
    /// The client buffer the data moves into or out of.
    pub buffer: Option<u64>,
}

/// Streams a buffered trace (plain, `.gz` or `.zst`).
pub struct BufferedReader {
    lines: Lines,
    failed: bool,
}

pub fn open(path: &Path) -> Result<BufferedReader, TraceError> {
    Ok(BufferedReader { lines: Lines::new(path, open_input(path)?), failed: false })
}

/// Whether a file's first line is this format's header.
pub fn is_buffered_trace(path: &Path) -> bool {
    let Ok(mut r) = open(path) else { return false };
    matches!(r.lines.next_line(), Ok(Some(line)) if line.text.trim() == HEADER)
}

impl BufferedReader {
    fn read(&mut self) -> Result<Option<BufferedAccess>, TraceError> {
        loop {
            let Some(line) = self.lines.next_line()? else { return Ok(None) };
            let text = line.text.trim();
            if text.is_empty() || (line.number == 1 && text == HEADER) {
                continue;
            }
            return parse(text).map(Some).map_err(|what| line.error(what));
        }
    }
}

fn parse(line: &str) -> Result<BufferedAccess, String> {
    let mut f = CsvFields::new(line, COLUMNS);
    let client = f.parse()?;
    let op = match f.text()? {
        "R" | "r" => Op::Read,
        "W" | "w" => Op::Write,
        other => return Err(f.bad_last(other, "expected R or W")),
    };
    let block = f.parse()?;
    let text = f.text()?;
    let buffer = match text {
        "" => None,
        t => Some(
            match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => t.parse(),
            }
            .map_err(|e| f.bad_last(t, e))?,
        ),
    };
    if let Ok(extra) = f.text() {
        return Err(f.bad_last(extra, "unexpected extra field"));
    }
    Ok(BufferedAccess { client, op, block, buffer })
}

impl Iterator for BufferedReader {
    type Item = Result<BufferedAccess, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.read().transpose();
        self.failed = matches!(item, Some(Err(_)));
        item
    }
}

/// Writes accesses in this format.
pub fn write(path: &Path, accesses: impl IntoIterator<Item = BufferedAccess>) -> Result<(), TraceError> {
    let io = |e| TraceError::io(path, Place::File, "cannot write", e);
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    writeln!(out, "{HEADER}").map_err(io)?;
    for a in accesses {
        let op = if a.op == Op::Write { 'W' } else { 'R' };
        match a.buffer {
            Some(b) => writeln!(out, "{},{op},{},{b:#x}", a.client, a.block),
            None => writeln!(out, "{},{op},{},", a.client, a.block),
        }
        .map_err(io)?;
    }
    out.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        let accesses = vec![
            BufferedAccess { client: 0, op: Op::Read, block: 12, buffer: Some(0x2000) },
            BufferedAccess { client: 3, op: Op::Write, block: 0, buffer: None },
        ];
        write(&path, accesses.clone()).unwrap();
        assert!(is_buffered_trace(&path));
        let back: Vec<_> = open(&path).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, accesses);

        std::fs::write(&path, format!("{HEADER}\n0,R,1,4096\n0,X,2,\n")).unwrap();
        let err = open(&path).unwrap().nth(1).unwrap().unwrap_err().to_string();
        assert!(err.contains("t.csv:3") && err.contains("(op)"), "{err}");
        std::fs::write(&path, format!("{HEADER}\n0,R,1,0xZZ\n")).unwrap();
        let err = open(&path).unwrap().next().unwrap().unwrap_err().to_string();
        assert!(err.contains("t.csv:2") && err.contains("(buffer)"), "{err}");
        std::fs::write(&path, "version,time,op,size,lbn\n").unwrap();
        assert!(!is_buffered_trace(&path));
    }
}

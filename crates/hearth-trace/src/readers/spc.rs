//! SPC-1 style traces from the UMass trace repository (Financial, WebSearch):
//! `ASU,LBA,Size,Opcode,Timestamp[,...]` with LBA in 512-byte sectors, size in
//! bytes, opcode `r`/`w` and timestamp in seconds. client = ASU.

use hearth_core::Op;

use crate::error::TraceError;
use crate::input::{parse_seconds_ns, sectors_to_bytes, CsvFields, Lines};
use crate::Request;

const COLUMNS: &[&str] = &["ASU", "LBA", "Size", "Opcode", "Timestamp"];

pub(crate) struct SpcReader {
    lines: Lines,
}

impl SpcReader {
    pub(crate) fn new(lines: Lines) -> Self {
        SpcReader { lines }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            let Some(line) = self.lines.next_line()? else {
                return Ok(None);
            };
            if line.text.trim().is_empty() {
                continue;
            }
            return parse(line.text).map(Some).map_err(|what| line.error(what));
        }
    }
}

fn parse(line: &str) -> Result<Request, String> {
    let mut f = CsvFields::new(line, COLUMNS);
    let client = f.parse()?;
    let lba = f.parse()?;
    let offset = sectors_to_bytes(lba).map_err(|e| f.bad_last(&lba.to_string(), e))?;
    let len = f.parse()?;
    let opcode = f.text()?;
    let op = match opcode {
        "r" | "R" => Op::Read,
        "w" | "W" => Op::Write,
        _ => return Err(f.bad_last(opcode, "expected r or w")),
    };
    let seconds = f.text()?;
    let time_ns = parse_seconds_ns(seconds).map_err(|e| f.bad_last(seconds, e))?;
    Ok(Request { time_ns, client, op, offset, len, next_access: None })
}

impl Iterator for SpcReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

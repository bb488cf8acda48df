//! The CloudPhysics CSV export libCacheSim ships (`cloudPhysicsIO.csv`):
//! header `version,time,op,size,lbn`, time in seconds, op a SCSI opcode in hex
//! (`28` read, `2a` write; an optional `0x` prefix is accepted), size in
//! bytes, lbn in 512-byte sectors. There is no client field; client = 0.

use crate::error::TraceError;
use crate::input::{parse_seconds_ns, sectors_to_bytes, CsvFields, Lines};
use crate::readers::scsi_op;
use crate::Request;

const COLUMNS: &[&str] = &["version", "time", "op", "size", "lbn"];

pub(crate) struct CpCsvReader {
    lines: Lines,
}

impl CpCsvReader {
    pub(crate) fn new(lines: Lines) -> Self {
        CpCsvReader { lines }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            let Some(line) = self.lines.next_line()? else {
                return Ok(None);
            };
            if line.text.trim().is_empty() || (line.number == 1 && line.text.starts_with("version")) {
                continue;
            }
            return parse(line.text).map(Some).map_err(|what| line.error(what));
        }
    }
}

fn parse(line: &str) -> Result<Request, String> {
    let mut f = CsvFields::new(line, COLUMNS);
    let _version: u32 = f.parse()?;
    let seconds = f.text()?;
    let time_ns = parse_seconds_ns(seconds).map_err(|e| f.bad_last(seconds, e))?;
    let opcode = f.text()?;
    let hex = opcode.strip_prefix("0x").or_else(|| opcode.strip_prefix("0X")).unwrap_or(opcode);
    let op = scsi_op(
        u8::from_str_radix(hex, 16).map_err(|e| f.bad_last(opcode, format!("expected a hex SCSI opcode: {e}")))?,
    );
    let len = f.parse()?;
    let lbn = f.parse()?;
    let offset = sectors_to_bytes(lbn).map_err(|e| f.bad_last(&lbn.to_string(), e))?;
    Ok(Request { time_ns, client: 0, op, offset, len, next_access: None })
}

impl Iterator for CpCsvReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

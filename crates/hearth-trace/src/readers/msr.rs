//! MSR Cambridge / SNIA block traces:
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with the
//! timestamp in Windows filetime (100 ns ticks since 1601), `Type` `Read` or
//! `Write`, offset and size in bytes.

use std::collections::HashMap;

use hearth_core::Op;

use crate::error::TraceError;
use crate::input::{CsvFields, Lines};
use crate::Request;

const COLUMNS: &[&str] = &["Timestamp", "Hostname", "DiskNumber", "Type", "Offset", "Size", "ResponseTime"];

pub(crate) struct MsrReader {
    lines: Lines,
    clients: ClientIds,
}

/// Client id of each (host, disk) pair, numbered in order of first appearance
/// so ids stay small and stable across runs. Keyed by host first so that a
/// lookup borrows the line instead of allocating.
#[derive(Default)]
struct ClientIds {
    by_host: HashMap<String, Vec<(u32, u32)>>,
    next: u32,
}

impl ClientIds {
    fn id(&mut self, host: &str, disk: u32) -> u32 {
        if let Some(disks) = self.by_host.get(host) {
            if let Some(&(_, id)) = disks.iter().find(|(d, _)| *d == disk) {
                return id;
            }
        }
        let id = self.next;
        self.next += 1;
        self.by_host.entry(host.to_string()).or_default().push((disk, id));
        id
    }
}

impl MsrReader {
    pub(crate) fn new(lines: Lines) -> Self {
        MsrReader { lines, clients: ClientIds::default() }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            let Some(line) = self.lines.next_line()? else {
                return Ok(None);
            };
            if line.text.trim().is_empty() {
                continue;
            }
            // SNIA's copies sometimes carry a header line.
            if line.number == 1 && line.text.starts_with("Timestamp") {
                continue;
            }
            let (ticks, host, disk, op, offset, len) = parse(line.text).map_err(|what| line.error(what))?;
            // 100 ns ticks since 1601 fit in u64 nanoseconds until the year 2185.
            let time_ns = ticks
                .checked_mul(100)
                .ok_or_else(|| line.error(format!("bad field 1 (Timestamp) {ticks}: too large")))?;
            let client = self.clients.id(host, disk);
            return Ok(Some(Request { time_ns, client, op, offset, len, next_access: None }));
        }
    }
}

type MsrFields<'a> = (u64, &'a str, u32, Op, u64, u32);

fn parse(line: &str) -> Result<MsrFields<'_>, String> {
    let mut f = CsvFields::new(line, COLUMNS);
    let ticks = f.parse()?;
    let host = f.text()?;
    let disk = f.parse()?;
    let kind = f.text()?;
    let op = if kind.eq_ignore_ascii_case("read") {
        Op::Read
    } else if kind.eq_ignore_ascii_case("write") {
        Op::Write
    } else {
        return Err(f.bad_last(kind, "expected Read or Write"));
    };
    let offset = f.parse()?;
    let len = f.parse()?;
    Ok((ticks, host, disk, op, offset, len))
}

impl Iterator for MsrReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

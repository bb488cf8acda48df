//! `blkparse` default text output, e.g.
//! `8,0    3    1   0.000000000  4096  Q  WS 1234 + 8 [fio]`:
//! device, CPU, sequence, seconds, pid, action, RWBS, sector `+` sectors, process.
//!
//! Only the events of one action become requests, `Q` (queued) by default. One
//! block I/O shows up as several events (Q, then G/I/D/C, plus M/F when merged,
//! X when split); Q is the one logged once per I/O as the submitter issued it,
//! before the scheduler merges or splits it and before the device's latency
//! shifts the time, which is what a cache in front of the device sees. (`D`
//! would give what the device was asked after merging, `C` the completions.)
//! Sectors are 512 bytes; client = pid.
//!
//! Lines that are not events (the per-CPU and total summaries blkparse prints
//! at the end, blank lines) are skipped; an event line that is malformed is an
//! error, and so is a file without a single event line.

use hearth_core::Op;

use crate::error::{Place, TraceError};
use crate::input::{parse_seconds_ns, sectors_to_bytes, Lines, SECTOR};
use crate::Request;

/// The blkparse action turned into requests unless another is asked for.
pub const DEFAULT_ACTION: char = 'Q';

/// Actions whose events carry `sector + count`, so can become requests.
pub const IO_ACTIONS: &str = "QGIDCMFAX";

pub(crate) struct BlkparseReader {
    lines: Lines,
    action: char,
    events_seen: u64,
    non_blank_seen: bool,
}

impl BlkparseReader {
    /// `action` must be one of [`IO_ACTIONS`].
    pub(crate) fn new(lines: Lines, action: char) -> Self {
        debug_assert!(IO_ACTIONS.contains(action));
        BlkparseReader { lines, action, events_seen: 0, non_blank_seen: false }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            let Some(line) = self.lines.next_line()? else {
                if self.events_seen == 0 && self.non_blank_seen {
                    return Err(TraceError::new(
                        &self.lines.path,
                        Place::File,
                        "no blkparse event lines (`maj,min cpu seq seconds pid action rwbs sector + count`) found; is the format right?",
                    ));
                }
                return Ok(None);
            };
            let mut tokens = line.text.split_ascii_whitespace();
            let Some(device) = tokens.next() else {
                continue;
            };
            self.non_blank_seen = true;
            if !is_device(device) {
                continue; // a summary line
            }
            self.events_seen += 1;
            match parse_event(tokens, self.action) {
                Ok(Some(request)) => return Ok(Some(request)),
                Ok(None) => continue,
                Err(what) => return Err(line.error(what)),
            }
        }
    }
}

/// `maj,min` as blkparse prints a device.
fn is_device(token: &str) -> bool {
    match token.split_once(',') {
        Some((major, minor)) => {
            !major.is_empty()
                && !minor.is_empty()
                && major.bytes().all(|b| b.is_ascii_digit())
                && minor.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// Parses the tokens after the device; `None` for events of other actions.
fn parse_event<'a>(mut tokens: impl Iterator<Item = &'a str>, wanted: char) -> Result<Option<Request>, String> {
    let mut field = |name: &str| tokens.next().ok_or_else(|| format!("event line ends before the {name} field"));
    let _cpu = field("cpu")?;
    let _sequence = field("sequence")?;
    let seconds = field("time")?;
    let pid = field("pid")?;
    let action = field("action")?;
    if action.len() != 1 || !action.starts_with(wanted) {
        return Ok(None);
    }
    let rwbs = field("RWBS")?;
    let sector = field("sector")?;
    let plus = field("`+`")?;
    let count = field("sector count")?;
    let time_ns = parse_seconds_ns(seconds).map_err(|e| format!("bad time {seconds:?}: {e}"))?;
    let client = pid.parse().map_err(|e| format!("bad pid {pid:?}: {e}"))?;
    let op = rwbs_op(rwbs).ok_or_else(|| format!("bad RWBS {rwbs:?}: expected letters from RWDFNSMAE"))?;
    let sector: u64 = sector.parse().map_err(|e| format!("bad sector {sector:?}: {e}"))?;
    if plus != "+" {
        return Err(format!("expected `+` between sector and count, found {plus:?}"));
    }
    let count: u64 = count.parse().map_err(|e| format!("bad sector count {count:?}: {e}"))?;
    let offset = sectors_to_bytes(sector)?;
    let len = count
        .checked_mul(SECTOR)
        .and_then(|bytes| u32::try_from(bytes).ok())
        .ok_or_else(|| format!("bad sector count {count}: request larger than 4 GiB"))?;
    Ok(Some(Request { time_ns, client, op, offset, len, next_access: None }))
}

/// RWBS letters: R read, W write, D discard, F flush/FUA, N none, S sync,
/// M metadata, A read-ahead, E secure erase. Discards and data-less flushes
/// are `Other`.
fn rwbs_op(rwbs: &str) -> Option<Op> {
    if rwbs.is_empty() || !rwbs.bytes().all(|b| b"RWDFNSMAE".contains(&b)) {
        return None;
    }
    Some(if rwbs.contains('D') || rwbs.contains('E') {
        Op::Other
    } else if rwbs.contains('W') {
        Op::Write
    } else if rwbs.contains('R') {
        Op::Read
    } else {
        Op::Other
    })
}

impl Iterator for BlkparseReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

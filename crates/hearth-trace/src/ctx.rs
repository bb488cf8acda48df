//! Context-tagged block traces: every I/O names the application context
//! (transaction, query, thread) it belongs to, and contexts are bracketed
//! by begin/end markers, as a context-aware storage server receives them.
//!
//! Text format (`.ctx`, optionally `.gz`/`.zst`), one event per line,
//! whitespace-separated, `#` starts a comment line:
//!
//! ```text
//! B <time_ns> <ctx> <class>   context <ctx> begins; <class> is its template (query/transaction type)
//! R <time_ns> <ctx> <block>   read of block <block> (a block number, not a byte offset)
//! W <time_ns> <ctx> <block>   write of block <block>
//! E <time_ns> <ctx>           context <ctx> ends
//! ```
//!
//! Context ids may be reused once a context ended. Reading checks that every
//! I/O belongs to an open context and that times never go backwards.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use hearth_core::{KeyMap, Op};

use crate::error::{CtxOrderError, Place, TraceError};
use crate::input::{open_input, Lines};

pub use hearth_core::CtxEvent;

/// Checks the bracketing rules one event at a time (shared by the reader and
/// the generator's tests): I/O and end only inside an open context, no
/// second begin of an open context, non-decreasing time.
#[derive(Default)]
pub struct CtxChecker {
    open: KeyMap<()>,
    last_time: u64,
}

impl CtxChecker {
    pub fn check(&mut self, e: &CtxEvent) -> Result<(), CtxOrderError> {
        if e.time_ns() < self.last_time {
            return Err(CtxOrderError::TimeGoesBack { time: e.time_ns(), last: self.last_time });
        }
        self.last_time = e.time_ns();
        let ctx = u64::from(e.ctx());
        match e {
            CtxEvent::Begin { .. } => {
                if self.open.insert(ctx, ()).is_some() {
                    return Err(CtxOrderError::BeginsAgain { ctx });
                }
            }
            CtxEvent::Io { .. } => {
                if !self.open.contains_key(&ctx) {
                    return Err(CtxOrderError::NotOpen { ctx });
                }
            }
            CtxEvent::End { .. } => {
                if self.open.remove(&ctx).is_none() {
                    return Err(CtxOrderError::EndNotOpen { ctx });
                }
            }
        }
        Ok(())
    }
    /// Contexts begun and not yet ended.
    pub fn open_contexts(&self) -> usize {
        self.open.len()
    }
}

/// Reads a whole context-tagged trace; errors name the file and line.
pub fn read_ctx_trace(path: &Path) -> Result<Vec<CtxEvent>, TraceError> {
    let mut lines = Lines::new(path, open_input(path)?);
    let mut events = Vec::new();
    let mut checker = CtxChecker::default();
    while let Some(line) = lines.next_line()? {
        let text = line.text.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        let number = |i: usize, name: &str| -> Result<u64, TraceError> {
            let f = fields.get(i).ok_or_else(|| line.error(format!("missing field {name}")))?;
            f.parse().map_err(|e| line.error(format!("bad {name} {f:?}: {e}")))
        };
        let small = |i: usize, name: &str| -> Result<u32, TraceError> {
            u32::try_from(number(i, name)?).map_err(|_| line.error(format!("{name} does not fit in 32 bits")))
        };
        let (kind, arity) = (fields[0], fields.len());
        let expected = match kind {
            "B" | "R" | "W" => 4,
            "E" => 3,
            _ => return Err(line.error(format!("unknown event {kind:?}; expected B, R, W or E"))),
        };
        if arity != expected {
            return Err(line.error(format!("event {kind} takes {} fields, found {}", expected - 1, arity - 1)));
        }
        let time_ns = number(1, "time_ns")?;
        let ctx = small(2, "ctx")?;
        let event = match kind {
            "B" => CtxEvent::Begin { time_ns, ctx, class: small(3, "class")? },
            "E" => CtxEvent::End { time_ns, ctx },
            _ => {
                let op = if kind == "R" { Op::Read } else { Op::Write };
                CtxEvent::Io { time_ns, ctx, op, block: number(3, "block")? }
            }
        };
        checker.check(&event).map_err(|what| line.error(what.to_string()))?;
        events.push(event);
    }
    Ok(events)
}

/// Writes events in the format [`read_ctx_trace`] reads (uncompressed).
pub fn write_ctx_trace(path: &Path, events: &[CtxEvent]) -> Result<(), TraceError> {
    let fail = |e| TraceError::io(path, Place::File, "write error", e);
    let file = File::create(path).map_err(|e| TraceError::io(path, Place::File, "cannot create", e))?;
    let mut out = BufWriter::with_capacity(256 * 1024, file);
    writeln!(out, "# hearth context-tagged trace: B time ctx class | R/W time ctx block | E time ctx").map_err(fail)?;
    for e in events {
        match *e {
            CtxEvent::Begin { time_ns, ctx, class } => writeln!(out, "B {time_ns} {ctx} {class}"),
            CtxEvent::Io { time_ns, ctx, op, block } => {
                let kind = if op == Op::Write { 'W' } else { 'R' };
                writeln!(out, "{kind} {time_ns} {ctx} {block}")
            }
            CtxEvent::End { time_ns, ctx } => writeln!(out, "E {time_ns} {ctx}"),
        }
        .map_err(fail)?;
    }
    out.flush().map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.ctx");
        let events = vec![
            CtxEvent::Begin { time_ns: 1, ctx: 7, class: 2 },
            CtxEvent::Io { time_ns: 2, ctx: 7, op: Op::Read, block: 40 },
            CtxEvent::Io { time_ns: 3, ctx: 7, op: Op::Write, block: 41 },
            CtxEvent::End { time_ns: 4, ctx: 7 },
        ];
        write_ctx_trace(&path, &events).unwrap();
        assert_eq!(read_ctx_trace(&path).unwrap(), events);

        let cases = [
            ("B 1 1 0\nR 2 2 5\n", ":2:", "not open"),
            ("B 1 1 0\nX 2 1 5\n", ":2:", "unknown event"),
            ("B 1 1 0\nR 2 1\n", ":2:", "takes 3 fields"),
            ("B 5 1 0\nR 2 1 9\n", ":2:", "goes back"),
            ("B 1 1 0\nR 2 1 nine\n", ":2:", "bad block"),
            ("B 1 1 0\nB 2 1 0\n", ":2:", "begins again"),
        ];
        for (text, place, what) in cases {
            std::fs::write(&path, text).unwrap();
            let err = read_ctx_trace(&path).unwrap_err().to_string();
            assert!(err.contains(place) && err.contains(what), "{text:?} gave {err}");
        }
    }
}

//! Plain text object traces: one id per line (blank lines skipped).
//!
//! An id is the key itself: offset = id, len = 1 (one object unit), as
//! libCacheSim's txt reader does. There is no timestamp (time_ns = 0), no op
//! (Read) and no client (0). Read it with [`Mode::Object`](crate::Mode).

use hearth_core::Op;

use crate::error::TraceError;
use crate::input::Lines;
use crate::Request;

pub(crate) struct TextReader {
    lines: Lines,
}

impl TextReader {
    pub(crate) fn new(lines: Lines) -> Self {
        TextReader { lines }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            let Some(line) = self.lines.next_line()? else {
                return Ok(None);
            };
            let id = line.text.trim();
            if id.is_empty() {
                continue;
            }
            let id: u64 = id.parse().map_err(|e| line.error(format!("bad id {id:?}: {e}")))?;
            return Ok(Some(Request { time_ns: 0, client: 0, op: Op::Read, offset: id, len: 1, next_access: None }));
        }
    }
}

impl Iterator for TextReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

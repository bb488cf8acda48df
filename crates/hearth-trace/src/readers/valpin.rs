//! libCacheSim's `valpin` traces: bare little-endian `u64` object ids, 8
//! bytes each, every object of size 1, no time, op or client.

use std::path::Path;

use hearth_core::Op;

use crate::error::TraceError;
use crate::input::{le_u64, Input, Records};
use crate::Request;

pub(crate) struct ValpinReader {
    records: Records,
}

impl ValpinReader {
    pub(crate) fn new(path: &Path, input: Input) -> Self {
        ValpinReader { records: Records::new(path, input) }
    }
}

impl Iterator for ValpinReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        let mut r = [0u8; 8];
        match self.records.next_record(&mut r) {
            Ok(true) => Some(Ok(Request {
                time_ns: 0,
                client: 0,
                op: Op::Read,
                offset: le_u64(&r, 0),
                len: 1,
                next_access: None,
            })),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

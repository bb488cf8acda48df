//! Twitter's cache traces in libCacheSim's binary form (`twr`, and `twrNS`
//! with a namespace): little-endian records of
//! `u32 clock_time, u64 obj_id, u32 key_size:10 value_size:22 (key size in
//! the top 10 bits), u32 op:8 ttl:24 (op in the top 8 bits)`, 20 bytes, and
//! for `twrNS` a `u16 namespace` after them, 22 bytes.
//!
//! The object size is key size + value size, the op libCacheSim's operation
//! code ([`cache_op`]), the namespace the client (0 for `twr`). A get whose
//! value size is 0 (the key was absent in production) is skipped, as
//! libCacheSim skips it: it is a miss the trace recorded, not an object.

use std::path::Path;

use crate::error::TraceError;
use crate::input::{le_u16, le_u32, le_u64, Input, Records};
use crate::readers::cache_op;
use crate::Request;

/// libCacheSim's get and gets.
const GETS: [u32; 2] = [1, 2];

pub(crate) struct TwrReader {
    records: Records,
    /// `twrNS`: a namespace after each record's fields.
    namespaced: bool,
}

impl TwrReader {
    pub(crate) fn new(path: &Path, input: Input, namespaced: bool) -> Self {
        TwrReader { records: Records::new(path, input), namespaced }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        let mut buf = [0u8; 22];
        let r = if self.namespaced { &mut buf[..] } else { &mut buf[..20] };
        loop {
            if !self.records.next_record(r)? {
                return Ok(None);
            }
            let (key_value, op_ttl) = (le_u32(r, 12), le_u32(r, 16));
            let (key_size, value_size) = (key_value >> 22, key_value & 0x3f_ffff);
            let op = op_ttl >> 24;
            if value_size == 0 && GETS.contains(&op) {
                continue;
            }
            return Ok(Some(Request {
                time_ns: u64::from(le_u32(r, 0)) * 1_000_000_000,
                client: if self.namespaced { u32::from(le_u16(r, 20)) } else { 0 },
                op: cache_op(op),
                offset: le_u64(r, 4),
                len: key_size + value_size,
                next_access: None,
            }));
        }
    }
}

impl Iterator for TwrReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

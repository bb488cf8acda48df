//! libCacheSim's `lcs` object traces: an 8192-byte header, then fixed-size
//! little-endian records whose layout the header's version decides.
//!
//! Header: `u64 start_magic` (0x123456789abcdef0), `u64 version`, 8000 bytes
//! of trace statistics (not needed to read the requests), 168 unused bytes,
//! `u64 end_magic` (the same value) at byte 8184. Records, by version:
//!
//! | version | bytes | fields |
//! |---|---|---|
//! | 1 | 24 | `u32 clock_time, u64 obj_id, u32 obj_size, i64 next_access_vtime` (oracleGeneral's) |
//! | 2 | 28 | `u32 clock_time, u64 obj_id, u32 obj_size, u32 op:8 tenant:24, i64 next_access_vtime` |
//! | 3 | 36 | `u32 clock_time, u64 obj_id, i64 obj_size, u32 op:8 tenant:24, u32 ttl, i64 next_access_vtime` |
//! | 4..8 | 40, 44, 52, 68, 100 | version 3's fields, then 1, 2, 4, 8 or 16 `u32` features |
//!
//! The op is libCacheSim's operation code ([`cache_op`]), the tenant becomes
//! the client, and `next_access_vtime` is 1-based like oracleGeneral's (the
//! reader converts it and checks it the same way). TTLs and features serve
//! policies Hearth does not have and are skipped.

use std::io::Read;
use std::path::Path;

use crate::error::{Place, TraceError};
use crate::input::{le_u32, le_u64, Input, Records};
use crate::readers::{cache_op, oracle};
use crate::Request;

const HEADER_LEN: usize = 8192;
const MAGIC: u64 = 0x1234_5678_9abc_def0;
const END_MAGIC_AT: usize = HEADER_LEN - 8;

/// Record bytes for versions 1 to 8.
const RECORD_LEN: [usize; 8] = [24, 28, 36, 40, 44, 52, 68, 100];

pub(crate) struct LcsReader {
    records: Records,
    version: u64,
    record_len: usize,
    /// 0-based index of the next record.
    index: u64,
}

impl LcsReader {
    /// Reads and checks the header.
    pub(crate) fn new(path: &Path, mut input: Input) -> Result<Self, TraceError> {
        let mut header = vec![0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            match input.read(&mut header[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TraceError::read(path, Place::Byte(got as u64), e)),
            }
        }
        let at = |byte: usize, what: String| TraceError::new(path, Place::Byte(byte as u64), what);
        if got < HEADER_LEN {
            return Err(at(0, format!("truncated lcs header: the file ends after {got} of its {HEADER_LEN} bytes")));
        }
        for (byte, name) in [(0, "start_magic"), (END_MAGIC_AT, "end_magic")] {
            let magic = le_u64(&header, byte);
            if magic != MAGIC {
                return Err(at(byte, format!("header field {name} is {magic:#x}, not {MAGIC:#x}: not an lcs trace")));
            }
        }
        let version = le_u64(&header, 8);
        let record_len = match version {
            1..=8 => RECORD_LEN[version as usize - 1],
            _ => {
                return Err(at(
                    8,
                    format!("header field version is {version}; libCacheSim defines lcs versions 1 to 8"),
                ))
            }
        };
        let mut records = Records::new(path, input);
        records.offset = HEADER_LEN as u64;
        Ok(LcsReader { records, version, record_len, index: 0 })
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        let mut buf = [0u8; 100];
        let r = &mut buf[..self.record_len];
        if !self.records.next_record(r)? {
            return Ok(None);
        }
        let (size, op_tenant, next_at) = match self.version {
            1 => (u64::from(le_u32(r, 12)), None, 16),
            2 => (u64::from(le_u32(r, 12)), Some(le_u32(r, 16)), 20),
            _ => {
                let size = le_u64(r, 12) as i64;
                let size = u64::try_from(size).map_err(|_| self.error(format!("obj_size {size} is negative")))?;
                (size, Some(le_u32(r, 20)), 28)
            }
        };
        let len = u32::try_from(size)
            .map_err(|_| self.error(format!("obj_size {size} is over 4 GiB, more than Hearth's 32-bit sizes hold")))?;
        let next_access =
            oracle::next_vtime(le_u64(r, next_at) as i64, self.index, "lcs").map_err(|what| self.error(what))?;
        let (op, client) = op_tenant.map_or((cache_op(0), 0), |v| (cache_op(v & 0xff), v >> 8));
        self.index += 1;
        Ok(Some(Request {
            time_ns: u64::from(le_u32(r, 0)) * 1_000_000_000,
            client,
            op,
            offset: le_u64(r, 4),
            len,
            next_access,
        }))
    }

    /// An error about the record just read, naming it.
    fn error(&self, what: String) -> TraceError {
        self.records.record_error(self.record_len, format!("record {}: {what}", self.index + 1))
    }
}

impl Iterator for LcsReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

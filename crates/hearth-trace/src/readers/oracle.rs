//! libCacheSim's oracleGeneral binary object traces: 24-byte little-endian
//! records `u32 clock_time, u64 obj_id, u32 obj_size, i64 next_access_vtime`.
//!
//! libCacheSim counts virtual time from 1, so `next_access_vtime` is the
//! 1-based index of the next request for the object (-1, or `i64::MAX`, for
//! never). [`Request::next_access`] is 0-based like `Access::vtime`; the
//! reader converts. A next access that is not strictly later than the record
//! itself, or one beyond 2^48 requests (no trace is that long), cannot come
//! from a real trace and is reported: that is also how a file in another
//! format given as oracleGeneral gets caught (text bytes make huge numbers).

use std::path::Path;

use hearth_core::Op;

use crate::error::TraceError;
use crate::input::{le_u32, le_u64, Input, Records};
use crate::Request;

pub(crate) const RECORD_LEN: usize = 24;

/// Larger next-access times are taken as a sign of a file in another format.
const MAX_PLAUSIBLE_VTIME: u64 = 1 << 48;

pub(crate) struct OracleReader {
    records: Records,
    /// 0-based index of the next record.
    index: u64,
}

impl OracleReader {
    pub(crate) fn new(path: &Path, input: Input) -> Self {
        OracleReader { records: Records::new(path, input), index: 0 }
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        let mut r = [0u8; RECORD_LEN];
        if !self.records.next_record(&mut r)? {
            return Ok(None);
        }
        let next_access = next_access(&r, self.index).map_err(|what| self.records.record_error(RECORD_LEN, what))?;
        self.index += 1;
        Ok(Some(Request {
            time_ns: u64::from(le_u32(&r, 0)) * 1_000_000_000,
            client: 0,
            op: Op::Read,
            offset: key(&r),
            len: le_u32(&r, 12),
            next_access,
        }))
    }
}

/// A record's object id.
pub(crate) fn key(record: &[u8]) -> u64 {
    le_u64(record, 4)
}

/// A record's object size as written (0 is allowed).
pub(crate) fn size(record: &[u8]) -> u32 {
    le_u32(record, 12)
}

/// The 0-based next access of the record at 0-based `index`, checked.
pub(crate) fn next_access(record: &[u8], index: u64) -> Result<Option<u64>, String> {
    next_vtime(le_u64(record, 16) as i64, index, "oracleGeneral")
}

/// A libCacheSim `next_access_vtime` (1-based; -1 or `i64::MAX` for never)
/// of the record at 0-based `index` as a 0-based index, checked; `format`
/// names the trace format the message asks about.
pub(crate) fn next_vtime(vtime: i64, index: u64, format: &str) -> Result<Option<u64>, String> {
    let own_vtime = index + 1;
    match vtime {
        -1 | i64::MAX => Ok(None),
        v if v > 0 && v as u64 > own_vtime && v as u64 <= MAX_PLAUSIBLE_VTIME => Ok(Some(v as u64 - 1)),
        v => Err(format!(
            "next_access_vtime {v} is not a vtime after this request's ({own_vtime}) \
             and below 2^48, nor -1 for never; is this an {format} trace?"
        )),
    }
}

impl Iterator for OracleReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

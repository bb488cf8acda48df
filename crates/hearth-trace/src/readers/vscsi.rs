//! VMware vscsi binary traces (the CloudPhysics format libCacheSim reads).
//!
//! Two little-endian record layouts exist:
//! - version 1, 32 bytes: `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`
//! - version 2, 40 bytes: `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`
//!
//! The high byte of `ver` holds the version (1 or 2). Like libCacheSim, the
//! version is detected by checking the first two records under the version 2
//! layout and then under the version 1 layout. `len` is in bytes, `lbn` in
//! 512-byte sectors, `ts` in microseconds, `cmd` a SCSI opcode. There is no
//! client field; client = 0. Every record's version byte is checked, which
//! catches misaligned or non-vscsi input early.

use std::io::Read;
use std::path::Path;

use crate::error::{Place, TraceError};
use crate::input::{le_u16, le_u32, le_u64, sectors_to_bytes, Input, Records};
use crate::readers::scsi_op;
use crate::Request;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

impl Version {
    fn record_len(self) -> usize {
        match self {
            Version::V1 => 32,
            Version::V2 => 40,
        }
    }
    /// Offset of the `ver` field inside a record.
    fn ver_at(self) -> usize {
        match self {
            Version::V1 => 14,
            Version::V2 => 2,
        }
    }
    fn number(self) -> u8 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
        }
    }
}

/// Records examined to detect the version (libCacheSim uses two).
const PROBE_RECORDS: usize = 2;

pub(crate) struct VscsiReader {
    records: Records,
    version: Version,
    record: [u8; 40],
}

impl VscsiReader {
    pub(crate) fn new(path: &Path, mut input: Input) -> Result<Self, TraceError> {
        // Read up to two v2 records, then put them back in front of the rest.
        let mut probe = Vec::with_capacity(PROBE_RECORDS * 40);
        (&mut input)
            .take((PROBE_RECORDS * 40) as u64)
            .read_to_end(&mut probe)
            .map_err(|e| TraceError::read(path, Place::Byte(0), e))?;
        let version = detect(&probe).map_err(|what| TraceError::new(path, Place::Byte(0), what))?;
        let input: Input = Box::new(std::io::Cursor::new(probe).chain(input));
        Ok(VscsiReader { records: Records::new(path, input), version, record: [0; 40] })
    }

    fn read(&mut self) -> Result<Option<Request>, TraceError> {
        let v = self.version;
        let len = v.record_len();
        if !self.records.next_record(&mut self.record[..len])? {
            return Ok(None);
        }
        let r = &self.record[..len];
        let ver = le_u16(r, v.ver_at());
        if (ver >> 8) as u8 != v.number() {
            return Err(self.records.record_error(
                len,
                format!("version field 0x{ver:04x} does not match the trace's vscsi version {}", v.number()),
            ));
        }
        let (cmd, bytes, lbn, ts_us) = match v {
            Version::V1 => (le_u16(r, 12), le_u32(r, 4), le_u64(r, 16), le_u64(r, 24)),
            Version::V2 => (le_u16(r, 0), le_u32(r, 8), le_u64(r, 16), le_u64(r, 24)),
        };
        let offset = sectors_to_bytes(lbn).map_err(|e| self.records.record_error(len, format!("bad lbn: {e}")))?;
        let time_ns = ts_us
            .checked_mul(1000)
            .ok_or_else(|| self.records.record_error(len, format!("bad timestamp {ts_us} us: too large")))?;
        // The opcode sits in the low byte; the high byte is unused.
        let op = scsi_op(cmd as u8);
        Ok(Some(Request { time_ns, client: 0, op, offset, len: bytes, next_access: None }))
    }
}

/// Detects the record version from the first bytes of the trace.
fn detect(probe: &[u8]) -> Result<Version, String> {
    if probe.is_empty() {
        // An empty trace is valid and has no records; either layout reads it.
        return Ok(Version::V1);
    }
    let matches = |v: Version| {
        let whole_records = (probe.len() / v.record_len()).min(PROBE_RECORDS);
        whole_records > 0
            && (0..whole_records).all(|i| (le_u16(probe, i * v.record_len() + v.ver_at()) >> 8) as u8 == v.number())
    };
    if matches(Version::V2) {
        Ok(Version::V2)
    } else if matches(Version::V1) {
        Ok(Version::V1)
    } else if probe.len() < Version::V1.record_len() {
        Err(format!("truncated record: file ends after {} of its 32 bytes", probe.len()))
    } else {
        let v1 = le_u16(probe, Version::V1.ver_at());
        let v2 = le_u16(probe, Version::V2.ver_at());
        Err(format!(
            "not a vscsi trace: version field is 0x{v1:04x} at byte 14 (version 1 layout) and 0x{v2:04x} at byte 2 \
             (version 2 layout); expected 0x01xx or 0x02xx"
        ))
    }
}

impl Iterator for VscsiReader {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.read().transpose()
    }
}

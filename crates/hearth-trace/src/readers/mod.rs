//! One reader per trace format. Each yields [`Request`](crate::Request)s and
//! stops at the first error (the [`TraceReader`](crate::TraceReader) wrapper
//! guarantees nothing is read after one).

pub(crate) mod binary;
pub(crate) mod blkparse;
pub(crate) mod columns_csv;
pub(crate) mod cpcsv;
pub(crate) mod lcs;
pub(crate) mod msr;
pub(crate) mod oracle;
pub(crate) mod spc;
pub(crate) mod text;
pub(crate) mod twr;
pub(crate) mod valpin;
pub(crate) mod vscsi;

use hearth_core::Op;

/// Maps a SCSI command opcode to an [`Op`]: READ(10/16/12) and
/// WRITE(10/16/12); everything else (TEST UNIT READY, SYNCHRONIZE CACHE, ...)
/// is `Other`. READ(6)/WRITE(6) (0x08/0x0a) are deliberately not included: the
/// CloudPhysics traces never use them and libCacheSim does not either.
pub(crate) fn scsi_op(opcode: u8) -> Op {
    match opcode {
        0x28 | 0x88 | 0xa8 => Op::Read,
        0x2a | 0x8a | 0xaa => Op::Write,
        _ => Op::Other,
    }
}

/// Maps libCacheSim's operation code (its `req_op_e`, used by lcs, twr and
/// binary traces) to an [`Op`]: get/gets/read, and nop (0, what a trace
/// without operations records), are reads; set, add, cas, replace, append,
/// prepend, incr, decr, write and update are writes; delete and anything
/// else is `Other`.
pub(crate) fn cache_op(code: u32) -> Op {
    match code {
        0 | 1 | 2 | 12 => Op::Read,
        3..=8 | 10 | 11 | 13 | 14 => Op::Write,
        _ => Op::Other,
    }
}

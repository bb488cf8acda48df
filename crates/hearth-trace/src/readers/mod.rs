//! One reader per trace format. Each yields [`Request`](crate::Request)s and
//! stops at the first error (the [`TraceReader`](crate::TraceReader) wrapper
//! guarantees nothing is read after one).

pub(crate) mod blkparse;
pub(crate) mod cpcsv;
pub(crate) mod msr;
pub(crate) mod oracle;
pub(crate) mod spc;
pub(crate) mod text;
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

//! Writers, so that simulator runs can be exported to other tools
//! (libCacheSim reads both formats).

use std::borrow::Borrow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use hearth_core::{Access, NEVER};

use crate::error::{Place, TraceError};

/// Writes `accesses` as a libCacheSim oracleGeneral trace: per access a
/// 24-byte record of `u32 clock_time, u64 obj_id, u32 obj_size, i64
/// next_access_vtime`.
///
/// Accesses carry no wall-clock time, so `clock_time` is the access's `vtime`
/// (saturating at `u32::MAX`): a logical clock ticking once per request.
/// `next_access` is shifted to libCacheSim's 1-based virtual time (NEVER is
/// written as -1), so it is right when the accesses are written from vtime 0
/// without gaps, as [`accesses`](crate::accesses) produces them. Op and ctx
/// have no field and are dropped.
pub fn write_oracle_general<B, I>(path: &Path, accesses: I) -> Result<(), TraceError>
where
    B: Borrow<Access>,
    I: IntoIterator<Item = B>,
{
    write_with(path, accesses, |out, a| {
        let next = if a.next_access == NEVER { -1 } else { a.next_access as i64 + 1 };
        let clock = u32::try_from(a.vtime).unwrap_or(u32::MAX);
        out.write_all(&clock.to_le_bytes())?;
        out.write_all(&a.key.to_le_bytes())?;
        out.write_all(&a.size.to_le_bytes())?;
        out.write_all(&next.to_le_bytes())
    })
}

/// Writes one key per line (the text format).
pub fn write_text<B, I>(path: &Path, accesses: I) -> Result<(), TraceError>
where
    B: Borrow<Access>,
    I: IntoIterator<Item = B>,
{
    write_with(path, accesses, |out, a| writeln!(out, "{}", a.key))
}

fn write_with<B, I, F>(path: &Path, accesses: I, mut record: F) -> Result<(), TraceError>
where
    B: Borrow<Access>,
    I: IntoIterator<Item = B>,
    F: FnMut(&mut BufWriter<File>, &Access) -> std::io::Result<()>,
{
    let file = File::create(path).map_err(|e| TraceError::io(path, Place::File, "cannot create", e))?;
    let mut out = BufWriter::with_capacity(256 * 1024, file);
    for access in accesses {
        record(&mut out, access.borrow()).map_err(|e| TraceError::io(path, Place::File, "write error", e))?;
    }
    out.flush().map_err(|e| TraceError::io(path, Place::File, "write error", e))
}

//! The first pass over a streamed trace, when one is needed: the footprint
//! (for cache sizes given as a share of it) and, for offline policies on a
//! trace that does not record next uses, each access's next use, written to
//! a temporary file rather than kept in memory (libCacheSim's converter does
//! the same).

use std::path::Path;

use hearth_core::{key_map, Access};
use hearth_trace::next_access::NextAccessFile;
use hearth_trace::TraceError;

/// What a first pass learned about a trace.
pub struct Scan {
    pub accesses: u64,
    /// Distinct keys requested.
    pub unique_keys: u64,
    /// Bytes of all distinct keys (each counted with its first size).
    pub footprint_bytes: u64,
    /// The largest size any access asked for.
    pub largest_object_bytes: u64,
    /// Each access's next use, when asked for.
    pub next_access: Option<NextAccessFile>,
}

/// Reads `accesses` once. With `next_access_dir`, also builds the next-use
/// column there, which counts the distinct keys and footprint in bounded
/// memory; without, a map of the distinct keys counts them. `progress`
/// receives accesses read since its previous call.
pub fn scan(
    accesses: impl Iterator<Item = Result<Access, TraceError>>,
    next_access_dir: Option<&Path>,
    progress: &dyn Fn(u64),
) -> Result<Scan, TraceError> {
    let mut count = 0u64;
    let mut largest_object_bytes = 0u64;
    let mut counted = |size: u32| {
        count += 1;
        largest_object_bytes = largest_object_bytes.max(u64::from(size));
        if count.is_multiple_of(1 << 16) {
            progress(1 << 16);
        }
    };
    let scan = match next_access_dir {
        Some(dir) => {
            let keys = accesses.map(|a| {
                a.map(|a| {
                    counted(a.size);
                    (a.key, a.size)
                })
            });
            let column = NextAccessFile::build(keys, dir)?;
            Scan {
                accesses: count,
                unique_keys: column.distinct_keys(),
                footprint_bytes: column.footprint_bytes(),
                largest_object_bytes,
                next_access: Some(column),
            }
        }
        None => {
            let mut seen = key_map::<()>(1 << 16);
            let mut footprint_bytes = 0u64;
            for a in accesses {
                let a = a?;
                counted(a.size);
                if seen.insert(a.key, ()).is_none() {
                    footprint_bytes += u64::from(a.size);
                }
            }
            let unique_keys = seen.len() as u64;
            Scan { accesses: count, unique_keys, footprint_bytes, largest_object_bytes, next_access: None }
        }
    };
    progress(count % (1 << 16));
    Ok(scan)
}

/// `accesses` with `next_access` taken from `column` (built over the same
/// accesses in the same order).
pub fn with_next_access<'a>(
    accesses: impl Iterator<Item = Result<Access, TraceError>> + 'a,
    column: &'a NextAccessFile,
) -> Result<impl Iterator<Item = Result<Access, TraceError>> + 'a, TraceError> {
    let mut next = column.reader()?;
    Ok(accesses.map(move |a| {
        let mut a = a?;
        a.next_access = next.next().expect("the column has one entry per access")?;
        Ok(a)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::{Op, NEVER};

    #[test]
    fn scan_counts_and_joins_next_uses() {
        let keys = [5u64, 6, 5, 7, 6, 5];
        let accesses: Vec<Access> = keys
            .iter()
            .enumerate()
            .map(|(i, &key)| {
                // Key 6 asked for again with a larger size: the footprint counts its first.
                let size = if i == 4 { 25 } else { 10 };
                Access { key, size, vtime: i as u64, next_access: NEVER, op: Op::Read, ctx: 0 }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let s = scan(accesses.iter().copied().map(Ok), Some(dir.path()), &|_| {}).unwrap();
        assert_eq!((s.accesses, s.unique_keys, s.footprint_bytes, s.largest_object_bytes), (6, 3, 30, 25));
        let column = s.next_access.expect("asked for");
        let joined: Vec<u64> = with_next_access(accesses.iter().copied().map(Ok), &column)
            .unwrap()
            .map(|a| a.unwrap().next_access)
            .collect();
        assert_eq!(joined, vec![2, 4, 5, NEVER, NEVER, NEVER]);
    }
}

//! OPT's oracle below a client cache: each storage-level request's next
//! use, where a use is a read not preceded by a write of the same block
//! (see the module comment of [`super`]).
//!
//! The next access of every storage request comes from
//! [`NextAccessFile`], the simulator's bounded-memory pass (a temporary
//! file of 8 bytes a request); which requests are writes is kept as one bit
//! each, so that a next access that is a write becomes "never used again".
//! Memory is then the bit per storage request plus a map entry per block,
//! where the whole column in memory took 8 bytes per request.

use hearth_core::{key_map, Key, KeyMap, Op, NEVER};
use hearth_trace::next_access::{NextAccessFile, NextAccessReader};
use hearth_trace::TraceError;

/// Next-use times over the storage-level stream, answered as the replay
/// moves forward.
pub struct StorageFuture {
    /// `None` for a storage policy that never looks ahead (every online
    /// one): it is given `NEVER` and the oracle costs nothing.
    column: Option<Column>,
    /// For every block, its next use at or after the current request.
    upcoming: KeyMap<u64>,
}

struct Column {
    /// Each storage request's next access (any op), in request order.
    next: NextAccessReader,
    /// Bit `i` is set when storage request `i` is a write.
    writes: Vec<u64>,
}

impl StorageFuture {
    /// For a storage policy that ignores next uses.
    pub fn blind() -> StorageFuture {
        StorageFuture { column: None, upcoming: key_map(0) }
    }

    /// Prepares the oracle from the storage-level requests, in order;
    /// temporary files go under `dir`.
    pub fn new(
        requests: impl Iterator<Item = Result<(Key, Op), TraceError>>,
        dir: &std::path::Path,
    ) -> Result<StorageFuture, TraceError> {
        let mut writes = Vec::new();
        let mut count = 0u64;
        let keys = requests.map(|r| {
            let (key, op) = r?;
            if count.is_multiple_of(64) {
                writes.push(0u64);
            }
            // The storage cache counts every non-write as a read.
            if op == Op::Write {
                *writes.last_mut().expect("pushed above") |= 1 << (count % 64);
            }
            count += 1;
            Ok((key, 1))
        });
        // The reader keeps the column's file open; nothing else needs it.
        let next = NextAccessFile::build(keys, dir)?.reader()?;
        Ok(StorageFuture { column: Some(Column { next, writes }), upcoming: key_map(1 << 16) })
    }

    /// The next use of `key` at or after the current request.
    pub(super) fn next_use(&self, key: Key) -> u64 {
        self.upcoming.get(&key).copied().unwrap_or(NEVER)
    }

    /// Moves past request `i` (for `key`) and returns that request's next
    /// use. Requests are passed in order, each once.
    pub(super) fn advance(&mut self, i: u64, key: Key) -> Result<u64, TraceError> {
        let Some(column) = self.column.as_mut() else { return Ok(NEVER) };
        let next_access = column.next.next().unwrap_or_else(|| panic!("the oracle covers storage request {i}"))?;
        let next = if next_access != NEVER && column.is_write(next_access) { NEVER } else { next_access };
        self.upcoming.insert(key, next);
        Ok(next)
    }
}

impl Column {
    fn is_write(&self, request: u64) -> bool {
        self.writes[(request / 64) as usize] >> (request % 64) & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, in memory: a backward pass where a request's next
    /// use is the next request of its block, unless that one is a write.
    fn reference(requests: &[(Key, Op)]) -> Vec<u64> {
        let mut next = vec![NEVER; requests.len()];
        let mut upcoming = std::collections::HashMap::new();
        for (i, &(key, op)) in requests.iter().enumerate().rev() {
            let use_here = if op == Op::Write { NEVER } else { i as u64 };
            if let Some(later) = upcoming.insert(key, use_here) {
                next[i] = later;
            }
        }
        next
    }

    proptest! {
        #[test]
        fn the_streamed_oracle_equals_the_definition(
            requests in prop::collection::vec((0u64..40, prop::bool::weighted(0.3)), 0..600)
        ) {
            let requests: Vec<(Key, Op)> =
                requests.into_iter().map(|(k, w)| (k, if w { Op::Write } else { Op::Read })).collect();
            let dir = tempfile::tempdir().unwrap();
            let mut future = StorageFuture::new(requests.iter().map(|&r| Ok(r)), dir.path()).unwrap();
            let expected = reference(&requests);
            let mut seen = std::collections::HashMap::new();
            for (i, &(key, _)) in requests.iter().enumerate() {
                let upcoming = seen.get(&key).copied().unwrap_or(NEVER);
                prop_assert_eq!(future.next_use(key), upcoming, "next use of {} before request {}", key, i);
                let next = future.advance(i as u64, key).unwrap();
                prop_assert_eq!(next, expected[i], "request {}", i);
                seen.insert(key, next);
            }
        }
    }
}

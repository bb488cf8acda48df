//! The next-access column of a trace of any length, in bounded memory.
//!
//! OPT needs each access's next use: the position of the next access to the
//! same key. libCacheSim's converter (and [`fill_next_access`](crate::fill_next_access))
//! finds it by a backward pass with a map from each key to its latest
//! position; that map holds every distinct key of the trace (2.2 GiB for 50 M
//! keys). [`NextAccessFile`] gives the same column with a map of bounded size:
//!
//! 1. A trace of at most `max_keys` accesses (so of at most as many keys) is
//!    read into memory and solved by one backward pass.
//! 2. A longer one is split, as it streams in, among 256 partition files by
//!    8 bits of a bijective hash of the key ([`sample::key_hash`](crate::sample::key_hash)):
//!    a record (position, key, size) of 20 bytes per access, and an index
//!    file of one byte per access naming its partition. All accesses to a
//!    key land in one partition, so each finds its next use there, and a
//!    partition's positions ascend.
//! 3. Each partition is solved by the backward pass, reading its file from
//!    the end in chunks. If it turns out to hold more than `max_keys` keys,
//!    the pass stops and the partition is split again by the hash's next 8
//!    bits, and so on: keys that agree on all 64 bits are one key, so this
//!    ends, and in practice one level suffices up to ~940 M distinct keys.
//! 4. The partitions' columns are merged back in position order: the index
//!    names the partition of each access in turn, and each column is read
//!    straight through (a 256-way merge with no comparisons).
//!
//! The result, its distinct keys and footprint are exactly those of the
//! in-memory pass (tests compare them with many levels of splits).
//!
//! **Memory budget** (the default): at most 3,670,016 keys in the map, which
//! fits 2^22 buckets of 25 bytes: 100 MiB, reserved once so that it never
//! grows. Besides it, either the short trace in memory (24 bytes an access:
//! 84 MiB at most), or a backward pass's chunk (2^20 records of 20 + 8
//! bytes: 28 MiB) and 258 buffered partition or column files (64 KiB each:
//! 16 MiB). In all under 200 MiB, whatever the trace's length or keys.
//!
//! **Disk**: 29 bytes an access at most while partitions are being solved
//! (records, index and columns), 8 once built. Every file is in the caller's
//! directory ([`std::env::temp_dir`], i.e. `$TMPDIR`, for the simulator),
//! unlinked as soon as it is created so that nothing is left behind however
//! the process ends, and freed as soon as it is done with; errors name the
//! file by the name it was created with.

mod external;
mod scratch;

use std::path::Path;
use std::sync::Arc;

use crate::error::TraceError;
use external::{Budget, Solver, Split, NEXT};
use scratch::{Scratch, ScratchReader};

/// The next-access vtime of every access of a trace ([`NEVER`](hearth_core::NEVER)
/// when its key is not used again), in a temporary file, with the trace's
/// distinct keys and footprint, which the computation finds on the way.
pub struct NextAccessFile {
    column: Arc<Scratch>,
    distinct_keys: u64,
    footprint_bytes: u64,
}

impl NextAccessFile {
    /// Builds the column for `accesses` (the key and size of each, in vtime
    /// order, vtimes counted from 0) in temporary files under `dir`. Stops
    /// at the first error of `accesses` and returns it.
    ///
    /// `dir` should be on a disk with room for 29 bytes per access; a tmpfs
    /// would put the files back in memory.
    pub fn build(
        accesses: impl Iterator<Item = Result<(u64, u32), TraceError>>,
        dir: &Path,
    ) -> Result<NextAccessFile, TraceError> {
        Self::build_within(accesses, dir, Budget::DEFAULT)
    }

    fn build_within(
        mut accesses: impl Iterator<Item = Result<(u64, u32), TraceError>>,
        dir: &Path,
        budget: Budget,
    ) -> Result<NextAccessFile, TraceError> {
        let mut head = Vec::with_capacity(budget.max_keys + 1);
        for access in accesses.by_ref() {
            head.push(access?);
            if head.len() > budget.max_keys {
                break;
            }
        }
        let solved = if head.len() <= budget.max_keys {
            external::in_memory(&head, dir)?
        } else {
            let mut split = Split::create(dir, 0, budget.partition_bits)?;
            for (pos, &(key, size)) in head.iter().enumerate() {
                split.push(pos as u64, key, size)?;
            }
            let rest = head.len() as u64..;
            // Before the solver takes its map.
            drop(head);
            for (pos, access) in rest.zip(accesses) {
                let (key, size) = access?;
                split.push(pos, key, size)?;
            }
            split.solve(&mut Solver::new(dir, budget))?
        };
        Ok(NextAccessFile {
            column: Arc::new(solved.column),
            distinct_keys: solved.distinct_keys,
            footprint_bytes: solved.footprint_bytes,
        })
    }

    /// Accesses in the column.
    pub fn len(&self) -> u64 {
        self.column.len() / NEXT as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Distinct keys of the trace.
    pub fn distinct_keys(&self) -> u64 {
        self.distinct_keys
    }

    /// Bytes of the distinct keys, each counted with its first size.
    pub fn footprint_bytes(&self) -> u64 {
        self.footprint_bytes
    }

    /// Reads the column forward from the start; each call opens an
    /// independent reader (several threads may read at once, each reader
    /// keeping the file alive).
    pub fn reader(&self) -> Result<NextAccessReader, TraceError> {
        Ok(NextAccessReader { entries: ScratchReader::new(Arc::clone(&self.column)), failed: false })
    }
}

/// The next-access vtimes of a [`NextAccessFile`], in vtime order. Reads at
/// its own offsets (`pread`), so readers never disturb each other.
pub struct NextAccessReader {
    entries: ScratchReader<Arc<Scratch>, NEXT>,
    /// A read failed: the iterator is over.
    failed: bool,
}

impl Iterator for NextAccessReader {
    type Item = Result<u64, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.entries.next_entry() {
            Ok(entry) => entry.map(|bytes| Ok(u64::from_le_bytes(bytes))),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = if self.failed { 0 } else { usize::try_from(self.entries.left()).unwrap_or(usize::MAX) };
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Place;
    use crate::synth::{Pattern, Synth};
    use crate::{accesses, fill_next_access, Mode};
    use hearth_core::{Access, NEVER};
    use proptest::prelude::*;

    /// What the in-memory pass gives: each access's next use, the distinct
    /// keys and the footprint (first sizes).
    fn in_memory(trace: &[(u64, u32)]) -> (Vec<u64>, u64, u64) {
        let mut accesses: Vec<Access> = trace
            .iter()
            .enumerate()
            .map(|(i, &(key, size))| Access { key, size, vtime: i as u64, ..Access::default() })
            .collect();
        fill_next_access(&mut accesses);
        let mut first_size = std::collections::HashMap::new();
        for &(key, size) in trace {
            first_size.entry(key).or_insert(size);
        }
        let footprint = first_size.values().map(|&s| u64::from(s)).sum();
        (accesses.iter().map(|a| a.next_access).collect(), first_size.len() as u64, footprint)
    }

    fn built(trace: &[(u64, u32)], budget: Budget) -> (Vec<u64>, u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let column = NextAccessFile::build_within(trace.iter().map(|&a| Ok(a)), dir.path(), budget).unwrap();
        assert_eq!(column.len(), trace.len() as u64);
        let nexts = column.reader().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "every temporary file is unlinked");
        (nexts, column.distinct_keys(), column.footprint_bytes())
    }

    fn budget(max_keys: usize, partition_bits: u32, chunk_records: usize) -> Budget {
        Budget { max_keys, partition_bits, chunk_records }
    }

    proptest! {
        #[test]
        fn matches_the_in_memory_pass(
            trace in prop::collection::vec((0u64..40, 1u32..5), 0..300),
            max_keys in 1usize..10,
            partition_bits in 1u32..4,
            chunk_records in 1usize..20,
        ) {
            prop_assert_eq!(built(&trace, budget(max_keys, partition_bits, chunk_records)), in_memory(&trace));
        }
    }

    /// A budget so small that the trace splits over several levels, and a
    /// chunk that is not a divisor of any partition's length.
    fn split_deep(trace: &[(u64, u32)]) {
        let tiny = budget(300, 2, 97);
        let expected = in_memory(trace);
        assert!(expected.1 > (tiny.max_keys << (2 * tiny.partition_bits)) as u64, "at least three levels of splits");
        assert_eq!(built(trace, tiny), expected);
    }

    fn bundled(mode: Mode) -> Vec<(u64, u32)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.csv.zst");
        accesses(crate::open(&path, None).unwrap(), mode).map(|a| a.map(|a| (a.key, a.size)).unwrap()).collect()
    }

    #[test]
    fn the_bundled_trace_split_deep_matches_the_in_memory_pass() {
        // Object mode: sizes vary, so the footprint checks first sizes.
        split_deep(&bundled(Mode::Object));
        split_deep(&bundled(Mode::Block { block_size: 4096 }));
    }

    #[test]
    fn a_zipf_trace_split_deep_matches_the_in_memory_pass() {
        let synth = Synth::new("zipf:50000:0.9".parse::<Pattern>().unwrap(), 7).unwrap().take(200_000).map(Ok);
        let trace: Vec<(u64, u32)> =
            accesses(synth, Mode::Block { block_size: 4096 }).map(|a| a.map(|a| (a.key, a.size)).unwrap()).collect();
        split_deep(&trace);
        // The default budget takes this trace in memory.
        assert_eq!(built(&trace, Budget::DEFAULT), in_memory(&trace));
    }

    #[test]
    fn readers_are_independent() {
        let dir = tempfile::tempdir().unwrap();
        let trace = [1u64, 2, 1, 2].map(|k| Ok((k, 1)));
        let column = NextAccessFile::build_within(trace.into_iter(), dir.path(), budget(1, 1, 1)).unwrap();
        let mut a = column.reader().unwrap();
        assert_eq!(a.next().unwrap().unwrap(), 2);
        let b = column.reader().unwrap();
        assert_eq!(b.size_hint(), (4, Some(4)));
        assert_eq!(a.size_hint(), (3, Some(3)));
        let rest: Vec<u64> = a.map(Result::unwrap).collect();
        assert_eq!(rest, vec![3, NEVER, NEVER]);
        assert_eq!(b.map(Result::unwrap).collect::<Vec<_>>(), vec![2, 3, NEVER, NEVER]);
    }

    #[test]
    fn no_file_is_left_whether_built_or_failed() {
        let dir = tempfile::tempdir().unwrap();
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        let column = NextAccessFile::build([(5u64, 1), (5, 1)].into_iter().map(Ok), dir.path()).unwrap();
        let reader = column.reader().unwrap();
        drop(column);
        assert_eq!(reader.map(Result::unwrap).collect::<Vec<_>>(), vec![1, NEVER], "a reader outlives its column");
        assert_eq!(files(), 0);

        // The error comes after the trace has been split into partitions.
        let boom = TraceError::new(Path::new("t.vscsi"), Place::Byte(80), "truncated record");
        let trace = vec![Ok((1, 1)), Ok((2, 1)), Ok((3, 1)), Err(boom), Ok((3, 1))];
        let err = NextAccessFile::build_within(trace.into_iter(), dir.path(), budget(1, 1, 1)).err().unwrap();
        assert_eq!(err.to_string(), "t.vscsi: byte 80: truncated record");
        assert_eq!(files(), 0);
    }

    #[test]
    fn a_directory_that_cannot_hold_files_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = NextAccessFile::build([(1u64, 1)].into_iter().map(Ok), &missing).err().unwrap().to_string();
        assert!(err.starts_with(&format!("{}: cannot create a temporary file: ", missing.display())), "{err}");
    }

    #[test]
    fn an_empty_trace_has_an_empty_column() {
        let dir = tempfile::tempdir().unwrap();
        let column = NextAccessFile::build(std::iter::empty(), dir.path()).unwrap();
        assert!(column.is_empty());
        assert_eq!((column.distinct_keys(), column.footprint_bytes()), (0, 0));
        assert_eq!(column.reader().unwrap().count(), 0);
    }
}

//! The next-access column of a trace too long to hold in memory.
//!
//! [`fill_next_access`](crate::fill_next_access) needs every access in a
//! slice. [`NextAccessFile`] computes the same column the way libCacheSim's
//! trace converter does: a forward pass writes each access's key to a
//! temporary file, a backward pass reads that file from the end in chunks,
//! keeping only a map from each distinct key to the vtime of its next use,
//! and replaces every key by its next access in place. Memory is the map plus
//! one chunk buffer, whatever the trace length; disk is 8 bytes per access.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hearth_core::{key_map, NEVER};

use crate::error::{Place, TraceError};

/// Keys per chunk of the backward pass: an 8 MiB buffer.
const CHUNK_KEYS: usize = 1 << 20;

/// Bytes a reader fetches at a time.
const READ_BUFFER: usize = 256 * 1024;

/// One little-endian `u64` per access.
const ENTRY: usize = 8;

/// The next-access vtime of every access of a trace ([`NEVER`] when its key
/// is not used again), in an unnamed temporary file: nothing is left behind
/// however the process ends.
pub struct NextAccessFile {
    file: Arc<File>,
    /// Where the file is, for error messages (it has no name).
    dir: PathBuf,
    len: u64,
}

impl NextAccessFile {
    /// Builds the next-access column for `keys` (one per access, in vtime
    /// order, vtimes counted from 0) in a temporary file under `dir`. Stops
    /// at the first error of `keys` and returns it.
    ///
    /// `dir` should be on a disk with room for 8 bytes per access; a tmpfs
    /// would put the column back in memory.
    pub fn build(
        keys: impl Iterator<Item = Result<u64, TraceError>>,
        dir: &Path,
    ) -> Result<NextAccessFile, TraceError> {
        Self::build_chunked(keys, dir, CHUNK_KEYS)
    }

    fn build_chunked(
        keys: impl Iterator<Item = Result<u64, TraceError>>,
        dir: &Path,
        chunk_keys: usize,
    ) -> Result<NextAccessFile, TraceError> {
        let io = |doing: &'static str| move |e| TraceError::io(dir, Place::File, doing, e);
        let file = tempfile::tempfile_in(dir).map_err(io("cannot create a temporary file"))?;

        let mut len = 0u64;
        let mut out = BufWriter::with_capacity(1 << 20, &file);
        for key in keys {
            out.write_all(&key?.to_le_bytes()).map_err(io("temporary file: write error"))?;
            len += 1;
        }
        out.flush().map_err(io("temporary file: write error"))?;
        drop(out);

        // Each chunk is read before it is overwritten, and the chunks before
        // it (still to do) never look at it again: one file serves as both
        // the key column and the next-access column.
        let mut next_use = key_map::<u64>(0);
        let chunk_len = usize::try_from(len).map_or(chunk_keys, |len| len.min(chunk_keys));
        let mut buf = vec![0u8; chunk_len * ENTRY];
        let mut end = len;
        while end > 0 {
            let start = end.saturating_sub(chunk_keys as u64);
            let bytes = &mut buf[..(end - start) as usize * ENTRY];
            file.read_exact_at(bytes, start * ENTRY as u64).map_err(io("temporary file: read error"))?;
            for (i, entry) in bytes.chunks_exact_mut(ENTRY).enumerate().rev() {
                let key = u64::from_le_bytes(entry.try_into().expect("8-byte entry"));
                let next = next_use.insert(key, start + i as u64).unwrap_or(NEVER);
                entry.copy_from_slice(&next.to_le_bytes());
            }
            file.write_all_at(bytes, start * ENTRY as u64).map_err(io("temporary file: write error"))?;
            end = start;
        }
        Ok(NextAccessFile { file: Arc::new(file), dir: dir.to_path_buf(), len })
    }

    /// Accesses in the column.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads the column forward from the start; each call opens an
    /// independent reader (several threads may read at once, each reader
    /// keeping the file alive).
    pub fn reader(&self) -> Result<NextAccessReader, TraceError> {
        Ok(NextAccessReader {
            file: Arc::clone(&self.file),
            dir: self.dir.clone(),
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
            at: 0,
            end: 0,
            index: 0,
            len: self.len,
        })
    }
}

/// The next-access vtimes of a [`NextAccessFile`], in vtime order. Reads at
/// its own offsets (`pread`), so readers never disturb each other.
pub struct NextAccessReader {
    file: Arc<File>,
    dir: PathBuf,
    buf: Box<[u8]>,
    /// Unread bytes of `buf`: `at..end`.
    at: usize,
    end: usize,
    /// Entries returned so far.
    index: u64,
    len: u64,
}

impl NextAccessReader {
    fn refill(&mut self) -> Result<(), TraceError> {
        let left = (self.len - self.index) * ENTRY as u64;
        let n = usize::try_from(left).map_or(self.buf.len(), |left| left.min(self.buf.len()));
        let offset = self.index * ENTRY as u64;
        self.file
            .read_exact_at(&mut self.buf[..n], offset)
            .map_err(|e| TraceError::io(&self.dir, Place::Byte(offset), "temporary next-access file: read error", e))?;
        (self.at, self.end) = (0, n);
        Ok(())
    }
}

impl Iterator for NextAccessReader {
    type Item = Result<u64, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.index == self.len {
            return None;
        }
        if self.at == self.end {
            if let Err(e) = self.refill() {
                self.index = self.len;
                return Some(Err(e));
            }
        }
        let entry = &self.buf[self.at..self.at + ENTRY];
        self.at += ENTRY;
        self.index += 1;
        Some(Ok(u64::from_le_bytes(entry.try_into().expect("8-byte entry"))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.len - self.index).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fill_next_access;
    use hearth_core::Access;
    use proptest::prelude::*;

    fn in_memory(keys: &[u64]) -> Vec<u64> {
        let mut accesses: Vec<Access> =
            keys.iter().enumerate().map(|(i, &key)| Access { key, vtime: i as u64, ..Access::default() }).collect();
        fill_next_access(&mut accesses);
        accesses.iter().map(|a| a.next_access).collect()
    }

    fn streamed(keys: &[u64], chunk_keys: usize) -> Vec<u64> {
        let dir = tempfile::tempdir().unwrap();
        let column = NextAccessFile::build_chunked(keys.iter().map(|&k| Ok(k)), dir.path(), chunk_keys).unwrap();
        assert_eq!(column.len(), keys.len() as u64);
        column.reader().unwrap().collect::<Result<_, _>>().unwrap()
    }

    proptest! {
        #[test]
        fn matches_the_in_memory_fill(keys in prop::collection::vec(0u64..20, 0..300), chunk_keys in 1usize..40) {
            prop_assert_eq!(streamed(&keys, chunk_keys), in_memory(&keys));
        }
    }

    #[test]
    fn a_trace_of_many_chunks_matches_the_in_memory_fill() {
        // A small chunk so that many chunk boundaries fall between reuses,
        // and a length that is not a multiple of it.
        let keys: Vec<u64> = (0..50_003u64).map(|i| (i * 7919 + i / 3) % 4_099).collect();
        assert_eq!(streamed(&keys, 1_000), in_memory(&keys));
        // 50 003 entries also span several reader buffers.
        assert_eq!(streamed(&keys, CHUNK_KEYS), in_memory(&keys));
    }

    #[test]
    fn readers_are_independent() {
        let dir = tempfile::tempdir().unwrap();
        let column = NextAccessFile::build([1u64, 2, 1, 2].into_iter().map(Ok), dir.path()).unwrap();
        let mut a = column.reader().unwrap();
        assert_eq!(a.next().unwrap().unwrap(), 2);
        let b = column.reader().unwrap();
        assert_eq!(b.size_hint(), (4, Some(4)));
        let rest: Vec<u64> = a.map(Result::unwrap).collect();
        assert_eq!(rest, vec![3, NEVER, NEVER]);
        assert_eq!(b.map(Result::unwrap).collect::<Vec<_>>(), vec![2, 3, NEVER, NEVER]);
    }

    #[test]
    fn no_file_is_left_whether_built_or_failed() {
        let dir = tempfile::tempdir().unwrap();
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        let column = NextAccessFile::build([5u64, 5].into_iter().map(Ok), dir.path()).unwrap();
        let reader = column.reader().unwrap();
        drop(column);
        assert_eq!(reader.map(Result::unwrap).collect::<Vec<_>>(), vec![1, NEVER], "a reader outlives its column");
        assert_eq!(files(), 0);

        let boom = TraceError::new(Path::new("t.vscsi"), Place::Byte(80), "truncated record");
        let keys = vec![Ok(1), Ok(2), Err(boom), Ok(3)];
        let err = NextAccessFile::build(keys.into_iter(), dir.path()).err().unwrap();
        assert_eq!(err.to_string(), "t.vscsi: byte 80: truncated record");
        assert_eq!(files(), 0);
    }

    #[test]
    fn an_empty_trace_has_an_empty_column() {
        let dir = tempfile::tempdir().unwrap();
        let column = NextAccessFile::build(std::iter::empty(), dir.path()).unwrap();
        assert!(column.is_empty());
        assert_eq!(column.reader().unwrap().count(), 0);
    }
}

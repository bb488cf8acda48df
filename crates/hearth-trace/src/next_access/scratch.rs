//! Temporary files of fixed-size entries, written once and read forward.
//!
//! Each file is unlinked as soon as it is created, so nothing is left behind
//! however the process ends, and its disk space returns when it is dropped;
//! the name it was created with is kept for error messages.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Place, TraceError};

/// Bytes a buffered reader or writer of a scratch file holds.
pub(super) const BUFFER: usize = 64 * 1024;

/// A complete temporary file.
pub(super) struct Scratch {
    file: File,
    path: PathBuf,
    /// Bytes written.
    len: u64,
}

impl Scratch {
    /// An empty temporary file in `dir`, its name ending in `.{role}`.
    pub(super) fn create(dir: &Path, role: &str) -> Result<(File, PathBuf), TraceError> {
        let named = tempfile::Builder::new()
            .prefix("hearth-next-access-")
            .suffix(&format!(".{role}"))
            .tempfile_in(dir)
            .map_err(|e| TraceError::io(dir, Place::File, "cannot create a temporary file", e))?;
        let path = named.path().to_path_buf();
        Ok((named.into_file(), path))
    }

    /// A file filled by `pwrite`s, `len` bytes long once they are all done.
    pub(super) fn from_parts(file: File, path: PathBuf, len: u64) -> Scratch {
        Scratch { file, path, len }
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    pub(super) fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<(), TraceError> {
        self.file.read_exact_at(buf, offset).map_err(|e| self.error(offset, "read error", e))
    }

    pub(super) fn write_at(&self, buf: &[u8], offset: u64) -> Result<(), TraceError> {
        self.file.write_all_at(buf, offset).map_err(|e| self.error(offset, "write error", e))
    }

    pub(super) fn error(&self, offset: u64, doing: &str, e: std::io::Error) -> TraceError {
        TraceError::io(&self.path, Place::Byte(offset), &format!("temporary file: {doing}"), e)
    }
}

/// Appends to a new temporary file.
pub(super) struct ScratchWriter {
    out: BufWriter<File>,
    path: PathBuf,
    len: u64,
}

impl ScratchWriter {
    pub(super) fn create(dir: &Path, role: &str) -> Result<ScratchWriter, TraceError> {
        let (file, path) = Scratch::create(dir, role)?;
        Ok(ScratchWriter { out: BufWriter::with_capacity(BUFFER, file), path, len: 0 })
    }

    pub(super) fn write(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        if let Err(e) = self.out.write_all(bytes) {
            return Err(TraceError::io(&self.path, Place::Byte(self.len), "temporary file: write error", e));
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    pub(super) fn finish(self) -> Result<Scratch, TraceError> {
        let ScratchWriter { out, path, len } = self;
        match out.into_inner() {
            Ok(file) => Ok(Scratch { file, path, len }),
            Err(e) => Err(TraceError::io(&path, Place::Byte(len), "temporary file: write error", e.into_error())),
        }
    }
}

/// Reads a scratch file forward in entries of `ENTRY` bytes, at its own
/// offsets (`pread`): readers of one file never disturb each other.
pub(super) struct ScratchReader<S, const ENTRY: usize> {
    scratch: S,
    buf: Box<[u8]>,
    /// Unread bytes of `buf`: `at..end`.
    at: usize,
    end: usize,
    /// File offset of `buf[end]`.
    offset: u64,
}

impl<S: AsRef<Scratch>, const ENTRY: usize> ScratchReader<S, ENTRY> {
    pub(super) fn new(scratch: S) -> Self {
        // Whole entries per buffer, so that none straddles two reads.
        let buf = vec![0; BUFFER / ENTRY * ENTRY].into_boxed_slice();
        ScratchReader { scratch, buf, at: 0, end: 0, offset: 0 }
    }

    /// The next entry; `None` at the end of the file.
    pub(super) fn next_entry(&mut self) -> Result<Option<[u8; ENTRY]>, TraceError> {
        if self.at == self.end {
            let scratch = self.scratch.as_ref();
            let left = scratch.len() - self.offset;
            if left == 0 {
                return Ok(None);
            }
            let n = usize::try_from(left).map_or(self.buf.len(), |left| left.min(self.buf.len()));
            scratch.read_at(&mut self.buf[..n], self.offset)?;
            (self.at, self.end) = (0, n);
            self.offset += n as u64;
        }
        let entry = self.buf[self.at..self.at + ENTRY].try_into().expect("whole entries");
        self.at += ENTRY;
        Ok(Some(entry))
    }

    /// Entries not yet returned.
    pub(super) fn left(&self) -> u64 {
        (self.scratch.as_ref().len() - self.offset + (self.end - self.at) as u64) / ENTRY as u64
    }

    /// The next entry of a file known to hold one more.
    pub(super) fn expect_entry(&mut self) -> Result<[u8; ENTRY], TraceError> {
        let offset = self.offset - (self.end - self.at) as u64;
        self.next_entry()?.ok_or_else(|| {
            let e = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
            self.scratch.as_ref().error(offset, "read error", e)
        })
    }
}

impl AsRef<Scratch> for Scratch {
    fn as_ref(&self) -> &Scratch {
        self
    }
}

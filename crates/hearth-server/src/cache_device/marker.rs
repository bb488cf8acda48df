//! What a backend file says about the cache device in front of it: an
//! extended attribute on the file (`user.hearth.cache-device`), as bcache's
//! superblock on a backing device says which cache holds its dirty data.
//!
//! * `clean DEVICE`: DEVICE caches this backend and holds nothing newer.
//! * `dirty DEVICE`: DEVICE holds writes the backend lacks: serving the
//!   backend without it would serve older data, so that is refused.
//! * `discarded DEVICE`: the backend was served without DEVICE since, so
//!   DEVICE's contents are out of date: it drops them when next attached.
//!
//! The mark is made durable (fsync) before the first dirty write is
//! acknowledged. Backends other than files (NBD, HTTP, memory) carry none.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

const NAME: &[u8] = b"user.hearth.cache-device\0";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mark {
    None,
    Clean(String),
    Dirty(String),
    Discarded(String),
}

/// The mark on one backend file.
#[derive(Debug)]
pub struct BackendMark {
    path: PathBuf,
}

impl BackendMark {
    pub fn on(path: &Path) -> BackendMark {
        BackendMark { path: path.into() }
    }

    fn c_path(&self) -> io::Result<CString> {
        CString::new(self.path.as_os_str().as_bytes()).map_err(io::Error::other)
    }

    pub fn read(&self) -> io::Result<Mark> {
        let path = self.c_path()?;
        let mut buf = vec![0u8; 4096];
        // SAFETY: both strings are NUL-terminated; the buffer's length is passed.
        let n = unsafe { libc::getxattr(path.as_ptr(), NAME.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(Mark::None),
                _ => Err(e),
            };
        }
        let text = String::from_utf8_lossy(&buf[..n as usize]).into_owned();
        Ok(match text.split_once(' ') {
            Some(("clean", device)) => Mark::Clean(device.into()),
            Some(("dirty", device)) => Mark::Dirty(device.into()),
            Some(("discarded", device)) => Mark::Discarded(device.into()),
            _ => Mark::None,
        })
    }

    /// Writes `mark` and makes it durable. `Ok(false)` when the file system
    /// keeps no extended attributes (the backend then carries no mark).
    pub fn write(&self, mark: &Mark) -> io::Result<bool> {
        let path = self.c_path()?;
        let value = match mark {
            Mark::None => None,
            Mark::Clean(d) => Some(format!("clean {d}")),
            Mark::Dirty(d) => Some(format!("dirty {d}")),
            Mark::Discarded(d) => Some(format!("discarded {d}")),
        };
        // SAFETY: NUL-terminated strings; the value's pointer and length match.
        let r = unsafe {
            match &value {
                Some(v) => libc::setxattr(path.as_ptr(), NAME.as_ptr().cast(), v.as_ptr().cast(), v.len(), 0),
                None => libc::removexattr(path.as_ptr(), NAME.as_ptr().cast()),
            }
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOTSUP) => Ok(false),
                Some(libc::ENODATA) if value.is_none() => Ok(true),
                _ => Err(e),
            };
        }
        std::fs::File::open(&self.path)?.sync_all()?;
        Ok(true)
    }
}

/// How a mark names the device at `path`: its canonical path when it has one.
pub fn device_name(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.into()).display().to_string()
}

/// A line for an export opened without a cache device, refusing it when
/// the backend file's mark says a device holds writes it lacks (unless
/// `ignore_dirty`); otherwise the mark becomes `discarded`, so the device
/// drops what it holds when next attached.
pub fn open_without_device(backend: &Path, ignore_dirty: bool) -> Result<(), String> {
    let mark = BackendMark::on(backend);
    let device = match mark.read() {
        Ok(Mark::Dirty(device)) if !ignore_dirty => {
            let held = dirty_at_last_flush(Path::new(&device))
                .map_or(String::new(), |n| format!(" ({n} dirty blocks at its last flush)"));
            return Err(format!(
                "{}: cache device {device} holds writes this backend lacks{held}; start with --cache-device {device} \
                 to write them back, or with --ignore-dirty-cache-device to serve the backend without them (they are lost)",
                backend.display()
            ));
        }
        Ok(Mark::Dirty(device)) => {
            tracing::warn!(backend = %backend.display(), device, "serving without the cache device's dirty blocks, as --ignore-dirty-cache-device says: they are lost");
            device
        }
        Ok(Mark::Clean(device)) => device,
        Ok(Mark::None | Mark::Discarded(_)) => return Ok(()),
        Err(e) => return Err(format!("{}: reading its cache device mark: {e}", backend.display())),
    };
    mark.write(&Mark::Discarded(device)).map(|_| ()).map_err(|e| format!("{}: marking it: {e}", backend.display()))
}

/// The dirty blocks a device's header recorded at its last flush, if it can be read.
fn dirty_at_last_flush(device: &Path) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut header = vec![0u8; super::layout::HEADER_LEN as usize];
    std::fs::File::open(device).ok()?.read_exact_at(&mut header, 0).ok()?;
    super::layout::StateRecord::newest(&header).map(|r| r.dirty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_on_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("disk.img");
        std::fs::write(&file, b"x").unwrap();
        let mark = BackendMark::on(&file);
        assert_eq!(mark.read().unwrap(), Mark::None);
        for m in [Mark::Dirty("/dev/a b".into()), Mark::Clean("/c".into()), Mark::Discarded("/d".into()), Mark::None] {
            assert!(mark.write(&m).unwrap(), "this file system keeps extended attributes");
            assert_eq!(mark.read().unwrap(), m);
        }
    }
}

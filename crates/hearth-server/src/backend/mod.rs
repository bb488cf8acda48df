//! Storage behind an export: a file or block device, an in-memory buffer,
//! another NBD server ([`nbd`]), a file on a web server ([`http`]), and a wrapper that makes any backend slow
//! (so cache effects show on a laptop).
//!
//! Backends are called from blocking threads and must allow concurrent calls.

pub use memory::MemoryBackend;

pub mod http;
mod memory;
pub mod nbd;
#[cfg(test)]
pub(crate) mod testing;
pub mod upstream;

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Part of a shared buffer (a cached block's bytes, or a chunk of a RAM
/// backend's): a read reply sends it without copying it out.
pub struct SharedSlice {
    buf: Arc<[u8]>,
    range: std::ops::Range<usize>,
}

impl SharedSlice {
    pub(crate) fn new(buf: Arc<[u8]>, range: std::ops::Range<usize>) -> SharedSlice {
        assert!(range.end <= buf.len(), "a shared slice lies inside its buffer");
        SharedSlice { buf, range }
    }
}

impl std::ops::Deref for SharedSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.range.clone()]
    }
}

/// The bytes of a shared block buffer, to change: copied first if anyone
/// else holds it (a reply still sending it), so what the other holders see
/// never changes.
pub(crate) fn writable(buf: &mut Arc<[u8]>) -> &mut [u8] {
    if Arc::get_mut(buf).is_none() {
        *buf = Arc::from(&buf[..]);
    }
    Arc::get_mut(buf).expect("just made unshared")
}

pub trait Backend: Send + Sync {
    /// Size in bytes; fixed for the backend's life.
    fn size(&self) -> u64;
    /// Fills `buf` from `offset` (the range lies inside the size).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Appends `len` bytes at `offset` (inside the size) to `out` as slices
    /// of buffers this backend keeps in RAM, shared, not copied: a cache in
    /// front then keeps no copy of its own (see
    /// [`shares_bytes`](Self::shares_bytes)). The backend never changes a
    /// buffer it handed out (it writes to a copy). Backends that keep no such
    /// buffers (the default) append nothing.
    fn share(&self, offset: u64, len: usize, out: &mut Vec<SharedSlice>) {
        let _ = (offset, len, out);
    }
    /// Whether [`share`](Self::share) hands out the bytes: a backend that
    /// keeps them in RAM and never waits.
    fn shares_bytes(&self) -> bool {
        false
    }
    /// Makes the range read as zeroes; `may_punch` allows deallocating it.
    fn write_zeroes(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        let _ = may_punch;
        write_zero_chunks(self, offset, len)
    }
    /// A hint that the range is unused; may do nothing.
    fn trim(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Makes every completed write durable.
    fn flush(&self) -> io::Result<()>;
    /// One line for logs, e.g. `file /var/disk.img`.
    fn describe(&self) -> String;
    /// The allocation map of `[offset, offset+len)`: at most `max`
    /// consecutive extents from `offset` (they may cover less than `len`).
    /// Backends that cannot tell report one data extent.
    fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<Extent>> {
        let _ = (offset, max);
        Ok(vec![Extent { len, hole: false }])
    }
    /// Whether a call may wait on a device, a network or a timer. Calls to a
    /// backend that never waits (RAM) may run on a connection's async task:
    /// handing them to another thread would cost more than the call.
    fn waits(&self) -> bool {
        true
    }
}

/// A run of bytes that is either allocated data or a hole (reads as zeroes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    pub hole: bool,
}

static ZEROES: [u8; 64 * 1024] = [0; 64 * 1024];

fn write_zero_chunks<B: Backend + ?Sized>(b: &B, mut offset: u64, mut len: u64) -> io::Result<()> {
    while len > 0 {
        let n = len.min(ZEROES.len() as u64) as usize;
        b.write_at(&ZEROES[..n], offset)?;
        offset += n as u64;
        len -= n as u64;
    }
    Ok(())
}

/// Alignment for O_DIRECT transfers (covers 512- and 4096-byte sectors).
const DIRECT_ALIGN: u64 = 4096;

/// A regular file or a block device, read and written with pread/pwrite.
pub struct FileBackend {
    file: File,
    path: PathBuf,
    size: u64,
    direct: bool,
    /// With O_DIRECT, unaligned writes read-modify-write whole sectors; they
    /// take this exclusively so no other write lands inside those sectors.
    sector_lock: RwLock<()>,
}

impl FileBackend {
    /// Opens an existing file or block device.
    pub fn open(path: &Path, read_only: bool, direct: bool) -> io::Result<FileBackend> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(!read_only);
        if direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let mut file = opts.open(path).map_err(|e| annotate(e, path, "opening"))?;
        // Block devices report length 0 in metadata; seeking finds their size.
        let size = file.seek(SeekFrom::End(0)).map_err(|e| annotate(e, path, "sizing"))?;
        Self::checked(file, path, size, direct)
    }

    /// Opens `path`, creating it as a sparse file of `size` bytes if missing.
    /// An existing file must already have that size.
    pub fn sparse(path: &Path, size: u64, direct: bool) -> io::Result<FileBackend> {
        let mut opts = OpenOptions::new();
        opts.read(true).write(true).create(true);
        if direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = opts.open(path).map_err(|e| annotate(e, path, "creating"))?;
        let len = file.metadata()?.len();
        if len == 0 {
            file.set_len(size).map_err(|e| annotate(e, path, "sizing"))?;
        } else if len != size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} exists with {len} bytes, not the configured {size}", path.display()),
            ));
        }
        Self::checked(file, path, size, direct)
    }

    fn checked(file: File, path: &Path, size: u64, direct: bool) -> io::Result<FileBackend> {
        if direct && !size.is_multiple_of(DIRECT_ALIGN) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: O_DIRECT needs a size that is a multiple of {DIRECT_ALIGN}, got {size}", path.display()),
            ));
        }
        Ok(FileBackend { file, path: path.to_path_buf(), size, direct, sector_lock: RwLock::new(()) })
    }

    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on a descriptor we own; no memory is passed.
        let r = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, offset as libc::off_t, len as libc::off_t) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// `lseek(fd, pos, whence)` for SEEK_DATA / SEEK_HOLE; None on ENXIO
    /// (nothing of that kind at or after `pos`).
    fn seek(&self, pos: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on a descriptor we own. It moves the shared
        // file offset, which nothing here uses (all I/O is pread/pwrite).
        let r = unsafe { libc::lseek(self.file.as_raw_fd(), pos as libc::off_t, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(e)
        }
    }

    /// Reads the sector-aligned span around `[offset, offset+len)`.
    fn read_aligned_span(&self, offset: u64, len: usize) -> io::Result<(AlignedBuf, usize)> {
        let start = offset / DIRECT_ALIGN * DIRECT_ALIGN;
        let end = (offset + len as u64).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let mut bounce = AlignedBuf::new((end - start) as usize);
        self.file.read_exact_at(bounce.as_mut(), start)?;
        Ok((bounce, (offset - start) as usize))
    }
}

fn annotate(e: io::Error, path: &Path, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

impl Backend for FileBackend {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if !self.direct {
            return self.file.read_exact_at(buf, offset);
        }
        let (bounce, skip) = self.read_aligned_span(offset, buf.len())?;
        buf.copy_from_slice(&bounce.as_ref()[skip..skip + buf.len()]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.direct {
            return self.file.write_all_at(buf, offset);
        }
        let aligned = offset.is_multiple_of(DIRECT_ALIGN) && (buf.len() as u64).is_multiple_of(DIRECT_ALIGN);
        if aligned {
            let _shared = self.sector_lock.read().unwrap_or_else(|p| p.into_inner());
            let mut bounce = AlignedBuf::new(buf.len());
            bounce.as_mut().copy_from_slice(buf);
            return self.file.write_all_at(bounce.as_ref(), offset);
        }
        let _exclusive = self.sector_lock.write().unwrap_or_else(|p| p.into_inner());
        let (mut bounce, skip) = self.read_aligned_span(offset, buf.len())?;
        bounce.as_mut()[skip..skip + buf.len()].copy_from_slice(buf);
        self.file.write_all_at(bounce.as_ref(), offset / DIRECT_ALIGN * DIRECT_ALIGN)
    }

    fn write_zeroes(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        if may_punch && self.fallocate(punch, offset, len).is_ok() {
            return Ok(());
        }
        if self.fallocate(libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE, offset, len).is_ok() {
            return Ok(());
        }
        write_zero_chunks(self, offset, len)
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        // Advisory: a filesystem without hole punching simply keeps the data.
        let _ = self.fallocate(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len);
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<Extent>> {
        let end = offset + len;
        let mut pos = offset;
        let mut out = Vec::new();
        while pos < end && out.len() < max {
            // No data at or after pos (ENXIO) means the rest is a hole.
            let data = self.seek(pos, libc::SEEK_DATA)?.unwrap_or(end).min(end);
            let (next, hole) = if data > pos {
                (data, true)
            } else {
                (self.seek(pos, libc::SEEK_HOLE)?.unwrap_or(end).min(end), false)
            };
            match out.last_mut() {
                Some(Extent { len, hole: h }) if *h == hole => *len += next - pos,
                _ => out.push(Extent { len: next - pos, hole }),
            }
            pos = next;
        }
        Ok(out)
    }

    fn describe(&self) -> String {
        format!("file {}{}", self.path.display(), if self.direct { " (O_DIRECT)" } else { "" })
    }
}

/// A heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl AlignedBuf {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(1), DIRECT_ALIGN as usize).expect("valid layout")
    }
    fn new(len: usize) -> AlignedBuf {
        // SAFETY: the layout has non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(Self::layout(len)) };
        let ptr = std::ptr::NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(Self::layout(len)));
        AlignedBuf { ptr, len }
    }
    fn as_ref(&self) -> &[u8] {
        // SAFETY: ptr points to len initialised (zeroed) bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

// SAFETY: AlignedBuf owns its allocation like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

/// Shared backends (tests keep a handle to inspect what reached them).
impl<B: Backend + ?Sized> Backend for Arc<B> {
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }
    fn share(&self, offset: u64, len: usize, out: &mut Vec<SharedSlice>) {
        (**self).share(offset, len, out)
    }
    fn shares_bytes(&self) -> bool {
        (**self).shares_bytes()
    }
    fn write_zeroes(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        (**self).write_zeroes(offset, len, may_punch)
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        (**self).trim(offset, len)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<Extent>> {
        (**self).extents(offset, len, max)
    }
    fn waits(&self) -> bool {
        (**self).waits()
    }
}

/// Adds a fixed latency to every call and limits throughput to
/// `bytes_per_sec`, shared by all callers like one device's channel.
pub struct SlowBackend<B: Backend + ?Sized> {
    latency: Duration,
    bytes_per_sec: Option<u64>,
    /// When the simulated channel is next free.
    busy_until: Mutex<Instant>,
    inner: Box<B>,
}

impl<B: Backend + ?Sized> SlowBackend<B> {
    pub fn new(inner: Box<B>, latency: Duration, bytes_per_sec: Option<u64>) -> SlowBackend<B> {
        SlowBackend { latency, bytes_per_sec, busy_until: Mutex::new(Instant::now()), inner }
    }

    fn delay(&self, bytes: u64) {
        let transfer = match self.bytes_per_sec {
            Some(bw) if bw > 0 => Duration::from_secs_f64(bytes as f64 / bw as f64),
            _ => Duration::ZERO,
        };
        let done = {
            let mut busy = self.busy_until.lock().unwrap_or_else(|p| p.into_inner());
            let start = (*busy).max(Instant::now());
            *busy = start + transfer;
            *busy
        };
        let wake = done + self.latency;
        let now = Instant::now();
        if wake > now {
            std::thread::sleep(wake - now);
        }
    }
}

impl<B: Backend + ?Sized> Backend for SlowBackend<B> {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    // The data moves first and the delay follows, so a slow call's view of
    // the device is as old as a real device's could be when it completes.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let r = self.inner.read_at(buf, offset);
        self.delay(buf.len() as u64);
        r
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let r = self.inner.write_at(buf, offset);
        self.delay(buf.len() as u64);
        r
    }
    fn write_zeroes(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        self.delay(0);
        self.inner.write_zeroes(offset, len, may_punch)
    }
    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.trim(offset, len)
    }
    fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<Extent>> {
        self.inner.extents(offset, len, max)
    }
    fn flush(&self) -> io::Result<()> {
        self.delay(0);
        self.inner.flush()
    }
    fn describe(&self) -> String {
        let bw = self.bytes_per_sec.map_or("unlimited".to_string(), |b| format!("{}/s", hearth_core::format_bytes(b)));
        format!("{} slowed to {:?} + {bw}", self.inner.describe(), self.latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_file_is_created_with_size_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let b = FileBackend::sparse(&path, 1 << 20, false).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        b.write_at(b"hello", 4000).unwrap();
        b.flush().unwrap();
        let mut buf = [0u8; 7];
        b.read_at(&mut buf, 3999).unwrap();
        assert_eq!(&buf, b"\0hello\0");
        b.write_zeroes(4001, 2, true).unwrap();
        b.read_at(&mut buf, 3999).unwrap();
        assert_eq!(&buf, b"\0h\0\0lo\0");
        drop(b);
        assert!(FileBackend::sparse(&path, 2 << 20, false).is_err(), "size mismatch must be refused");
        let reopened = FileBackend::open(&path, true, false).unwrap();
        assert_eq!(reopened.size(), 1 << 20);
    }

    #[test]
    fn sparse_file_reports_holes_and_data() {
        let dir = tempfile::tempdir().unwrap();
        let b = FileBackend::sparse(&dir.path().join("map.img"), 4 << 20, false).unwrap();
        assert_eq!(b.extents(0, 4 << 20, 64).unwrap(), vec![Extent { len: 4 << 20, hole: true }]);
        b.write_at(&[1u8; 8192], 1 << 20).unwrap();
        let map = b.extents(0, 4 << 20, 64).unwrap();
        assert_eq!(
            map,
            vec![
                Extent { len: 1 << 20, hole: true },
                Extent { len: 8192, hole: false },
                Extent { len: (3 << 20) - 8192, hole: true },
            ]
        );
        assert_eq!(b.extents((1 << 20) + 4096, 100, 64).unwrap(), vec![Extent { len: 100, hole: false }]);
        assert_eq!(b.extents(0, 4 << 20, 1).unwrap().len(), 1, "max bounds the extent count");
    }

    #[test]
    fn direct_io_handles_unaligned_requests_when_supported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("direct.img");
        let Ok(b) = FileBackend::sparse(&path, 64 << 10, true) else {
            eprintln!("skipped: this filesystem refuses O_DIRECT");
            return;
        };
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        b.write_at(&data, 1234).unwrap();
        let mut back = vec![0u8; data.len()];
        b.read_at(&mut back, 1234).unwrap();
        assert_eq!(back, data);
        let mut edge = [9u8; 2];
        b.read_at(&mut edge, 1233).unwrap();
        assert_eq!(edge, [0, data[0]]);
    }

    #[test]
    fn slow_backend_enforces_bandwidth() {
        let slow = SlowBackend::new(Box::new(MemoryBackend::new(1 << 20)), Duration::ZERO, Some(10 << 20));
        let start = Instant::now();
        let mut buf = vec![0u8; 256 << 10];
        for _ in 0..4 {
            slow.read_at(&mut buf, 0).unwrap();
        }
        // 1 MiB at 10 MiB/s takes about 100 ms.
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(95), "{took:?}");
    }
}

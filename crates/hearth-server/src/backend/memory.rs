//! The memory backend: an export held in RAM as 64 KiB chunks written in
//! place, as nbdkit's memory plugin keeps its sparse array.
//!
//! Design (issue 45, shape B in `docs/dev/issue45-extents.md`): a chunk is
//! allocated on its first write and absent chunks read as zeroes. A cache in
//! front keeps no copy of what is here: it asks for shared slices of the
//! chunks ([`Backend::share`]) and a read reply sends from them. A write to a
//! chunk nobody else holds lands in place (a run of a large write stays
//! together, whatever was written before); a chunk a reply still holds is
//! copied first, so what the reply sends never changes under it. Each chunk
//! has its own lock, so writes to different chunks copy at once (a write
//! spanning chunks is not atomic across them, which NBD does not promise).
//!
//! Absent chunks are reported as holes by [`Backend::extents`]; zeroing
//! whole chunks with `may_punch` makes them absent again.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{writable, Backend, Extent, SharedSlice};

/// Bytes per chunk: where the streaming copy starts to pay (`STREAMING_MIN`),
/// and a write to a chunk a reply holds copies at most this much.
const CHUNK: usize = 64 * 1024;

/// A zero-filled export in RAM; counts calls so tests can see which requests
/// reached the backend.
pub struct MemoryBackend {
    size: u64,
    /// Chunk `i`'s bytes (always [`CHUNK`] long, the last chunk's tail past
    /// `size` unused), or `None` while it reads as zeroes.
    chunks: Vec<Mutex<Option<Arc<[u8]>>>>,
    /// One chunk of zeroes, shared by every slice [`Backend::share`] hands
    /// out of an absent chunk.
    zeroes: Arc<[u8]>,
    reads: AtomicU64,
    flushes: AtomicU64,
}

impl MemoryBackend {
    /// A zeroed export of `size` bytes.
    pub fn new(size: u64) -> MemoryBackend {
        let count = usize::try_from(size.div_ceil(CHUNK as u64)).expect("memory backend size fits in usize");
        MemoryBackend {
            size,
            chunks: (0..count).map(|_| Mutex::new(None)).collect(),
            zeroes: Arc::from(vec![0u8; CHUNK]),
            reads: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        }
    }

    /// `read_at` calls so far ([`Backend::share`] is not counted: it is how
    /// a cache in front reads what it holds).
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }
    /// A copy of the stored bytes (for tests).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![0; self.size as usize];
        self.read_into(&mut out, 0);
        out
    }

    /// Bytes of RAM holding data: one chunk per present chunk (a chunk a
    /// reply still holds after a write replaced it is not counted).
    pub fn stored_bytes(&self) -> u64 {
        (0..self.chunks.len()).filter(|&c| self.chunk(c).is_some()).count() as u64 * CHUNK as u64
    }

    fn chunk(&self, c: usize) -> MutexGuard<'_, Option<Arc<[u8]>>> {
        // A panic mid-copy leaves bytes a concurrent reader could have seen
        // anyway: keep serving, as the cache does with its lock.
        self.chunks[c].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The chunks `[offset, offset+len)` touches, each as (chunk, offset
    /// within the chunk, offset within the range, length).
    fn pieces(&self, offset: u64, len: usize) -> impl Iterator<Item = (usize, usize, usize, usize)> {
        let cs = CHUNK as u64;
        let end = offset + len as u64;
        let first = offset / cs;
        let last = if len == 0 { first } else { (end - 1) / cs + 1 };
        (first..last).map(move |c| {
            let start = c * cs;
            let from = start.max(offset);
            let to = (start + cs).min(end);
            (c as usize, (from - start) as usize, (from - offset) as usize, (to - from) as usize)
        })
    }

    fn read_into(&self, buf: &mut [u8], offset: u64) {
        for (c, in_chunk, in_buf, n) in self.pieces(offset, buf.len()) {
            let out = &mut buf[in_buf..in_buf + n];
            match &*self.chunk(c) {
                Some(data) => out.copy_from_slice(&data[in_chunk..in_chunk + n]),
                None => out.fill(0),
            }
        }
    }

    /// Whether `len` bytes at chunk offset `in_chunk` cover chunk `c` (the
    /// last chunk counts as covered up to the export's end).
    fn covers(&self, c: usize, in_chunk: usize, len: usize) -> bool {
        let chunk_len = (self.size - (c * CHUNK) as u64).min(CHUNK as u64) as usize;
        in_chunk == 0 && len == chunk_len
    }
}

/// The bytes of a chunk, to change: allocated zeroed if absent, copied
/// first if a reply holds it.
fn chunk_bytes(slot: &mut Option<Arc<[u8]>>) -> &mut [u8] {
    writable(slot.get_or_insert_with(|| Arc::from(vec![0u8; CHUNK])))
}

impl Backend for MemoryBackend {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_into(buf, offset);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let streaming = buf.len() >= STREAMING_MIN;
        for (c, in_chunk, in_buf, n) in self.pieces(offset, buf.len()) {
            let src = &buf[in_buf..in_buf + n];
            let mut slot = self.chunk(c);
            if n == CHUNK && slot.as_mut().is_none_or(|d| Arc::get_mut(d).is_none()) {
                // A whole chunk with no buffer of its own: a fresh copy, no zeroing or copying first.
                *slot = Some(Arc::from(src));
                continue;
            }
            let dst = &mut chunk_bytes(&mut slot)[in_chunk..in_chunk + n];
            if streaming {
                copy_streaming(dst, src);
            } else {
                dst.copy_from_slice(src);
            }
        }
        Ok(())
    }

    fn share(&self, offset: u64, len: usize, out: &mut Vec<SharedSlice>) {
        for (c, in_chunk, _, n) in self.pieces(offset, len) {
            let chunk = self.chunk(c).as_ref().unwrap_or(&self.zeroes).clone();
            out.push(SharedSlice::new(chunk, in_chunk..in_chunk + n));
        }
    }

    fn shares_bytes(&self) -> bool {
        true
    }

    fn write_zeroes(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        for (c, in_chunk, _, n) in self.pieces(offset, len as usize) {
            let mut slot = self.chunk(c);
            if may_punch && self.covers(c, in_chunk, n) {
                *slot = None;
            } else if slot.is_some() || !may_punch {
                // Without may_punch the zeroes are stored (NBD's NO_HOLE).
                chunk_bytes(&mut slot)[in_chunk..in_chunk + n].fill(0);
            }
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("memory {}", hearth_core::format_bytes(self.size))
    }

    fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<Extent>> {
        let mut out: Vec<Extent> = Vec::new();
        for (c, _, _, n) in self.pieces(offset, len as usize) {
            let hole = self.chunk(c).is_none();
            let full = out.len() == max;
            match out.last_mut() {
                Some(e) if e.hole == hole => e.len += n as u64,
                _ if full => break,
                _ => out.push(Extent { len: n as u64, hole }),
            }
        }
        Ok(out)
    }

    fn waits(&self) -> bool {
        false
    }
}

/// Smallest write the memory backend stores in place with streaming stores:
/// large writes (streams, 1 MiB requests), where skipping the reads pays;
/// small random writes keep plain copies, as their lines may be read again soon.
const STREAMING_MIN: usize = 64 * 1024;

/// Copies `src` into `dst` with streaming (non-temporal) stores on x86_64
/// (plain copies elsewhere). A large write's bytes would leave the CPU
/// caches before they are read again anyway, so the destination's cache
/// lines need not be read in before being overwritten, nor push hotter data
/// out of the CPU caches.
fn copy_streaming(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_streaming of unequal lengths");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        dst[..head].copy_from_slice(&src[..head]);
        let chunks = (dst.len() - head) / 16;
        // SAFETY: dst[head..] starts 16-byte aligned (as _mm_stream_si128
        // needs), src needs no alignment (loadu), and the `chunks` 16-byte
        // accesses stay within both slices, which do not overlap (&mut).
        unsafe {
            let d = dst.as_mut_ptr().add(head).cast::<__m128i>();
            let s = src.as_ptr().add(head).cast::<__m128i>();
            for i in 0..chunks {
                _mm_stream_si128(d.add(i), _mm_loadu_si128(s.add(i)));
            }
            // Streaming stores are weakly ordered: fence them before the
            // lock release that makes them visible to readers.
            _mm_sfence();
        }
        let done = head + chunks * 16;
        dst[done..].copy_from_slice(&src[done..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_copies_equal_plain_ones_at_any_alignment_and_length() {
        let src: Vec<u8> = (0..STREAMING_MIN * 2 + 100).map(|i| (i % 251) as u8).collect();
        for (at, len) in [(0, STREAMING_MIN), (1, STREAMING_MIN + 7), (15, STREAMING_MIN * 2 + 33), (3, 100), (0, 0)] {
            let mut dst = vec![0xaa; src.len() + 32];
            copy_streaming(&mut dst[at..at + len], &src[5..5 + len]);
            assert_eq!(&dst[at..at + len], &src[5..5 + len], "at {at} len {len}");
            assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0xaa), "bytes around untouched");
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    #[test]
    fn bytes_round_trip_across_chunks_and_a_short_last_chunk() {
        let size = 2 * CHUNK as u64 + 10_000;
        let m = MemoryBackend::new(size);
        let data = pattern(CHUNK + 7000, 3);
        m.write_at(&data, CHUNK as u64 - 2500).unwrap();
        let mut back = vec![9u8; size as usize];
        m.read_at(&mut back, 0).unwrap();
        assert!(back[..CHUNK - 2500].iter().all(|&b| b == 0));
        assert_eq!(&back[CHUNK - 2500..2 * CHUNK + 4500], &data[..]);
        assert!(back[2 * CHUNK + 4500..].iter().all(|&b| b == 0));
        let big = pattern(size as usize, 7);
        m.write_at(&big, 0).unwrap();
        assert_eq!(m.snapshot(), big, "a large write (streaming stores) lands whole");
    }

    /// The bytes a range's shared slices hold, joined.
    fn shared(m: &MemoryBackend, offset: u64, len: usize) -> (Vec<SharedSlice>, Vec<u8>) {
        let mut slices = Vec::new();
        m.share(offset, len, &mut slices);
        let bytes = slices.iter().flat_map(|s| s.iter().copied()).collect();
        (slices, bytes)
    }

    #[test]
    fn shared_slices_are_the_bytes_and_keep_them_across_later_writes() {
        let m = MemoryBackend::new(4 * CHUNK as u64);
        let first = pattern(2 * CHUNK, 1);
        m.write_at(&first, 100).unwrap();
        let (slices, bytes) = shared(&m, 50, 2 * CHUNK);
        assert_eq!(slices.len(), 3, "one slice per chunk touched");
        assert_eq!(&bytes[..50], &[0u8; 50][..]);
        assert_eq!(&bytes[50..], &first[..2 * CHUNK - 50]);
        assert_eq!(m.reads(), 0, "sharing is not a backend read");
        let (_, holes) = shared(&m, 3 * CHUNK as u64, CHUNK);
        assert!(holes.iter().all(|&b| b == 0), "an absent chunk shares zeroes");

        // Small and whole-chunk writes while the slices are held: the slices keep the old bytes.
        m.write_at(b"xyz", 200).unwrap();
        m.write_at(&pattern(CHUNK, 9), CHUNK as u64).unwrap();
        let kept: Vec<u8> = slices.iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(kept, bytes, "a held slice never changes");
        let mut now = vec![0u8; 2 * CHUNK];
        m.read_at(&mut now, 0).unwrap();
        assert_eq!(&now[200..203], b"xyz");
        assert_eq!(&now[CHUNK..], &pattern(CHUNK, 9)[..]);
        assert_eq!(m.stored_bytes(), 3 * CHUNK as u64, "chunks 0..3 hold data, chunk 3 is absent");
    }

    #[test]
    fn a_chunk_nobody_holds_is_written_in_place() {
        let m = MemoryBackend::new(2 * CHUNK as u64);
        m.write_at(&pattern(CHUNK, 1), 0).unwrap();
        let at = |m: &MemoryBackend| shared(m, 0, 1).0[0].as_ptr();
        let before = at(&m);
        m.write_at(&pattern(4096, 2), 8192).unwrap();
        m.write_at(&pattern(CHUNK, 3), 0).unwrap();
        assert_eq!(at(&m), before, "small and whole-chunk writes landed in the same chunk");
        let held = shared(&m, 0, 1).0;
        m.write_at(&pattern(4096, 4), 0).unwrap();
        assert_ne!(at(&m), held[0].as_ptr(), "a chunk a reply holds is copied first");
    }

    #[test]
    fn absent_and_punched_chunks_are_holes() {
        let c = CHUNK as u64;
        let m = MemoryBackend::new(8 * c);
        assert_eq!(m.extents(0, 8 * c, 16).unwrap(), vec![Extent { len: 8 * c, hole: true }]);
        m.write_at(&[1u8; 100], 2 * c + 50).unwrap();
        m.write_at(&[1u8; 4096], 3 * c).unwrap();
        let map = m.extents(100, 8 * c - 100, 16).unwrap();
        let want = [(2 * c - 100, true), (2 * c, false), (4 * c, true)];
        assert_eq!(map, want.map(|(len, hole)| Extent { len, hole }));
        assert_eq!(m.extents(0, 8 * c, 1).unwrap().len(), 1, "max bounds the extent count");
        m.write_zeroes(2 * c + 60, 4096, true).unwrap();
        let mut back = vec![7u8; 4096];
        m.read_at(&mut back, 2 * c).unwrap();
        assert_eq!(&back[50..60], &[1u8; 10]);
        assert!(back[60..].iter().all(|&b| b == 0), "partial zeroing stores zeroes");
        m.write_zeroes(2 * c, 2 * c, true).unwrap();
        assert_eq!(m.extents(0, 8 * c, 16).unwrap(), vec![Extent { len: 8 * c, hole: true }]);
        m.write_zeroes(0, 4096, false).unwrap();
        assert_eq!(m.extents(0, c, 16).unwrap(), vec![Extent { len: c, hole: false }], "NO_HOLE allocates");
        assert!(m.snapshot().iter().all(|&b| b == 0));
    }
}

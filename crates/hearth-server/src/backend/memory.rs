//! The memory backend: an export held in RAM as block-sized shared buffers.
//!
//! Design (issue 13, "the memory backend storing data twice"): the data is a
//! sparse array of `Arc<[u8]>` buffers of one block size, absent meaning
//! zeroes. A cache in front with the same block size hands it its own block
//! buffers ([`Backend::write_blocks`]), which it keeps as they are: the
//! export's bytes then live once in RAM, shared by cache and backend,
//! instead of once in each. Neither side ever changes a shared buffer: a
//! write to a block whose buffer is also held elsewhere (by the cache, or by
//! a reply still sending it) replaces the buffer with a copy, so what the
//! other holder sees never changes under it. Writes given as bytes
//! ([`Backend::write_at`]) copy into the blocks, as before.
//!
//! Absent blocks are reported as holes by [`Backend::extents`]; zeroing
//! whole blocks with `may_punch` makes them absent again.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::{prefetch_counts, writable, Backend, BlockBuffers, Extent};

/// Block size of [`MemoryBackend::new`]: the servers' default cache block.
const DEFAULT_BLOCK: usize = 4096;

/// A zero-filled export in RAM; counts calls so tests can see which requests
/// reached the backend.
pub struct MemoryBackend {
    size: u64,
    block_size: usize,
    /// Block `i`'s bytes (always `block_size` long, the last block's tail
    /// past `size` unused), or `None` while it reads as zeroes.
    blocks: RwLock<Vec<Option<Arc<[u8]>>>>,
    /// One block of zeroes, shared by every block [`Backend::read_blocks`]
    /// hands out while it reads as zeroes: a cache holding many of them
    /// holds one buffer.
    zeroes: Arc<[u8]>,
    reads: AtomicU64,
    flushes: AtomicU64,
}

impl MemoryBackend {
    /// A zeroed export of `size` bytes in 4 KiB blocks.
    pub fn new(size: u64) -> MemoryBackend {
        MemoryBackend::with_block_size(size, DEFAULT_BLOCK as u64)
    }

    /// A zeroed export of `size` bytes kept in blocks of `block_size` bytes:
    /// a cache whose blocks are that size shares its buffers with it.
    pub fn with_block_size(size: u64, block_size: u64) -> MemoryBackend {
        assert!(block_size > 0, "memory backend block size must be positive");
        let block_size = usize::try_from(block_size).expect("memory backend block size fits in usize");
        let count = usize::try_from(size.div_ceil(block_size as u64)).expect("memory backend size fits in usize");
        MemoryBackend {
            size,
            block_size,
            blocks: RwLock::new(vec![None; count]),
            zeroes: Arc::from(vec![0u8; block_size]),
            reads: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        }
    }

    /// `read_at` and `read_blocks` calls so far.
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

    /// Bytes of RAM holding data: one block per present buffer (however
    /// many holders share it).
    pub fn stored_bytes(&self) -> u64 {
        let blocks = self.blocks.read().unwrap_or_else(|p| p.into_inner());
        blocks.iter().flatten().count() as u64 * self.block_size as u64
    }

    /// The blocks `[offset, offset+len)` touches, each as (block, offset
    /// within the block, offset within the range, length).
    fn pieces(&self, offset: u64, len: usize) -> impl Iterator<Item = (usize, usize, usize, usize)> + '_ {
        let bs = self.block_size as u64;
        let end = offset + len as u64;
        let first = offset / bs;
        let last = if len == 0 { first } else { (end - 1) / bs + 1 };
        (first..last).map(move |b| {
            let start = b * bs;
            let from = start.max(offset);
            let to = (start + bs).min(end);
            (b as usize, (from - start) as usize, (from - offset) as usize, (to - from) as usize)
        })
    }

    fn read_into(&self, buf: &mut [u8], offset: u64) {
        let blocks = self.blocks.read().unwrap_or_else(|p| p.into_inner());
        for (b, in_block, in_buf, n) in self.pieces(offset, buf.len()) {
            let out = &mut buf[in_buf..in_buf + n];
            match &blocks[b] {
                Some(data) => out.copy_from_slice(&data[in_block..in_block + n]),
                None => out.fill(0),
            }
        }
    }

    /// Whether `len` bytes at block offset `in_block` cover block `b` (the
    /// last block counts as covered up to the export's end).
    fn covers(&self, b: usize, in_block: usize, len: usize) -> bool {
        let block_len = (self.size - (b * self.block_size) as u64).min(self.block_size as u64) as usize;
        in_block == 0 && len == block_len
    }
}

/// The bytes of a block's buffer, to change: allocated zeroed if absent,
/// copied first if someone else holds it.
fn block_bytes(slot: &mut Option<Arc<[u8]>>, block_size: usize) -> &mut [u8] {
    writable(slot.get_or_insert_with(|| Arc::from(vec![0u8; block_size])))
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
        let bs = self.block_size;
        let streaming = buf.len() >= STREAMING_MIN;
        let mut blocks = self.blocks.write().unwrap_or_else(|p| p.into_inner());
        for (b, in_block, in_buf, n) in self.pieces(offset, buf.len()) {
            let src = &buf[in_buf..in_buf + n];
            let slot = &mut blocks[b];
            let replace = n == bs && slot.as_mut().is_none_or(|d| Arc::get_mut(d).is_none());
            if replace {
                // A whole block with no buffer of its own: a fresh copy, no zeroing first.
                *slot = Some(Arc::from(src));
                continue;
            }
            let dst = &mut block_bytes(slot, bs)[in_block..in_block + n];
            if streaming {
                copy_streaming(dst, src);
            } else {
                dst.copy_from_slice(src);
            }
        }
        Ok(())
    }

    fn write_blocks(&self, offset: u64, buffers: &[Arc<[u8]>]) -> io::Result<bool> {
        let bs = self.block_size as u64;
        let first = offset / bs;
        let fits = offset.is_multiple_of(bs)
            && buffers.iter().all(|b| b.len() == self.block_size)
            && first + buffers.len() as u64 <= self.size.div_ceil(bs);
        if !fits {
            return Ok(false);
        }
        let mut blocks = self.blocks.write().unwrap_or_else(|p| p.into_inner());
        let slots = &mut blocks[first as usize..first as usize + buffers.len()];
        // The buffers replaced are cold: their drops below then hit.
        slots.iter().flatten().for_each(prefetch_counts);
        for (slot, buf) in slots.iter_mut().zip(buffers) {
            *slot = Some(buf.clone());
        }
        Ok(true)
    }

    fn block_buffer_size(&self) -> Option<u64> {
        Some(self.block_size as u64)
    }

    fn read_blocks(&self, first: u64, count: usize) -> io::Result<Option<BlockBuffers>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let blocks = self.blocks.read().unwrap_or_else(|p| p.into_inner());
        let inside = usize::try_from(first).ok().and_then(|first| blocks.get(first..first.checked_add(count)?));
        let Some(slots) = inside else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("memory backend: blocks {first}..+{count} lie past its {} blocks", blocks.len()),
            ));
        };
        Ok(Some(slots.iter().map(|slot| slot.as_ref().unwrap_or(&self.zeroes).clone()).collect()))
    }

    fn write_zeroes(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        let bs = self.block_size;
        let mut blocks = self.blocks.write().unwrap_or_else(|p| p.into_inner());
        for (b, in_block, _, n) in self.pieces(offset, len as usize) {
            let slot = &mut blocks[b];
            if may_punch && self.covers(b, in_block, n) {
                *slot = None;
            } else if slot.is_some() || !may_punch {
                // Without may_punch the zeroes are stored (NBD's NO_HOLE).
                block_bytes(slot, bs)[in_block..in_block + n].fill(0);
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
        let blocks = self.blocks.read().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<Extent> = Vec::new();
        for (b, _, _, n) in self.pieces(offset, len as usize) {
            let hole = blocks[b].is_none();
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

/// Smallest write given as bytes ([`Backend::write_at`]: not shared with a
/// cache) that the memory backend stores in place with streaming stores:
/// large writes (streams, 1 MiB requests), where skipping the reads pays;
/// small random writes keep plain copies, as their lines may be read again soon.
const STREAMING_MIN: usize = 64 * 1024;

/// Copies `src` into `dst` with streaming (non-temporal) stores on x86_64
/// (plain copies elsewhere). A large write's copy in the backend is not read
/// again soon (a cache in front holds the same data), so the destination's
/// cache lines need not be read in before being overwritten, nor push
/// hotter data out of the CPU caches.
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
    fn bytes_round_trip_across_blocks_and_a_short_last_block() {
        let m = MemoryBackend::with_block_size(10_000, 4096);
        let data = pattern(7000, 3);
        m.write_at(&data, 2500).unwrap();
        let mut back = vec![9u8; 10_000];
        m.read_at(&mut back, 0).unwrap();
        assert!(back[..2500].iter().all(|&b| b == 0));
        assert_eq!(&back[2500..9500], &data[..]);
        assert!(back[9500..].iter().all(|&b| b == 0));
        let big = pattern(10_000, 7);
        m.write_at(&big, 0).unwrap();
        assert_eq!(m.snapshot(), big, "a large write (streaming stores) lands whole");
    }

    #[test]
    fn taken_blocks_are_kept_shared_and_a_later_write_does_not_reach_them() {
        let m = MemoryBackend::with_block_size(4 * 4096, 4096);
        let given: Vec<Arc<[u8]>> = (0..2).map(|i| Arc::from(pattern(4096, i))).collect();
        assert!(m.write_blocks(4096, &given).unwrap());
        assert_eq!(Arc::strong_count(&given[0]), 2, "kept, not copied");
        assert_eq!(m.stored_bytes(), 2 * 4096);
        m.write_at(b"xyz", 4096 + 10).unwrap();
        assert_eq!(&given[0][..], &pattern(4096, 0)[..], "the giver's buffer is unchanged");
        assert_eq!(Arc::strong_count(&given[0]), 1, "the backend copied before writing");
        let mut back = vec![0u8; 4096];
        m.read_at(&mut back, 4096).unwrap();
        assert_eq!(&back[10..13], b"xyz");
        assert_eq!(back[..10], pattern(4096, 0)[..10]);
        assert!(!m.write_blocks(100, &given).unwrap(), "unaligned: not taken");
        assert!(!m.write_blocks(0, &[Arc::from(vec![0u8; 512])]).unwrap(), "other block size: not taken");
        assert!(!m.write_blocks(3 * 4096, &given).unwrap(), "past the end: not taken");
    }

    #[test]
    fn absent_and_punched_blocks_are_holes() {
        let m = MemoryBackend::with_block_size(8 * 4096, 4096);
        assert_eq!(m.extents(0, 8 * 4096, 16).unwrap(), vec![Extent { len: 8 * 4096, hole: true }]);
        m.write_at(&[1u8; 100], 2 * 4096 + 50).unwrap();
        m.write_at(&[1u8; 4096], 3 * 4096).unwrap();
        let map = m.extents(100, 8 * 4096 - 100, 16).unwrap();
        let want = [(2 * 4096 - 100, true), (2 * 4096, false), (4 * 4096, true)];
        assert_eq!(map, want.map(|(len, hole)| Extent { len, hole }));
        assert_eq!(m.extents(0, 8 * 4096, 1).unwrap().len(), 1, "max bounds the extent count");
        m.write_zeroes(2 * 4096 + 60, 4096, true).unwrap();
        let mut back = vec![7u8; 4096];
        m.read_at(&mut back, 2 * 4096).unwrap();
        assert_eq!(&back[50..60], &[1u8; 10]);
        assert!(back[60..].iter().all(|&b| b == 0), "partial zeroing stores zeroes");
        m.write_zeroes(2 * 4096, 2 * 4096, true).unwrap();
        assert_eq!(m.extents(0, 8 * 4096, 16).unwrap(), vec![Extent { len: 8 * 4096, hole: true }]);
        m.write_zeroes(0, 4096, false).unwrap();
        assert_eq!(m.extents(0, 4096, 16).unwrap(), vec![Extent { len: 4096, hole: false }], "NO_HOLE allocates");
        assert!(m.snapshot().iter().all(|&b| b == 0));
    }
}

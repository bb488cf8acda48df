//! Copies with streaming (non-temporal) stores, for writing large amounts
//! of data into cold memory.

/// Smallest write whose data is stored with streaming stores: large writes
/// (streams, 1 MiB requests), where skipping the reads of the destination
/// pays; small random writes keep plain copies, as their lines may be read
/// again soon.
pub(crate) const STREAMING_MIN: usize = 64 * 1024;

/// Copies `src` into `dst` with streaming (non-temporal) stores on x86_64
/// (plain copies elsewhere): the destination's cache lines are not read in
/// before being overwritten, nor push hotter data out of the CPU caches.
/// For destinations that are cold and wholly overwritten (a block's new
/// buffer, the memory backend's copy) with data not read again soon.
pub(crate) fn copy_streaming(dst: &mut [u8], src: &[u8]) {
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
}

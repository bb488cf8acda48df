//! Payload buffers a connection reuses: read replies and write payloads.
//! Freshly allocated buffers of a MiB or more are mapped and unmapped by
//! the allocator each time, and a stream of 1 MiB reads then spends more
//! time faulting in zeroed pages than copying data.

use std::sync::Mutex;

/// Capacity one connection keeps for reuse; buffers past it are freed.
const KEPT_BYTES: usize = 8 << 20;
/// Most buffers kept (a request's search for one is a scan of these).
const KEPT_BUFFERS: usize = 32;
/// Smaller buffers (status replies) are not worth keeping.
const SMALLEST_KEPT: usize = 4096;

#[derive(Default)]
pub(super) struct BufferPool {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl BufferPool {
    /// An empty buffer with room for `capacity` bytes.
    pub(super) fn take(&self, capacity: usize) -> Vec<u8> {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        match kept.buffers.iter().rposition(|b| b.capacity() >= capacity) {
            Some(i) => {
                let buf = kept.buffers.swap_remove(i);
                kept.bytes -= buf.capacity();
                buf
            }
            None => Vec::with_capacity(capacity),
        }
    }

    /// Keeps `buf` for a later [`take`](Self::take), if there is room.
    pub(super) fn give(&self, mut buf: Vec<u8>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let room = kept.buffers.len() < KEPT_BUFFERS && kept.bytes + buf.capacity() <= KEPT_BYTES;
        if room && buf.capacity() >= SMALLEST_KEPT {
            buf.clear();
            kept.bytes += buf.capacity();
            kept.buffers.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_a_large_enough_buffer_and_keeps_a_bounded_amount() {
        let pool = BufferPool::default();
        let mut a = pool.take(1 << 20);
        a.extend_from_slice(&[7; 100]);
        let at = a.as_ptr();
        pool.give(a);
        let b = pool.take(4096);
        assert_eq!(b.as_ptr(), at, "the kept buffer is reused");
        assert!(b.is_empty(), "a reused buffer comes back empty");
        let c = pool.take(4096);
        assert_ne!(c.as_ptr(), at, "a buffer is handed out once");
        for _ in 0..20 {
            pool.give(Vec::with_capacity(1 << 20));
        }
        assert!(pool.kept.lock().unwrap().bytes <= KEPT_BYTES);
        let pool = BufferPool::default();
        for _ in 0..100 {
            pool.give(Vec::with_capacity(SMALLEST_KEPT));
            pool.give(Vec::with_capacity(32));
        }
        let kept = pool.kept.lock().unwrap();
        assert_eq!(kept.buffers.len(), KEPT_BUFFERS, "a bounded number, none of them small");
        assert!(kept.buffers.iter().all(|b| b.capacity() >= SMALLEST_KEPT));
    }
}

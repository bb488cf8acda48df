//! Sequential cutoff, as bcache names it: reads that continue a long
//! sequential stream (a backup, a scan, a copy) bypass the cache, so one
//! pass over a large file does not push out the working set.

/// Recent streams remembered (the end of each and how far it has run).
const STREAMS: usize = 64;

/// Recognizes sequential streams among an export's reads, whichever
/// connection issues them: a read that starts where a recent stream ended
/// extends it; once a stream has read more than `cutoff` bytes, its reads
/// bypass the cache.
pub(crate) struct SequentialCutoff {
    cutoff: u64,
    /// (end offset, bytes read in a row), replaced round robin.
    streams: Vec<(u64, u64)>,
    next: usize,
}

impl SequentialCutoff {
    pub(crate) fn new(cutoff: u64) -> SequentialCutoff {
        SequentialCutoff { cutoff, streams: Vec::with_capacity(STREAMS), next: 0 }
    }

    /// Records a read of `len` bytes at `offset`; true if it should bypass
    /// the cache.
    pub(crate) fn bypass(&mut self, offset: u64, len: u64) -> bool {
        let end = offset.saturating_add(len);
        if let Some(s) = self.streams.iter_mut().find(|s| s.0 == offset) {
            *s = (end, s.1.saturating_add(len));
            return s.1 > self.cutoff;
        }
        if self.streams.len() < STREAMS {
            self.streams.push((end, len));
        } else {
            self.streams[self.next] = (end, len);
            self.next = (self.next + 1) % STREAMS;
        }
        len > self.cutoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_stream_bypasses_once_past_the_cutoff() {
        let mut c = SequentialCutoff::new(4 * MIB);
        let bypassed: Vec<bool> = (0..6).map(|i| c.bypass(i * MIB, MIB)).collect();
        assert_eq!(bypassed, [false, false, false, false, true, true]);
        // A read elsewhere starts a stream of its own.
        assert!(!c.bypass(100 * MIB, 4096));
        assert!(c.bypass(6 * MIB, MIB), "the first stream goes on");
        assert!(c.bypass(200 * MIB, 5 * MIB), "one read over the cutoff");
    }

    #[test]
    fn interleaved_streams_are_told_apart_and_random_reads_never_bypass() {
        let mut c = SequentialCutoff::new(2 * MIB);
        let mut last = (false, false);
        for i in 0..4 {
            last = (c.bypass(i * MIB, MIB), c.bypass(1000 * MIB + i * MIB, MIB));
        }
        assert_eq!(last, (true, true));
        let mut x = 12345u64;
        for _ in 0..10_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            assert!(!c.bypass((x >> 20) % (1 << 30) * 4096, 4096));
        }
    }
}

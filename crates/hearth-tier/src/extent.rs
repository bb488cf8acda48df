//! Trace requests as runs of whole blocks, the unit the tiering simulator,
//! the partitioners and the prefetcher work in.

use hearth_core::{Op, Request};

/// One request: `blocks` consecutive blocks from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub time_ns: u64,
    pub start: u64,
    pub blocks: u32,
    pub write: bool,
}

impl Extent {
    pub fn block_range(&self) -> std::ops::Range<u64> {
        self.start..self.start + u64::from(self.blocks)
    }
}

/// Reads requests into extents of `block_size`-byte blocks. Zero-length
/// requests touch no block and are dropped; requests other than reads and
/// writes (trim, flush) too, since they move no data. The first error of
/// `requests` (a reader's) ends it.
pub fn extents<E>(requests: impl Iterator<Item = Result<Request, E>>, block_size: u32) -> Result<Vec<Extent>, E> {
    assert!(block_size > 0, "block size must be positive");
    let bs = u64::from(block_size);
    let mut out = Vec::new();
    for request in requests {
        let r = request?;
        if r.len == 0 || r.op == Op::Other {
            continue;
        }
        let first = r.offset / bs;
        let last = (r.offset + u64::from(r.len) - 1) / bs;
        let blocks = u32::try_from(last - first + 1).unwrap_or(u32::MAX);
        out.push(Extent { time_ns: r.time_ns, start: first, blocks, write: r.op == Op::Write });
    }
    Ok(out)
}

/// Distinct blocks the extents touch.
pub fn footprint_blocks(extents: &[Extent]) -> u64 {
    let mut seen = rustc_hash::FxHashSet::default();
    for e in extents {
        seen.extend(e.block_range());
    }
    seen.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_requests_cover_every_block_they_touch() {
        let req = |offset, len, op| Ok::<_, String>(Request { time_ns: 5, offset, len, op, ..Request::default() });
        let got = extents(
            vec![req(4095, 2, Op::Read), req(8192, 4096, Op::Write), req(0, 0, Op::Read), req(0, 512, Op::Other)]
                .into_iter(),
            4096,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                Extent { time_ns: 5, start: 0, blocks: 2, write: false },
                Extent { time_ns: 5, start: 2, blocks: 1, write: true },
            ]
        );
        assert_eq!(footprint_blocks(&got), 3);
    }
}

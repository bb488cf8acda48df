//! OBL: one-block lookahead, as libCacheSim 0.3.5 runs it. Once the last
//! `k` requests were the `k` blocks just before this one, in order, the next
//! block is prefetched. Every demand read counts, hit or miss.
//!
//! Parameters as libCacheSim names them: `sequential-confidence-k` (4) and
//! `block-size` (512 bytes), the size a prefetched object takes in an object
//! cache (`hearth sim --prefetch` in object mode; in a block cache every
//! block has the cache's block size).

use hearth_core::Key;

use crate::{Demand, PrefetchError, Prefetcher};

pub struct Obl {
    /// The last `k` blocks requested, oldest at `next`.
    recent: Vec<Key>,
    next: usize,
    object_size: u32,
}

impl Obl {
    pub fn new(k: usize, object_size: u32) -> Result<Obl, PrefetchError> {
        if k == 0 {
            return Err(PrefetchError::range("obl", "sequential-confidence-k must be at least 1"));
        }
        if object_size == 0 {
            return Err(PrefetchError::range("obl", "block-size must be at least 1 byte"));
        }
        // No block is u64::MAX's predecessor run, so the start never matches.
        Ok(Obl { recent: vec![u64::MAX; k], next: 0, object_size })
    }

    /// Whether the last `k` requests were `block - k`, ..., `block - 1`.
    fn follows_a_run(&self, block: Key) -> bool {
        let k = self.recent.len();
        (0..k).all(|i| self.recent[(self.next + i) % k] == block.wrapping_sub((k - i) as u64))
    }
}

impl Prefetcher for Obl {
    fn name(&self) -> String {
        "OBL".into()
    }

    fn access(&mut self, d: &Demand, cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        let sequential = self.follows_a_run(d.block);
        self.recent[self.next] = d.block;
        self.next = (self.next + 1) % self.recent.len();
        let ahead = d.block.wrapping_add(1);
        if sequential && !cached(ahead) {
            out.push(ahead);
        }
    }

    fn object_size(&self) -> Option<u32> {
        Some(self.object_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;
    use hearth_core::Op;

    fn run(p: &mut Obl, blocks: &[Key]) -> Vec<Vec<Key>> {
        blocks
            .iter()
            .map(|&block| {
                let mut out = Vec::new();
                let d = Demand { block, ctx: 0, time_ns: 0, op: Op::Read, class: Class::Hit };
                p.access(&d, &|_| false, &mut out);
                out
            })
            .collect()
    }

    #[test]
    fn prefetches_the_next_block_after_k_sequential_ones() {
        let mut p = Obl::new(2, 512).unwrap();
        // 10, 11 then 12: the two before 12 ran up to it.
        let got = run(&mut p, &[10, 11, 12, 13, 20, 21, 5, 22]);
        let empty: Vec<Key> = Vec::new();
        assert_eq!(
            got,
            vec![empty.clone(), empty.clone(), vec![13], vec![14], empty.clone(), empty.clone(), empty.clone(), empty]
        );
        // A block repeated is no run.
        let mut p = Obl::new(1, 512).unwrap();
        assert_eq!(run(&mut p, &[7, 7, 8]), vec![vec![], vec![], vec![9]]);
        assert!(Obl::new(0, 512).is_err());
    }
}

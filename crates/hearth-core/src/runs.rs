//! Hashing that keeps runs of consecutive blocks in neighbouring buckets.
//!
//! A request of many blocks (a 1 MiB read or write is 256 blocks of 4 KiB)
//! looks each block up in several maps. With a scattering hash (FxHash, the
//! policies' [`KeyMap`](crate::KeyMap)), every lookup lands on a cache line
//! of its own, which the request's payload, just copied through the CPU's
//! caches, has pushed out: one miss to memory per block per map.
//! [`run_hash`] keeps a block's place in its aligned run of 16 as the low
//! bits of the hash, so a run's blocks probe 16 neighbouring buckets
//! (hashbrown picks a bucket by the low bits and scans 16 control bytes at
//! once), while the runs themselves spread as FxHash spreads keys.
//!
//! The simulator keeps FxHash: replaying a trace whose hot keys are one
//! dense range, its LRU ran 4-7% slower with the run hash as every
//! policy's index. So the policies are not changed; the server hands them
//! [`run_keyed`] blocks instead, keys whose FxHash *is* the block's run
//! hash (both maps are bijections, so this is a renaming of blocks the
//! policies cannot tell from the real numbers), and maps keys coming back
//! with [`block_of`]. Maps the server keys by block number itself use
//! [`RunMap`] and [`RunSet`].

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

use crate::Key;

/// Blocks per run: hashbrown's SSE2 group width.
const LANE_BITS: u32 = 4;
const LANE_MASK: u64 = (1 << LANE_BITS) - 1;
/// Bits of a run's number (a block number without its lane).
const RUN_BITS: u32 = u64::BITS - LANE_BITS;
const RUN_MASK: u64 = (1 << RUN_BITS) - 1;
/// FxHash's multiplier and final rotation (rustc-hash 2): the hash of a
/// `u64` key `k` in a [`KeyMap`](crate::KeyMap) is `(k * FX).rotate_left(FX_TURN)`.
/// Runs are spread the same way: multiplying by the odd `FX` is a bijection
/// (modulo 2^60 too), and the rotation turns the product's well-mixed top
/// bits down to where hashbrown picks a bucket.
const FX: u64 = 0xf135_7aea_2e62_a9c5;
const FX_INVERSE: u64 = inverse(FX);
const FX_TURN: u32 = 26;

/// The multiplicative inverse of odd `a` modulo 2^64 (Newton's iteration:
/// each step doubles the correct low bits, from 3).
const fn inverse(a: u64) -> u64 {
    let mut x = a;
    let mut step = 0;
    while step < 5 {
        x = x.wrapping_mul(2u64.wrapping_sub(a.wrapping_mul(x)));
        step += 1;
    }
    x
}

/// Rotates the low [`RUN_BITS`] bits of `x` left by `by`.
fn turn_run(x: u64, by: u32) -> u64 {
    ((x << by) | (x >> (RUN_BITS - by))) & RUN_MASK
}

/// The hash of `block`: its run's number spread (times an odd constant,
/// modulo 2^60, top bits turned down), then the lane (the block's place in
/// its run) as the low bits, and mixed into the top bits too, which
/// hashbrown keeps as each entry's tag, so that a run's blocks do not all
/// share one tag. A bijection: [`block_of_run_hash`] undoes it.
pub fn run_hash(block: u64) -> u64 {
    let lane = block & LANE_MASK;
    let spread = turn_run((block >> LANE_BITS).wrapping_mul(FX) & RUN_MASK, FX_TURN);
    ((spread << LANE_BITS) | lane) ^ (lane << RUN_BITS)
}

/// The block whose [`run_hash`] is `hash`.
fn block_of_run_hash(hash: u64) -> u64 {
    let lane = hash & LANE_MASK;
    let spread = (hash ^ (lane << RUN_BITS)) >> LANE_BITS;
    let run = turn_run(spread, RUN_BITS - FX_TURN).wrapping_mul(FX_INVERSE) & RUN_MASK;
    (run << LANE_BITS) | lane
}

/// The key a [`KeyMap`](crate::KeyMap) hashes to `block`'s [`run_hash`]:
/// what the server hands its policy for `block`.
pub fn run_keyed(block: u64) -> Key {
    run_hash(block).rotate_right(FX_TURN).wrapping_mul(FX_INVERSE)
}

/// The block `key` stands for ([`run_keyed`] undone).
pub fn block_of(key: Key) -> u64 {
    block_of_run_hash(key.wrapping_mul(FX).rotate_left(FX_TURN))
}

/// Hashes block numbers with [`run_hash`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RunHash;

impl BuildHasher for RunHash {
    type Hasher = RunHasher;
    fn build_hasher(&self) -> RunHasher {
        RunHasher::default()
    }
}

/// The [`Hasher`] of [`RunHash`]; meant for `u64` keys.
#[derive(Default)]
pub struct RunHasher {
    hash: u64,
}

impl Hasher for RunHasher {
    fn write_u64(&mut self, block: u64) {
        self.hash = run_hash(self.hash ^ block);
    }

    /// Other key types: each 8 bytes (zero-padded) as one `write_u64`.
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A map keyed by block number, runs of blocks in neighbouring buckets.
pub type RunMap<V> = HashMap<u64, V, RunHash>;
/// A set of block numbers, runs of blocks in neighbouring buckets.
pub type RunSet = HashSet<u64, RunHash>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks near 0, near the top, and scattered between.
    fn samples() -> impl Iterator<Item = u64> {
        let scattered = (0..20_000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 7));
        (0..5_000).chain((u64::MAX - 5_000)..=u64::MAX).chain(scattered)
    }

    #[test]
    fn the_inverses_are_inverses() {
        assert_eq!(FX.wrapping_mul(FX_INVERSE), 1);
    }

    #[test]
    fn renaming_blocks_is_a_bijection() {
        for block in samples() {
            assert_eq!(block_of_run_hash(run_hash(block)), block, "block {block}");
            assert_eq!(block_of(run_keyed(block)), block, "block {block}");
        }
    }

    /// If rustc-hash changes its algorithm, policies still see distinct
    /// keys (the renaming is a bijection whatever the hash), but runs no
    /// longer share cache lines: this says so.
    #[test]
    fn a_key_map_hashes_a_run_keyed_block_to_its_run_hash() {
        let fx = rustc_hash::FxBuildHasher;
        for block in samples() {
            assert_eq!(fx.hash_one(run_keyed(block)), run_hash(block), "block {block}");
            assert_eq!(RunHash.hash_one(block), run_hash(block));
        }
    }

    #[test]
    fn a_runs_blocks_take_neighbouring_buckets_and_distinct_tags() {
        let bucket_mask = (1u64 << 20) - 1;
        for run in [0u64, 1, 77, 1 << 30] {
            let first = run << LANE_BITS;
            let hashes: Vec<u64> = (first..first + 16).map(run_hash).collect();
            for (lane, h) in hashes.iter().enumerate() {
                assert_eq!(h & bucket_mask, (hashes[0] & bucket_mask) + lane as u64);
            }
            let mut tags: Vec<u64> = hashes.iter().map(|h| h >> 57).collect();
            tags.sort_unstable();
            tags.dedup();
            assert_eq!(tags.len(), 16, "run {run}: tags {tags:?}");
        }
        // Consecutive runs spread over the table rather than sitting side by side.
        let buckets: HashSet<u64> = (0..4096u64).map(|run| run_hash(run << LANE_BITS) & bucket_mask).collect();
        assert!(buckets.len() >= 4050, "4096 runs in {} buckets", buckets.len());
        let bucket = |run: u64| run_hash(run << LANE_BITS) & bucket_mask;
        let neighbours = (0..4095u64).filter(|&run| bucket(run + 1).abs_diff(bucket(run)) < 64).count();
        assert!(neighbours < 64, "{neighbours} of 4095 consecutive runs are neighbours");
    }
}

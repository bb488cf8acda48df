//! Cache blocks shared with a memory backend that keeps block buffers: the
//! data stays exact on both sides through evictions, partial rewrites,
//! write-back clean-outs and replies still sending old data.

use super::*;
use crate::backend::MemoryBackend;

const BS: u32 = 4096;
const BSU: usize = BS as usize;

fn setup(blocks_in_backend: u64, blocks_in_cache: u64, mode: CacheMode) -> (Arc<MemoryBackend>, BlockCache) {
    let backend = Arc::new(MemoryBackend::with_block_size(blocks_in_backend * u64::from(BS), u64::from(BS)));
    let policy = hearth_policy::build("lru", blocks_in_cache * u64::from(BS)).unwrap();
    let cache = BlockCache::new(Box::new(backend.clone()), policy, BS, mode);
    (backend, cache)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// How many holders `block`'s cached buffer has (the cache's one included).
fn holders(cache: &BlockCache, block: u64) -> usize {
    Arc::strong_count(&cache.lock().blocks[&block])
}

fn read(cache: &BlockCache, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    cache.read(offset, &mut buf).unwrap();
    buf
}

#[test]
fn whole_block_writes_are_shared_and_survive_eviction_and_partial_rewrites() {
    let (backend, cache) = setup(64, 4, CacheMode::Through);
    let data = pattern(3 * BSU, 1);
    cache.write(0, &data, false).unwrap();
    assert_eq!(holders(&cache, 1), 2, "the cache and the backend hold one buffer");
    assert_eq!(backend.stored_bytes(), 3 * u64::from(BS));
    // Push the three blocks out of the cache.
    for b in 10..20u64 {
        read(&cache, b * u64::from(BS), BSU);
    }
    assert_eq!(cache.occupancy().0, 4);
    assert!(!cache.lock().blocks.contains_key(&1), "evicted");
    assert_eq!(backend.snapshot()[..3 * BSU], data[..], "the backend kept the data the cache dropped");
    // Rewrite parts of them: at a block's start, inside one, across two.
    cache.write(BS as u64, b"start", false).unwrap();
    cache.write(2 * u64::from(BS) + 100, b"inside", false).unwrap();
    cache.write(u64::from(BS) - 3, b"across", false).unwrap();
    let mut want = data.clone();
    want[BSU..BSU + 5].copy_from_slice(b"start");
    want[2 * BSU + 100..2 * BSU + 106].copy_from_slice(b"inside");
    want[BSU - 3..BSU + 3].copy_from_slice(b"across");
    assert_eq!(backend.snapshot()[..3 * BSU], want[..]);
    assert_eq!(read(&cache, 0, 3 * BSU), want);
    // A partial write at the start of a cached, shared block keeps the rest.
    cache.write(0, &pattern(3 * BSU, 2), false).unwrap();
    assert_eq!(holders(&cache, 0), 2);
    cache.write(0, b"head", false).unwrap();
    let mut want = pattern(3 * BSU, 2);
    want[..4].copy_from_slice(b"head");
    assert_eq!(read(&cache, 0, 3 * BSU), want);
    assert_eq!(backend.snapshot()[..3 * BSU], want[..]);
    assert_eq!(holders(&cache, 0), 2, "after the partial write the cache holds the backend's new buffer: one copy");
}

#[test]
fn a_reply_keeps_its_data_across_writes_of_a_shared_block() {
    let (backend, cache) = setup(16, 8, CacheMode::Through);
    let old = pattern(2 * BSU, 3);
    cache.write(0, &old, false).unwrap();
    let mut held = Vec::new();
    assert!(cache.read_cached(0, 2 * BSU, &mut held));
    assert_eq!(holders(&cache, 0), 3, "cache, backend and the reply");
    cache.write(0, &pattern(BSU, 4), false).unwrap(); // whole block
    cache.write(u64::from(BS), b"part", false).unwrap(); // partial, at the block's start
    let sent: Vec<u8> = held.iter().flat_map(|s| s.iter().copied()).collect();
    assert_eq!(sent, old, "the reply sends the data as it was read");
    let mut now = pattern(BSU, 4);
    now.extend_from_slice(&old[BSU..]);
    now[BSU..BSU + 4].copy_from_slice(b"part");
    assert_eq!(read(&cache, 0, 2 * BSU), now);
    assert_eq!(backend.snapshot()[..2 * BSU], now[..]);
}

#[test]
fn write_back_hands_cleaned_blocks_over_and_later_writes_copy_them() {
    let (backend, cache) = setup(64, 4, CacheMode::Back { dirty_limit: 1 << 20 });
    let data = pattern(2 * BSU, 5);
    cache.write(0, &data, false).unwrap();
    assert_eq!(holders(&cache, 0), 1, "dirty: only in the cache");
    cache.flush().unwrap();
    assert_eq!(holders(&cache, 0), 2, "cleaned: handed to the backend");
    cache.write(10, b"dirty again", false).unwrap();
    assert_eq!(backend.snapshot()[..2 * BSU], data[..], "the backend's copy is unchanged until written back");
    // Evicting the dirty block writes it back; the other is rewritten once gone.
    for b in 10..20u64 {
        read(&cache, b * u64::from(BS), BSU);
    }
    cache.write(u64::from(BS) + 1, b"late", false).unwrap();
    cache.flush().unwrap();
    let mut want = data;
    want[10..21].copy_from_slice(b"dirty again");
    want[BSU + 1..BSU + 5].copy_from_slice(b"late");
    assert_eq!(backend.snapshot()[..2 * BSU], want[..]);
    assert_eq!(read(&cache, 0, 2 * BSU), want);
}

#[test]
fn zeroing_a_shared_block_leaves_no_stale_copy_and_reports_a_hole() {
    let (backend, cache) = setup(8, 8, CacheMode::Through);
    cache.write(0, &pattern(4 * BSU, 6), false).unwrap();
    cache.discard(u64::from(BS), 2 * u64::from(BS), false, true, false).unwrap();
    cache.discard(10, 20, false, true, false).unwrap();
    let mut want = pattern(4 * BSU, 6);
    want[BSU..3 * BSU].fill(0);
    want[10..30].fill(0);
    assert_eq!(read(&cache, 0, 4 * BSU), want);
    assert_eq!(backend.snapshot()[..4 * BSU], want[..]);
    let map = cache.extents(0, 8 * u64::from(BS), 8).unwrap();
    let runs = [(1, false), (2, true), (1, false), (4, true)];
    assert_eq!(map, runs.map(|(n, hole)| Extent { len: n * u64::from(BS), hole }));
}

#[test]
fn a_cache_of_another_block_size_copies_as_before() {
    let backend = Arc::new(MemoryBackend::with_block_size(64 * 1024, 8192));
    let policy = hearth_policy::build("lru", 64 * 1024).unwrap();
    let cache = BlockCache::new(Box::new(backend.clone()), policy, BS, CacheMode::Through);
    let data = pattern(8 * BSU, 7);
    cache.write(0, &data, false).unwrap();
    assert_eq!(holders(&cache, 0), 1, "not shared");
    assert_eq!(backend.snapshot()[..8 * BSU], data[..]);
    assert_eq!(read(&cache, 0, 8 * BSU), data);
}

#[test]
fn large_rewrites_refill_old_buffers_exactly() {
    let (backend, cache) = setup(64, 64, CacheMode::Through);
    // The second pass frees the first pass's buffers; the third refills them.
    for seed in [8, 9, 10] {
        let reusable = cache.lock().free.0.len();
        let data = pattern(20 * BSU, seed);
        cache.write(4 * u64::from(BS), &data, false).unwrap();
        assert_eq!(read(&cache, 4 * u64::from(BS), 20 * BSU), data);
        assert_eq!(backend.snapshot()[4 * BSU..24 * BSU], data[..]);
        assert_eq!(holders(&cache, 4), 2, "shared with the backend");
        if seed == 10 {
            assert_eq!(reusable, 20, "the third pass had the second's freed buffers to refill");
        }
    }
}

#[test]
fn a_reply_holding_one_block_of_a_large_rewrite_keeps_its_bytes() {
    let (backend, cache) = setup(64, 64, CacheMode::Through);
    let old = pattern(20 * BSU, 11);
    cache.write(4 * u64::from(BS), &old, false).unwrap();
    let mut reply = Vec::new();
    assert!(cache.read_cached(10 * u64::from(BS), BSU, &mut reply));
    let new = pattern(20 * BSU, 12);
    cache.write(4 * u64::from(BS), &new, false).unwrap();
    assert_eq!(&reply[0][..], &old[6 * BSU..7 * BSU], "the reply sends what it read");
    assert_eq!(read(&cache, 4 * u64::from(BS), 20 * BSU), new);
    assert_eq!(backend.snapshot()[4 * BSU..24 * BSU], new[..]);
    assert_eq!(cache.lock().free.0.len(), 19, "the old buffers no reply holds are kept for reuse");
}

/// Buffers handed out for a payload to be read into are shared like a
/// copied write's; single blocks are not handed out; and a mode switch
/// between handing them out and the write still writes their bytes.
#[test]
fn filled_write_buffers_are_shared_and_survive_a_mode_switch() {
    let (backend, cache) = setup(64, 8, CacheMode::Through);
    assert!(cache.write_buffers(0, u64::from(BS)).is_none(), "one block is copied instead");
    assert!(cache.write_buffers(100, 2 * u64::from(BS)).is_none(), "not whole blocks");
    let fill = |blocks: &mut Vec<BlockBuf>, seed| {
        let data = pattern(blocks.len() * BSU, seed);
        for (buf, piece) in blocks.iter_mut().zip(data.chunks(BSU)) {
            Arc::get_mut(buf).unwrap().copy_from_slice(piece);
        }
        data
    };
    let mut blocks = cache.write_buffers(4 * u64::from(BS), 3 * u64::from(BS)).expect("whole blocks, write-through");
    let data = fill(&mut blocks, 3);
    cache.write_filled(4 * u64::from(BS), 3 * u64::from(BS), blocks, false).unwrap();
    assert_eq!(read(&cache, 4 * u64::from(BS), 3 * BSU), data);
    assert_eq!(holders(&cache, 5), 2, "the cache and the backend hold one buffer");

    let mut blocks = cache.write_buffers(10 * u64::from(BS), 2 * u64::from(BS)).unwrap();
    let data = fill(&mut blocks, 9);
    cache.set_mode(CacheMode::Back { dirty_limit: 8 * u64::from(BS) }).unwrap();
    cache.write_filled(10 * u64::from(BS), 2 * u64::from(BS), blocks, false).unwrap();
    assert_eq!(read(&cache, 10 * u64::from(BS), 2 * BSU), data);
    cache.flush().unwrap();
    let mut stored = vec![0u8; 2 * BSU];
    backend.read_at(&mut stored, 10 * u64::from(BS)).unwrap();
    assert_eq!(stored, data, "written back after the switch");
}

#[test]
fn unaligned_writes_through_hold_the_backends_buffers_and_stay_exact() {
    let bs = u64::from(BS);
    let (backend, cache) = setup(64, 4, CacheMode::Through);
    let mut want = vec![0u8; 64 * BSU];
    // Writes through the cache and into `want`, the bytes the export must hold.
    let write = |cache: &BlockCache, want: &mut Vec<u8>, offset: u64, data: &[u8]| {
        cache.write(offset, data, false).unwrap();
        want[offset as usize..offset as usize + data.len()].copy_from_slice(data);
    };
    write(&cache, &mut want, 0, &pattern(3 * BSU, 1));
    let mut reply = Vec::new();
    assert!(cache.read_cached(0, 3 * BSU, &mut reply), "cached whole");
    let sent_before: Vec<u8> = reply.iter().flat_map(|s| s.iter().copied()).collect();

    // Rewrite across all three cached blocks, unaligned: each now holds the
    // buffer the backend keeps (one copy in RAM), and a reply still sending
    // the old data sees it unchanged.
    write(&cache, &mut want, 100, &pattern(2 * BSU, 2));
    for b in 0..3 {
        assert_eq!(holders(&cache, b), 2, "block {b}: the cache and the backend hold one buffer");
    }
    assert_eq!(reply.iter().flat_map(|s| s.iter().copied()).collect::<Vec<u8>>(), sent_before);
    drop(reply);
    assert_eq!(read(&cache, 0, 3 * BSU), want[..3 * BSU]);

    // An unaligned write whose inner blocks are whole: those are cached from the backend's buffers.
    write(&cache, &mut want, 8 * bs + 10, &pattern(3 * BSU, 3));
    for b in 9..11 {
        assert_eq!(holders(&cache, b), 2, "block {b}: write-allocated without a second copy");
    }
    assert_eq!(backend.stored_bytes(), 7 * bs, "blocks 0-2 and 8-11, each stored once");

    // Eviction drops the cache's hold only: the backend still has every byte.
    for b in 20..30 {
        read(&cache, b * bs, BSU);
    }
    for b in [0, 1, 2, 9, 10] {
        assert!(!cache.lock().blocks.contains_key(&b), "block {b} evicted");
    }
    assert_eq!(backend.snapshot(), want, "nothing lost on eviction");
    // Read back through the cache (misses now), rewrite one block in part, and flush.
    assert_eq!(read(&cache, 0, 12 * BSU), want[..12 * BSU]);
    write(&cache, &mut want, 9 * bs + 7, b"after eviction");
    let flushes = backend.flushes();
    cache.flush().unwrap();
    assert_eq!(backend.flushes(), flushes + 1, "the flush reached the backend");
    assert_eq!(backend.snapshot(), want);
    assert_eq!(read(&cache, 0, 64 * BSU), want);
}

/// A read miss caches the buffers the backend keeps (no second copy in
/// RAM; its blocks of zeroes come as one shared buffer), and a write
/// afterwards copies instead of changing what the backend or a reply holds.
#[test]
fn a_read_miss_holds_the_backends_buffers_and_a_write_copies_them() {
    let bs = u64::from(BS);
    let (backend, cache) = setup(64, 16, CacheMode::Through);
    let data = pattern(4 * BSU, 13);
    backend.write_at(&data, 0).unwrap();
    let stored = backend.stored_bytes();
    let mut want = data.clone();
    want.resize(8 * BSU, 0);
    assert_eq!(read(&cache, 0, 8 * BSU), want, "blocks 0-3 written, 4-7 zeroes");
    let theirs = backend.read_blocks(0, 8).unwrap().unwrap();
    for (b, buf) in (0..8).zip(&theirs) {
        assert!(Arc::ptr_eq(&cache.lock().blocks[&b], buf), "block {b}: the backend's own buffer, not a copy");
    }
    assert!(Arc::ptr_eq(&theirs[4], &theirs[7]), "blocks of zeroes share one buffer");
    assert_eq!(backend.stored_bytes(), stored, "reading stored nothing new in the backend");
    drop(theirs);
    assert_eq!(holders(&cache, 1), 2, "the cache and the backend hold one buffer");

    let mut reply = Vec::new();
    assert!(cache.read_cached(0, 8 * BSU, &mut reply));
    // Writes in part (a written block, a block of zeroes) and whole.
    cache.write(bs + 5, b"part", false).unwrap();
    cache.write(5 * bs + 5, b"part", false).unwrap();
    cache.write(2 * bs, &pattern(BSU, 14), false).unwrap();
    let sent: Vec<u8> = reply.iter().flat_map(|s| s.iter().copied()).collect();
    assert_eq!(sent, want, "a reply still sending the blocks sends them as read");
    let zeroes = backend.read_blocks(6, 1).unwrap().unwrap();
    assert!(zeroes[0].iter().all(|&b| b == 0), "the shared block of zeroes is still zeroes");
    want[BSU + 5..BSU + 9].copy_from_slice(b"part");
    want[5 * BSU + 5..5 * BSU + 9].copy_from_slice(b"part");
    want[2 * BSU..3 * BSU].copy_from_slice(&pattern(BSU, 14));
    assert_eq!(read(&cache, 0, 8 * BSU), want);
    assert_eq!(backend.snapshot()[..8 * BSU], want[..]);
    for b in [1, 2, 5] {
        assert_eq!(holders(&cache, b), 2, "block {b}: after the write, one buffer again");
    }

    // Write-back: a write to a block a read miss shares copies it; the
    // backend's bytes change only when it is written back.
    cache.set_mode(CacheMode::Back { dirty_limit: 1 << 20 }).unwrap();
    let block10 = pattern(BSU, 15);
    backend.write_at(&block10, 10 * bs).unwrap();
    assert_eq!(read(&cache, 10 * bs, BSU), block10);
    assert_eq!(holders(&cache, 10), 2);
    cache.write(10 * bs + 1, b"dirty", false).unwrap();
    assert_eq!(holders(&cache, 10), 1, "dirty: the cache's own copy");
    assert_eq!(backend.snapshot()[10 * BSU..11 * BSU], block10[..], "not written back yet");
    cache.flush().unwrap();
    assert_eq!(&backend.snapshot()[10 * BSU + 1..10 * BSU + 6], b"dirty");
}

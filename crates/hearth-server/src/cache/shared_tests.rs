//! A cache over a backend that keeps its bytes in RAM (the memory backend):
//! clean blocks are marks, not copies, so the export's bytes are in RAM once;
//! the data stays exact through evictions, partial rewrites, write-back
//! (whose dirty blocks keep their bytes until written back) and replies
//! still sending old data. And over a backend that keeps its bytes apart,
//! the cache keeps copies as before.

use super::*;
use crate::backend::testing::TestBackend;
use crate::backend::MemoryBackend;

const BS: u32 = 4096;
const BSU: usize = BS as usize;

fn setup(blocks_in_backend: u64, blocks_in_cache: u64, mode: CacheMode) -> (Arc<MemoryBackend>, BlockCache) {
    let backend = Arc::new(MemoryBackend::new(blocks_in_backend * u64::from(BS)));
    let policy = hearth_policy::build("lru", blocks_in_cache * u64::from(BS)).unwrap();
    let cache = BlockCache::new(Box::new(backend.clone()), policy, BS, mode);
    (backend, cache)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
}

/// Whether `block` is resident with its bytes left to the backend.
fn marked(cache: &BlockCache, block: u64) -> bool {
    matches!(cache.lock().blocks.get(&block), Some(Held::InBackend))
}

/// Resident blocks whose bytes the cache keeps itself.
fn own_copies(cache: &BlockCache) -> usize {
    cache.lock().blocks.values().filter(|h| matches!(h, Held::Bytes(_))).count()
}

fn read(cache: &BlockCache, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    cache.read(offset, &mut buf).unwrap();
    buf
}

fn joined(reply: &[SharedSlice]) -> Vec<u8> {
    reply.iter().flat_map(|s| s.iter().copied()).collect()
}

#[test]
fn writes_leave_marks_not_copies_and_survive_eviction_and_partial_rewrites() {
    let (backend, cache) = setup(64, 4, CacheMode::Through);
    let data = pattern(3 * BSU, 1);
    cache.write(0, &data, false).unwrap();
    assert!((0..3).all(|b| marked(&cache, b)), "written whole: resident, bytes in the backend");
    assert_eq!(own_copies(&cache), 0);
    assert_eq!(backend.stored_bytes(), 64 * 1024, "one chunk, stored once");
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
    // A partial write to a resident block: still a mark, and the rest kept.
    cache.write(0, &pattern(3 * BSU, 2), false).unwrap();
    cache.write(0, b"head", false).unwrap();
    let mut want = pattern(3 * BSU, 2);
    want[..4].copy_from_slice(b"head");
    assert_eq!(read(&cache, 0, 3 * BSU), want);
    assert_eq!(backend.snapshot()[..3 * BSU], want[..]);
    assert!(marked(&cache, 0));
    assert_eq!(own_copies(&cache), 0);
}

#[test]
fn a_hit_shares_one_slice_per_chunk_of_marked_blocks() {
    let (_, cache) = setup(64, 64, CacheMode::Back { dirty_limit: 1 << 20 });
    cache.set_mode(CacheMode::Through).unwrap();
    let data = pattern(32 * BSU, 3);
    cache.write(0, &data, false).unwrap();
    let mut reply = Vec::new();
    assert!(cache.read_cached(100, 32 * BSU - 200, &mut reply));
    assert_eq!(reply.len(), 2, "32 blocks in two 64 KiB chunks: two slices");
    assert_eq!(joined(&reply), data[100..32 * BSU - 100]);
    // A dirty block in the middle keeps its own bytes: the run splits around it.
    cache.set_mode(CacheMode::Back { dirty_limit: 1 << 20 }).unwrap();
    cache.write(5 * u64::from(BS) + 1, b"dirty", false).unwrap();
    assert!(!marked(&cache, 5));
    let mut reply = Vec::new();
    assert!(cache.read_cached(0, 8 * BSU, &mut reply));
    assert_eq!(reply.len(), 3, "blocks 0-4 from the backend, 5 from the cache, 6-7 from the backend");
    let mut want = data[..8 * BSU].to_vec();
    want[5 * BSU + 1..5 * BSU + 6].copy_from_slice(b"dirty");
    assert_eq!(joined(&reply), want);
    assert!(!cache.read_cached(60 * u64::from(BS), BSU, &mut reply), "a block not resident is a miss");
    assert_eq!(reply.len(), 3, "a miss appends nothing");
}

#[test]
fn a_reply_keeps_its_data_across_writes_of_its_chunk() {
    let (backend, cache) = setup(16, 8, CacheMode::Through);
    let old = pattern(2 * BSU, 3);
    cache.write(0, &old, false).unwrap();
    let mut held = Vec::new();
    assert!(cache.read_cached(0, 2 * BSU, &mut held));
    cache.write(0, &pattern(BSU, 4), false).unwrap(); // whole block
    cache.write(u64::from(BS), b"part", false).unwrap(); // partial, at the block's start
    assert_eq!(joined(&held), old, "the reply sends the data as it was read");
    let mut now = pattern(BSU, 4);
    now.extend_from_slice(&old[BSU..]);
    now[BSU..BSU + 4].copy_from_slice(b"part");
    assert_eq!(read(&cache, 0, 2 * BSU), now);
    assert_eq!(backend.snapshot()[..2 * BSU], now[..]);
}

#[test]
fn write_back_keeps_dirty_bytes_until_written_back_then_lets_them_go() {
    let (backend, cache) = setup(64, 4, CacheMode::Back { dirty_limit: 1 << 20 });
    let data = pattern(2 * BSU, 5);
    cache.write(0, &data, false).unwrap();
    assert_eq!(own_copies(&cache), 2, "dirty: only in the cache");
    assert!(backend.snapshot()[..2 * BSU].iter().all(|&b| b == 0), "not written back yet");
    cache.flush().unwrap();
    assert!(marked(&cache, 0) && marked(&cache, 1), "written back: the cache lets its copies go");
    cache.write(10, b"dirty again", false).unwrap();
    assert!(!marked(&cache, 0), "a partial write to a marked block takes a copy of the backend's bytes");
    assert_eq!(backend.snapshot()[..2 * BSU], data[..], "the backend's copy is unchanged until written back");
    let mut want = data;
    want[10..21].copy_from_slice(b"dirty again");
    assert_eq!(read(&cache, 0, 2 * BSU), want, "reads see the dirty bytes");
    // Evicting the dirty block writes it back; the other is rewritten once gone.
    for b in 10..20u64 {
        read(&cache, b * u64::from(BS), BSU);
    }
    assert_eq!(backend.snapshot()[..11], want[..11], "written back at eviction");
    cache.write(u64::from(BS) + 1, b"late", false).unwrap();
    cache.flush().unwrap();
    want[BSU + 1..BSU + 5].copy_from_slice(b"late");
    assert_eq!(backend.snapshot()[..2 * BSU], want[..]);
    assert_eq!(read(&cache, 0, 2 * BSU), want);
}

#[test]
fn zeroing_leaves_no_stale_bytes_and_reports_a_hole_per_chunk() {
    let bs = u64::from(BS);
    let (backend, cache) = setup(64, 64, CacheMode::Through);
    cache.write(0, &pattern(32 * BSU, 6), false).unwrap();
    cache.discard(16 * bs, 16 * bs, false, true, false).unwrap();
    cache.discard(10, 20, false, true, false).unwrap();
    let mut want = pattern(32 * BSU, 6);
    want[16 * BSU..].fill(0);
    want[10..30].fill(0);
    want.resize(64 * BSU, 0);
    assert_eq!(read(&cache, 0, 64 * BSU), want);
    assert_eq!(backend.snapshot(), want);
    let map = cache.extents(0, 64 * bs, 8).unwrap();
    assert_eq!(map, [(16, false), (48, true)].map(|(n, hole)| Extent { len: n * bs, hole }));
}

/// Over a backend that keeps its bytes to itself (any but RAM), the cache
/// holds copies, and a reply holding one block of a large rewrite keeps its bytes.
#[test]
fn over_a_backend_keeping_its_bytes_the_cache_copies_as_before() {
    let memory = Arc::new(MemoryBackend::new(64 * u64::from(BS)));
    let policy = hearth_policy::build("lru", 64 * u64::from(BS)).unwrap();
    let backend = TestBackend::over(memory.clone()).keeping_bytes();
    let cache = BlockCache::new(Box::new(backend), policy, BS, CacheMode::Through);
    let old = pattern(20 * BSU, 11);
    cache.write(4 * u64::from(BS), &old, false).unwrap();
    assert_eq!(own_copies(&cache), 20);
    let mut reply = Vec::new();
    assert!(cache.read_cached(10 * u64::from(BS), BSU, &mut reply));
    let new = pattern(20 * BSU, 12);
    cache.write(4 * u64::from(BS), &new, false).unwrap();
    assert_eq!(&reply[0][..], &old[6 * BSU..7 * BSU], "the reply sends what it read");
    assert_eq!(read(&cache, 4 * u64::from(BS), 20 * BSU), new);
    assert_eq!(memory.snapshot()[4 * BSU..24 * BSU], new[..]);
}

#[test]
fn unaligned_writes_through_stay_exact_with_one_copy() {
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
    let sent_before = joined(&reply);

    // Rewrite across all three cached blocks, unaligned: a reply still
    // sending the old data sees it unchanged.
    write(&cache, &mut want, 100, &pattern(2 * BSU, 2));
    assert_eq!(joined(&reply), sent_before);
    drop(reply);
    assert_eq!(read(&cache, 0, 3 * BSU), want[..3 * BSU]);

    // An unaligned write whose inner blocks are whole: those are write-allocated as marks.
    write(&cache, &mut want, 8 * bs + 10, &pattern(3 * BSU, 3));
    assert!(marked(&cache, 9) && marked(&cache, 10));
    assert!(!cache.lock().blocks.contains_key(&8), "a partial write to an absent block allocates nothing");
    assert_eq!(own_copies(&cache), 0);

    // Eviction drops the cache's mark only: the backend still has every byte.
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

/// A read miss leaves marks (no second copy in RAM, nothing new stored in
/// the backend), and writes afterwards change neither what a reply holds
/// nor the backend's shared zeroes.
#[test]
fn a_read_miss_leaves_marks_and_later_writes_spare_replies() {
    let bs = u64::from(BS);
    let (backend, cache) = setup(64, 32, CacheMode::Through);
    let data = pattern(4 * BSU, 13);
    backend.write_at(&data, 0).unwrap();
    let stored = backend.stored_bytes();
    let mut want = data.clone();
    want.resize(20 * BSU, 0);
    assert_eq!(read(&cache, 0, 20 * BSU), want, "blocks 0-3 written, 4-19 zeroes (chunk 1 absent)");
    assert!((0..20).all(|b| marked(&cache, b)));
    assert_eq!(backend.stored_bytes(), stored, "reading stored nothing new in the backend");

    let mut reply = Vec::new();
    assert!(cache.read_cached(0, 16 * BSU, &mut reply));
    // Writes in part (a written block, a block of zeroes) and whole, and one into the absent chunk.
    cache.write(bs + 5, b"part", false).unwrap();
    cache.write(5 * bs + 5, b"part", false).unwrap();
    cache.write(2 * bs, &pattern(BSU, 14), false).unwrap();
    cache.write(17 * bs, b"new chunk", false).unwrap();
    assert_eq!(joined(&reply), want[..16 * BSU], "a reply still sending the blocks sends them as read");
    want[BSU + 5..BSU + 9].copy_from_slice(b"part");
    want[5 * BSU + 5..5 * BSU + 9].copy_from_slice(b"part");
    want[2 * BSU..3 * BSU].copy_from_slice(&pattern(BSU, 14));
    want[17 * BSU..17 * BSU + 9].copy_from_slice(b"new chunk");
    assert_eq!(read(&cache, 0, 20 * BSU), want);
    assert_eq!(backend.snapshot()[..20 * BSU], want[..]);
    let mut zeroes = Vec::new();
    backend.share(40 * bs, BSU, &mut zeroes);
    assert!(zeroes[0].iter().all(|&b| b == 0), "the shared chunk of zeroes is still zeroes");
}

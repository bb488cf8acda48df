use super::*;
use crate::backend::testing::{Pause, Switches, TestBackend};
use crate::backend::MemoryBackend;
use std::sync::Arc;

pub(super) const BS: u32 = 4096;

/// A cache of `blocks` blocks over a memory backend of `size` bytes whose
/// bytes are `i % 251` (a backend that shares its bytes: the cache keeps none).
pub(super) fn setup(size: u64, blocks: u64, mode: CacheMode) -> (Arc<MemoryBackend>, BlockCache) {
    let (backend, cache) = setup_over(size, blocks, mode, |memory| Box::new(memory));
    (backend, cache)
}

/// As [`setup`], with the memory wrapped by `wrap` (a backend that keeps
/// its bytes apart makes the cache keep copies).
fn setup_over(
    size: u64,
    blocks: u64,
    mode: CacheMode,
    wrap: impl FnOnce(Arc<MemoryBackend>) -> Box<dyn Backend>,
) -> (Arc<MemoryBackend>, BlockCache) {
    let backend = Arc::new(MemoryBackend::new(size));
    let pattern: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    backend.write_at(&pattern, 0).unwrap();
    let policy = hearth_policy::build("lru", blocks * u64::from(BS)).unwrap();
    let cache = BlockCache::new(wrap(backend.clone()), policy, BS, mode);
    (backend, cache)
}

/// A cache over a jittery backend, or over one with a fixed 200 µs
/// latency (which widens the window between a read and its fill).
fn setup_racy(size: u64, blocks: u64, mode: CacheMode, jitter: bool) -> (Arc<MemoryBackend>, BlockCache) {
    let backend = Arc::new(MemoryBackend::new(size));
    let policy = hearth_policy::build("lru", blocks * u64::from(BS)).unwrap();
    let racy: Box<dyn Backend> = if jitter {
        Box::new(TestBackend::over(backend.clone()).pausing(Pause::AfterEachCall { max_us: 400 }))
    } else {
        let latency = std::time::Duration::from_micros(200);
        Box::new(crate::backend::SlowBackend::new(Box::new(backend.clone()), latency, None))
    };
    (backend.clone(), BlockCache::new(racy, policy, BS, mode))
}

/// The bytes a cache-only read returns, or None if it had to miss.
pub(super) fn cached(cache: &BlockCache, offset: u64, len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    cache.read_cached(offset, len, &mut out).then(|| out.iter().flat_map(|s| s.iter().copied()).collect())
}

fn expected(offset: u64, len: usize) -> Vec<u8> {
    (offset..offset + len as u64).map(|i| (i % 251) as u8).collect()
}

#[test]
fn cached_reads_never_reach_the_backend() {
    let (backend, cache) = setup(1 << 20, 64, CacheMode::Through);
    let mut buf = vec![0u8; 10_000];
    cache.read(5000, &mut buf).unwrap();
    assert_eq!(buf, expected(5000, 10_000));
    let after_first = backend.reads();
    assert_eq!(after_first, 1, "one run of missing blocks is one backend read");
    for _ in 0..5 {
        assert_eq!(cached(&cache, 5000, 10_000).as_ref(), Some(&buf));
        let mut again = vec![0u8; 100];
        cache.read(4096, &mut again).unwrap();
    }
    assert_eq!(backend.reads(), after_first);
    assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 3);
    // A read overlapping one uncached block fetches just that block.
    let mut wider = vec![0u8; 4096 * 4];
    cache.read(0, &mut wider).unwrap();
    assert_eq!(wider, expected(0, 4096 * 4));
    assert_eq!(backend.reads(), after_first + 1);
    assert_eq!(backend.snapshot()[..100], expected(0, 100)[..]);
}

/// Slices a reply holds keep the data as it was read: writes (through and
/// back) to their blocks, and evictions that reuse block buffers, change
/// the cache, not the slices; over a backend sharing its bytes and over
/// one keeping them apart (the cache's own copies).
#[test]
fn held_cached_slices_keep_the_data_they_were_read_with() {
    let modes = [CacheMode::Through, CacheMode::Back { dirty_limit: 1 << 20 }];
    for (mode, shares) in modes.into_iter().flat_map(|m| [(m, true), (m, false)]) {
        let wrap = |memory: Arc<MemoryBackend>| -> Box<dyn Backend> {
            if shares {
                Box::new(memory)
            } else {
                Box::new(TestBackend::over(memory).keeping_bytes())
            }
        };
        let (_, cache) = setup_over(1 << 20, 2, mode, wrap);
        let mut buf = vec![0u8; 8192];
        cache.read(0, &mut buf).unwrap();
        let mut held = Vec::new();
        assert!(cache.read_cached(100, 5000, &mut held));
        cache.write(0, &[1u8; 4096], false).unwrap();
        cache.write(4096 + 10, &[2u8; 10], false).unwrap();
        let bytes: Vec<u8> = held.iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(bytes, expected(100, 5000), "{mode:?}, shares {shares}: the reply sends what was read");
        let mut now = expected(0, 8192);
        now[..4096].fill(1);
        now[4096 + 10..4096 + 20].fill(2);
        assert_eq!(cached(&cache, 0, 8192), Some(now), "{mode:?}: the cache has the writes");
        // Evict both held blocks: new blocks must not land in their buffers.
        let mut later = vec![0u8; 8192];
        cache.read(64 * 1024, &mut later).unwrap();
        assert_eq!(cached(&cache, 64 * 1024, 8192), Some(expected(64 * 1024, 8192)));
        let bytes: Vec<u8> = held.iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(bytes, expected(100, 5000), "{mode:?}: eviction leaves a held slice alone");
    }
}

#[test]
fn short_last_block_reads_correctly() {
    let size = 3 * 4096 + 100;
    let (_, cache) = setup(size, 8, CacheMode::Through);
    let mut buf = vec![0u8; 200];
    cache.read(size - 200, &mut buf).unwrap();
    assert_eq!(buf, expected(size - 200, 200));
    assert_eq!(cached(&cache, size - 50, 50), Some(expected(size - 50, 50)));
}

#[test]
fn write_through_reaches_backend_and_updates_cache() {
    let (backend, cache) = setup(1 << 20, 64, CacheMode::Through);
    let mut buf = vec![0u8; 8192];
    cache.read(0, &mut buf).unwrap();
    // Partial write into a cached block, and a whole-block write to an absent one.
    cache.write(100, b"hello", false).unwrap();
    cache.write(40960, &[7u8; 4096], true).unwrap();
    let snap = backend.snapshot();
    assert_eq!(&snap[100..105], b"hello");
    assert_eq!(&snap[40960..45056], &[7u8; 4096][..]);
    assert!(backend.flushes() >= 1, "FUA flushes the backend");
    let reads = backend.reads();
    let buf = cached(&cache, 96, 12).expect("cached");
    assert_eq!(&buf[4..9], b"hello");
    assert_eq!(&buf[9..12], &expected(105, 3)[..]);
    assert_eq!(&buf[..4], &expected(96, 4)[..]);
    assert_eq!(cached(&cache, 40960, 4096), Some(vec![7u8; 4096]), "whole-block writes are cached");
    assert_eq!(backend.reads(), reads);
}

#[test]
fn evictions_respect_capacity() {
    let (backend, cache) = setup(1 << 20, 4, CacheMode::Through);
    let mut buf = vec![0u8; 4096];
    for b in 0..10u64 {
        cache.read(b * 4096, &mut buf).unwrap();
        assert_eq!(buf, expected(b * 4096, 4096));
    }
    assert_eq!(cache.occupancy().0, 4);
    assert!(cached(&cache, 9 * 4096, 4096).is_some(), "LRU keeps the newest");
    assert!(cached(&cache, 0, 4096).is_none());
    assert_eq!(backend.reads(), 10);
}

#[test]
fn write_back_holds_writes_until_flush_and_writes_back_on_eviction() {
    let (backend, cache) = setup(1 << 20, 8, CacheMode::Back { dirty_limit: 6 * 4096 });
    cache.write(4096, &[1u8; 4096], false).unwrap();
    cache.write(8192 + 10, b"xyz", false).unwrap(); // partial: read-modify-write
    let snap = backend.snapshot();
    assert_eq!(snap[4096..8192], expected(4096, 4096)[..], "not on the backend yet");
    let mut buf = vec![0u8; 20];
    cache.read(8192, &mut buf).unwrap();
    assert_eq!(&buf[10..13], b"xyz");
    assert_eq!(&buf[..10], &expected(8192, 10)[..]);
    assert_eq!(cache.occupancy().1, 2);
    cache.flush().unwrap();
    let snap = backend.snapshot();
    assert_eq!(snap[4096..8192], [1u8; 4096]);
    assert_eq!(&snap[8202..8205], b"xyz");
    assert_eq!(cache.occupancy().1, 0);

    // Dirty blocks pushed out by the policy are written first.
    cache.write(0, &[9u8; 4096], false).unwrap();
    let mut buf = vec![0u8; 4096];
    for b in 20..40u64 {
        cache.read(b * 4096, &mut buf).unwrap();
    }
    assert_eq!(backend.snapshot()[..4096], [9u8; 4096]);
}

#[test]
fn write_back_dirty_limit_and_fua_write_through() {
    let (backend, cache) = setup(1 << 20, 16, CacheMode::Back { dirty_limit: 2 * 4096 });
    cache.write(0, &[3u8; 4096], true).unwrap();
    assert_eq!(backend.snapshot()[..4096], [3u8; 4096], "FUA reaches the backend");
    for b in 1..4u64 {
        cache.write(b * 4096, &[b as u8; 4096], false).unwrap();
    }
    assert!(cache.occupancy().1 <= 2, "exceeding the dirty limit flushes");
    assert_eq!(backend.snapshot()[4096..8192], [1u8; 4096]);
}

#[test]
fn discard_zeroes_and_drops_cached_blocks() {
    for mode in [CacheMode::Through, CacheMode::Back { dirty_limit: 1 << 20 }] {
        let (_, cache) = setup(1 << 20, 64, mode);
        let mut buf = vec![0u8; 3 * 4096];
        cache.read(0, &mut buf).unwrap();
        cache.write(8192, &[5u8; 4096], false).unwrap();
        cache.discard(100, 10_000, false, true, false).unwrap();
        cache.read(0, &mut buf).unwrap();
        assert_eq!(buf[..100], expected(0, 100)[..], "{mode:?}");
        assert!(buf[100..10_100].iter().all(|&b| b == 0), "{mode:?}");
        assert_eq!(buf[10_100..12_288], [5u8; 2188][..], "{mode:?}");
    }
}

/// Concurrent overlapping reads and writes must leave the cache agreeing
/// with the backend: every block read through the cache afterwards equals
/// the backend's bytes.
#[test]
fn concurrent_reads_and_writes_keep_cache_and_backend_equal() {
    let modes = [CacheMode::Through, CacheMode::Back { dirty_limit: 16 * 4096 }];
    for (mode, jitter) in modes.into_iter().flat_map(|m| [(m, true), (m, false)]) {
        // The cache holds every block, so a stale one would survive to the check.
        let (backend, cache) = setup_racy(64 * 4096, 128, mode, jitter);
        let cache = Arc::new(cache);
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    let mut x = t * 7919 + 1;
                    let mut buf = vec![0u8; 3 * 4096];
                    for i in 0..1000u64 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let offset = (x >> 33) % (62 * 4096);
                        let len = 1 + ((x >> 20) % (2 * 4096)) as usize;
                        if i % 3 == 0 {
                            buf[..len].fill((t * 50 + i % 50) as u8);
                            cache.write(offset, &buf[..len], false).unwrap();
                        } else if i % 5 == 1 {
                            // Zeroing drops cached blocks, so later reads miss again.
                            cache.discard(offset, len as u64, false, true, false).unwrap();
                        } else {
                            cache.read(offset, &mut buf[..len]).unwrap();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        cache.flush().unwrap();
        let truth = backend.snapshot();
        let mut buf = vec![0u8; 4096];
        for b in 0..64u64 {
            cache.read(b * 4096, &mut buf).unwrap();
            assert_eq!(buf[..], truth[(b * 4096) as usize..((b + 1) * 4096) as usize], "{mode:?} block {b}");
        }
    }
}

/// Write-back under pressure: writers (each owning its blocks, some
/// writes FUA, some zeroing), a reader forcing evictions and a thread
/// flushing in a loop, over a backend that pauses *before* each write so
/// a write-back copy lands late. Every block must end with its owner's last
/// write on the backend: an older copy landing after a newer one would
/// show as a lost update.
#[test]
fn write_back_never_lands_an_older_copy_after_a_newer_one() {
    const BLOCKS: u64 = 48;
    let memory = Arc::new(MemoryBackend::new(BLOCKS * 4096));
    let policy = hearth_policy::build("lru", 12 * 4096).unwrap();
    let backend: Box<dyn Backend> =
        Box::new(TestBackend::over(memory.clone()).pausing(Pause::BeforeWrites { max_us: 300 }));
    let cache = Arc::new(BlockCache::new(backend, policy, BS, CacheMode::Back { dirty_limit: 6 * 4096 }));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let background: Vec<_> = (0..2)
        .map(|role| {
            let (cache, stop) = (cache.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 4096];
                let mut x = 99u64 + role;
                while !stop.load(Ordering::Relaxed) {
                    if role == 0 {
                        cache.flush().unwrap();
                    } else {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        cache.read((x >> 33) % BLOCKS * 4096, &mut buf).unwrap();
                    }
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..3u64)
        .map(|t| {
            let cache = cache.clone();
            std::thread::spawn(move || {
                let mut last = std::collections::HashMap::new();
                let mut x = t + 1;
                for i in 0..300u64 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let block = ((x >> 33) % (BLOCKS / 3)) * 3 + t;
                    let value = (t * 80 + i % 80 + 1) as u8;
                    if i % 17 == 0 {
                        cache.discard(block * 4096, 4096, false, true, false).unwrap();
                        last.insert(block, 0u8);
                    } else {
                        cache.write(block * 4096, &[value; 4096], i % 7 == 0).unwrap();
                        last.insert(block, value);
                    }
                }
                last
            })
        })
        .collect();
    let mut expected = std::collections::HashMap::new();
    for w in writers {
        expected.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for t in background {
        t.join().unwrap();
    }
    cache.flush().unwrap();
    assert_eq!(cache.occupancy().1, 0, "nothing dirty after FLUSH");
    let truth = memory.snapshot();
    for (&block, &value) in &expected {
        let on_disk = &truth[(block * 4096) as usize..((block + 1) * 4096) as usize];
        assert!(on_disk.iter().all(|&b| b == value), "block {block}: expected {value}, backend has {}", on_disk[0]);
    }
    let mut buf = vec![0u8; 4096];
    for (&block, &value) in &expected {
        cache.read(block * 4096, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == value), "block {block} read through the cache");
    }
}

/// The ordering rule, made deterministic: FLUSH copies block 0 (value 1)
/// and its backend write is held at a gate; meanwhile block 0 is rewritten
/// (2) and evicted. The eviction's write-back must wait for the held copy,
/// so the backend ends with 2, not with the older 1 landing last.
#[test]
fn write_backs_under_the_lock_wait_for_an_unlocked_copy_of_the_same_block() {
    let faulty = TestBackend::new(16 * 4096);
    let (memory, switches) = (faulty.memory.clone(), faulty.switches.clone());
    let backend = Box::new(faulty);
    let policy = hearth_policy::build("lru", 2 * 4096).unwrap();
    let cache = Arc::new(BlockCache::new(backend, policy, BS, CacheMode::Back { dirty_limit: 1 << 20 }));
    cache.write(0, &[1u8; 4096], false).unwrap();
    switches.hold_next_write.store(true, Ordering::SeqCst); // the flush's write of block 0
    let flusher = {
        let cache = cache.clone();
        std::thread::spawn(move || cache.flush().unwrap())
    };
    while cache.in_flight.lock().unwrap().is_empty() {
        std::thread::yield_now();
    }
    cache.write(0, &[2u8; 4096], false).unwrap();
    let mut buf = vec![0u8; 4096];
    for b in 1..4u64 {
        cache.read(b * 4096, &mut buf).unwrap(); // evicts block 0, dirty with 2
    }
    flusher.join().unwrap();
    cache.flush().unwrap();
    assert!(memory.snapshot()[..4096].iter().all(|&b| b == 2), "eviction: the older copy landed last");

    // The same with a FUA write of the block instead of an eviction: the
    // FUA write-back waits too, and the block must not be left clean with
    // the older copy on the backend.
    cache.write(5 * 4096, &[1u8; 4096], false).unwrap();
    switches.hold_next_write.store(true, Ordering::SeqCst);
    let flusher = {
        let cache = cache.clone();
        std::thread::spawn(move || cache.flush().unwrap())
    };
    while cache.in_flight.lock().unwrap().is_empty() {
        std::thread::yield_now();
    }
    cache.write(5 * 4096, &[2u8; 4096], true).unwrap();
    flusher.join().unwrap();
    for b in 1..4u64 {
        cache.read(b * 4096, &mut buf).unwrap(); // evicts block 5
    }
    assert!(memory.snapshot()[5 * 4096..6 * 4096].iter().all(|&b| b == 2), "FUA: the older copy landed last");
}

/// A write-back that fails at eviction does not lose the acknowledged
/// data: the block is stranded in memory, reads and partial writes use it,
/// FLUSH fails until the backend takes it, and then it is on the backend.
#[test]
fn failed_eviction_write_backs_keep_the_data_until_a_flush_lands() {
    let faulty = TestBackend::new(16 * 4096);
    let (memory, switches) = (faulty.memory.clone(), faulty.switches.clone());
    let failing = &switches.fail_writes;
    let policy = hearth_policy::build("lru", 2 * 4096).unwrap();
    let cache = BlockCache::new(Box::new(faulty.clone()), policy, BS, CacheMode::Back { dirty_limit: 1 << 20 });
    cache.write(0, &[1u8; 4096], false).unwrap();
    cache.write(4096, &[2u8; 4096], false).unwrap();
    failing.store(true, Ordering::SeqCst);
    // Block 2 evicts block 0, whose write-back fails: block 0 is stranded.
    cache.write(2 * 4096, &[3u8; 4096], false).unwrap();
    let mut buf = vec![0u8; 4096];
    cache.read(0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 1), "a stranded block reads back from memory");
    assert!(cache.flush().is_err(), "FLUSH cannot succeed while the backend refuses the data");
    assert_eq!(cache.stranded(), 1);
    // A partial write merges into the stranded copy, not the backend's zeros.
    cache.write(10, b"xy", false).unwrap();
    failing.store(false, Ordering::SeqCst);
    cache.flush().unwrap();
    let disk = memory.snapshot();
    assert_eq!(&disk[10..12], b"xy");
    assert!(disk[..10].iter().chain(&disk[12..4096]).all(|&b| b == 1), "block 0 landed whole");
    assert!(disk[4096..2 * 4096].iter().all(|&b| b == 2));
    assert!(disk[2 * 4096..3 * 4096].iter().all(|&b| b == 3));

    // With the backend refusing for good, stranded data is bounded by the
    // dirty limit: past it, writes fail instead of piling up in memory.
    let cache = BlockCache::new(
        Box::new(faulty),
        hearth_policy::build("lru", 2 * 4096).unwrap(),
        BS,
        CacheMode::Back { dirty_limit: 2 * 4096 },
    );
    failing.store(true, Ordering::SeqCst);
    let refused = (0..12u64).position(|b| cache.write(b * 4096, &[9u8; 4096], false).is_err());
    assert!(refused.is_some(), "writes never refused");
    assert!(cache.stranded() <= 3, "{} blocks stranded", cache.stranded());
}

/// Every registered online policy (not OPT or BeladySize) drives the cache correctly:
/// random reads, writes and zeroing agree with a plain byte model, and
/// the cache never holds more than its capacity.
#[test]
fn every_policy_keeps_reads_equal_to_a_model() {
    let online = hearth_policy::parse_list("all").unwrap().into_iter().filter(|spec| !spec.is_offline());
    for spec in online {
        for mode in [CacheMode::Through, CacheMode::Back { dirty_limit: 8 * 4096 }] {
            let size = 64 * 4096 + 1000;
            let policy = spec.build(16 * u64::from(BS));
            let backend = Arc::new(MemoryBackend::new(size));
            let cache = BlockCache::new(Box::new(backend.clone()), policy, BS, mode);
            let mut model = vec![0u8; size as usize];
            let mut x = 0x2545_f491_4f6c_dd1du64;
            let mut buf = vec![0u8; 3 * 4096];
            for i in 0..2000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = 1 + (x >> 40) as usize % (2 * 4096);
                let offset = (x >> 8) % (size - len as u64);
                let (at, end) = (offset as usize, offset as usize + len);
                match i % 5 {
                    0 | 1 => {
                        buf[..len].fill(i as u8);
                        cache.write(offset, &buf[..len], i % 7 == 0).unwrap();
                        model[at..end].fill(i as u8);
                    }
                    2 => {
                        cache.discard(offset, len as u64, false, true, false).unwrap();
                        model[at..end].fill(0);
                    }
                    _ => {
                        cache.read(offset, &mut buf[..len]).unwrap();
                        assert_eq!(buf[..len], model[at..end], "{spec} {mode:?} request {i}");
                    }
                }
                assert!(cache.occupancy().0 <= 16, "{spec} holds more blocks than its capacity");
            }
            cache.flush().unwrap();
            assert!(backend.snapshot() == model, "{spec} {mode:?}: backend differs from the model after flush");
        }
    }
}

#[test]
fn write_back_dirty_data_never_hides_behind_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let file = crate::backend::FileBackend::sparse(&dir.path().join("wb.img"), 1 << 20, false).unwrap();
    let policy = hearth_policy::build("lru", 64 * 4096).unwrap();
    let cache = BlockCache::new(Box::new(file), policy, BS, CacheMode::Back { dirty_limit: 64 * 4096 });
    cache.write(8192, &[4u8; 4096], false).unwrap();
    let map = cache.extents(0, 1 << 20, 16).unwrap();
    assert_eq!(map[0], Extent { len: 8192, hole: true });
    assert_eq!(map[1], Extent { len: 4096, hole: false }, "the dirty block is reported as data");
    assert_eq!(cache.occupancy().1, 0);
}

#[test]
fn eviction_based_placement_waits_for_the_client_then_reloads() {
    let backend = Arc::new(MemoryBackend::new(64 * u64::from(BS)));
    let pattern: Vec<u8> = (0..64 * BS as usize).map(|i| (i % 251) as u8).collect();
    backend.write_at(&pattern, 0).unwrap();
    let policy = hearth_policy::build("lru", 8 * u64::from(BS)).unwrap();
    let ev = Placement::Eviction { reload_threshold: 0 };
    let cache = BlockCache::with_placement(Box::new(backend.clone()), policy, BS, CacheMode::Through, ev);
    let bs = BS as usize;
    let mut buf = vec![0u8; bs];
    cache.read(3 * u64::from(BS), &mut buf).unwrap();
    assert_eq!(buf, pattern[3 * bs..4 * bs]);
    // Reads do not place under EV.
    assert_eq!(cache.occupancy().0, 0);
    // The client evicts it: placed, and its data must be reloaded once.
    assert_eq!(cache.client_evicted(3), Some(3));
    let reads = cache.stats.backend_reads.load(Ordering::Relaxed);
    cache.reload(3).unwrap();
    assert_eq!(cache.stats.backend_reads.load(Ordering::Relaxed), reads + 1);
    assert_eq!(cache.occupancy().0, 1);
    // Now a client read hits without the backend.
    assert_eq!(cached(&cache, 3 * u64::from(BS), bs).expect("cached"), pattern[3 * bs..4 * bs]);
    // A second eviction notice needs no reload; one beyond the export is ignored.
    assert_eq!(cache.client_evicted(3), None);
    assert_eq!(cache.client_evicted(1 << 40), None);
    // A write while placed-but-unloaded must not let a stale reload in.
    assert_eq!(cache.client_evicted(5), Some(5));
    cache.write(5 * u64::from(BS), &vec![9u8; bs], false).unwrap();
    cache.reload(5).unwrap();
    assert_eq!(cached(&cache, 5 * u64::from(BS), bs).expect("cached"), vec![9u8; bs]);
    let s = cache.placement_stats();
    assert_eq!((s.client_evictions, s.reloads), (3, 2));
}

/// Background cleaning writes dirty data back without a FLUSH, and the age
/// it goes by starts with the oldest write still dirty.
#[test]
fn cleaning_writes_dirty_blocks_back_and_resets_their_age() {
    let (backend, cache) = setup(16 * 4096, 8, CacheMode::Back { dirty_limit: 1 << 20 });
    assert_eq!(cache.dirty_age(), None);
    cache.write(4096, &[7u8; 4096], false).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    cache.write(2 * 4096, &[8u8; 4096], false).unwrap();
    let age = cache.dirty_age().expect("dirty data has an age");
    assert!(age >= std::time::Duration::from_millis(20), "the age is the oldest write's: {age:?}");
    assert_ne!(backend.snapshot()[4096..2 * 4096], [7u8; 4096], "not written back before cleaning");
    cache.clean().unwrap();
    let disk = backend.snapshot();
    assert!(disk[4096..2 * 4096].iter().all(|&b| b == 7) && disk[2 * 4096..3 * 4096].iter().all(|&b| b == 8));
    assert_eq!(cache.dirty_age(), None);
    assert_eq!(cached(&cache, 4096, 4096), Some(vec![7u8; 4096]), "cleaning keeps the blocks cached");
}

/// Write-around: a write reaches the backend and drops the cached copy;
/// only reads fill the cache.
#[test]
fn write_around_writes_leave_the_cache_and_reads_fill_it() {
    let (backend, cache) = setup(16 * 4096, 8, CacheMode::Around);
    let mut buf = vec![0u8; 4096];
    cache.read(4096, &mut buf).unwrap();
    assert_eq!(cached(&cache, 4096, 4096), Some(expected(4096, 4096)), "a read fills the cache");
    cache.write(4096, &[5u8; 4096], false).unwrap();
    assert_eq!(cached(&cache, 4096, 4096), None, "the write dropped the cached copy");
    assert!(backend.snapshot()[4096..2 * 4096].iter().all(|&b| b == 5), "the write is on the backend");
    cache.write(3 * 4096, &[6u8; 4096], false).unwrap();
    assert_eq!(cached(&cache, 3 * 4096, 4096), None, "a write does not allocate");
    cache.read(4096, &mut buf).unwrap();
    assert_eq!(buf, vec![5u8; 4096]);
    assert_eq!(cached(&cache, 4096, 4096), Some(vec![5u8; 4096]));
}

/// A write-back LRU cache of `blocks` blocks over 64 blocks of memory, whose
/// backend counts the calls made on this thread (the switches).
fn watched_write_back(blocks: u64, dirty_blocks: u64) -> (BlockCache, Arc<MemoryBackend>, Arc<Switches>) {
    let backend = TestBackend::new(64 * u64::from(BS)).watching(std::thread::current().id());
    let (switches, memory) = (backend.switches.clone(), backend.memory.clone());
    let policy = hearth_policy::build("lru", blocks * u64::from(BS)).unwrap();
    let mode = CacheMode::Back { dirty_limit: dirty_blocks * u64::from(BS) };
    (BlockCache::new(Box::new(backend), policy, BS, mode), memory, switches)
}

#[test]
fn write_back_writes_that_stay_in_memory_make_no_backend_call() {
    let (cache, memory, switches) = watched_write_back(4, 3);
    let bs = BS as usize;
    // Whole blocks need nothing from the backend; a partial write to an
    // absent block needs its old bytes and is left, untouched, to `write`.
    assert!(cache.write_cached(0, &vec![1; 2 * bs]));
    assert!(!cache.write_cached(5 * u64::from(BS) + 10, &[9; 100]));
    assert_eq!(cached(&cache, 5 * u64::from(BS), 1), None, "a refused write changes nothing");
    // A partial write to a cached block stays in memory.
    assert!(cache.write_cached(u64::from(BS) + 100, &[2; 50]));
    // Past the dirty limit the write needs a write-back: refused.
    assert!(cache.write_cached(2 * u64::from(BS), &vec![3; bs]));
    assert!(!cache.write_cached(3 * u64::from(BS), &vec![4; bs]));
    assert!(!cache.write_cached(3 * u64::from(BS), &vec![4; bs]));
    assert_eq!(switches.calls_on_watched_thread.load(Ordering::Relaxed), 0, "no backend call so far");
    assert!(!cache.take_held(), "nothing evicted yet");
    assert_eq!(cache.occupancy(), (3, 3));
    let mut block1 = vec![1u8; bs];
    block1[100..150].fill(2);
    assert_eq!(cached(&cache, u64::from(BS), bs), Some(block1.clone()));
    assert!(memory.snapshot()[..3 * bs].iter().all(|&b| b == 0), "write-back: the backend has nothing yet");
    cache.flush().unwrap();
    assert_eq!(memory.snapshot()[bs..2 * bs], block1[..]);
    assert_eq!(memory.snapshot()[2 * bs..3 * bs], vec![3u8; bs][..]);
}

#[test]
fn a_write_in_memory_holds_dirty_victims_for_a_blocking_thread() {
    let (cache, memory, switches) = watched_write_back(2, 8);
    let bs = BS as usize;
    for b in 0..3u64 {
        assert!(cache.write_cached(b * u64::from(BS), &vec![b as u8 + 1; bs]));
    }
    assert_eq!(switches.calls_on_watched_thread.load(Ordering::Relaxed), 0);
    assert!(cache.take_held(), "block 0 was evicted dirty and held");
    assert_eq!(cache.stranded(), 1);
    // While a victim is held, writes go the blocking way.
    assert!(!cache.write_cached(3 * u64::from(BS), &vec![4; bs]));
    // The held block still reads back, and lands on the backend when written back.
    let mut buf = vec![0u8; bs];
    cache.read(0, &mut buf).unwrap();
    assert_eq!(buf, vec![1u8; bs]);
    std::thread::scope(|s| s.spawn(|| cache.write_back_held().unwrap()).join().unwrap());
    assert_eq!(memory.snapshot()[..bs], vec![1u8; bs][..]);
    assert_eq!(cache.stranded(), 0);
    assert!(cache.write_cached(3 * u64::from(BS), &vec![4; bs]));
}

#[test]
fn writes_in_memory_are_for_write_back_only() {
    let (backend, cache) = setup(1 << 20, 64, CacheMode::Through);
    assert!(!cache.write_cached(0, &[7; 4096]));
    assert_eq!(backend.snapshot()[..4096], expected(0, 4096)[..], "nothing written");
}

/// Switching modes while writers run loses no acknowledged write: every
/// switch out of write-back writes the dirty blocks first, and writes of
/// the old mode finish before the new one starts.
#[test]
fn mode_switches_under_concurrent_writes_lose_nothing() {
    const BLOCKS: u64 = 64;
    let back = CacheMode::Back { dirty_limit: 8 * u64::from(BS) };
    let (backend, cache) = setup(BLOCKS * u64::from(BS), 16, back);
    let image = std::sync::Mutex::new(backend.snapshot());
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the writers however the switching ends, a failed assertion included.
    struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        for writer in 0..2u64 {
            let (cache, image, stop) = (&cache, &image, &stop);
            s.spawn(move || {
                // Each writer owns half of the blocks, so its own record of
                // what it wrote there is the expected contents.
                let mut x = writer + 1;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let block = writer * BLOCKS / 2 + (x >> 33) % (BLOCKS / 2 - 1);
                    let (start, len) = match x % 3 {
                        0 => (0, BS as usize),
                        1 => (512, 1024),
                        _ => (3072, 2048), // into the next block, still its own
                    };
                    let offset = block * u64::from(BS) + start;
                    let data = vec![(x >> 8) as u8; len];
                    if !cache.write_cached(offset, &data) {
                        cache.write(offset, &data, false).unwrap();
                    }
                    image.lock().unwrap()[offset as usize..offset as usize + len].copy_from_slice(&data);
                }
            });
        }
        let _stop = StopOnDrop(&stop);
        let others = [CacheMode::Through, CacheMode::Around, CacheMode::PassThrough];
        for i in 0..60 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            let to = if i % 2 == 0 { others[(i / 2) % 3] } else { back };
            cache.set_mode(to).unwrap();
            assert_eq!(cache.mode(), to);
            if to != back {
                assert_eq!(cache.dirty_age(), None, "no dirty block is left to a mode that does not expect them");
            }
        }
    });
    cache.flush().unwrap();
    let expected = image.into_inner().unwrap();
    let mut through_cache = vec![0u8; expected.len()];
    cache.read(0, &mut through_cache).unwrap();
    let differs = |got: &[u8]| {
        (0..BLOCKS as usize)
            .filter(|&b| got[b * 4096..(b + 1) * 4096] != expected[b * 4096..(b + 1) * 4096])
            .collect::<Vec<_>>()
    };
    assert_eq!(differs(&backend.snapshot()), Vec::<usize>::new(), "blocks whose backend copy lost a write");
    assert_eq!(differs(&through_cache), Vec::<usize>::new(), "blocks read wrong through the cache");
}

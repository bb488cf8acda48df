//! The prefetch partition in the server's cache: prefetched blocks wait,
//! are promoted, age out and leave as wasted as in the simulator, borrow
//! their room from the main cache, and (adaptive) size the partition.

use super::tests::{cached, setup, BS};
use super::*;

/// Write-back onto a landed prefetch: the written block leaves the prefetch
/// partition for the main cache, so when the partition later drops its
/// blocks the dirty data is not dropped with them.
#[test]
fn write_back_onto_a_prefetched_block_keeps_the_data() {
    let (backend, cache) = setup(256 * u64::from(BS), 50, CacheMode::Back { dirty_limit: 1 << 20 });
    let bs = u64::from(BS);
    assert!(cache.start_prefetch(20));
    cache.prefetch(20).unwrap();
    cache.write(20 * bs + 100, b"dirty", false).unwrap();
    for b in 30..40 {
        // Fills the 2-block partition many times over.
        assert!(cache.start_prefetch(b));
        cache.prefetch(b).unwrap();
    }
    cache.flush().unwrap();
    let disk = backend.snapshot();
    assert_eq!(&disk[(20 * bs + 100) as usize..(20 * bs + 105) as usize], b"dirty");
    assert_eq!(disk[(20 * bs) as usize], (20 * bs % 251) as u8, "the rest of the block is the backend's");
}

#[test]
fn prefetches_wait_in_their_partition_until_demanded() {
    // 50 blocks: the partition holds 4% = 2 blocks.
    let (_, cache) = setup(256 * u64::from(BS), 50, CacheMode::Through);
    let bs = u64::from(BS);
    for b in [10, 11, 12] {
        assert!(cache.start_prefetch(b));
        cache.prefetch(b).unwrap();
    }
    assert!(!cache.start_prefetch(11), "already prefetched");
    assert!(!cache.start_prefetch(1 << 40), "beyond the export");
    // The partition kept the newest two; 10 was evicted unused.
    assert_eq!(cache.take_wasted(), vec![10]);
    assert_eq!(cache.classify_demand(10), Class::Miss);
    assert_eq!(cache.classify_demand(11), Class::Promote);
    // Promoted into the main cache: now a plain hit, served from memory.
    assert_eq!(cache.classify_demand(11), Class::Hit);
    let expect: Vec<u8> = (11 * bs..12 * bs).map(|i| (i % 251) as u8).collect();
    assert_eq!(cached(&cache, 11 * bs, BS as usize).expect("cached"), expect);
    // Main-cache hits are never reclassified as promotes.
    assert_eq!(cache.placement_stats().placements, 1);
}

/// The simulator's ageing, in the server: a landed prefetch that no demand
/// takes within one turnover of the main cache leaves, reported as wasted,
/// and its memory is freed.
#[test]
fn a_prefetch_not_demanded_within_one_turnover_leaves_as_wasted() {
    let (_, cache) = setup(256 * u64::from(BS), 50, CacheMode::Through);
    assert!(cache.start_prefetch(200));
    cache.prefetch(200).unwrap();
    let mut buf = vec![0u8; BS as usize];
    for b in 0..49 {
        cache.read(b * u64::from(BS), &mut buf).unwrap();
    }
    // 49 insertions into a main cache of 49 blocks (the waiting prefetch
    // borrows the 50th): not yet one full turnover.
    assert_eq!(cache.classify_demand(0), Class::Hit);
    assert!(cache.cached_or_prefetching(200));
    cache.read(49 * u64::from(BS), &mut buf).unwrap();
    assert_eq!(cache.classify_demand(1), Class::Hit);
    assert!(!cache.cached_or_prefetching(200), "aged out after the 50th insertion");
    assert_eq!(cache.take_wasted(), vec![200]);
    assert_eq!(cache.occupancy().0, 49, "its buffer left with it");
    assert_eq!(cache.classify_demand(200), Class::Miss);
}

#[test]
fn a_dropped_prefetch_releases_its_claim() {
    let (_, cache) = setup(256 * u64::from(BS), 50, CacheMode::Through);
    // Claimed, then dropped before its read: the first demand is a miss.
    assert!(cache.start_prefetch(20));
    cache.cancel_prefetch(20);
    assert!(!cache.cached_or_prefetching(20));
    assert_eq!(cache.classify_demand(20), Class::Miss);
    assert!(cache.start_prefetch(20), "claimable again");
    // A prefetch that already landed is kept.
    assert!(cache.start_prefetch(21));
    cache.prefetch(21).unwrap();
    cache.cancel_prefetch(21);
    assert_eq!(cache.classify_demand(21), Class::Promote);
    assert_eq!(cache.placement_stats().reloads_skipped, 0, "no eviction reload was involved");
}

/// The guarded QuickMine's spare prefetches in the server: they land only in
/// room the base prefetches leave, push out only each other, and when
/// refused release their claim and their buffer.
#[test]
fn spare_prefetches_never_push_out_base_prefetches() {
    // 50 blocks: the partition holds 4% = 2 blocks.
    let (_, cache) = setup(256 * u64::from(BS), 50, CacheMode::Through);
    assert!(cache.start_prefetch(10));
    cache.prefetch(10).unwrap();
    for b in [20, 21] {
        assert!(cache.start_spare_prefetch(b));
        cache.prefetch_spare(b).unwrap();
    }
    // 21 pushed out 20, the older spare block, not base block 10.
    assert_eq!(cache.take_wasted(), vec![20]);
    assert!(cache.start_prefetch(11));
    cache.prefetch(11).unwrap();
    assert_eq!(cache.take_wasted(), vec![21], "a base prefetch pushes spare blocks out first");
    // The base tier is full: a spare prefetch is refused and its claim released.
    assert!(cache.start_spare_prefetch(22));
    cache.prefetch_spare(22).unwrap();
    assert!(!cache.cached_or_prefetching(22));
    assert!(cache.take_wasted().is_empty());
    assert_eq!(cache.occupancy().0, 2, "the refused block holds no buffer");
    assert_eq!(cache.classify_demand(22), Class::Miss);
    assert_eq!([10, 11].map(|b| cache.classify_demand(b)), [Class::Promote; 2]);
}

/// A base prefetch of a block waiting as a spare one takes it over, as in
/// the simulator: no new read, and it lands (or moves) into the base tier,
/// where later spare prefetches cannot push it out.
#[test]
fn a_base_prefetch_takes_over_a_spare_one() {
    // 50 blocks: the partition holds 4% = 2 blocks.
    let (_, cache) = setup(256 * u64::from(BS), 50, CacheMode::Through);
    assert!(cache.start_spare_prefetch(20));
    cache.prefetch_spare(20).unwrap();
    assert!(cache.spare_prefetching(20) && !cache.cached_outside_spare(20));
    // Landed: taken over with no new read to queue.
    assert!(!cache.start_prefetch(20));
    assert!(!cache.spare_prefetching(20) && cache.cached_outside_spare(20));
    // Queued as spare, taken over before its read: it lands as a base block.
    assert!(cache.start_spare_prefetch(21));
    assert!(!cache.start_prefetch(21));
    cache.prefetch_spare(21).unwrap();
    assert!(cache.cached_outside_spare(21));
    // The partition holds base blocks 20 and 21: spare ones are refused.
    for b in [30, 31] {
        assert!(cache.start_spare_prefetch(b));
        cache.prefetch_spare(b).unwrap();
    }
    assert!(cache.take_wasted().is_empty());
    assert_eq!([20, 21, 30].map(|b| cache.classify_demand(b)), [Class::Promote, Class::Promote, Class::Miss]);
}

/// As in the simulator, the partition's blocks take their room from the
/// main cache while they wait: cache and partition together never hold more
/// than the cache size, and a promote moves a block from one to the other.
#[test]
fn prefetched_blocks_borrow_their_room_from_the_main_cache() {
    let (_, cache) = setup(256 * u64::from(BS), 50, CacheMode::Through);
    let mut buf = vec![0u8; BS as usize];
    for b in 0..50 {
        cache.read(b * u64::from(BS), &mut buf).unwrap();
    }
    assert_eq!(cache.occupancy().0, 50);
    assert!(cache.start_prefetch(200));
    cache.prefetch(200).unwrap();
    assert_eq!(cache.occupancy().0, 50, "the prefetch took a main-cache block's room");
    assert_eq!(cached(&cache, 0, BS as usize), None, "the least recent block gave it up");
    assert!((1..50).all(|b| cached(&cache, b * u64::from(BS), BS as usize).is_some()));
    assert_eq!(cache.classify_demand(200), Class::Promote);
    assert_eq!(cache.occupancy().0, 50, "promoted: the same block, now the main cache's");
    // With nothing waiting, a demand fill takes the main cache's own room.
    cache.read(60 * u64::from(BS), &mut buf).unwrap();
    assert_eq!(cache.occupancy().0, 50);
}

/// `--adaptive-partition` in the server: a demand miss on a block the
/// partition pushed out lately grows it by a block (SARC's rule, the
/// simulator's code), so the next round of prefetches keeps one more.
#[test]
fn an_adaptive_partition_grows_on_a_miss_it_pushed_out() {
    let run = |adaptive: bool| {
        // 200 blocks: the partition starts at 4% = 8 blocks, its band 1% = 2.
        let (_, cache) = setup(1024 * u64::from(BS), 200, CacheMode::Through);
        let cache = if adaptive { cache.with_adaptive_partition() } else { cache };
        for b in 100..=108 {
            assert!(cache.start_prefetch(b));
            cache.prefetch(b).unwrap();
        }
        assert_eq!(cache.take_wasted(), vec![100], "eight fit");
        assert_eq!(cache.classify_demand(100), Class::Miss);
        for b in 110..=118 {
            assert!(cache.start_prefetch(b));
            cache.prefetch(b).unwrap();
        }
        cache.take_wasted()
    };
    assert_eq!(run(true), (101..=108).collect::<Vec<_>>(), "grown to nine: all of the new round stays");
    assert_eq!(run(false), (101..=108).chain([110]).collect::<Vec<_>>(), "fixed at eight");
}

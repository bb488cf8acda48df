//! Belady's OPT below a client cache: its next-use times are the storage
//! cache's own (its next read of each block before an overwrite), so it
//! bounds every policy's read hits in two-level runs and in replays of
//! recorded storage-level traces, and on a read-only block sequence a replay
//! of OPT equals single-level OPT over the same sequence.

use std::path::Path;

use hearth_core::{Access, Key, Op, NEVER};
use hearth_placement::Placement;
use hearth_sim::hierarchy::{run_hierarchy, run_storage_trace, storage_trace, HierarchyConfig, HierarchyResult};
use hearth_sim::{CacheSize, Trace};
use hearth_trace::buffered::BufferedAccess;
use hearth_trace::oltp::{Oltp, OltpConfig};
use hearth_trace::Mode;
use proptest::prelude::*;

const BLOCK: u64 = 4096;
const MODE: Mode = Mode::Block { block_size: BLOCK as u32 };

/// Every registered policy OPT must bound: all but BeladySize, which
/// refuses blocks never read again and so can beat demand-paging OPT.
fn bounded_policies() -> Vec<&'static str> {
    hearth_policy::names().into_iter().filter(|&p| p != "beladysize").collect()
}

fn oltp(requests: usize, seed: u64) -> Trace {
    let gen = Oltp::new(OltpConfig { seed, ..OltpConfig::default() }).unwrap();
    let accesses = hearth_trace::accesses(gen.take(requests).map(Ok), MODE).collect::<Result<_, _>>().unwrap();
    Trace::from_accesses(accesses, MODE)
}

fn cloud_physics(requests: usize) -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.csv.zst");
    let reader = hearth_trace::open(&path, None).unwrap();
    let accesses = hearth_trace::accesses(reader, MODE).take(requests).collect::<Result<_, _>>().unwrap();
    Trace::from_accesses(accesses, MODE)
}

fn config(policy: &str, client_bytes: u64, storage_bytes: u64, placement: Placement) -> HierarchyConfig {
    HierarchyConfig {
        client_policy: "lru".parse().unwrap(),
        client_bytes,
        per_client: false,
        storage_policy: policy.parse().unwrap(),
        storage_bytes,
        placement,
        slot_bytes: BLOCK,
        timing: None,
    }
}

fn share(trace: &Trace, share: f64) -> u64 {
    CacheSize::Footprint(share).resolve(trace.footprint_bytes, Some(BLOCK as u32)).unwrap()
}

/// Asserts OPT's storage read hits are at least every other policy's.
fn assert_opt_on_top(results: &[HierarchyResult], what: &str) {
    let opt = results.iter().find(|r| r.result.policy == "OPT").expect("OPT ran");
    for r in results {
        assert!(
            opt.storage.read_hits >= r.storage.read_hits,
            "{what}: OPT {} read hits < {} {} ({} placement, {} bytes)",
            opt.storage.read_hits,
            r.result.policy,
            r.storage.read_hits,
            r.placement,
            r.result.cache_bytes
        );
    }
    assert!(opt.storage.read_hits > 0, "{what}: the case should exercise hits");
}

/// Every registered policy below the same client cache, live and replayed
/// from the recorded storage-level trace.
fn check_two_level(trace: &Trace, what: &str) {
    let client = share(trace, 0.05);
    for storage in [share(trace, 0.05), share(trace, 0.2)] {
        let cfgs: Vec<_> =
            bounded_policies().into_iter().map(|p| config(p, client, storage, Placement::Access)).collect();
        let live: Vec<_> = cfgs.iter().map(|c| run_hierarchy(&trace.accesses, c).unwrap()).collect();
        assert_opt_on_top(&live, &format!("{what}, two-level"));
        let recorded: Vec<_> = storage_trace(&trace.accesses, &cfgs[0]).unwrap().collect::<Result<_, _>>().unwrap();
        let replayed: Vec<_> = cfgs.iter().map(|c| run_storage_trace(&recorded, c).unwrap()).collect();
        assert_opt_on_top(&replayed, &format!("{what}, storage-trace replay"));
        for (l, r) in live.iter().zip(&replayed) {
            assert_eq!(l.storage, r.storage, "{what}: {} replay differs from the live run", l.result.policy);
        }
        // The block sequence alone, as a plain trace of reads.
        let reads: Vec<_> = recorded.iter().map(|r| BufferedAccess { op: Op::Read, ..*r }).collect();
        let opt = run_storage_trace(&reads, &config("opt", client, storage, Placement::Access)).unwrap();
        assert_eq!(opt.storage.read_hits, single_level_read_hits("opt", &reads, storage), "{what}");
    }
}

/// Read hits of `policy` replaying the block sequence alone, with next-use
/// times from the sequence itself: the single-level simulator's view.
fn single_level_read_hits(policy: &str, trace: &[BufferedAccess], bytes: u64) -> u64 {
    let mut accesses: Vec<Access> = trace
        .iter()
        .enumerate()
        .map(|(i, r)| Access {
            key: r.block,
            size: BLOCK as u32,
            vtime: i as u64,
            next_access: NEVER,
            op: r.op,
            ctx: 0,
        })
        .collect();
    hearth_trace::fill_next_access(&mut accesses);
    let mut p = hearth_policy::build(policy, bytes).unwrap();
    let mut evicted = Vec::new();
    accesses.iter().filter(|a| p.access(a, &mut evicted) && a.op == Op::Read).count() as u64
}

#[test]
fn opt_bounds_every_policy_below_a_client_cache_on_synthetic_oltp() {
    check_two_level(&oltp(150_000, 21), "synth:oltp");
}

#[test]
fn opt_bounds_every_policy_below_a_client_cache_on_cloud_physics() {
    check_two_level(&cloud_physics(150_000), "cloudPhysicsIO");
}

#[test]
fn opt_bounds_every_policy_under_ev_and_demote() {
    // Placements are free under EV and DEMOTE, so OPT's rule still bounds
    // every policy given the same placements.
    let trace = oltp(100_000, 5);
    for placement in [Placement::Eviction { reload_threshold: 0 }, Placement::Demote] {
        let results: Vec<_> = bounded_policies()
            .into_iter()
            .map(|p| run_hierarchy(&trace.accesses, &config(p, share(&trace, 0.05), share(&trace, 0.1), placement)))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_opt_on_top(&results, &format!("synth:oltp {placement}"));
    }
}

fn random_trace(keys: Vec<(u8, bool)>) -> Vec<Access> {
    let mut accesses: Vec<Access> = keys
        .into_iter()
        .enumerate()
        .map(|(i, (k, write))| Access {
            key: Key::from(k),
            size: BLOCK as u32,
            vtime: i as u64,
            next_access: NEVER,
            op: if write { Op::Write } else { Op::Read },
            ctx: (k % 2).into(),
        })
        .collect();
    hearth_trace::fill_next_access(&mut accesses);
    accesses
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn opt_bounds_every_policy_in_random_two_level_configurations(
        keys in prop::collection::vec((0u8..48, prop::bool::weighted(0.2)), 1..600),
        client_blocks in 1u64..12,
        storage_blocks in 1u64..24,
        per_client in any::<bool>(),
        client_policy in prop::sample::select(vec!["lru", "fifo", "clock", "opt"]),
        placement in prop::sample::select(vec![
            Placement::Access, Placement::Eviction { reload_threshold: 0 }, Placement::Demote,
        ]),
    ) {
        let trace = random_trace(keys);
        let results: Vec<_> = bounded_policies()
            .into_iter()
            .map(|p| {
                let mut c = config(p, client_blocks * BLOCK, storage_blocks * BLOCK, placement);
                c.client_policy = client_policy.parse().unwrap();
                c.per_client = per_client;
                run_hierarchy(&trace, &c).unwrap()
            })
            .collect();
        let opt = results.iter().find(|r| r.result.policy == "OPT").unwrap();
        for r in &results {
            prop_assert!(
                opt.storage.read_hits >= r.storage.read_hits,
                "OPT {} < {} {} ({placement})", opt.storage.read_hits, r.result.policy, r.storage.read_hits
            );
        }
    }
}

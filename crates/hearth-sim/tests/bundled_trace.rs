//! Every policy on the bundled real trace (block mode): Belady's OPT is a
//! lower bound on misses at every size, and LRU, a stack algorithm, never
//! loses hits as the cache grows.

use std::path::Path;

use hearth_sim::{run_jobs, CacheSize, Job, Trace};
use hearth_trace::Mode;

/// A prefix keeps the debug-build test quick while spanning many reuses.
const PREFIX: usize = 200_000;

#[test]
fn opt_bounds_every_policy_at_every_size() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.csv.zst");
    let reader = hearth_trace::open(&path, None).unwrap();
    let mode = Mode::Block { block_size: 4096 };
    let accesses: Vec<_> = hearth_trace::accesses(reader, mode).take(PREFIX).collect::<Result<_, _>>().unwrap();
    let trace = Trace::from_accesses(accesses, mode);
    // BeladySize refuses blocks never read again, so demand-paging OPT does not bound it.
    let policies: Vec<_> = hearth_policy::names().into_iter().filter(|&p| p != "beladysize").collect();
    let mut jobs = Vec::new();
    for share in [0.01, 0.05, 0.1, 0.25] {
        let bytes = CacheSize::Footprint(share).resolve(trace.footprint_bytes, Some(4096)).unwrap();
        jobs.extend(policies.iter().map(|p| Job { policy: p.parse().unwrap(), cache_bytes: bytes }));
    }
    let results = run_jobs(&trace, &jobs, 2, &|_| {});
    for per_size in results.chunks(policies.len()) {
        let opt = per_size.iter().find(|r| r.policy == "OPT").expect("OPT is registered");
        for r in per_size {
            assert!(
                opt.misses() <= r.misses(),
                "OPT {} misses > {} {} misses at {} bytes",
                opt.misses(),
                r.policy,
                r.misses(),
                r.cache_bytes
            );
        }
    }
    let lru: Vec<_> = results.iter().filter(|r| r.policy == "LRU").map(|r| r.hits).collect();
    assert!(lru.windows(2).all(|w| w[0] <= w[1]), "LRU is a stack algorithm: {lru:?}");
}

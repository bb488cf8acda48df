//! The streamed paths give today's in-memory answers: on the bundled real
//! trace, every policy at every size, OPT with next uses from a temporary
//! column or from an oracleGeneral file, and the one-pass LRU curve; on an
//! OLTP-like workload, two-level runs (client caches above the storage cache).

use std::path::{Path, PathBuf};

use hearth_core::Access;
use hearth_sim::mrc::{Shards, ShardsMode, StackDistances};
use hearth_sim::scan::{scan, with_next_access};
use hearth_sim::stream::{run_streaming, Counting};
use hearth_sim::{run_jobs, CacheSize, Job, Trace};
use hearth_trace::{Mode, TraceError};

/// A prefix keeps the debug-build test quick while spanning many reuses.
const PREFIX: usize = 100_000;

fn bundled() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cloudPhysicsIO.csv.zst")
}

fn prefix(mode: Mode) -> impl Iterator<Item = Result<Access, TraceError>> {
    hearth_trace::accesses(hearth_trace::open(&bundled(), None).unwrap(), mode).take(PREFIX)
}

fn jobs(trace: &Trace, policies: &[&str], shares: &[f64]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for &share in shares {
        let cache_bytes = CacheSize::Footprint(share).resolve(trace.footprint_bytes, trace.block_size()).unwrap();
        jobs.extend(policies.iter().map(|p| Job { policy: p.parse().unwrap(), cache_bytes }));
    }
    jobs
}

#[test]
fn streamed_results_equal_in_memory_for_every_policy_and_size() {
    let mode = Mode::Block { block_size: 4096 };
    let trace = Trace::from_accesses(prefix(mode).collect::<Result<_, _>>().unwrap(), mode);
    let jobs = jobs(&trace, &hearth_policy::names(), &[0.01, 0.05, 0.1, 0.25]);
    let want = run_jobs(&trace, &jobs, 2, &|_| {});

    let dir = tempfile::tempdir().unwrap();
    let first = scan(prefix(mode), Some(dir.path()), &|_| {}).unwrap();
    assert_eq!((first.unique_keys, first.footprint_bytes), (trace.unique_keys, trace.footprint_bytes));
    let column = first.next_access.as_ref().unwrap();
    let got =
        run_streaming(with_next_access(prefix(mode), column).unwrap(), &jobs, Counting::default(), 2, &|_| {}).unwrap();
    // Training time is wall clock: only whether a result has one must agree.
    let counts = |rows: Vec<hearth_estimate::SimResult>| {
        rows.into_iter()
            .map(|r| hearth_estimate::SimResult { train_seconds: r.train_seconds.map(|_| 0.0), ..r })
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(got), counts(want));
}

#[test]
fn opt_reads_next_uses_from_an_oracle_general_file() {
    let trace = Trace::from_accesses(prefix(Mode::Object).collect::<Result<_, _>>().unwrap(), Mode::Object);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prefix.oracleGeneral.bin");
    hearth_trace::write_oracle_general(&file, &trace.accesses).unwrap();
    let jobs = jobs(&trace, &["opt", "lru"], &[0.01, 0.1]);
    let want = run_jobs(&trace, &jobs, 2, &|_| {});
    let from_file = hearth_trace::accesses(hearth_trace::open(&file, None).unwrap(), Mode::Object);
    let got = run_streaming(from_file, &jobs, Counting::default(), 2, &|_| {}).unwrap();
    assert_eq!(got, want);
}

#[test]
fn one_pass_lru_curve_equals_full_simulation_at_40_sizes() {
    for mode in [Mode::Block { block_size: 4096 }, Mode::Object] {
        // The curve is exact when each item keeps one size (as in
        // oracleGeneral traces): give each offset its first request's length.
        let mut first_size = hearth_core::key_map::<u32>(1024);
        let accesses = prefix(mode)
            .map(|a| a.map(|a| Access { size: *first_size.entry(a.key).or_insert(a.size), ..a }))
            .collect::<Result<_, _>>()
            .unwrap();
        let trace = Trace::from_accesses(accesses, mode);
        let shares: Vec<f64> = (0..40).map(|i| 0.001 * 1000f64.powf(i as f64 / 39.0)).collect();
        let jobs = jobs(&trace, &["lru"], &shares);
        let sizes: Vec<u64> = jobs.iter().map(|j| j.cache_bytes).collect();
        let full = run_jobs(&trace, &jobs, 2, &|_| {});

        let mut exact = StackDistances::new(&sizes);
        let mut shards = Shards::new(ShardsMode::FixedRate(1.0), &sizes).unwrap();
        for a in &trace.accesses {
            exact.access(a);
            shards.access(a);
        }
        assert_eq!(exact.results(), full, "{mode:?}");
        assert_eq!(shards.results(), full, "{mode:?}: SHARDS at rate 1 is exact");

        // Finding items by the next uses an oracleGeneral file records.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("curve.oracleGeneral.bin");
        let mut with_next = trace.accesses.clone();
        hearth_trace::fill_next_access(&mut with_next);
        hearth_trace::write_oracle_general(&file, &with_next).unwrap();
        let mut by_next_use = StackDistances::with_next_uses(&sizes);
        for a in hearth_trace::accesses(hearth_trace::open(&file, None).unwrap(), Mode::Object) {
            by_next_use.access(&a.unwrap());
        }
        assert_eq!(by_next_use.results(), full, "{mode:?}: by next use");

        // The pass the CLI runs: the file's records decoded in batches.
        let source = hearth_sim::TraceSource::new(&file);
        let streamed = hearth_sim::source::Streamed::open(&source, Default::default(), &()).unwrap();
        let curve = hearth_sim::mrc::exact_pass(&streamed, &sizes, &|_| {}).unwrap();
        assert_eq!(curve, full, "{mode:?}: exact pass over the file");
    }
}

#[test]
fn two_level_runs_streamed_from_the_file_equal_in_memory_runs() {
    use hearth_placement::Placement;
    use hearth_sim::hierarchy::{run_hierarchy, run_storage_trace, storage_trace, HierarchyConfig};
    use hearth_sim::source::{Needs, Streamed};
    use hearth_sim::TraceSource;

    // The OLTP-like workload: reads and writes, skewed, quick in a debug build.
    let source = TraceSource { requests: 60_000, ..TraceSource::new("synth:oltp") };
    let streamed = Streamed::open(&source, Needs { totals: true, next_access: false }, &()).unwrap();
    let (requests, mode) = source.open().unwrap();
    let accesses: Vec<Access> = hearth_trace::accesses(requests, mode).collect::<Result<_, _>>().unwrap();
    let in_memory = Trace::from_accesses(accesses, streamed.mode);
    assert_eq!(streamed.footprint_bytes(), in_memory.footprint_bytes);
    let share = |s: f64| CacheSize::Footprint(s).resolve(in_memory.footprint_bytes, in_memory.block_size()).unwrap();
    for placement in [Placement::Access, Placement::Eviction { reload_threshold: 0 }, Placement::Demote] {
        for policy in ["lru", "arc", "opt"] {
            let cfg = HierarchyConfig {
                client_policy: "lru".parse().unwrap(),
                client_bytes: share(0.02),
                per_client: false,
                storage_policy: policy.parse().unwrap(),
                storage_bytes: share(0.1),
                placement,
                slot_bytes: 4096,
                timing: None,
            };
            let want = run_hierarchy(&in_memory.accesses, &cfg).unwrap();
            let got = run_hierarchy(&streamed, &cfg).unwrap();
            assert_eq!(got.storage, want.storage, "{policy} {placement}");
            assert_eq!(got.result, want.result, "{policy} {placement}");
            assert!(want.storage.read_hits > 0, "{policy} {placement}: the case should exercise hits");
            if placement != Placement::Demote {
                // A recorded storage-level trace, replayed from its file.
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("storage.trace");
                let recorded = storage_trace(&streamed, &cfg).unwrap().map(Result::unwrap);
                hearth_trace::buffered::write(&path, recorded).unwrap();
                let replayed = run_storage_trace(&hearth_sim::hierarchy::BufferedFile(path), &cfg).unwrap();
                assert_eq!(replayed.storage, want.storage, "{policy} {placement}: replayed from the file");
            }
        }
    }
}

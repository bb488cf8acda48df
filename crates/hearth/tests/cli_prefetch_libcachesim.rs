//! libCacheSim's prefetchers in `hearth sim --prefetch` give the miss ratios
//! of libCacheSim 0.3.5's own `cachesim --prefetch`, LRU underneath, on the
//! bundled cloudPhysicsIO trace (113,872 requests, object mode) at 128 MiB
//! to 1 GiB: OBL, PG and Mithril with libCacheSim's defaults, and each with
//! other parameters. Both insert prefetched objects into the cache at the
//! MRU end and count a hit on one as a hit; a prefetched object takes
//! OBL's `block-size` or its last demanded size, in both.
//!
//! cachesim comes from a libCacheSim 0.3.5 build (scripts/build-cachesim.sh;
//! the test finds it through `LIBCACHESIM_CACHESIM`). Without it the test is
//! skipped, except under `CI=true`, where it fails. cachesim prints miss
//! ratios to 4 decimals: Hearth's must round to the same. Prefetch counts
//! (which cachesim does not print) are in the crate's README, measured
//! against libCacheSim's library.

mod cli_support;

use std::path::PathBuf;
use std::process::Command;

use cli_support::{hearth, repo_file, stdout};
use tempfile::TempDir;

const MIB: u64 = 1 << 20;

/// (Hearth spec, cachesim's prefetcher, its --prefetch-params).
const COMPARED: &[(&str, &str, &str)] = &[
    ("obl", "OBL", ""),
    ("obl:sequential-confidence-k=1,block-size=4096", "OBL", "sequential-confidence-k=1,block-size=4096"),
    ("pg", "PG", ""),
    ("pg:lookahead-range=5,prefetch-threshold=0.2", "PG", "lookahead-range=5,prefetch-threshold=0.2"),
    ("mithril", "Mithril", ""),
    (
        "mithril:rec-trigger=each_req,pf-list-size=3,cycle-time=1",
        "Mithril",
        "rec-trigger=each_req,pf-list-size=3,cycle-time=1",
    ),
];

fn cachesim() -> Option<PathBuf> {
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    match std::env::var("LIBCACHESIM_CACHESIM") {
        Ok(bin) => Some(PathBuf::from(bin)),
        Err(_) => {
            assert!(
                !in_ci,
                "LIBCACHESIM_CACHESIM is not set (CI=true requires it; scripts/build-cachesim.sh builds cachesim)"
            );
            println!("skipped: LIBCACHESIM_CACHESIM is not set (scripts/build-cachesim.sh builds cachesim)");
            None
        }
    }
}

/// cachesim's LRU miss ratios with `prefetcher` at `sizes`.
fn theirs(cachesim: &PathBuf, trace: &str, sizes: &str, prefetcher: &str, params: &str) -> Vec<f64> {
    let scratch = TempDir::new().unwrap(); // cachesim writes a result/ directory where it runs
    let mut cmd = Command::new(cachesim);
    cmd.current_dir(scratch.path()).args([trace, "oracleGeneral", "lru", sizes, "--num-thread", "1"]);
    cmd.args(["--prefetch", prefetcher]);
    if !params.is_empty() {
        cmd.args(["--prefetch-params", params]);
    }
    let out = cmd.output().expect("running cachesim");
    assert!(out.status.success(), "cachesim failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| l.split("miss ratio ").nth(1))
        .map(|r| r.split(',').next().unwrap().trim().parse().unwrap())
        .collect()
}

/// `hearth sim --prefetch`'s (miss ratio, prefetches) at `sizes`.
fn ours(trace: &str, sizes: &str, spec: &str) -> Vec<(f64, u64)> {
    let args = ["sim", trace, "-p", "lru", "-s", sizes, "--prefetch", spec, "--csv", "-q", "--threads", "1"];
    stdout(&hearth(&args))
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[6].parse().unwrap(), f[8].parse().unwrap())
        })
        .collect()
}

#[test]
fn prefetchers_match_libcachesims_cachesim() {
    let Some(cachesim) = cachesim() else { return };
    let trace = repo_file("data/cloudPhysicsIO.oracleGeneral.bin.zst");
    let sizes: Vec<u64> = (1..=8).map(|i| i * 128 * MIB).collect();
    let sizes_arg = sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut failures = Vec::new();
    println!("{:<58} {:>6} {:>8} {:>8} {:>10}", "prefetcher", "MiB", "hearth", "cachesim", "prefetches");
    for &(spec, name, params) in COMPARED {
        let theirs = theirs(&cachesim, &trace, &sizes_arg, name, params);
        let ours = ours(&trace, &sizes_arg, spec);
        assert_eq!((theirs.len(), ours.len()), (sizes.len(), sizes.len()), "{spec}: one result per size");
        for ((&size, &their), &(our, prefetches)) in sizes.iter().zip(&theirs).zip(&ours) {
            println!("{spec:<58} {:>6} {our:>8.5} {their:>8.4} {prefetches:>10}", size / MIB);
            if (our - their).abs() > 0.00005 + 1e-9 {
                failures.push(format!("{spec} at {} MiB: hearth {our:.5}, cachesim {their:.4}", size / MIB));
            }
            assert!(prefetches > 0, "{spec} at {} MiB prefetched nothing", size / MIB);
        }
    }
    assert!(failures.is_empty(), "miss ratios differ from cachesim:\n{}", failures.join("\n"));
}

#[test]
fn bad_prefetch_specs_say_what_is_wrong() {
    let trace = repo_file("data/cloudPhysicsIO.oracleGeneral.bin.zst");
    let err =
        |spec: &str| cli_support::failure(&hearth(&["sim", &trace, "-p", "lru", "-s", "10KiB", "--prefetch", spec]));
    assert!(err("nope").contains("unknown prefetcher \"nope\""));
    assert!(err("pg:prefetch-threshold=2").contains("prefetch-threshold must lie strictly between 0 and 1"));
    assert!(err("obl:depth=2").contains("has no parameter \"depth\""));
    assert!(err("cminer").contains("use `hearth prefetch sim`"));
    assert!(err("mithril").contains("too small"), "10 KiB leaves Mithril's prefetch table no room");
}

//! Cross-check against libCacheSim: every policy with a libCacheSim
//! counterpart is driven over the cloudPhysicsIO trace in object mode at
//! 128 MiB .. 1 GiB, and its miss count is compared with the `libcachesim`
//! Python package's (run through scripts/libcachesim_reference.py).
//!
//! Object mode as libCacheSim does it: each request is one object of the
//! record's size, the cache capacity is in bytes, no per-object metadata is
//! counted, and objects larger than the cache are never admitted.
//!
//! Without the package the test is skipped, except under `CI=true`, where it
//! fails. Set HEARTH_PYTHON to choose the interpreter (default `python3`).

use std::path::{Path, PathBuf};
use std::process::Command;

use hearth_core::Access;
use hearth_trace::{Format, Mode};

fn trace_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/cloudPhysicsIO.oracleGeneral.bin")
}
const MIB: u64 = 1024 * 1024;
/// Policies whose miss counts must equal libCacheSim's exactly (the issue
/// asks this of LRU and FIFO; the others matched exactly when written).
const EXACT: &[&str] =
    &["lru", "fifo", "clock", "lfu", "arc", "slru", "lirs", "opt", "s3fifo", "sieve", "wtinylfu:freq=exact", "lruk"];
/// Allowed relative difference for any other compared policy: `gdsf`, which
/// makes room before pricing a newcomer where libCacheSim prices it first
/// (see gdsf.rs).
const TOLERANCE: f64 = 0.005;
/// Hearth specs with a libCacheSim counterpart in the reference script.
/// Left out because libCacheSim has another algorithm under the same name:
/// - plain `wtinylfu`: its Caffeine sketch is not the estimator libCacheSim's
///   WTinyLFU uses (see wtinylfu.rs); `freq=exact` counts as libCacheSim does
///   and checks everything else;
/// - `lfuda` (the paper's LFU-DA, priority = count + L): libCacheSim's LFUDA
///   adds L to the priority at every hit instead, with L the lowest resident
///   priority rather than the last victim's. Re-simulating that formula
///   reproduces libCacheSim's counts exactly; Hearth's differ by -6.9% to
///   +1.0% at 128 MiB..1 GiB.
const COMPARED: &[&str] = &[
    "lru",
    "fifo",
    "clock",
    "lfu",
    "arc",
    "slru",
    "lirs",
    "opt",
    "s3fifo",
    "sieve",
    "wtinylfu:freq=exact",
    "lruk",
    "gdsf",
];

/// The trace through Hearth's own reader, with next-use times for OPT.
fn load_oracle_general(path: &Path) -> Vec<Access> {
    let reader = hearth_trace::open(path, Some(Format::OracleGeneral)).unwrap();
    let mut accesses = hearth_trace::accesses(reader, Mode::Object).collect::<Result<Vec<_>, _>>().unwrap();
    hearth_trace::fill_next_access(&mut accesses);
    accesses
}

fn our_misses(spec: &str, capacity: u64, trace: &[Access]) -> u64 {
    let mut policy = hearth_policy::build(spec, capacity).unwrap();
    let mut evicted = Vec::new();
    let mut misses = 0;
    for a in trace {
        evicted.clear();
        if !policy.access(a, &mut evicted) {
            misses += 1;
        }
    }
    misses
}

#[test]
fn miss_counts_match_libcachesim() {
    let sizes: Vec<u64> = (1..=8).map(|i| i * 128 * MIB).collect();
    let registered = hearth_policy::names();
    let policies: Vec<&str> = COMPARED
        .iter()
        .copied()
        .filter(|spec| registered.iter().any(|name| spec.split(':').next() == Some(name)))
        .collect();

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/libcachesim_reference.py");
    let python = std::env::var("HEARTH_PYTHON").unwrap_or_else(|_| "python3".into());
    let sizes_arg = sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let output = Command::new(&python).arg(&script).arg(trace_path()).arg(&sizes_arg).arg(policies.join(",")).output();
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let missing = match &output {
        Err(e) => Some(format!("cannot run {python}: {e}")),
        Ok(o) if o.status.code() == Some(3) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Ok(_) => None,
    };
    if let Some(why) = missing {
        assert!(!in_ci, "libcachesim is missing (CI=true requires it): {why}");
        println!("skipped: libcachesim not installed ({why})");
        return;
    }
    let output = output.unwrap();
    assert!(
        output.status.success(),
        "{} failed ({}): {}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let reference: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("reference script printed invalid JSON");

    let trace = load_oracle_general(&trace_path());
    assert_eq!(
        reference["requests"].as_u64(),
        Some(trace.len() as u64),
        "libCacheSim read a different number of requests"
    );

    let mut failures = Vec::new();
    println!("{:<20} {:>9} {:>9} {:>9} {:>8}", "policy", "size_MiB", "hearth", "libcsim", "diff_%");
    for &policy in &policies {
        for &size in &sizes {
            let theirs = reference["misses"][policy][size.to_string()]
                .as_u64()
                .unwrap_or_else(|| panic!("reference has no miss count for {policy} at {size}"));
            let ours = our_misses(policy, size, &trace);
            let diff = (ours as f64 - theirs as f64) / theirs as f64;
            println!("{policy:<20} {:>9} {ours:>9} {theirs:>9} {:>8.3}", size / MIB, diff * 100.0);
            let ok = if EXACT.contains(&policy) { ours == theirs } else { diff.abs() <= TOLERANCE };
            if !ok {
                failures.push(format!("{policy} at {} MiB: hearth {ours} misses, libCacheSim {theirs}", size / MIB));
            }
        }
    }
    assert!(failures.is_empty(), "miss counts differ from libCacheSim:\n{}", failures.join("\n"));
}

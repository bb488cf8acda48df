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
//! fails. Set HEARTH_PYTHON to choose the interpreter (default `python3`),
//! and HEARTH_LIBCACHESIM_ONLY="spec;spec" to compare only those specs of
//! [`COMPARED`] and [`CLI_COMPARED`] (while working on one policy); a spec
//! in neither fails. Each test prints how many specs it compared and fails
//! when that is none.

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
const EXACT: &[&str] = &[
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
    "lru+tinylfu",
    "fifo+tinylfu",
    "arc+tinylfu",
    "s3fifo+tinylfu",
    "lru+size:max=16384",
    "lru+prob",
    "lru+prob:p=0.3",
    "lru+sizeprob",
    "lru+sizeprob:exponent=0.0001",
    "lru+adaptsize",
    // Its draws come from libCacheSim's generator at its fresh-process state.
    "lecar",
    "clock2qplus:window=0",
    // Its draws too; this trace is shorter than one reconfiguration (2^20
    // requests), so it checks the prior, sampling and explorers, not learning.
    "lhd",
    // libCacheSim-compatible parameterisations (Hearth's defaults differ; see COMPARED).
    "2q:sizing=bytes",
    "lfuda:formula=additive",
    "mq:lifetime=10000,history=bytes",
    // Only its hits draw, from libCacheSim's generator at its fresh-process state.
    "lruprob",
    "lruprob:prob=0.3",
    "size",
    // Its tie-breaking draws too (the package builds it through its
    // low-level FIFO_Merge_init; see CLI_COMPARED for cachesim's seeds).
    "fifomerge",
    "fifomerge:retain=recency",
    "s3fifod",
    // With libCacheSim's batch (65,536 labelled samples) neither tool trains
    // a model on this trace (113,872 requests), so both are LRU throughout:
    // this checks that 3L-Cache's sampling and history leave its untrained
    // order alone. Hearth's default batch trains, and differs (docs).
    "3lcache:batch=65536",
];
/// Allowed relative difference (the 0.5%) for any other compared
/// policy: `gdsf`, which makes room before pricing a newcomer where
/// libCacheSim prices it first (see gdsf.rs), and `hyperbolic` and
/// `beladysize`, whose random samples are drawn differently (see
/// [`RANDOMIZED`]; BeladySize also makes no room for an item it will not
/// admit, see beladysize.rs: Hearth misses 0.00% to 0.04% less).
const TOLERANCE: f64 = 0.005;
/// Policies whose victims are random draws. Besides the usual check of the
/// default seed's run, the test prints the mean and standard deviation of
/// Hearth's runs over [`SEEDS`] seeds and the z-score of libCacheSim's run.
/// libCacheSim does not draw uniformly over items but over the non-empty
/// buckets of its hash table (which it shrinks until a few draws find one),
/// then within the bucket's chain, so an item sharing its bucket is drawn
/// less often, by a weight fixed by the hash of its id; Hearth draws
/// uniformly (random.rs). Measured at 128 MiB..1 GiB:
/// - `hyperbolic` (64 samples): means within 0.19% (z -2.7..10.6), the
///   default seed within the usual 0.5%;
/// - `random`: libCacheSim misses 0.04% to 0.62% less than Hearth's mean, z
///   from -0.7 to -5.6, always below: a systematic effect of its weighted
///   draw, which one sample per eviction does not average out as 64 do. It
///   is in [`NOT_ASSERTED`] with that cause rather than under a wider
///   tolerance.
const RANDOMIZED: &[&str] = &["random", "hyperbolic", "beladysize"];
/// Compared and printed, not asserted: `random` (see [`RANDOMIZED`]) and
/// `clock2qplus` with its default correlation window, which libCacheSim
/// 0.3.5 measures in items admitted against a length in bytes (see
/// clock2qplus.rs), so no FIFO hit of a real-sized object ever counts there:
/// -0.37% to +1.39% at 128 MiB..1 GiB. Without a window
/// (`clock2qplus:window=0`, libCacheSim's `corr_window_ratio=0`) the units
/// do not matter and the counts are equal, in [`EXACT`].
///
/// `clockpro` is printed too: libCacheSim 0.3.5's ClockPro drops items it
/// promotes to hot from its table, so it misses more than LRU there; Hearth
/// follows the paper (clockpro.rs).
///
/// `2q`, `lfuda` and `mq` are Hearth's own variants, printed to show how far the
/// libCacheSim-compatible parameterisations move them (see [`COMPARED`]).
///
/// `cacheus` follows the paper (cacheus.rs); libCacheSim 0.3.5's Cacheus
/// revises its learning rate every cache-size-in-bytes requests (never, on
/// this trace), resizes SR-LRU's partitions by single bytes and evicts SR's
/// overflow besides the chosen victims. Hearth: -10.0% to +1.9%; with its
/// learning rate frozen as libCacheSim's is, -8.5% to +6.1%, so SR-LRU's
/// differences dominate.
const NOT_ASSERTED: &[&str] = &["random", "clock2qplus", "clockpro", "2q", "lfuda", "mq", "cacheus"];
const SEEDS: u64 = 16;
/// Hearth specs with a libCacheSim counterpart in the reference script.
/// Compared but not asserted ([`NOT_ASSERTED`]) because libCacheSim has
/// another algorithm under the same name:
/// - plain `wtinylfu`: its Caffeine sketch is not the estimator libCacheSim's
///   WTinyLFU uses (see wtinylfu.rs); `freq=exact` counts as libCacheSim does
///   and checks everything else;
/// - `lfuda` (the paper's LFU-DA, priority = count + L): libCacheSim's LFUDA
///   adds L to the priority at every hit instead, with L the lowest resident
///   priority rather than the last victim's. Re-simulating that formula
///   reproduces libCacheSim's counts exactly; Hearth's differ by -6.9% to
///   +1.0% at 128 MiB..1 GiB. `lfuda:formula=additive` is that formula, exact.
/// - plain `2q`: Hearth counts A1out in keys against the cache's slots and
///   lets Am take what A1in leaves (the paper); libCacheSim bounds A1out at
///   0.5 x capacity bytes and Am at 0.75 x capacity. `2q:sizing=bytes` sizes
///   them so, exact (plain 2q: -1.9% to +1.8% at 128 MiB..1 GiB).
/// - plain `mq`: Hearth's lifeTime follows the peak reuse distance and Qout
///   counts entries (the paper); libCacheSim fixes lifeTime at 10,000
///   requests and bounds Qout at 4 x capacity bytes.
///   `mq:lifetime=10000,history=bytes` is that, exact (plain mq: -2.7% to
///   +2.5%).
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
    "random",
    "hyperbolic",
    "lecar",
    "clock2qplus",
    "clock2qplus:window=0",
    "beladysize",
    "clockpro",
    "lhd",
    "cacheus",
    "2q:sizing=bytes",
    "lfuda:formula=additive",
    "mq:lifetime=10000,history=bytes",
    "2q",
    "lfuda",
    "mq",
    // Admission policies (POLICY+ADMISSION): the random ones use libCacheSim's
    // generator from its fresh-process state (the script runs each in a new
    // interpreter), so they are deterministic too.
    "lru+tinylfu",
    "fifo+tinylfu",
    "arc+tinylfu",
    "s3fifo+tinylfu",
    "lru+size:max=16384",
    "lru+prob",
    "lru+prob:p=0.3",
    "lru+sizeprob",
    "lru+sizeprob:exponent=0.0001",
    "lru+adaptsize",
    "lruprob",
    "lruprob:prob=0.3",
    "size",
    "fifomerge",
    "fifomerge:retain=recency",
    "s3fifod",
    "3lcache:batch=65536",
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
    let only = only();
    let policies: Vec<&str> = COMPARED
        .iter()
        .copied()
        .filter(|spec| registered.iter().any(|name| spec.split([':', '+']).next() == Some(name)))
        .filter(|spec| only.as_ref().is_none_or(|only| only.iter().any(|o| o == spec)))
        .collect();
    if policies.is_empty() && only.is_some() {
        println!("HEARTH_LIBCACHESIM_ONLY selects none of these specs (only other tests')");
        return;
    }
    assert!(!policies.is_empty(), "no policy to compare with libCacheSim");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/libcachesim_reference.py");
    let python = std::env::var("HEARTH_PYTHON").unwrap_or_else(|_| "python3".into());
    let sizes_arg = sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let output = Command::new(&python).arg(&script).arg(trace_path()).arg(&sizes_arg).arg(policies.join(";")).output();
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
            if RANDOMIZED.contains(&policy) {
                let runs: Vec<f64> =
                    (1..=SEEDS).map(|s| our_misses(&format!("{policy}:seed={s}"), size, &trace) as f64).collect();
                let mean = runs.iter().sum::<f64>() / runs.len() as f64;
                let sd = (runs.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (runs.len() - 1) as f64).sqrt();
                let z = (theirs as f64 - mean) / sd;
                println!(
                    "{policy:<20} {:>9} {mean:>9.0} {theirs:>9} {:>8.3} (mean of {SEEDS} seeds, sd {sd:.0}, z {z:.2})",
                    size / MIB,
                    (mean / theirs as f64 - 1.0) * 100.0
                );
            }
            let ours = our_misses(policy, size, &trace);
            let diff = (ours as f64 - theirs as f64) / theirs as f64;
            println!("{policy:<20} {:>9} {ours:>9} {theirs:>9} {:>8.3}", size / MIB, diff * 100.0);
            let ok = if EXACT.contains(&policy) {
                ours == theirs
            } else {
                NOT_ASSERTED.contains(&policy) || diff.abs() <= TOLERANCE
            };
            if !ok {
                failures.push(format!("{policy} at {} MiB: hearth {ours} misses, libCacheSim {theirs}", size / MIB));
            }
        }
    }
    println!("compared {} specs at {} sizes with libCacheSim's Python package", policies.len(), sizes.len());
    assert!(failures.is_empty(), "miss counts differ from libCacheSim:\n{}", failures.join("\n"));
}

/// The specs named in HEARTH_LIBCACHESIM_ONLY (`;`-separated), each checked
/// against both tests' lists: a typo fails rather than comparing nothing.
/// The (Hearth spec, libCacheSim name) pairs of `compared` that
/// HEARTH_LIBCACHESIM_ONLY selects (all without it); `None`, said on
/// stdout, when it selects none of them.
fn selected(compared: &[(&'static str, &'static str)]) -> Option<Vec<(&'static str, &'static str)>> {
    let only = only();
    let specs: Vec<_> = compared
        .iter()
        .copied()
        .filter(|(spec, _)| only.as_ref().is_none_or(|only| only.iter().any(|o| o == spec)))
        .collect();
    if specs.is_empty() {
        println!("HEARTH_LIBCACHESIM_ONLY selects none of these specs");
        return None;
    }
    Some(specs)
}

fn only() -> Option<Vec<String>> {
    let only = std::env::var("HEARTH_LIBCACHESIM_ONLY").ok()?;
    let specs: Vec<String> = only.split(';').map(str::to_string).collect();
    for spec in &specs {
        assert!(
            COMPARED.contains(&spec.as_str())
                || CLI_COMPARED.iter().chain(STANDALONE_COMPARED).any(|(ours, _)| ours == spec),
            "HEARTH_LIBCACHESIM_ONLY names {spec:?}, which no test compares (known: {}; {})",
            COMPARED.join(";"),
            CLI_COMPARED.iter().chain(STANDALONE_COMPARED).map(|(ours, _)| *ours).collect::<Vec<_>>().join(";")
        );
    }
    Some(specs)
}

/// Hearth specs checked against libCacheSim's `cachesim` command for the
/// policies its Python package does not expose, with cachesim's name.
/// Plain `car` bounds B2 as the paper does; `car:b2=unbounded` is libCacheSim's.
const CLI_COMPARED: &[(&str, &str)] = &[
    ("qdlp", "qdlp"),
    ("car:b2=unbounded", "car"),
    ("randomtwo", "randomTwo"),
    ("randomlru", "RandomLRU"),
    ("s3fifod", "s3fifod"),
];
/// Specs of [`CLI_COMPARED`] whose victims are random draws, which Hearth
/// and libCacheSim make differently (see [`RANDOMIZED`]): their miss counts
/// must agree within [`TOLERANCE`], not to cachesim's rounding.
const CLI_RANDOMIZED: &[&str] = &["randomtwo", "randomlru"];
// `fifomerge` is compared through the Python package ([`COMPARED`]), not
// here: cachesim seeds libCacheSim's generator for each cache from the C
// library's `rand()` when it runs several sizes (1804289383 for the first,
// 846930886 for the second, ... unseeded glibc) and from the clock when it
// runs one, so its FIFO-Merge draws differ from run to run or from the
// package's fresh state. `fifomerge:seed=1804289383` at 128 MiB and
// `seed=846930886` at 256 MiB give cachesim's 0.8070 and 0.7734 of a
// two-size run.

/// The cachesim binary (`LIBCACHESIM_CACHESIM`), or None when it is unset
/// outside CI (the caller skips); under `CI=true` its absence fails.
fn cachesim_binary() -> Option<PathBuf> {
    let Ok(bin) = std::env::var("LIBCACHESIM_CACHESIM") else {
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !in_ci,
            "LIBCACHESIM_CACHESIM is not set (CI=true requires it; scripts/build-cachesim.sh builds cachesim)"
        );
        println!("skipped: LIBCACHESIM_CACHESIM is not set (scripts/build-cachesim.sh builds cachesim)");
        return None;
    };
    Some(PathBuf::from(bin))
}

/// cachesim's miss ratios for `policy` at `sizes` (comma-separated bytes),
/// in order.
fn cachesim_ratios(bin: &Path, policy: &str, sizes: &str) -> Vec<f64> {
    // cachesim writes a result/ directory where it runs.
    let scratch = std::env::temp_dir().join(format!("hearth-cachesim-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let out = Command::new(bin)
        .current_dir(&scratch)
        .arg(trace_path())
        .args(["oracleGeneral", policy, sizes, "--num-thread", "1"])
        .output()
        .expect("running cachesim");
    assert!(out.status.success(), "cachesim failed: {}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&scratch);
    let text = String::from_utf8_lossy(&out.stdout);
    let ratios: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("miss ratio ").nth(1))
        .map(|r| r.split(',').next().unwrap().trim().parse().unwrap())
        .collect();
    assert_eq!(ratios.len(), sizes.split(',').count(), "cachesim output:\n{text}");
    ratios
}

/// The same comparison through libCacheSim's own `cachesim` binary (from a
/// libCacheSim 0.3.5 build, path in `LIBCACHESIM_CACHESIM`), for policies
/// the Python package lacks. cachesim prints miss ratios to 4 decimals, so
/// counts are equal up to that rounding (±0.00005 x requests, 6 misses
/// here). Skipped when the variable is unset, except under `CI=true`, where
/// it fails (.ci/run builds cachesim with scripts/build-cachesim.sh).
#[test]
fn miss_counts_match_libcachesim_cachesim() {
    let Some(specs) = selected(CLI_COMPARED) else { return };
    let Some(bin) = cachesim_binary() else { return };
    let sizes: Vec<u64> = (1..=8).map(|i| i * 128 * MIB).collect();
    let trace = load_oracle_general(&trace_path());
    let n = trace.len() as f64;
    let sizes_arg = sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut failures = Vec::new();
    for &(spec, theirs_name) in &specs {
        let ratios = cachesim_ratios(&bin, theirs_name, &sizes_arg);
        for (&size, &ratio) in sizes.iter().zip(&ratios) {
            let ours = our_misses(spec, size, &trace);
            let theirs = ratio * n;
            println!(
                "{spec:<20} {:>9} {ours:>9} {theirs:>11.1} {:>8.3}",
                size / MIB,
                (ours as f64 / theirs - 1.0) * 100.0
            );
            let allowed = if CLI_RANDOMIZED.contains(&spec) { TOLERANCE * theirs } else { 0.00005 * n + 0.5 };
            if (ours as f64 - theirs).abs() > allowed {
                failures.push(format!("{spec} at {} MiB: hearth {ours}, cachesim {theirs:.0}", size / MIB));
            }
        }
    }
    println!("compared {} specs at {} sizes with cachesim", specs.len(), sizes.len());
    assert!(failures.is_empty(), "miss counts differ from cachesim:\n{}", failures.join("\n"));
}

/// Hearth specs checked against libCacheSim policies that neither cachesim
/// nor the Python package offers on their own: Cacheus' two experts, whose
/// `SR_LRU_init` and `CR_LFU_init` libCacheSim's library exports. The test
/// builds scripts/libcachesim_standalone.c against the static library and
/// headers of the cachesim build (`LIBCACHESIM_CACHESIM`'s source tree)
/// with `cc`, glib's pkg-config flags and zstd, and compares exact counts.
///
/// Both are exact here. `srlru` could differ where libCacheSim holds more
/// than the capacity (SR grows by bytes R gives up while R still holds
/// them; see srlru.rs): Hearth demotes R's excess at once, libCacheSim at
/// R's next insert; on this trace that changes no count.
const STANDALONE_COMPARED: &[(&str, &str)] = &[("crlfu", "CR_LFU"), ("srlru", "SR_LRU")];

#[test]
fn miss_counts_match_libcachesim_library() {
    let Some(specs) = selected(STANDALONE_COMPARED) else { return };
    let Some(bin) = cachesim_binary() else { return };
    // .../src/libCacheSim/_build/bin/cachesim
    let build = bin.parent().and_then(Path::parent).expect("cachesim sits in _build/bin");
    let source = build.parent().expect("_build sits in libCacheSim's source tree");
    let driver = std::env::temp_dir().join(format!("hearth-lcs-standalone-{}", std::process::id()));
    let glib =
        Command::new("pkg-config").args(["--cflags", "--libs", "glib-2.0"]).output().expect("running pkg-config");
    assert!(glib.status.success(), "pkg-config glib-2.0 failed: {}", String::from_utf8_lossy(&glib.stderr));
    let glib = String::from_utf8(glib.stdout).unwrap();
    let cc = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&driver)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/libcachesim_standalone.c"))
        .arg(format!("-I{}", source.join("libCacheSim/include").display()))
        .arg(build.join("liblibCacheSim.a"))
        .args(glib.split_whitespace())
        .args(["-lzstd", "-lm", "-lpthread"])
        .output()
        .expect("running cc");
    assert!(cc.status.success(), "building the libCacheSim driver failed: {}", String::from_utf8_lossy(&cc.stderr));

    let sizes: Vec<u64> = (1..=8).map(|i| i * 128 * MIB).collect();
    let trace = load_oracle_general(&trace_path());
    let mut failures = Vec::new();
    for &(spec, theirs_name) in &specs {
        for &size in &sizes {
            let out = Command::new(&driver)
                .arg(trace_path())
                .arg(size.to_string())
                .arg(theirs_name)
                .output()
                .expect("running the libCacheSim driver");
            assert!(out.status.success(), "driver failed: {}", String::from_utf8_lossy(&out.stderr));
            let text = String::from_utf8_lossy(&out.stdout);
            let counts: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap()).collect();
            assert_eq!(counts.first(), Some(&(trace.len() as u64)), "the driver read a different trace: {text}");
            let (ours, theirs) = (our_misses(spec, size, &trace), counts[1]);
            let diff = (ours as f64 - theirs as f64) / theirs as f64;
            println!("{spec:<20} {:>9} {ours:>9} {theirs:>9} {:>8.3}", size / MIB, diff * 100.0);
            if ours != theirs {
                failures.push(format!("{spec} at {} MiB: hearth {ours}, libCacheSim {theirs}", size / MIB));
            }
        }
    }
    let _ = std::fs::remove_file(&driver);
    println!("compared {} specs at {} sizes with libCacheSim's library", specs.len(), sizes.len());
    assert!(failures.is_empty(), "miss counts differ from libCacheSim:\n{}", failures.join("\n"));
}

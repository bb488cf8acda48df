//! Runs the real `hearth` binary for the `cli_*` tests and reads its output.

#![allow(dead_code)] // each test file uses a different part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn hearth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hearth")).args(args).output().expect("run hearth")
}

/// Standard output of a run that must have succeeded.
pub fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "hearth failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Standard error of a run that must have failed.
pub fn failure(o: &Output) -> String {
    assert!(!o.status.success(), "hearth should have failed: {}", String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A file of this checkout, by its path from the repository root.
pub fn repo_file(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel).to_string_lossy().into_owned()
}

/// The cloudPhysicsIO trace in libCacheSim's formats, beside the checkout.
pub fn shared(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data").join(name).to_string_lossy().into_owned()
}

pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The texts of an SVG file's `<text>` elements (titles, tick labels, legend).
pub fn svg_texts(file: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once(">\n")?.1.split_once("\n</text>")?.0.to_string()))
        .collect()
}

/// Tick labels written as floats (`10.0`, `20000.0`): there should be none.
pub fn float_ticks(texts: &[String]) -> Vec<&String> {
    texts.iter().filter(|t| t.parse::<f64>().is_ok() && t.contains('.') && t.ends_with('0')).collect()
}

/// libCacheSim's `cachesim` (a libCacheSim 0.3.5 build, scripts/build-cachesim.sh; path in
/// `LIBCACHESIM_CACHESIM`), or `None` (skipped) outside CI when it is not built; under
/// `CI=true` a missing one fails.
pub fn cachesim() -> Option<PathBuf> {
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

/// cachesim's LRU miss ratios, one per size of `sizes`, for `trace` read as `trace_type`,
/// with `extra` arguments (a prefetcher, trace options).
pub fn cachesim_lru_miss_ratios(
    cachesim: &Path,
    trace: &Path,
    trace_type: &str,
    sizes: &[u64],
    extra: &[&str],
) -> Vec<f64> {
    let scratch = tempfile::TempDir::new().unwrap(); // cachesim writes a result/ directory where it runs
    let sizes_arg = sizes.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let out = Command::new(cachesim)
        .current_dir(scratch.path())
        .arg(trace)
        .args([trace_type, "lru", &sizes_arg, "--num-thread", "1"])
        .args(extra)
        .output()
        .expect("running cachesim");
    assert!(out.status.success(), "cachesim failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let ratios: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("miss ratio ").nth(1))
        .map(|r| r.split(',').next().unwrap().trim().parse().unwrap())
        .collect();
    assert_eq!(ratios.len(), sizes.len(), "cachesim output:\n{text}");
    ratios
}

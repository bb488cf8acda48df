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

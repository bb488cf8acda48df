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

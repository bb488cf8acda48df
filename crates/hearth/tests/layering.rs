//! The layer rule (README "Layout"): the server, prefetch, warmup and tier
//! crates use the sans-I/O pieces below them (`hearth-core`,
//! `hearth-estimate`), never the simulator, the trace readers, the analyzer
//! or the plots. Checked on the workspace's declared normal dependencies
//! (`cargo metadata`), followed transitively, so an edge added to any crate
//! they reach fails here too. Dev-dependencies are free: a test may read a
//! trace file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Crates each guarded crate must not reach through normal dependencies.
const RULES: &[(&str, &[&str])] = &[
    ("hearth-server", &["hearth-sim", "hearth-trace", "hearth-analyze", "hearth-plot"]),
    ("hearth-prefetch", &["hearth-sim", "hearth-trace", "hearth-analyze", "hearth-plot"]),
    ("hearth-warmup", &["hearth-sim", "hearth-trace", "hearth-analyze", "hearth-plot"]),
    ("hearth-tier", &["hearth-sim", "hearth-trace", "hearth-analyze", "hearth-plot"]),
    // The estimators sit below the simulator and the readers.
    ("hearth-estimate", &["hearth-sim", "hearth-trace", "hearth-analyze", "hearth-plot", "hearth-policy"]),
];

/// Each workspace crate's normal dependencies on other workspace crates.
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline", "--manifest-path"])
        .arg(&manifest)
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages.iter().map(|p| p["name"].as_str().unwrap().to_string()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                // `kind` is null for [dependencies], "dev" or "build" otherwise.
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|name| members.contains(name))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// Every crate `from` reaches, with the path to it (for the failure message).
fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeMap<String, Vec<String>> {
    let mut paths = BTreeMap::new();
    let mut stack = vec![vec![from.to_string()]];
    while let Some(path) = stack.pop() {
        let last = path.last().unwrap();
        for dep in graph.get(last).into_iter().flatten() {
            if !paths.contains_key(dep) {
                let mut longer = path.clone();
                longer.push(dep.clone());
                paths.insert(dep.clone(), longer.clone());
                stack.push(longer);
            }
        }
    }
    paths
}

#[test]
fn guarded_crates_reach_neither_the_simulator_nor_the_trace_readers() {
    let graph = workspace_graph();
    let mut broken = Vec::new();
    for (krate, forbidden) in RULES {
        assert!(graph.contains_key(*krate), "{krate} is not a workspace member");
        let reached = reachable(&graph, krate);
        for f in *forbidden {
            if let Some(path) = reached.get(*f) {
                broken.push(path.join(" -> "));
            }
        }
    }
    assert!(broken.is_empty(), "forbidden dependencies:\n  {}", broken.join("\n  "));
}

/// The check can fail: it sees direct edges (the simulator reads traces)
/// and edges through other crates (the CLI reaches the estimators only
/// through the simulator and the crates that use them).
#[test]
fn the_graph_has_direct_and_transitive_edges() {
    let graph = workspace_graph();
    let from_sim = reachable(&graph, "hearth-sim");
    assert_eq!(from_sim.get("hearth-trace").map(Vec::len), Some(2), "hearth-sim -> hearth-trace");
    let from_cli = reachable(&graph, "hearth");
    let to_estimate = from_cli.get("hearth-estimate").expect("the CLI reaches hearth-estimate");
    assert!(to_estimate.len() > 2, "through another crate: {to_estimate:?}");
}

//! Miss ratios of the learned policies beside LRU and ARC on an uncompressed
//! oracleGeneral trace (object mode, every request counted, as `hearth sim
//! --mode object`), with how often and how long each learned policy trained
//! (`3lcache65k` is 3L-Cache with libCacheSim's batch of 65,536 samples).
//!
//! Usage: cargo run --release -p hearth-policy --example learned_training -- TRACE SIZE...
//! where SIZE is bytes (`128MiB`) or a share of the footprint (`5%`).

use std::time::Instant;

use hearth_core::{parse_bytes, Access, Key, Policy};
use hearth_policy::admission::DEFAULT_SEED;
use hearth_policy::{GlCache, Lrb, LrbObjective, LrbWindow, ThreeLCache, Training};

fn read_oracle_general(path: &str) -> Vec<Access> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(bytes.len() % 24 == 0, "{path}: not a whole number of 24-byte oracleGeneral records");
    bytes
        .chunks_exact(24)
        .enumerate()
        .map(|(i, r)| Access {
            key: u64::from_le_bytes(r[4..12].try_into().unwrap()),
            size: u32::from_le_bytes(r[12..16].try_into().unwrap()),
            vtime: i as u64,
            ..Access::default()
        })
        .collect()
}

fn run(policy: &mut dyn Policy, trace: &[Access]) -> f64 {
    let mut evicted: Vec<Key> = Vec::new();
    let misses = trace.iter().filter(|a| !policy.access(a, &mut evicted)).count();
    misses as f64 / trace.len() as f64
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, sizes) = args.split_first().expect("usage: learned_training TRACE SIZE...");
    let trace = read_oracle_general(path);
    let mut footprint = std::collections::HashMap::new();
    for a in &trace {
        footprint.insert(a.key, u64::from(a.size));
    }
    let footprint: u64 = footprint.values().sum();
    println!("{path}: {} requests, footprint {footprint} bytes", trace.len());
    println!(
        "{:<10} {:>12} {:>10} {:>7} {:>9} {:>10} {:>8}",
        "policy", "cache bytes", "miss ratio", "models", "rows", "training s", "run s"
    );
    for size in sizes {
        let capacity = match size.strip_suffix('%') {
            Some(p) => (footprint as f64 * p.parse::<f64>().expect("a share") / 100.0) as u64,
            None => parse_bytes(size).expect("a size"),
        };
        for name in ["lru", "arc"] {
            let started = Instant::now();
            let ratio = run(&mut *hearth_policy::build(name, capacity).unwrap(), &trace);
            println!(
                "{name:<10} {capacity:>12} {ratio:>10.4} {:>7} {:>9} {:>10} {:>8.2}",
                "-",
                "-",
                "-",
                started.elapsed().as_secs_f64()
            );
        }
        let report = |name: &str, ratio: f64, t: Training, started: Instant| {
            println!(
                "{name:<10} {capacity:>12} {ratio:>10.4} {:>7} {:>9} {:>10.3} {:>8.2}",
                t.models,
                t.rows,
                t.time.as_secs_f64(),
                started.elapsed().as_secs_f64()
            );
        };
        let started = Instant::now();
        let mut gl = GlCache::new(capacity, 100, 0.02, 1.0).unwrap();
        let ratio = run(&mut gl, &trace);
        report("glcache", ratio, gl.training(), started);
        let started = Instant::now();
        let mut lrb = Lrb::new(capacity, LrbWindow::Auto, 16384, LrbObjective::Bytes, DEFAULT_SEED).unwrap();
        let ratio = run(&mut lrb, &trace);
        report("lrb", ratio, lrb.training(), started);
        // Hearth's batch, then libCacheSim's.
        for (name, batch) in [("3lcache", 16384), ("3lcache65k", 65536)] {
            let started = Instant::now();
            let mut cache = ThreeLCache::new(capacity, batch, LrbObjective::Bytes, DEFAULT_SEED).unwrap();
            let ratio = run(&mut cache, &trace);
            report(name, ratio, cache.training(), started);
        }
    }
}

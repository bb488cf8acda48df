//! Sequential cutoff: one pass over a 2 GiB export does not push a hot
//! 100 MiB working set out of a 128 MiB cache when its reads bypass the
//! cache past `--sequential-cutoff`, and does without it (the control).

mod serve_support;

use std::net::TcpStream;

use hearth_server::Config;
use serve_support::raw::*;
use serve_support::{export, loopback, metric, scrape, Server};

const MIB: u64 = 1 << 20;
const HOT_START: u64 = 1024 * MIB;
const HOT_CHUNKS: u64 = 100;

/// Reads the hot set in 1 MiB pieces, in an order where no piece follows
/// the one before it (so it never looks sequential).
fn read_hot_set(s: &mut TcpStream) {
    for i in 0..HOT_CHUNKS {
        read(s, HOT_START + (i * 37 % HOT_CHUNKS) * MIB, MIB as u32);
    }
}

/// Misses of the hot set read again after a sequential pass over the export.
fn hot_misses_after_a_scan(extra: &[&str]) -> (f64, f64) {
    let mut flags = vec!["--backend", "memory", "--size", "2GiB", "--cache-size", "128MiB", "--policy", "lru"];
    flags.extend(extra);
    let server = Server::start(Config { server: loopback(), exports: vec![export("disk", &flags)] });
    let url = server.metrics.clone().unwrap();
    let misses = || metric(&scrape(&url), "hearth_cache_misses_total{export=\"disk\"}");
    let mut s = hello(server.tcp.unwrap(), 3);
    go(&mut s);
    read_hot_set(&mut s);
    let before = misses();
    read_hot_set(&mut s);
    assert_eq!(misses(), before, "the hot set fits the cache");
    for offset in (0..2048 * MIB).step_by(MIB as usize) {
        read(&mut s, offset, MIB as u32);
    }
    let before = misses();
    read_hot_set(&mut s);
    (misses() - before, metric(&scrape(&url), "hearth_cache_bypassed_total{export=\"disk\"}"))
}

#[test]
fn a_long_sequential_read_leaves_the_working_set_cached() {
    let (misses, bypassed) = hot_misses_after_a_scan(&["--sequential-cutoff", "4MiB"]);
    assert_eq!(misses, 0.0, "the scan pushed out part of the hot set");
    // Past its first 4 MiB the scan went around the cache (the hot 100 MiB it copied from memory).
    assert!(bypassed >= ((2048 - 4 - 100) * 256) as f64, "{bypassed} blocks bypassed");
    let (misses, bypassed) = hot_misses_after_a_scan(&[]);
    assert_eq!(bypassed, 0.0);
    assert_eq!(misses, (HOT_CHUNKS * 256) as f64, "without the cutoff the scan evicts the hot set");
}

//! Cache modes against the real server: write-around sends writes to the
//! backend and drops the cached copy, so the next read misses and returns
//! the new data.

mod serve_support;

use std::io::Write;

use serve_support::raw::*;
use serve_support::{metric, scrape, start_disk};

#[test]
fn write_around_writes_drop_the_cached_block() {
    let dir = tempfile::tempdir().unwrap();
    let (server, disk) = start_disk(dir.path(), "4MiB", &["--write-around"]);
    let url = server.metrics.clone().unwrap();
    let counters = || {
        let page = scrape(&url);
        (
            metric(&page, "hearth_cache_hits_total{export=\"disk\"}"),
            metric(&page, "hearth_cache_misses_total{export=\"disk\"}"),
        )
    };
    let mut s = hello(server.tcp.unwrap(), 3);
    go(&mut s);
    read(&mut s, 8192, 4096);
    read(&mut s, 8192, 4096);
    assert_eq!(counters(), (1.0, 1.0), "a read fills the cache");
    request(&mut s, 0, CMD_WRITE, 2, 8192, 4096);
    s.write_all(&[9u8; 4096]).unwrap();
    assert_eq!(simple_reply(&mut s), (0, 2));
    assert_eq!(std::fs::read(&disk).unwrap()[8192..12288], [9u8; 4096], "the write is on the backend at once");
    assert_eq!(read(&mut s, 8192, 4096), vec![9u8; 4096]);
    assert_eq!(counters(), (1.0, 2.0), "the write dropped the cached copy");
}

/// The access log records every client request, cache hits included, as a
/// trace `hearth` reads back.
#[test]
fn the_access_log_records_every_client_request() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.csv");
    let (server, _) = start_disk(dir.path(), "4MiB", &["--access-log", log.to_str().unwrap()]);
    let mut s = hello(server.tcp.unwrap(), 3);
    go(&mut s);
    request(&mut s, 0, CMD_WRITE, 2, 8192, 4096);
    s.write_all(&[9u8; 4096]).unwrap();
    assert_eq!(simple_reply(&mut s), (0, 2));
    read(&mut s, 8192, 4096);
    read(&mut s, 8192, 4096);
    read(&mut s, 1 << 20, 4096);
    let page = scrape(server.metrics.as_ref().unwrap());
    assert_eq!(metric(&page, "hearth_cache_hits_total{export=\"disk\"}"), 2.0, "two of the reads were hits");
    request(&mut s, 0, CMD_FLUSH, 3, 0, 0);
    assert_eq!(simple_reply(&mut s), (0, 3));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["trace", "head", log.to_str().unwrap(), "-n", "10"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let requests: Vec<_> = text.lines().skip(1).map(|l| l.split_whitespace().nth(3).unwrap()).collect();
    assert_eq!(requests, ["write", "read", "read", "read"], "every request, hits included:\n{text}");
}

//! Hostile clients against the server in-process: idle sessions time out,
//! connections past the limit are closed at accept, a read-only export
//! advertises what `nbdkit -r` does, and eviction notices place no more
//! blocks than their connection moved, with a bounded share of reloads
//! queued and cancelled when it leaves. The
//! attacks bounded by the server's resident memory run the binary, whose
//! memory is its own: crates/hearth/tests/serve_hostile.rs.

mod serve_support;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use hearth_server::config::{Config, ExportConfig, ServerConfig};
use serve_support::raw::*;
use serve_support::{export, have, metric, run, scrape, Server};

/// An export "disk" of 64 MiB in memory with an 8 MiB cache, plus the
/// export flags `extra`, on a free loopback port; `adjust` adjusts the
/// server table (limits, metrics) and the export.
fn start(extra: &[&str], adjust: impl FnOnce(&mut ServerConfig, &mut ExportConfig)) -> (Server, SocketAddr) {
    let mut flags = vec!["--cache-size", "8MiB", "--backend", "memory", "--size", "64MiB"];
    flags.extend_from_slice(extra);
    let mut table = serve_support::loopback();
    table.metrics = None;
    let mut export = export("disk", &flags);
    adjust(&mut table, &mut export);
    let s = Server::start(Config { server: table, exports: vec![export] });
    let addr = s.tcp.unwrap();
    (s, addr)
}

#[test]
fn idle_sessions_time_out_and_connections_are_limited() {
    let (mut server, addr) = start(&[], |server, _| {
        server.idle_timeout = 1;
        server.max_connections = 2;
    });
    let mut idle = session(addr);
    set_timeout(&idle, Duration::from_secs(10));
    let mut busy = session(addr);
    set_timeout(&busy, Duration::from_secs(10));
    // A third connection is closed at accept.
    let mut third = TcpStream::connect(addr).unwrap();
    set_timeout(&third, Duration::from_secs(10));
    assert!(closed(&mut third), "a connection past --max-connections is closed");
    let t = Instant::now();
    for i in 0..6 {
        std::thread::sleep(Duration::from_millis(400));
        answers(&mut busy, i * 4096);
    }
    assert!(closed(&mut idle), "an idle session is closed");
    assert!(t.elapsed() < Duration::from_secs(8));
    // The idle session's slot is free again.
    let mut again = session(addr);
    set_timeout(&again, Duration::from_secs(10));
    answers(&mut again, 0);
    assert!(server.alive());
    assert!(server.log_text().contains("max_connections"), "the refusal is logged");
}

#[test]
fn read_only_exports_advertise_what_nbdkit_r_does() {
    if !have("nbdinfo") || !have("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = start(&[], |_, export| export.read_only = true);
    let flags = |json: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        let e = &v["exports"][0];
        ["is_read_only", "can_flush", "can_fua", "can_trim", "can_zero", "can_cache", "can_multi_conn"]
            .iter()
            .map(|k| format!("{k}={}", e[k]))
            .collect()
    };
    let ours = flags(&run(std::process::Command::new("nbdinfo").args(["--json", &server.uri("disk")])));
    let sock = dir.path().join("nbdkit.sock");
    let theirs = flags(&run(std::process::Command::new("nbdkit").args([
        "-r",
        "-U",
        sock.to_str().unwrap(),
        "memory",
        "64M",
        "--run",
        "nbdinfo --json \"$uri\"",
    ])));
    assert_eq!(ours, theirs);
    assert!(ours.contains(&"can_trim=false".to_string()) && ours.contains(&"can_zero=false".to_string()));
}

/// Polls `metrics` until `name` reaches `want` (10 s at most); its value.
fn await_metric(metrics: &str, name: &str, want: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let value = metric(&scrape(metrics), name);
        if value >= want || Instant::now() > deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Under eviction-based placement a client's EVICTED notice places blocks
/// in the cache every client shares. A connection may name only as many
/// blocks as it has read or written: a flood from one that moved nothing
/// places nothing, one that read 64 blocks places at most 64, and another
/// client's hot set stays cached through both. A connection's queued
/// reloads are bounded and cancelled when it leaves.
#[test]
fn eviction_notices_place_no_more_than_their_connection_moved() {
    let extra = ["--placement", "ev", "--latency", "5ms", "--background-reads", "1"];
    let (mut server, addr) = start(&extra, |server, _| server.metrics = Some("127.0.0.1:0".to_string()));
    let metrics = server.metrics.clone().unwrap();
    let value = |name: &str| metric(&scrape(&metrics), name);
    const HOT: u64 = 256; // blocks: 1 MiB of the 8 MiB cache
    const EXPORT: u64 = 64 << 20;

    // A client reads its hot set and evicts it from its own cache: the
    // server places the 256 blocks and reloads them in the background.
    let mut victim = hint_session(addr);
    set_timeout(&victim, Duration::from_secs(10));
    read(&mut victim, 0, (HOT * 4096) as u32);
    hint(&mut victim, 1, &[(2, 0, HOT * 4096)]);
    assert_eq!(simple_reply(&mut victim), (0, 1));
    let resident = await_metric(&metrics, "hearth_cache_blocks{export=\"disk\",state=\"resident\"}", HOT as f64);
    assert_eq!(resident, HOT as f64, "the hot set was placed and reloaded");

    // A connection that moved nothing says it evicted the whole export.
    let (placed, skipped) = (value("hearth_placements_total{"), value("hearth_eviction_reloads_skipped_total{"));
    let mut flood = hint_session(addr);
    set_timeout(&flood, Duration::from_secs(10));
    hint(&mut flood, 1, &[(2, 0, EXPORT)]);
    assert_eq!(simple_reply(&mut flood), (0, 1), "a notice beyond its credit is still a valid hint");
    assert_eq!(value("hearth_placements_total{"), placed, "a connection that moved nothing placed blocks");
    assert_eq!(value("hearth_eviction_reloads_skipped_total{"), skipped + (EXPORT / 4096) as f64);

    // One that read 64 blocks (far from the hot set) places at most 64.
    let mut scanner = hint_session(addr);
    set_timeout(&scanner, Duration::from_secs(10));
    read(&mut scanner, EXPORT - (64 << 12), 64 * 4096);
    hint(&mut scanner, 1, &[(2, 0, EXPORT)]);
    assert_eq!(simple_reply(&mut scanner), (0, 1));
    let scanner_placed = value("hearth_placements_total{") - placed;
    assert!(scanner_placed <= 64.0, "{scanner_placed} blocks placed for 64 moved");

    // The hot set is still cached: reading it again reads no block from the backend.
    let (hits, misses) = (value("hearth_cache_hits_total{"), value("hearth_cache_misses_total{"));
    read(&mut victim, 0, (HOT * 4096) as u32);
    assert_eq!(value("hearth_cache_misses_total{"), misses, "the hot set was evicted by the floods");
    assert_eq!(value("hearth_cache_hits_total{"), hits + HOT as f64);

    // A connection that read 1,024 blocks and evicts them all has 256
    // reloads queued (its share) and the rest skipped at once; when it
    // leaves, the queued ones are cancelled rather than read (5 ms each).
    const MOVED: u64 = 1024;
    let mut leaver = hint_session(addr);
    set_timeout(&leaver, Duration::from_secs(10));
    read(&mut leaver, EXPORT / 2, (MOVED * 4096) as u32);
    let (reads, skipped) = (value("hearth_backend_reads_total{"), value("hearth_eviction_reloads_skipped_total{"));
    hint(&mut leaver, 1, &[(2, EXPORT / 2, MOVED * 4096)]);
    assert_eq!(simple_reply(&mut leaver), (0, 1));
    drop(leaver);
    let deadline = Instant::now() + Duration::from_secs(10);
    let (reloaded, dropped) = loop {
        let reloaded = value("hearth_backend_reads_total{") - reads;
        let dropped = value("hearth_eviction_reloads_skipped_total{") - skipped;
        if reloaded + dropped >= MOVED as f64 || Instant::now() > deadline {
            break (reloaded, dropped);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("eviction notice then disconnect: {reloaded} reloads read, {dropped} skipped or cancelled");
    assert_eq!(reloaded + dropped, MOVED as f64, "every placed block is reloaded or counted as skipped");
    assert!(reloaded < 100.0, "{reloaded} reloads ran for a connection that left");
    assert!(server.alive());
}

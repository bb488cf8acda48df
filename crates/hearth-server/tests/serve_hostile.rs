//! Hostile clients against the server in-process: idle sessions time out,
//! connections past the limit are closed at accept, a read-only export
//! advertises what `nbdkit -r` does, and a flood of eviction hints queues a
//! bounded share of reloads, cancelled when its connection leaves. The
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

#[test]
fn eviction_hint_floods_queue_a_bounded_share_of_reloads_cancelled_at_disconnect() {
    let extra = ["--placement", "ev", "--latency", "5ms", "--background-reads", "1"];
    let (mut server, addr) = start(&extra, |server, _| server.metrics = Some("127.0.0.1:0".to_string()));
    let metrics = server.metrics.clone().unwrap();
    let mut s = hint_session(addr);
    set_timeout(&s, Duration::from_secs(10));
    // One record: "I evicted the whole 64 MiB export" — 16,384 reloads asked for.
    hint(&mut s, 1, &[(2, 0, 64 << 20)]);
    assert_eq!(simple_reply(&mut s), (0, 1));
    drop(s);
    std::thread::sleep(Duration::from_secs(2));
    let page = scrape(&metrics);
    let reads = metric(&page, "hearth_backend_reads_total{");
    let skipped = metric(&page, "hearth_eviction_reloads_skipped_total{");
    eprintln!("eviction flood: {reads} backend reads, {skipped} reloads dropped or skipped");
    // At 5 ms a read, one thread would have done ~400 in 2 s had the
    // connection's queued reloads outlived it.
    assert!(reads < 100.0, "{reads} reloads ran for a connection that left");
    assert!(skipped >= 16_384.0 - 2_048.0 - 256.0, "only {skipped} reloads dropped");
    assert!(server.alive());
}

//! Hostile clients against the real `hearth serve` process: each attack a
//! client could mount alone (never reading replies, CACHE floods, huge hint
//! tables, endless contexts) leaves the server's resident memory bounded,
//! other clients served, and SIGTERM prompt. The memory is the server
//! process's own, so these run the binary; the attacks without a memory
//! bound (idling, too many connections, eviction notice floods) run
//! in-process: crates/hearth-server/tests/serve_hostile.rs.

mod serve_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serve_support::raw::*;
use serve_support::Server;

/// How much an attack may grow the server's resident memory.
const ATTACK_RSS_KIB: u64 = 64 * 1024;

fn start(dir: &std::path::Path, extra: &[&str]) -> (Server, SocketAddr) {
    let mut args = vec!["--name", "disk", "--listen", "127.0.0.1:0", "--cache-size", "8MiB"];
    if !extra.contains(&"--backend") {
        args.extend_from_slice(&["--backend", "memory", "--size", "64MiB"]);
    }
    args.extend_from_slice(extra);
    let s = Server::start(&args, &dir.join("log"));
    let addr = s.tcp.unwrap();
    (s, addr)
}

/// Writes requests until the server stops reading them (the socket stays
/// full for a second) or `limit` requests are sent; returns how many went.
fn flood(s: &mut TcpStream, limit: u64, mut next: impl FnMut(u64) -> Vec<u8>) -> u64 {
    s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut sent = 0;
    let mut batch = Vec::new();
    while sent < limit {
        batch.clear();
        for i in sent..(sent + 1000).min(limit) {
            batch.extend_from_slice(&next(i));
        }
        if s.write_all(&batch).is_err() {
            return sent;
        }
        sent += 1000;
    }
    sent
}

fn header(command: u16, cookie: u64, offset: u64, len: u32) -> Vec<u8> {
    let mut m = 0x2560_9513u32.to_be_bytes().to_vec();
    m.extend_from_slice(&0u16.to_be_bytes());
    m.extend_from_slice(&command.to_be_bytes());
    m.extend_from_slice(&cookie.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&len.to_be_bytes());
    m
}

/// SIGTERM ends the server within 10 s, cleanly.
fn terminates_promptly(server: Server, attack: &str) {
    let t = Instant::now();
    let clean = server.stop("TERM");
    let took = t.elapsed();
    assert!(clean, "{attack}: the server did not exit cleanly on SIGTERM");
    assert!(took < Duration::from_secs(10), "{attack}: SIGTERM took {took:?}");
    eprintln!("{attack}: SIGTERM exit in {took:?}");
}

#[test]
fn replies_never_read_stop_the_reader_instead_of_queueing_without_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = start(dir.path(), &[]);
    let before = memory_kib(server.pid(), "VmRSS");
    // READs past the end, FLUSHes, zero-length READs: all answered without
    // touching the backend, so only queued replies could pile up.
    let mut attacker = session(addr);
    let sent = flood(&mut attacker, 2_000_000, |i| match i % 3 {
        0 => header(CMD_READ, i, 1 << 40, 4096),
        1 => header(CMD_FLUSH, i, 0, 0),
        _ => header(CMD_READ, i, 0, 0),
    });
    assert!(sent < 2_000_000, "the server kept reading {sent} requests whose replies nobody read");
    let during = memory_kib(server.pid(), "VmRSS");
    let mut other = session(addr);
    set_timeout(&other, Duration::from_secs(5));
    answers(&mut other, 4096);
    drop(attacker);
    std::thread::sleep(Duration::from_millis(500));
    answers(&mut other, 8192);
    eprintln!("unread replies: {sent} requests sent before the server stopped reading; RSS {before} -> {during} KiB");
    assert!(during < before + ATTACK_RSS_KIB, "RSS grew from {before} to {during} KiB");
    assert!(server.alive());
    // SIGTERM while another attacker is mid-flood.
    let mut attacker = session(addr);
    flood(&mut attacker, 2_000_000, |i| header(CMD_READ, i, 1 << 40, 4096));
    terminates_promptly(server, "unread replies");
}

#[test]
fn a_cache_flood_neither_stalls_other_clients_nor_outlives_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk.img");
    let path = path.to_str().unwrap();
    let (server, addr) = start(dir.path(), &["--backend", "sparse", "--path", path, "--size", "1GiB"]);
    let before = memory_kib(server.pid(), "VmRSS");
    // 1,000 CACHE requests for 256 MiB each: 28 KB on the wire, 250 GiB of reads.
    let mut attacker = session(addr);
    let sent = flood(&mut attacker, 1000, |i| header(CMD_CACHE, i, (i % 4) << 28, 256 << 20));
    let mut other = session(addr);
    set_timeout(&other, Duration::from_secs(5));
    let mut slowest = Duration::ZERO;
    for i in 0..20u64 {
        // Blocks far apart, so each read misses the cache.
        let t = Instant::now();
        request(&mut other, 0, CMD_READ, i, ((i * 37 + 3) % 256) << 22, 4096);
        assert_eq!(simple_reply(&mut other), (0, i));
        read_data(&mut other, 4096);
        slowest = slowest.max(t.elapsed());
        if i == 10 {
            drop(std::mem::replace(&mut attacker, session(addr))); // the attacker leaves
        }
    }
    let during = memory_kib(server.pid(), "VmRSS");
    eprintln!("CACHE flood: {sent} sent, slowest other-client read {slowest:?}, RSS {before} -> {during} KiB");
    assert!(slowest < Duration::from_secs(1), "another client's read took {slowest:?} during a CACHE flood");
    assert!(during < before + ATTACK_RSS_KIB, "RSS grew from {before} to {during} KiB");
    // SIGTERM in the middle of a flood.
    flood(&mut attacker, 1000, |i| header(CMD_CACHE, i, (i % 4) << 28, 256 << 20));
    terminates_promptly(server, "CACHE flood");
}

#[test]
fn hint_state_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = start(dir.path(), &["--max-client-buffers", "4096", "--prefetch", "quickmine"]);
    let before = memory_kib(server.pid(), "VmRSS");
    let mut s = hint_session(addr);
    set_timeout(&s, Duration::from_secs(5));
    // A BUFFER hint at slot 2^27 - 1 would need a 1 GiB table: refused.
    hint(&mut s, 1, &[(1, ((1 << 27) - 1) * 4096, 0)]);
    assert_eq!(simple_reply(&mut s), (EINVAL, 1));
    hint(&mut s, 2, &[(1, 4096 * 4096, 0)]);
    assert_eq!(simple_reply(&mut s), (EINVAL, 2), "the first buffer past --max-client-buffers");
    hint(&mut s, 3, &[(1, 4095 * 4096, 0)]);
    assert_eq!(simple_reply(&mut s), (0, 3), "the last buffer within it");
    answers(&mut s, 0);

    // Contexts: at most 1024 open per connection, freed at END and disconnect.
    let begin = |c: u64| (4u16, c + 1, 0u64);
    let open: Vec<_> = (0..1024).map(begin).collect();
    hint(&mut s, 4, &open);
    assert_eq!(simple_reply(&mut s), (0, 4));
    hint(&mut s, 5, &[begin(5000)]);
    assert_eq!(simple_reply(&mut s), (EINVAL, 5), "the 1025th open context");
    hint(&mut s, 6, &[(5, 1, 0), begin(5000)]);
    assert_eq!(simple_reply(&mut s), (0, 6), "END makes room");
    drop(s);
    // Many connections each leaving 1024 contexts open.
    for round in 0..200u64 {
        let mut c = hint_session(addr);
        set_timeout(&c, Duration::from_secs(5));
        let records: Vec<_> = (0..1024).map(|i| begin(round * 1024 + i)).collect();
        hint(&mut c, 1, &records);
        request(&mut c, 0, CMD_READ, 2, round * 4096, 4096);
        assert_eq!(simple_reply(&mut c), (0, 1));
        assert_eq!(simple_reply(&mut c), (0, 2));
        read_data(&mut c, 4096);
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = memory_kib(server.pid(), "VmRSS");
    eprintln!("hint state: 204,800 contexts over 200 connections, RSS {before} -> {after} KiB");
    assert!(after < before + ATTACK_RSS_KIB, "RSS grew from {before} to {after} KiB");
    assert!(server.alive());
}

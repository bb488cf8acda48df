//! The Rust hint client (crates/hearth-client) against the live server:
//! negotiation, data round trip, contexts reaching the server's prefetcher
//! and buffer addresses reaching its eviction-based placement.

mod serve_support;

use hearth_client::Client;
use serve_support::{metric, scrape, Server};

#[test]
fn rust_client_round_trips_and_its_hints_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let server = Server::start(
        &[
            "--backend",
            "memory",
            "--size",
            "4MiB",
            "--cache-size",
            "128KiB",
            "--policy",
            "lru",
            "--placement",
            "ev",
            "--prefetch",
            "quickmine",
            "--name",
            "disk",
            "--unix",
            sock.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ],
        &dir.path().join("log"),
    );
    let mut c = Client::connect_unix(&sock, "disk").unwrap();
    assert!(c.hints(), "the server offers the hint extension");
    assert_eq!(c.size(), 4 << 20);
    let block = |b: u64| vec![(b % 251) as u8; 4096];
    for b in 0..64 {
        c.write(b * 4096, &block(b), b % 8 == 7).unwrap();
    }
    c.flush().unwrap();
    // Contexts repeating one path: the prefetcher learns it and predicts.
    for ctx in 1..=6 {
        assert!(c.begin(ctx, 1).unwrap());
        for b in [40u64, 3, 17, 58, 9, 33] {
            assert_eq!(c.read(b * 4096, 4096).unwrap(), block(b));
        }
        assert!(c.end(ctx).unwrap());
    }
    // A client with 4 buffers cycling over 8 blocks: every read reuses a buffer.
    for i in 0..32u64 {
        let b = i % 8;
        assert_eq!(c.read_into_buffer(b * 4096, 4096, (i % 4) * 4096).unwrap(), block(b));
    }
    assert!(c.evicted(0, 4096).unwrap());
    assert!(c.evicted(8 << 20, 4096).is_err(), "an eviction hint beyond the export is refused");
    drop(c);
    let page = scrape(server.metrics.as_ref().unwrap());
    let m = |name: &str| metric(&page, &format!("{name}{{export=\"disk\"}}"));
    assert!(m("hearth_prefetches_total") > 0.0, "{page}");
    assert!(m("hearth_client_evictions_total") >= 28.0, "{page}");
    server.stop("TERM");
}

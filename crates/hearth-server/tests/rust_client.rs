//! The Rust hint client (crates/hearth-client) against the server run
//! in-process (no `hearth` binary): negotiation, data round trip, contexts
//! reaching the server's prefetcher and buffer addresses reaching its
//! eviction-based placement, seen in the server's /metrics.

use std::io::{Read, Write};
use std::net::SocketAddr;

use hearth_client::Client;
use hearth_server::{Config, Server};

/// `GET /metrics` from the server's metrics listener.
fn scrape(addr: SocketAddr) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    page
}

/// The value of the sample named exactly `series` (labels included).
fn metric(page: &str, series: &str) -> f64 {
    let line = page.lines().find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '));
    let line = line.unwrap_or_else(|| panic!("no {series} in\n{page}"));
    line[series.len()..].trim().parse().unwrap()
}

#[test]
fn rust_client_round_trips_and_its_hints_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let toml = format!(
        r#"
        [server]
        unix = [{sock:?}]
        metrics = "127.0.0.1:0"

        [[export]]
        name = "disk"
        backend = "memory"
        size = "4MiB"
        cache_size = "128KiB"
        policy = "lru"
        placement = "ev"
        prefetch = "quickmine"
        "#
    );
    let settings = Config::parse(&toml).unwrap().validate().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = rt.block_on(Server::bind(&settings, Vec::new())).unwrap();
    let metrics = server.metrics_addr().expect("a metrics listener");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = rt.spawn(server.run(async {
        let _ = stopped.await;
    }));

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
    let page = scrape(metrics);
    let m = |name: &str| metric(&page, &format!("{name}{{export=\"disk\"}}"));
    assert!(m("hearth_prefetches_total") > 0.0, "{page}");
    assert!(m("hearth_client_evictions_total") >= 28.0, "{page}");

    stop.send(()).unwrap();
    rt.block_on(served).unwrap().expect("the server stops cleanly, every export flushed");
    assert!(!sock.exists(), "the server removes its socket when it stops");
}

//! Cache modes against the real server: write-around sends writes to the
//! backend and drops the cached copy, so the next read misses and returns
//! the new data; pass-through caches nothing; and an operator switches
//! modes while a client writes (`POST /mode`), leaving write-back only once
//! its dirty data is on the backend.

mod serve_support;

use std::io::{Read, Write};

use hearth_core::Op;
use serve_support::raw::*;
use serve_support::{metric, scrape, start_disk, start_disk_with};

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
    // Read back by the trace reader `hearth trace head` uses.
    let records: Vec<_> = hearth_trace::open(&log, None).unwrap().collect::<Result<_, _>>().unwrap();
    let requests: Vec<_> = records.iter().map(|r| (r.op, r.offset)).collect();
    assert_eq!(
        requests,
        [(Op::Write, 8192), (Op::Read, 8192), (Op::Read, 8192), (Op::Read, 1 << 20)],
        "every request, hits included"
    );
}

/// `POST /mode?{query}` on the metrics address: (status line, body).
fn post_mode(metrics_url: &str, query: &str) -> (String, String) {
    let host = metrics_url.strip_prefix("http://").and_then(|r| r.split('/').next()).expect("metrics url");
    let mut s = std::net::TcpStream::connect(host).expect("connect to metrics");
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    write!(s, "POST /mode?{query} HTTP/1.0\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

fn write_block(s: &mut std::net::TcpStream, cookie: u64, offset: u64, byte: u8) {
    request(s, 0, CMD_WRITE, cookie, offset, 4096);
    s.write_all(&[byte; 4096]).unwrap();
    assert_eq!(simple_reply(s), (0, cookie));
}

#[test]
fn pass_through_leaves_the_cache_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (server, disk) = start_disk(dir.path(), "4MiB", &["--pass-through"]);
    let url = server.metrics.clone().unwrap();
    let mut s = hello(server.tcp.unwrap(), 3);
    go(&mut s);
    read(&mut s, 8192, 4096);
    read(&mut s, 8192, 4096);
    write_block(&mut s, 2, 16384, 7);
    assert_eq!(std::fs::read(&disk).unwrap()[16384..20480], [7u8; 4096], "the write is on the backend at once");
    assert_eq!(read(&mut s, 16384, 4096), vec![7u8; 4096]);
    let page = scrape(&url);
    assert_eq!(metric(&page, "hearth_cache_hits_total{export=\"disk\"}"), 0.0, "nothing was cached to hit");
    assert_eq!(metric(&page, "hearth_cache_bypassed_total{export=\"disk\"}"), 3.0, "every read went around");
    assert_eq!(metric(&page, "hearth_cache_mode{export=\"disk\",mode=\"pass\"}"), 1.0);
}

#[test]
fn switching_out_of_write_back_writes_dirty_data_back_first() {
    let dir = tempfile::tempdir().unwrap();
    let (server, disk) = start_disk_with(dir.path(), "4MiB", &["--write-back"], |s| s.admin = true);
    let url = server.metrics.clone().unwrap();
    let mut s = hello(server.tcp.unwrap(), 3);
    go(&mut s);
    write_block(&mut s, 2, 8192, 5);
    assert_eq!(std::fs::read(&disk).unwrap()[8192..12288], [0u8; 4096], "write-back: not on the backend yet");

    let (status, body) = post_mode(&url, "export=disk&mode=write-through");
    assert!(status.contains("200"), "{status}: {body}");
    assert_eq!(body, r#"{"export":"disk","from":"back","to":"through"}"#);
    assert_eq!(std::fs::read(&disk).unwrap()[8192..12288], [5u8; 4096], "written back before the switch");
    write_block(&mut s, 3, 12288, 6);
    assert_eq!(std::fs::read(&disk).unwrap()[12288..16384], [6u8; 4096], "write-through now");
    assert_eq!(metric(&scrape(&url), "hearth_cache_mode{export=\"disk\",mode=\"through\"}"), 1.0);

    assert!(post_mode(&url, "export=disk&mode=back").0.contains("200"));
    write_block(&mut s, 4, 16384, 8);
    assert_eq!(std::fs::read(&disk).unwrap()[16384..20480], [0u8; 4096], "write-back again");
    assert_eq!(read(&mut s, 16384, 4096), vec![8u8; 4096]);

    for (query, status) in
        [("export=disk&mode=sideways", "400"), ("export=nope&mode=pass", "404"), ("mode=pass", "400")]
    {
        let (got, body) = post_mode(&url, query);
        assert!(got.contains(status) && body.contains("error"), "{query}: {got} {body}");
    }
}

#[test]
fn the_admin_endpoint_is_off_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = start_disk(dir.path(), "4MiB", &["--write-back"]);
    let url = server.metrics.clone().unwrap();
    let (status, body) = post_mode(&url, "export=disk&mode=through");
    assert!(status.contains("403") && body.contains("--admin"), "{status}: {body}");
    assert_eq!(metric(&scrape(&url), "hearth_cache_mode{export=\"disk\",mode=\"back\"}"), 1.0, "unchanged");
}

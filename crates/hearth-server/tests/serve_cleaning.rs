//! Background cleaning in write-back: data a client wrote and never flushed
//! reaches the backend file once it has waited `--dirty-max-age`, and not
//! before while writes go on; a quiet export drains earlier in bounded
//! batches; the passes are counted in /metrics.

mod serve_support;

use std::io::Write;
use std::time::{Duration, Instant};

use serve_support::raw::*;
use serve_support::{metric, pattern, scrape, start_disk};

/// Whether `file` holds `data` at `offset`.
fn holds(file: &std::path::Path, offset: usize, data: &[u8]) -> bool {
    std::fs::read(file).is_ok_and(|disk| disk.get(offset..offset + data.len()) == Some(data))
}

#[test]
fn unflushed_writes_reach_the_backend_within_the_dirty_max_age() {
    let dir = tempfile::tempdir().unwrap();
    let (server, disk) = start_disk(dir.path(), "4MiB", &["--write-back", "--dirty-max-age", "2s"]);
    let mut s = hello(server.tcp.unwrap(), 3);
    go(&mut s);
    let data = pattern(64 * 1024, 11);
    let offset = 3 * 1024 * 1024;
    request(&mut s, 0, CMD_WRITE, 1, offset as u64, data.len() as u32);
    s.write_all(&data).unwrap();
    assert_eq!(simple_reply(&mut s), (0, 1));
    let written = Instant::now();
    assert!(!holds(&disk, offset, &data), "write-back: the data is still only in the cache");
    // Keep writing elsewhere, so the export is never idle and only the age pass cleans.
    let mut cookie = 2;
    while !holds(&disk, offset, &data) {
        assert!(written.elapsed() < Duration::from_secs(10), "dirty data never reached the backend");
        request(&mut s, 0, CMD_WRITE, cookie, 8 << 20, 4096);
        s.write_all(&[cookie as u8; 4096]).unwrap();
        assert_eq!(simple_reply(&mut s), (0, cookie));
        cookie += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = written.elapsed();
    // Checked every half second once half the age has passed: 1 to 1.5 s, plus the write.
    assert!(took >= Duration::from_millis(900), "cleaned after {took:?}, before half the age");
    assert!(took < Duration::from_secs(4), "cleaned after {took:?}");
    let page = scrape(server.metrics.as_ref().unwrap());
    assert!(metric(&page, "hearth_cache_cleanings_total{export=\"disk\"}") >= 1.0);
    assert!(metric(&page, "hearth_cache_writebacks_total{export=\"disk\"}") >= 16.0);
}

/// Once writes pause for an eighth of the maximum age, cleaning starts
/// early, in bounded batches (256 blocks a tick), well before the age pass.
#[test]
fn a_quiet_export_drains_early_in_bounded_batches() {
    let dir = tempfile::tempdir().unwrap();
    // Idle after 2 s, ticks every second, the age pass only at 8 s.
    let (server, disk) = start_disk(dir.path(), "8MiB", &["--write-back", "--dirty-max-age", "16s"]);
    let url = server.metrics.clone().unwrap();
    let mut s = hello(server.tcp.unwrap(), 3);
    go(&mut s);
    let data = pattern(3 * 1024 * 1024, 12); // 768 blocks: three batches
    for (i, chunk) in data.chunks(1 << 20).enumerate() {
        request(&mut s, 0, CMD_WRITE, i as u64, (i << 20) as u64, chunk.len() as u32);
        s.write_all(chunk).unwrap();
        assert_eq!(simple_reply(&mut s), (0, i as u64));
    }
    let written = Instant::now();
    let writebacks = || metric(&scrape(&url), "hearth_cache_writebacks_total{export=\"disk\"}") as u64;
    let mut seen = vec![0];
    while !holds(&disk, 0, &data) {
        assert!(written.elapsed() < Duration::from_secs(7), "not drained before the age pass: {seen:?}");
        let n = writebacks();
        if n != *seen.last().unwrap() {
            assert!(
                written.elapsed() >= Duration::from_millis(1500),
                "cleaned {n} blocks while the writes were recent"
            );
            seen.push(n);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    seen.push(writebacks());
    assert!(seen.windows(2).all(|w| w[1] - w[0] <= 256), "batches of at most 256 blocks: {seen:?}");
    assert_eq!(*seen.last().unwrap(), 768, "{seen:?}");
}

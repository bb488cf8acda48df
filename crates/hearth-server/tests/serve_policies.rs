//! The modern policies and an admission policy in the real server: `hearth
//! serve --policy s3fifo`, `--policy wtinylfu` and `--policy lru+tinylfu`
//! each serve qemu-io byte-correct through a cache smaller than the data,
//! and repeated reads show up as cache hits in /metrics.

mod serve_support;

use std::process::Command;

use serve_support::{have, metric, run, scrape, start_disk};

/// Writes 8 MiB through a 2 MiB cache, reads a hot 512 KiB region three
/// times (policies that admit on the second miss, like `+tinylfu`, hit on the
/// third), then reads everything back, checking every byte against its
/// pattern, and returns the page of /metrics.
fn serve_and_check(policy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (server, backing) = start_disk(dir.path(), "2MiB", &["--policy", policy]);
    let uri = format!("nbd://{}/disk", server.tcp.unwrap());
    let before = scrape(server.metrics.as_deref().unwrap());
    let hits_before = metric(&before, "hearth_cache_hits_total{export=\"disk\"}");

    let out = run(Command::new("qemu-io")
        .args(["-f", "raw"])
        .args([
            "-c",
            "write -P 0x5a 0 8M",
            "-c",
            "write -P 0xa5 1000 5000",
            "-c",
            "write -P 0x3c 12M 64K",
            "-c",
            "read -P 0x3c 12M 64K",
            "-c",
            "read -P 0x3c 12M 64K",
            "-c",
            "read -P 0x3c 12M 64K",
            "-c",
            "read -P 0x5a 0 1000",
            "-c",
            "read -P 0xa5 1000 5000",
            "-c",
            "read -P 0x5a 6000 8382608",
            "-c",
            "read -P 0x00 13M 1M",
            "-c",
            "flush",
        ])
        .arg(&uri));
    assert!(!out.contains("fail") && !out.contains("Pattern verification"), "{policy}: {out}");
    assert_eq!(out.matches("read ").count(), 7, "{policy}: {out}");

    // The check is real: a wrong pattern is reported.
    let wrong = Command::new("qemu-io").args(["-f", "raw", "-c", "read -P 0x77 0 4K", &uri]).output().unwrap();
    let text = String::from_utf8_lossy(&wrong.stdout).into_owned() + &String::from_utf8_lossy(&wrong.stderr);
    assert!(text.contains("Pattern verification failed"), "{policy}: {text}");

    let page = scrape(server.metrics.as_deref().unwrap());
    let hits = metric(&page, "hearth_cache_hits_total{export=\"disk\"}") - hits_before;
    assert!(hits > 0.0, "{policy}: no cache hits after repeated reads:\n{page}");
    assert!(metric(&page, "hearth_requests_total{export=\"disk\",op=\"read\"}") >= 7.0, "{policy}");
    assert!(server.stop(), "{policy}: shutting down must succeed");

    // Write-through: the backing file holds the same bytes.
    let data = std::fs::read(&backing).unwrap();
    assert!(data[..1000].iter().all(|&b| b == 0x5a), "{policy}: backing file differs");
    assert!(data[1000..6000].iter().all(|&b| b == 0xa5), "{policy}: backing file differs");
    assert!(data[6000..8 << 20].iter().all(|&b| b == 0x5a), "{policy}: backing file differs");
    assert!(data[12 << 20..(12 << 20) + (64 << 10)].iter().all(|&b| b == 0x3c), "{policy}: backing file differs");
}

#[test]
fn s3fifo_serves_qemu_io_with_hits() {
    if have("qemu-io") {
        serve_and_check("s3fifo");
    }
}

#[test]
fn wtinylfu_serves_qemu_io_with_hits() {
    if have("qemu-io") {
        serve_and_check("wtinylfu");
    }
}

#[test]
fn an_admission_policy_serves_qemu_io_with_hits() {
    if have("qemu-io") {
        serve_and_check("lru+tinylfu");
    }
}

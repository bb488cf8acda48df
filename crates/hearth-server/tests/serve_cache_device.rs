//! The persistent cache device (`--cache-device`) across a clean restart of
//! the server in-process, read by python3-libnbd: the cache is kept and
//! served without backend reads. Kill -9 and the devices refused at start
//! are the binary's: crates/hearth/tests/serve_cache_device.rs.

mod serve_support;

use std::path::Path;
use std::process::Command;

use serve_support::{blocks_sha256, have_python_nbd, metric, run, scrape, start_disk, Server, PYTHON};

const BS: usize = 4096;

/// The 16 MiB sparse export "disk" on `dir/disk.img` with the cache device `device`.
fn start(dir: &Path, device: &str, cache_size: &str, extra: &[&str]) -> Server {
    start_disk(dir, cache_size, &[&["--cache-device", device][..], extra].concat()).0
}

fn read_all(server: &Server, first: u64, count: u64) -> String {
    blocks_sha256(&server.uri("disk"), first, count)
}

fn device_metric(server: &Server, name: &str) -> f64 {
    metric(&scrape(server.metrics.as_ref().unwrap()), &format!("{name}{{export=\"disk\"}}"))
}

/// Fill 4 MiB through a 256 KiB RAM cache into an 8 MiB device; after a
/// clean stop and restart the same reads come from the device alone.
#[test]
fn a_restart_keeps_the_cache_and_serves_it_without_backend_reads() {
    if !have_python_nbd() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let device = dir.path().join("cache.dev");
    let flags = ["--cache-device-size", "8MiB"];
    // Data on the backend first, written around any cache by a plain file write.
    let content: Vec<u8> = (0..16 << 20).map(|i: usize| (i / BS) as u8 ^ (i % 251) as u8).collect();
    std::fs::write(dir.path().join("disk.img"), &content).unwrap();
    let blocks = 1024;
    let server = start(dir.path(), device.to_str().unwrap(), "256KiB", &flags);
    let first = read_all(&server, 0, blocks);
    assert_eq!(device_metric(&server, "hearth_cache_device_misses_total"), blocks as f64);
    assert!(server.stop(), "clean stop");

    let server = start(dir.path(), device.to_str().unwrap(), "256KiB", &flags);
    let again = read_all(&server, 0, blocks);
    assert_eq!(again, first, "byte-identical after the restart");
    assert_eq!(device_metric(&server, "hearth_cache_device_misses_total"), 0.0, "no backend read");
    assert_eq!(device_metric(&server, "hearth_cache_device_hits_total"), blocks as f64);
    let expect = run(Command::new(PYTHON).args([
        "-c",
        "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read(int(sys.argv[2]))).hexdigest())",
        dir.path().join("disk.img").to_str().unwrap(),
        &(blocks as usize * BS).to_string(),
    ]));
    assert_eq!(again, expect, "what the device serves is the backend's data");
}

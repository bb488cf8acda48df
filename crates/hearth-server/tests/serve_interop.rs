//! The server against unmodified NBD clients from Debian packages: nbdinfo,
//! nbdcopy, python3-libnbd and fio (qemu-io through `--run`, and `-r`, are
//! the binary's: crates/hearth/tests/serve_interop.rs).

mod serve_support;

use std::process::Command;

use hearth_server::config::{Config, ServerConfig};
use serve_support::{export, have, have_python_nbd, metric, on_unix, pattern, run, scrape, Server, PYTHON};

#[test]
fn nbdinfo_reports_size_flags_and_every_export() {
    if !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[server]
unix = ["{}"]

[[export]]
name = "main"
description = "the main disk"
backend = "memory"
size = "12MiB"
policy = "lru"

[[export]]
name = "ro"
backend = "sparse"
path = "{}"
size = 1048576
read_only = true
"#,
            sock.display(),
            dir.path().join("ro.img").display()
        ),
    )
    .unwrap();
    let server = Server::start(Config::load(&config).unwrap());
    let out = run(Command::new("nbdinfo").arg(server.uri("main")));
    for want in [
        "export-size: 12582912",
        "can_flush: true",
        "can_fua: true",
        "can_trim: true",
        "can_zero: true",
        "can_multi_conn: true",
        "can_cache: true",
        "is_read_only: false",
        "base:allocation",
        "block_size_preferred: 4096",
    ] {
        assert!(out.contains(want), "nbdinfo lacks {want:?}:\n{out}");
    }
    let out = run(Command::new("nbdinfo").arg(server.uri("ro")));
    assert!(out.contains("export-size: 1048576") && out.contains("is_read_only: true"), "{out}");
    // base:allocation: the never-written sparse export is one hole.
    let out = run(Command::new("nbdinfo").args(["--map", &server.uri("ro")]));
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["0", "1048576", "3", "hole,zero"], "{out}");
    let out = run(Command::new("nbdinfo").args(["--list", &server.uri("")]));
    assert!(out.contains("export=\"main\"") && out.contains("export=\"ro\"") && out.contains("the main disk"), "{out}");
    let missing = Command::new("nbdinfo").arg(server.uri("nope")).output().unwrap();
    assert!(!missing.status.success(), "an unknown export must be refused");
}

#[test]
fn nbdcopy_round_trips_a_file_byte_identical() {
    if !have("nbdcopy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    let backing = dir.path().join("backing.img");
    let data = pattern(20 << 20, 7);
    std::fs::write(&input, &data).unwrap();
    let sock = dir.path().join("nbd.sock");
    let flags = ["--backend", "sparse", "--path", backing.to_str().unwrap(), "--size", "20MiB"];
    let server = Server::start(Config {
        server: ServerConfig { metrics: Some("127.0.0.1:0".to_string()), ..on_unix(&sock) },
        exports: vec![export("disk", &[&flags[..], &["--cache-size", "8MiB", "--policy", "lru"]].concat())],
    });
    run(Command::new("nbdcopy").arg(&input).arg(server.uri("disk")));
    run(Command::new("nbdcopy").arg(server.uri("disk")).arg(&output));
    assert!(std::fs::read(&output).unwrap() == data, "copy out differs from copy in");
    let page = scrape(server.metrics.as_deref().unwrap());
    assert!(metric(&page, "hearth_bytes_total{export=\"disk\",direction=\"write\"}") >= (20 << 20) as f64);
    assert!(metric(&page, "hearth_requests_total{export=\"disk\",op=\"read\"}") > 0.0);
    assert!(page.contains("hearth_request_duration_seconds_bucket{export=\"disk\",op=\"read\",le=\"+Inf\"}"));
    // Write-through: the backing file already holds everything.
    assert!(server.stop(), "the shutdown must succeed");
    assert!(std::fs::read(&backing).unwrap() == data, "backing file differs after shutdown");
}

/// Pipelined requests over python3-libnbd: a cache hit issued after a slow
/// miss completes first, and a burst of 64 in-flight writes and reads on two
/// connections (multi-conn) all land.
#[test]
fn python_libnbd_pipelined_requests_complete_out_of_order() {
    if !have_python_nbd() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let flags = ["--backend", "memory", "--size", "32MiB", "--latency", "150ms", "--cache-size", "16MiB"];
    let server = Server::start(Config { server: on_unix(&sock), exports: vec![export("disk", &flags)] });
    let script = r#"
import nbd, sys, json
uri = sys.argv[1]
h = nbd.NBD()
h.connect_uri(uri)
h.pread(4096, 0)                      # slow miss; block 0 is now cached
order = []
def done(name):
    def cb(err):
        order.append(name)
        return 1
    return cb
miss = nbd.Buffer(4096)
hit = nbd.Buffer(4096)
h.aio_pread(miss, 8 << 20, completion=done("miss"))
h.aio_pread(hit, 0, completion=done("hit"))
while h.aio_in_flight() > 0:
    h.poll(-1)

# 64 pipelined writes of distinct patterns, then a flush, then reads back on
# a second connection.
bufs = []
for i in range(64):
    b = nbd.Buffer.from_bytearray(bytearray([i + 1]) * 65536)
    bufs.append(b)
    h.aio_pwrite(b, (16 << 20) + i * 65536)
while h.aio_in_flight() > 0:
    h.poll(-1)
h.flush()
h2 = nbd.NBD()
h2.connect_uri(uri)
ok = all(h2.pread(65536, (16 << 20) + i * 65536) == bytes([i + 1]) * 65536 for i in range(64))
print(json.dumps({"order": order, "multi_conn_reads_ok": ok, "can_multi_conn": h.can_multi_conn()}))
"#;
    let out = run(Command::new(PYTHON).args(["-c", script, &server.uri("disk")]));
    let line = out.lines().last().unwrap_or_default();
    assert!(line.contains(r#""order": ["hit", "miss"]"#), "the cache hit must overtake the slow miss: {out}");
    assert!(line.contains(r#""multi_conn_reads_ok": true"#), "{out}");
    assert!(line.contains(r#""can_multi_conn": true"#), "{out}");
}

/// fio's nbd engine writes 32-deep random writes of 512 B to 64 KiB (so most
/// straddle cache blocks), then reads everything back verifying checksums;
/// a 1 MiB cache forces evictions (and write-backs of dirty blocks).
#[test]
fn fio_verifies_random_unaligned_pipelined_writes() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (i, mode) in [&[][..], &["--write-back", "--dirty-limit", "512KiB"][..]].into_iter().enumerate() {
        let sock = dir.path().join(format!("nbd{i}.sock"));
        let image = dir.path().join(format!("disk{i}.img"));
        let mut flags = vec!["--backend", "sparse", "--path", image.to_str().unwrap(), "--size", "32MiB"];
        flags.extend(["--cache-size", "1MiB"]);
        flags.extend_from_slice(mode);
        let server = Server::start(Config { server: on_unix(&sock), exports: vec![export("disk", &flags)] });
        let out = run(Command::new("fio")
            .args([
                "--name=verify",
                "--ioengine=nbd",
                &format!("--uri={}", server.uri("disk")),
                "--rw=randwrite",
                "--bsrange=512-64k",
                "--iodepth=32",
                "--size=16M",
                "--verify=crc32c",
                "--do_verify=1",
                "--verify_fatal=1",
            ])
            // fio leaves a verify state file in its working directory.
            .current_dir(dir.path()));
        assert!(out.contains("err= 0"), "{mode:?}: {out}");
        assert!(out.contains("read: IOPS"), "{mode:?}: the verify pass must read: {out}");
    }
}

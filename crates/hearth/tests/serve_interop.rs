//! `hearth serve` against unmodified NBD clients from Debian packages:
//! qemu-io, nbdinfo, nbdcopy and python3-libnbd.

mod serve_support;

use std::process::Command;

use serve_support::{have, have_python_nbd, metric, pattern, run, scrape, Server, PYTHON};

#[test]
fn qemu_io_writes_and_verifies_patterns_over_tcp() {
    if !have("qemu-io") {
        return;
    }
    // A 1 MiB cache under 8 MiB of data: verification crosses evictions and misses.
    // The server is captive (--run): it stops when qemu-io is done.
    let reads = ["read -P 0x5a 0 1000", "read -P 0xa5 1000 5000", "read -P 0x5a 6000 7M", "read -P 0x3c 12M 4K"];
    let commands = ["write -P 0x5a 0 8M", "write -P 0xa5 1000 5000", "write -P 0x3c 12M 4K"]
        .iter()
        .chain(&reads)
        .chain(&["read -P 0x00 13M 1M", "flush"])
        .map(|c| format!("-c '{c}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // The check is real: a wrong expected pattern is reported.
    let script = format!(
        r#"qemu-io -f raw {commands} "$uri" || exit 1; echo ===; qemu-io -f raw -c 'read -P 0x77 0 4K' "$uri" 2>&1; exit 0"#
    );
    let out = run(Command::new(env!("CARGO_BIN_EXE_hearth")).args([
        "serve",
        "--backend",
        "memory",
        "--size",
        "16MiB",
        "--cache-size",
        "1MiB",
        "--name",
        "disk",
        "--listen",
        "127.0.0.1:0",
        "--run",
        &script,
    ]));
    let (out, wrong) = out.split_once("===").expect("both qemu-io runs");
    assert!(!out.contains("fail"), "{out}");
    assert_eq!(out.matches("read ").count(), 5, "{out}");
    assert!(wrong.contains("Pattern verification failed"), "{wrong}");
}

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
    let server = Server::start(&["--config", config.to_str().unwrap()], &dir.path().join("log"));
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

/// `-r` makes every export of a config file read-only, as `qemu-nbd -r` and
/// `nbdkit -r`: a write that reaches the server gets EPERM and changes
/// nothing, and qemu-io sees a read-only export.
#[test]
fn read_only_flag_covers_every_export_of_a_config_file() {
    if !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let disk = dir.path().join("disk.img");
    std::fs::write(&disk, pattern(1 << 20, 3)).unwrap();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nunix = [\"{}\"]\n\n[[export]]\nname = \"mem\"\nbackend = \"memory\"\nsize = \"1MiB\"\n\n\
             [[export]]\nname = \"file\"\nbackend = \"file\"\npath = \"{}\"\n",
            sock.display(),
            disk.display()
        ),
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap(), "-r"], &dir.path().join("log"));
    for (export, before) in [("mem", vec![0; 4096]), ("file", pattern(1 << 20, 3)[..4096].to_vec())] {
        // hearth-client sends the WRITE whatever the flags say: the server refuses it.
        let mut client = hearth_client::Client::connect_unix(&sock, export).unwrap();
        let refused = client.write(0, &[0x5a; 4096], false).unwrap_err();
        assert!(refused.to_string().starts_with("NBD error 1 "), "{export}: EPERM expected: {refused}");
        assert_eq!(client.read(0, 4096).unwrap(), before, "{export}: the refused write changed the data");
        let out = Command::new("qemu-io")
            .args(["-f", "raw", "-c", "write -P 0x5a 0 4K", &server.uri(export)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains("wrote 4096"), "{export}: qemu-io wrote to a read-only export:\n{text}");
    }
    assert!(std::fs::read(&disk).unwrap() == pattern(1 << 20, 3), "the backing file changed");
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
    let server = Server::start(
        &[
            "--backend",
            "sparse",
            "--path",
            backing.to_str().unwrap(),
            "--size",
            "20MiB",
            "--cache-size",
            "8MiB",
            "--policy",
            "lru",
            "--name",
            "disk",
            "--unix",
            sock.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ],
        &dir.path().join("log"),
    );
    run(Command::new("nbdcopy").arg(&input).arg(server.uri("disk")));
    run(Command::new("nbdcopy").arg(server.uri("disk")).arg(&output));
    assert!(std::fs::read(&output).unwrap() == data, "copy out differs from copy in");
    let page = scrape(server.metrics.as_deref().unwrap());
    assert!(metric(&page, "hearth_bytes_total{export=\"disk\",direction=\"write\"}") >= (20 << 20) as f64);
    assert!(metric(&page, "hearth_requests_total{export=\"disk\",op=\"read\"}") > 0.0);
    assert!(page.contains("hearth_request_duration_seconds_bucket{export=\"disk\",op=\"read\",le=\"+Inf\"}"));
    // Write-through: the backing file already holds everything.
    assert!(server.stop("TERM"), "SIGTERM must exit cleanly");
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
    let server = Server::start(
        &[
            "--backend",
            "memory",
            "--size",
            "32MiB",
            "--latency",
            "150ms",
            "--cache-size",
            "16MiB",
            "--name",
            "disk",
            "--unix",
            sock.to_str().unwrap(),
        ],
        &dir.path().join("log"),
    );
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
        let mut args = vec![
            "--backend",
            "sparse",
            "--path",
            image.to_str().unwrap(),
            "--size",
            "32MiB",
            "--cache-size",
            "1MiB",
            "--name",
            "disk",
            "--unix",
            sock.to_str().unwrap(),
        ];
        args.extend_from_slice(mode);
        let server = Server::start(&args, &dir.path().join(format!("log{i}")));
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

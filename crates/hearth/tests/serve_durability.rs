//! Durability: SIGKILL the server in the middle of a write stream; every write
//! acknowledged with FUA, or followed by an acknowledged FLUSH, must read
//! back after a restart on the same backing file.

mod serve_support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serve_support::{have_python_nbd, Server, PYTHON};

/// Writes 4 KiB block i (filled with i as a 4-byte little-endian number) in
/// batches of 8 pipelined writes: even batches with FUA, odd batches
/// followed by a FLUSH. Prints `ack i` once i is durable by the protocol's
/// rules, until the connection dies.
const WRITER: &str = r#"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
i = 0
try:
    while i < 4096:
        batch = list(range(i, i + 8))
        fua = (i // 8) % 2 == 0
        bufs = [nbd.Buffer.from_bytearray(bytearray(n.to_bytes(4, "little") * 1024)) for n in batch]
        cookies = [h.aio_pwrite(b, n * 4096, flags=nbd.CMD_FLAG_FUA if fua else 0) for n, b in zip(batch, bufs)]
        while h.aio_in_flight() > 0:
            h.poll(-1)
        # A command retired by a dead connection completes with an error:
        # aio_command_completed raises it, so only real acks are printed.
        for c in cookies:
            h.aio_command_completed(c)
        if not fua:
            h.flush()
        for n in batch:
            print("ack", n, flush=True)
        i += 8
except Exception as e:
    print("stopped", e, flush=True)
"#;

/// Reads blocks given on stdin (one number per line) and prints the numbers
/// whose content is wrong.
const CHECKER: &str = r#"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
bad = []
for line in sys.stdin:
    n = int(line)
    if h.pread(4096, n * 4096) != n.to_bytes(4, "little") * 1024:
        bad.append(n)
print("bad", len(bad), bad[:20])
"#;

fn kill_mid_stream(extra: &[&str]) {
    if !have_python_nbd() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    let sock = dir.path().join("nbd.sock");
    let args: Vec<&str> = [
        "--backend",
        "sparse",
        "--path",
        image.to_str().unwrap(),
        "--size",
        "16MiB",
        "--cache-size",
        "4MiB",
        "--name",
        "disk",
        "--unix",
        sock.to_str().unwrap(),
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .collect();
    let server = Server::start(&args, &dir.path().join("log1"));
    let mut writer =
        Command::new(PYTHON).args(["-c", WRITER, &server.uri("disk")]).stdout(Stdio::piped()).spawn().unwrap();
    let mut acked = Vec::new();
    let mut server = Some(server);
    for line in BufReader::new(writer.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("ack ") {
            acked.push(n.parse::<u64>().unwrap());
            if acked.len() == 200 {
                // Mid-stream: more writes are in flight right now.
                assert!(!server.take().unwrap().stop("KILL"), "SIGKILL must not look like a clean exit");
            }
        }
    }
    writer.wait().unwrap();
    assert!(acked.len() >= 200, "the writer stopped early: {} acks", acked.len());
    assert!(acked.len() < 4096, "the kill came after the whole stream");

    let restarted = Server::start(&args, &dir.path().join("log2"));
    let mut checker = Command::new(PYTHON)
        .args(["-c", CHECKER, &restarted.uri("disk")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = checker.stdin.take().unwrap();
        for n in &acked {
            writeln!(stdin, "{n}").unwrap();
        }
    }
    let out = checker.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("bad 0 "), "acknowledged writes lost after SIGKILL ({} acked): {text}", acked.len());
    // The checker does detect wrong content: block 4095 was never written.
    let mut never = Command::new(PYTHON)
        .args(["-c", CHECKER, &restarted.uri("disk")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        writeln!(never.stdin.take().unwrap(), "4095").unwrap();
    }
    let out = never.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("bad 1 "));
}

#[test]
fn write_through_survives_sigkill() {
    kill_mid_stream(&[]);
}

#[test]
fn write_back_fua_and_flush_survive_sigkill() {
    kill_mid_stream(&["--write-back", "--dirty-limit", "2MiB"]);
}

/// Write-back with a dirty limit no test write reaches: data written without
/// FUA or FLUSH is only in the cache until SIGTERM, whose graceful shutdown
/// must flush it to the backing file.
#[test]
fn sigterm_flushes_write_back_cache() {
    if !have_python_nbd() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    let sock = dir.path().join("nbd.sock");
    let server = Server::start(
        &[
            "--backend",
            "sparse",
            "--path",
            image.to_str().unwrap(),
            "--size",
            "4MiB",
            "--cache-size",
            "4MiB",
            "--write-back",
            "--dirty-limit",
            "4MiB",
            "--name",
            "disk",
            "--unix",
            sock.to_str().unwrap(),
        ],
        &dir.path().join("log"),
    );
    let script = r#"
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
for i in range(64):
    h.pwrite(bytes([i + 1]) * 4096, i * 16384 + 100)
h.shutdown()
"#;
    let out = Command::new(PYTHON).args(["-c", script, &server.uri("disk")]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let before = std::fs::read(&image).unwrap();
    assert!(before.iter().all(|&b| b == 0), "write-back must not have written yet");
    assert!(server.stop("TERM"), "SIGTERM must exit cleanly");
    let after = std::fs::read(&image).unwrap();
    for i in 0..64usize {
        let at = i * 16384 + 100;
        assert!(after[at..at + 4096].iter().all(|&b| b == i as u8 + 1), "block {i} not flushed at shutdown");
    }
}

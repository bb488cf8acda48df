//! `hearth bench serve`, the pipelined load generator, against the real
//! server (Unix socket and TCP) and against nbdkit's memory plugin: it
//! completes requests of every pattern, the server counts as many bytes as
//! it reports, and bad input gets a one-line error.

mod serve_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serve_support::{have, metric, scrape, Server};

/// Runs `hearth bench serve URI ARGS --json` and returns its JSON report.
fn bench(uri: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["bench", "serve", uri, "--duration", "300ms", "--json"])
        .args(args)
        .output()
        .expect("running hearth bench serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "hearth bench serve {uri} {args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"))
}

/// The report's operations, after checking that its figures agree with
/// each other and are not empty.
fn checked_ops(r: &serde_json::Value, bs: u64) -> u64 {
    let ops = r["ops"].as_u64().expect("ops");
    let seconds = r["seconds"].as_f64().expect("seconds");
    assert!(ops > 0 && seconds > 0.1, "{r}");
    let rate = r["ops_per_sec"].as_f64().unwrap();
    assert!((rate - ops as f64 / seconds).abs() <= rate * 1e-6, "{r}");
    let mib = r["mib_per_sec"].as_f64().unwrap();
    assert!((mib - rate * bs as f64 / 1048576.0).abs() <= mib * 1e-6, "{r}");
    let (p50, p99) = (r["latency_us"]["p50"].as_f64().unwrap(), r["latency_us"]["p99"].as_f64().unwrap());
    assert!(p50 > 0.0 && p50 <= p99 && p99 <= r["latency_us"]["max"].as_f64().unwrap(), "{r}");
    assert!(r["client_cpu_us_per_op"].as_f64().unwrap() > 0.0, "{r}");
    ops
}

#[test]
fn drives_hearth_over_unix_and_tcp_and_the_server_sees_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hearth.sock");
    let server = Server::start(
        &[
            "--backend",
            "memory",
            "--size",
            "16MiB",
            "--cache-size",
            "32MiB",
            "--name",
            "disk",
            "--unix",
            sock.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ],
        &dir.path().join("hearth.log"),
    );
    let uris = [server.uri("disk"), format!("nbd://{}/disk", server.tcp.expect("tcp listener"))];
    let page = || scrape(server.metrics.as_deref().expect("--metrics"));
    let bytes =
        |direction: &str| metric(&page(), &format!("hearth_bytes_total{{export=\"disk\",direction=\"{direction}\"}}"));
    for uri in &uris {
        for (rw, bs, bs_bytes) in [
            ("write", "1MiB", 1u64 << 20),
            ("randwrite", "4KiB", 4096),
            ("read", "1MiB", 1 << 20),
            ("randread", "4KiB", 4096),
        ] {
            let direction = if rw.contains("write") { "write" } else { "read" };
            let before = bytes(direction);
            let r = bench(uri, &["--rw", rw, "--bs", bs, "--iodepth", "8", "--jobs", "2"]);
            let ops = checked_ops(&r, bs_bytes);
            assert_eq!(r["rw"], rw);
            assert_eq!(
                bytes(direction) - before,
                (ops * bs_bytes) as f64,
                "{uri} {rw}: the server counted other bytes"
            );
        }
    }
}

#[test]
fn drives_nbdkit_memory() {
    if !have("nbdkit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbdkit.sock");
    let mut nbdkit = Command::new("nbdkit")
        .args(["-f", "-U", sock.to_str().unwrap(), "memory", "16M"])
        .stderr(Stdio::null())
        .spawn()
        .expect("starting nbdkit");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !sock.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let uri = format!("nbd+unix:///?socket={}", sock.display());
    let w = bench(&uri, &["--rw", "write", "--bs", "1MiB", "--iodepth", "4"]);
    let r = bench(&uri, &["--rw", "randread", "--bs", "4KiB", "--iodepth", "16", "--jobs", "2"]);
    let _ = nbdkit.kill();
    let _ = nbdkit.wait();
    checked_ops(&w, 1 << 20);
    checked_ops(&r, 4096);
}

#[test]
fn bad_input_is_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("hearth.sock");
    let server = Server::start(
        &["--backend", "memory", "--size", "64KiB", "--name", "disk", "--unix", sock.to_str().unwrap()],
        &dir.path().join("hearth.log"),
    );
    let fails = |args: &[&str], expected: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_hearth")).args(["bench", "serve"]).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(expected), "{args:?}: {stderr}");
        // One line says what is wrong (clap adds a pointer to --help).
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert!(errors.len() == 1 && errors[0].contains(expected), "{args:?}: {stderr}");
    };
    fails(&["http://x/disk"], "expected nbd://HOST:PORT/EXPORT");
    let uri = server.uri("disk");
    fails(&[&uri, "--bs", "1MiB", "--duration", "100ms"], "smaller than one request");
    fails(&[&uri, "--duration", "0s"], "a duration above zero");
    fails(&[&uri, "--bs", "64MiB"], "1 byte to 32MiB");
    fails(&[&server.uri("nosuch"), "--duration", "100ms"], "nosuch");
}

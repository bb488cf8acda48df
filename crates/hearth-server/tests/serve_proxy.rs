//! `--backend nbd`: a caching proxy in front of a real NBD
//! server (nbdkit's file plugin). Reads come through byte-identical, writes
//! reach the upstream's file, and an upstream restart in the middle of a
//! client's session costs a retry inside the proxy, not an error, while an
//! upstream that is stopped or down longer than `--upstream-timeout` costs
//! EIO at that deadline, not a wait without end. An upstream refused at
//! start is the binary's: crates/hearth/tests/serve_refusals.rs.

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::mpsc;

use hearth_client::Client;
use hearth_server::config::{Config, ServerConfig};
use serve_support::{export, have, metric, on_unix, pattern, run, scrape, Server};

const SIZE: usize = 8 << 20;

/// `nbdkit file` serving `image` on a Unix socket, in the foreground.
struct Nbdkit {
    child: Child,
}

impl Nbdkit {
    fn start(image: &Path, socket: &Path) -> Nbdkit {
        let child = Command::new("nbdkit")
            .args(["-f", "-U"])
            .arg(socket)
            .arg("file")
            .arg(image)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nbdkit");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(socket).is_err() {
            assert!(Instant::now() < deadline, "nbdkit did not start listening on {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Nbdkit { child }
    }

    /// Kills it (a crash, as far as its clients can tell) and removes its
    /// socket so that a new one can listen there.
    fn kill(self, socket: &Path) {
        drop(self);
        let _ = std::fs::remove_file(socket);
    }

    /// Sends `signal` (STOP, CONT) to it.
    fn signal(&self, signal: &str) {
        run(Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()));
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Setup {
    dir: tempfile::TempDir,
    image: PathBuf,
    upstream_socket: PathBuf,
    data: Vec<u8>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("upstream.img");
    let data = pattern(SIZE, 11);
    std::fs::write(&image, &data).unwrap();
    let upstream_socket = dir.path().join("upstream.sock");
    Setup { dir, image, upstream_socket, data }
}

fn proxy(s: &Setup, cache_size: &str) -> Server {
    proxy_with(s, cache_size, &[], |_| {})
}

/// The proxy on a Unix socket; `server` adjusts its server table.
fn proxy_with(s: &Setup, cache_size: &str, extra: &[&str], server: impl FnOnce(&mut ServerConfig)) -> Server {
    let upstream = format!("nbd+unix:///?socket={}", s.upstream_socket.display());
    let mut flags = vec!["--backend", "nbd", "--upstream", &upstream, "--cache-size", cache_size];
    flags.extend(extra);
    let mut table = on_unix(&s.dir.path().join("proxy.sock"));
    server(&mut table);
    Server::start(Config { server: table, exports: vec![export("hearth", &flags)] })
}

#[test]
fn reads_and_writes_pass_through_the_proxy_byte_identical() {
    if !have("nbdkit") || !have("nbdcopy") || !have("qemu-io") {
        return;
    }
    let s = setup();
    let _upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    let server = proxy(&s, "2MiB");
    let uri = server.uri("hearth");

    let out = s.dir.path().join("copy.bin");
    run(Command::new("nbdcopy").arg(&uri).arg(&out));
    assert!(std::fs::read(&out).unwrap() == s.data, "the proxy's bytes differ from the upstream's");

    // A write through the proxy lands in the upstream's file.
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x5a 1M 64k", &uri]));
    let image = std::fs::read(&s.image).unwrap();
    assert!(image[1 << 20..(1 << 20) + (64 << 10)].iter().all(|&b| b == 0x5a), "write not in the upstream");
    assert_eq!(image[..1 << 20], s.data[..1 << 20], "bytes around the write unchanged");
    let read = run(Command::new("qemu-io").args(["-f", "raw", "-c", "read -P 0x5a 1M 64k", &uri]));
    assert!(!read.contains("Pattern verification failed"), "{read}");
}

#[test]
fn an_upstream_restart_costs_a_retry_not_an_error() {
    if !have("nbdkit") {
        return;
    }
    let s = setup();
    let upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    // No cache, so every read after the restart must reach the upstream.
    let server = proxy(&s, "0");
    let mut client = Client::connect_unix(server.unix.as_ref().unwrap(), "hearth").unwrap();
    assert_eq!(client.read(0, 65536).unwrap(), s.data[..65536]);

    upstream.kill(&s.upstream_socket);
    // A read while the upstream is down; it comes back on the same socket.
    let at = 4 << 20;
    let reader = std::thread::spawn(move || {
        let data = client.read(at, 65536);
        (client, data)
    });
    std::thread::sleep(Duration::from_millis(700));
    let _upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    let (mut client, across) = reader.join().unwrap();
    let across = across.unwrap_or_else(|e| panic!("read across the restart: {e}\n{}", server.log_text()));
    assert_eq!(across, s.data[at as usize..at as usize + 65536], "read across the restart");
    client.write(at, &[0xc3; 4096], false).unwrap();
    client.flush().unwrap();
    assert!(std::fs::read(&s.image).unwrap()[at as usize..at as usize + 4096].iter().all(|&b| b == 0xc3));
    let log = server.log_text();
    assert_eq!(log.matches("upstream unavailable").count(), 1, "the outage is logged once:\n{log}");
    assert_eq!(log.matches("upstream available again").count(), 1, "and its end once:\n{log}");
}

#[test]
fn a_flush_after_the_upstream_lost_unflushed_writes_fails_once() {
    if !have("nbdkit") {
        return;
    }
    let s = setup();
    let upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    let server = proxy(&s, "0");
    let mut client = Client::connect_unix(server.unix.as_ref().unwrap(), "hearth").unwrap();
    client.write(0, &[7; 4096], false).unwrap();
    upstream.kill(&s.upstream_socket);
    let _upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    assert!(client.flush().is_err(), "the upstream may have dropped the write: FLUSH must not succeed");
    client.write(8192, &[8; 4096], false).unwrap();
    client.flush().expect("once reported, later writes and flushes go on");
    assert!(std::fs::read(&s.image).unwrap()[8192..12288].iter().all(|&b| b == 8));
}

const DEADLINE: Duration = Duration::from_secs(1);
/// What a loaded machine may add to the deadline before the error reaches the client.
const MARGIN: Duration = Duration::from_millis(1500);

/// Reads 64 KiB at each offset, each from its own connection to the proxy
/// and thread, all at once; gives each result with how long it took. A
/// read still running at `DEADLINE + MARGIN` counts as hung (and is left).
fn reads_at_once(server: &Server, offsets: &[u64]) -> Vec<Result<Duration, String>> {
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    for (i, &at) in offsets.iter().enumerate() {
        let mut client = Client::connect_unix(server.unix.as_ref().unwrap(), "hearth").unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let result = client.read(at, 65536).map(|_| ()).map_err(|e| e.to_string());
            let _ = tx.send((i, result, started.elapsed()));
        });
    }
    let mut results = vec![Err("hung past the deadline".to_string()); offsets.len()];
    for _ in offsets {
        let Ok((i, result, took)) =
            rx.recv_timeout((started + DEADLINE + MARGIN).saturating_duration_since(Instant::now()))
        else {
            break;
        };
        results[i] = match result {
            Ok(()) => Err(format!("read succeeded after {took:?} from a stopped or absent upstream")),
            Err(e) if e.contains("NBD error 5 ") => Ok(took),
            Err(e) => Err(format!("not EIO: {e}")),
        };
    }
    results
}

#[test]
fn a_stopped_upstream_costs_eio_at_the_deadline_then_serves_again() {
    if !have("nbdkit") {
        return;
    }
    let s = setup();
    let upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    let server =
        proxy_with(&s, "0", &["--upstream-timeout", "1s"], |server| server.metrics = Some("127.0.0.1:0".to_string()));
    let mut client = Client::connect_unix(server.unix.as_ref().unwrap(), "hearth").unwrap();
    assert_eq!(client.read(0, 65536).unwrap(), s.data[..65536]);

    upstream.signal("STOP");
    // More readers than the 4 upstream connections: some wait for one.
    let results = reads_at_once(&server, &[1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20, 6 << 20]);
    upstream.signal("CONT");
    for (i, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "reader {i}: {r:?}\n{}", server.log_text());
    }
    let at = 7 << 20;
    assert_eq!(client.read(at, 65536).unwrap(), s.data[at as usize..at as usize + 65536], "served again");

    let log = server.log_text();
    assert_eq!(log.matches("upstream unavailable").count(), 1, "the outage is logged once:\n{log}");
    assert_eq!(log.matches("upstream available again").count(), 1, "and its end once:\n{log}");
    let page = scrape(server.metrics.as_ref().unwrap());
    assert!(metric(&page, "hearth_upstream_timeouts_total{") >= 6.0, "{page}");
    assert_eq!(metric(&page, "hearth_upstream_up{"), 1.0, "{page}");
}

#[test]
fn an_upstream_down_past_the_deadline_fails_queued_requests_at_it() {
    if !have("nbdkit") {
        return;
    }
    let s = setup();
    let upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    // One upstream connection: every read but one waits for it.
    let server = proxy_with(&s, "0", &["--upstream-timeout", "1s", "--upstream-connections", "1"], |_| {});
    drop(upstream); // its socket stays, so dialling it is refused
    let results = reads_at_once(&server, &[0, 1 << 20, 2 << 20, 3 << 20]);
    for (i, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "reader {i}: {r:?}\n{}", server.log_text());
    }
    let log = server.log_text();
    assert!(log.contains("Connection refused"), "{log}");

    std::fs::remove_file(&s.upstream_socket).unwrap();
    let _upstream = Nbdkit::start(&s.image, &s.upstream_socket);
    let mut client = Client::connect_unix(server.unix.as_ref().unwrap(), "hearth").unwrap();
    assert_eq!(client.read(0, 65536).unwrap(), s.data[..65536], "served once the upstream is back");
}

/// The upstream URI is percent-decoded as libnbd decodes it (issue 42): an
/// export named `my disk` (`my%20disk`) behind a socket in a directory with
/// a space (`socket=.../with%20space/...`), served by nbdkit, which refuses
/// any other export name (exportname filter, strict).
#[test]
fn percent_encoded_upstream_uris_reach_the_named_export() {
    if !have("nbdkit") || !have("nbdinfo") || !have("nbdcopy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().join("with space");
    std::fs::create_dir(&spaced).unwrap();
    let socket = spaced.join("up.sock");
    let image = dir.path().join("upstream.img");
    let data = pattern(SIZE, 5);
    std::fs::write(&image, &data).unwrap();
    let child = Command::new("nbdkit")
        .args(["-f", "-U"])
        .arg(&socket)
        .args(["--filter=exportname", "file"])
        .arg(&image)
        .args(["exportname=my disk", "exportname-strict=true"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _nbdkit = Nbdkit { child };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "nbdkit did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let encoded = socket.to_str().unwrap().replace(' ', "%20");
    let wrong = format!("nbd+unix:///other?socket={encoded}");
    assert!(!Command::new("nbdinfo").arg(&wrong).output().unwrap().status.success(), "nbdkit refuses other names");

    let upstream = format!("nbd+unix:///my%20disk?socket={encoded}");
    let config = Config {
        server: serve_support::loopback(),
        exports: vec![export("hearth", &["--backend", "nbd", "--upstream", &upstream])],
    };
    let server = Server::try_start(config).unwrap_or_else(|e| panic!("the proxy did not reach \"my disk\":\n{e}"));
    let copy = dir.path().join("copy.img");
    run(Command::new("nbdcopy").arg(server.uri("hearth")).arg(&copy));
    assert!(std::fs::read(&copy).unwrap() == data, "the upstream's bytes, through the proxy");
}

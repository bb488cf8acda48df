//! What the server's end-to-end tests share, whether they start the
//! server in-process (crates/hearth-server/tests) or as the `hearth serve`
//! binary (crates/hearth/tests): raw NBD, a test CA, the client tools they
//! drive and the /metrics page they read. Test-only (`publish = false`).

pub mod pki;
pub mod raw;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether `tool` can run. Missing tools fail the test under CI=true and
/// skip it elsewhere.
pub fn have(tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{tool} is required under CI=true but is not installed");
        }
        eprintln!("skipped: {tool} not installed");
    }
    found
}

/// Debian's python with python3-libnbd (`import nbd`).
pub const PYTHON: &str = "/usr/bin/python3";

pub fn have_python_nbd() -> bool {
    let ok = Command::new(PYTHON).args(["-c", "import nbd"]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{PYTHON} with python3-libnbd is required under CI=true");
        }
        eprintln!("skipped: python3-libnbd not installed");
    }
    ok
}

/// Runs a command, panicking with its output if it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Deterministic bytes that differ at every offset of a block.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Runs qemu-io over TLS against the export `hearth` at `addr`, with the
/// credentials `object` (a `tls-creds-*` object with `id=tls0`), one `-c`
/// per command; its output, failing the test if it fails.
pub fn qemu_io_tls(addr: std::net::SocketAddr, object: &str, commands: &[&str]) -> String {
    let image = format!("driver=nbd,host={},port={},export=hearth,tls-creds=tls0", addr.ip(), addr.port());
    let mut cmd = Command::new("qemu-io");
    cmd.args(["--object", object, "--image-opts", &image]);
    for c in commands {
        cmd.args(["-c", c]);
    }
    run(&mut cmd)
}

/// A TCP connection to `addr` from the local address `source` (127.0.0.x
/// are all local), with a 10 s read timeout.
pub fn connect_from(source: &str, addr: SocketAddr) -> std::net::TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    let stream = rt
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::new(source.parse::<std::net::IpAddr>().unwrap(), 0))?;
            socket.connect(addr).await
        })
        .unwrap();
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Fetches the metrics page with a plain HTTP/1.0 GET.
pub fn scrape(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http url");
    let (host, path) = rest.split_once('/').expect("path");
    let mut s = std::net::TcpStream::connect(host).expect("connect to metrics");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

/// The value of the metric line starting with `prefix` (labels included).
pub fn metric(page: &str, prefix: &str) -> f64 {
    page.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric {prefix} in:\n{page}"))
}

/// `nbd+unix:///EXPORT?socket=...` over the server's Unix socket if it has
/// one, else `nbd://host:port/EXPORT`.
pub fn nbd_uri(unix: Option<&Path>, tcp: Option<SocketAddr>, export: &str) -> String {
    match (unix, tcp) {
        (Some(p), _) => format!("nbd+unix:///{export}?socket={}", p.display()),
        (None, Some(a)) => format!("nbd://{a}/{export}"),
        (None, None) => panic!("server has no listener"),
    }
}

/// The server's log (`log()`) once `done` holds for it, or as it stands
/// after 10 s: a client can see its refusal before the server has logged why.
pub fn log_once(log: impl Fn() -> String, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = log();
        if done(&text) || std::time::Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free TCP port on loopback (bound, then released for whoever listens next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits up to 10 s for a listener on loopback `port`; `what` says what failed to start.
pub fn wait_for_port(port: u16, what: impl Fn() -> String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "{}", what());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The SHA-256 (hex) of 4 KiB blocks `first..first + count` of the export
/// at `uri`, read block by block through python3-libnbd.
pub fn blocks_sha256(uri: &str, first: u64, count: u64) -> String {
    const READ_ALL: &str = r#"
import nbd, sys, hashlib
h = nbd.NBD()
h.connect_uri(sys.argv[1])
first, count = int(sys.argv[2]), int(sys.argv[3])
digest = hashlib.sha256()
for b in range(first, first + count):
    digest.update(h.pread(4096, b * 4096))
print(digest.hexdigest())
"#;
    run(Command::new(PYTHON).args(["-c", READ_ALL, uri, &first.to_string(), &count.to_string()]))
}

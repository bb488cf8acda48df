//! Starts the real `hearth serve` binary for interop tests and finds the
//! client tools they drive.

#![allow(dead_code)] // each test file uses a different part

pub mod pki;
pub mod raw;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Server {
    child: Child,
    pub tcp: Option<SocketAddr>,
    pub unix: Option<PathBuf>,
    pub metrics: Option<String>,
    pub log: PathBuf,
}

impl Server {
    /// Runs `hearth serve ARGS --log warn`, waits for its `ready` line and
    /// records the addresses it printed. Its log goes to `log`.
    pub fn start(args: &[&str], log: &Path) -> Server {
        Server::try_start(args, log).unwrap_or_else(|log| panic!("hearth serve exited before it was ready:\n{log}"))
    }

    /// As `start`, but a server that exits before `ready` is an `Err` with its log.
    pub fn try_start(args: &[&str], log: &Path) -> Result<Server, String> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_hearth"));
        command.arg("serve").args(args).args(["--log", "info"]);
        let mut server = Server::spawn(command, log);
        server.wait_ready().map(|()| server)
    }

    /// Starts `command` (one that runs `hearth serve`, perhaps through
    /// another program that execs it) without waiting for it; its stderr
    /// goes to `log`.
    pub fn spawn(mut command: Command, log: &Path) -> Server {
        let child = command
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).expect("log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
        Server { tcp: None, unix: None, metrics: None, log: log.to_path_buf(), child }
    }

    /// Reads the server's stdout up to `ready`, recording the addresses it
    /// printed; a server that exits first is an `Err` with its log.
    pub fn wait_ready(&mut self) -> Result<(), String> {
        let stdout = self.child.stdout.take().expect("piped stdout");
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("reading hearth's stdout");
            if let Some(a) = line.strip_prefix("listening tcp ") {
                self.tcp = Some(a.parse().expect("tcp address"));
            } else if let Some(p) = line.strip_prefix("listening unix ") {
                self.unix = Some(PathBuf::from(p));
            } else if let Some(m) = line.strip_prefix("metrics ") {
                self.metrics = Some(m.to_string());
            } else if line == "ready" {
                return Ok(());
            }
        }
        let _ = self.child.wait();
        Err(std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// `nbd+unix:///EXPORT?socket=...` (or `nbd://host:port/EXPORT` without a socket).
    pub fn uri(&self, export: &str) -> String {
        match (&self.unix, &self.tcp) {
            (Some(p), _) => format!("nbd+unix:///{export}?socket={}", p.display()),
            (None, Some(a)) => format!("nbd://{a}/{export}"),
            (None, None) => panic!("server has no listener"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` and waits for exit; returns whether it exited successfully.
    pub fn stop(mut self, signal: &str) -> bool {
        let _ = Command::new("kill").args([format!("-{signal}"), self.child.id().to_string()]).status();
        let status = self.child.wait().expect("waiting for hearth");
        status.success()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The log once `done` holds for it, or as it stands after 10 s: a
    /// client can see its refusal before the server has logged why.
    pub fn log_text_once(&self, done: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let log = self.log_text();
            if done(&log) || std::time::Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

/// A 16 MiB sparse export "disk", backed by `dir/disk.img`, with a cache of
/// `cache_size`, on a free TCP port with /metrics, plus `extra` flags.
/// Returns the server and the backing file.
pub fn start_disk(dir: &Path, cache_size: &str, extra: &[&str]) -> (Server, PathBuf) {
    let disk = dir.join("disk.img");
    let mut args = vec!["--name", "disk", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"];
    args.extend(["--backend", "sparse", "--size", "16MiB", "--path", disk.to_str().unwrap()]);
    args.extend(["--cache-size", cache_size]);
    args.extend(extra);
    (Server::start(&args, &dir.join("log")), disk)
}

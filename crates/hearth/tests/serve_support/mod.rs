//! Starts the real `hearth serve` binary for the tests of what only the
//! process does (signals, `--run`, `--pidfile`, privileges, socket
//! activation, flags and exit codes); the helpers every server test shares
//! are hearth-testkit's.

#![allow(dead_code)] // each test file uses a different part

pub use hearth_testkit::*;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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
        nbd_uri(self.unix.as_deref(), self.tcp, export)
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
        log_once(|| self.log_text(), done)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `hearth serve ARGS` (export "hearth", on TCP), which must refuse to
/// start because of `flags`: its error, checked to be one line. Should it
/// start, the test fails, saying whether a plain-text client (nbdinfo) got
/// served.
pub fn refused_in_one_line(args: &[&str], log: &Path, flags: &str) -> String {
    match Server::try_start(args, log) {
        Ok(server) => {
            let plain = Command::new("nbdinfo").arg(format!("nbd://{}/hearth", server.tcp.unwrap())).output().unwrap();
            let served = if plain.status.success() { "was served" } else { "was refused" };
            panic!("started despite {flags}; a plain-text nbdinfo {served}");
        }
        Err(log) => {
            let lines: Vec<_> = log.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "one line:\n{log}");
            lines[0].to_string()
        }
    }
}

/// `hearth serve` of a 1 MiB memory export on a free port, plus `extra`,
/// must exit unsuccessfully with `want` on stderr.
pub fn refused_at_start(extra: &[&str], want: &str) {
    let base = ["serve", "--backend", "memory", "--size", "1MiB", "--listen", "127.0.0.1:0"];
    let out = Command::new(env!("CARGO_BIN_EXE_hearth")).args(base).args(extra).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(want), "{extra:?}: want {want:?} in:\n{err}");
}

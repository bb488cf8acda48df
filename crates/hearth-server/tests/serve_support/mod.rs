//! Runs the server in-process for the end-to-end tests: `Server::bind` and
//! `Server::run` (what `hearth serve` calls) on a runtime the test owns,
//! with exports described by `hearth serve`'s export flags, its log kept
//! per server. Real clients talk to it over its real sockets; what only the
//! `hearth` process does (signals, `--run`, flags, exit codes) is tested in
//! crates/hearth/tests.

#![allow(dead_code)] // each test file uses a different part

pub use hearth_testkit::*;

use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clap::{Args, FromArgMatches};
use hearth_server::config::{Config, ExportConfig, ServerConfig};
use hearth_server::ServeError;

pub struct Server {
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
    pub tcp: Option<SocketAddr>,
    pub unix: Option<PathBuf>,
    pub metrics: Option<String>,
    log: Log,
}

impl Server {
    /// Validates `config`, binds it and serves it on a runtime of its own.
    pub fn start(config: Config) -> Server {
        Server::try_start(config).unwrap_or_else(|e| panic!("the server did not start: {e}"))
    }

    /// As `start`, but a configuration the server refuses is an `Err` with
    /// its message and causes, on one line as `hearth serve` prints them.
    pub fn try_start(config: Config) -> Result<Server, String> {
        let log = Log::default();
        let dispatch = log.dispatch();
        // Validation loads the TLS certificates and warns about their dates in the server's log.
        let settings = tracing::dispatcher::with_default(&dispatch, || config.validate()).map_err(|e| causes(&e))?;
        let on_start = dispatch.clone();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .on_thread_start(move || LOGGING.set(Some(tracing::dispatcher::set_default(&on_start))))
            .on_thread_stop(|| LOGGING.set(None))
            .build()
            .unwrap();
        let bound = tracing::dispatcher::with_default(&dispatch, || {
            runtime.block_on(hearth_server::Server::bind(&settings, Vec::new()))
        });
        let server = bound.map_err(|e| causes(&e))?;
        let tcp = server.tcp_addrs().first().copied();
        let unix = server.unix_paths().first().cloned();
        let metrics = server.metrics_addr().map(|a| format!("http://{a}/metrics"));
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = runtime.spawn(server.run(async {
            let _ = stopped.await;
        }));
        Ok(Server { runtime: Some(runtime), shutdown: Some(shutdown), served: Some(served), tcp, unix, metrics, log })
    }

    /// `nbd+unix:///EXPORT?socket=...` (or `nbd://host:port/EXPORT` without a socket).
    pub fn uri(&self, export: &str) -> String {
        nbd_uri(self.unix.as_deref(), self.tcp, export)
    }

    /// Whether the server is still serving (its task has not ended).
    pub fn alive(&mut self) -> bool {
        self.served.as_ref().is_some_and(|served| !served.is_finished())
    }

    /// What the server has logged so far, as `hearth serve --log info`
    /// writes it (without colours).
    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&self.log.0.lock().unwrap()).into_owned()
    }

    /// The log once `done` holds for it, or as it stands after 10 s: a
    /// client can see its refusal before the server has logged why.
    pub fn log_text_once(&self, done: impl Fn(&str) -> bool) -> String {
        log_once(|| self.log_text(), done)
    }

    /// Shuts the server down as SIGTERM does in `hearth serve` (in-flight
    /// requests finish, every export is flushed); whether that succeeded.
    pub fn stop(mut self) -> bool {
        self.shut_down().is_ok()
    }

    fn shut_down(&mut self) -> Result<(), String> {
        let (Some(shutdown), Some(served), Some(runtime)) =
            (self.shutdown.take(), self.served.take(), self.runtime.take())
        else {
            return Ok(());
        };
        let _ = shutdown.send(());
        let result = runtime.block_on(served);
        // Requests of closed connections may still run on the blocking pool, as in `hearth serve`.
        runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        match result {
            Ok(served) => served.map_err(|e| e.to_string()),
            Err(e) => Err(format!("the server task failed: {e}")),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Err(e) = self.shut_down() {
            if !std::thread::panicking() {
                panic!("the server did not shut down cleanly: {e}");
            }
        }
    }
}

/// `error` and its sources joined by ": ", as anyhow's `{:#}` in `hearth`'s main.
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

thread_local! {
    /// A runtime thread's log destination, set as the thread starts.
    static LOGGING: RefCell<Option<tracing::dispatcher::DefaultGuard>> = const { RefCell::new(None) };
}

/// One server's log: the `tracing` events of its runtime's threads.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Log {
    fn dispatch(&self) -> tracing::Dispatch {
        let log = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || log.clone())
            .finish();
        tracing::Dispatch::new(subscriber)
    }
}

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An export named `name` described by `hearth serve`'s export flags
/// (`--backend memory --size 4MiB ...`), parsed by the same clap
/// definition the binary flattens.
pub fn export(name: &str, flags: &[&str]) -> ExportConfig {
    let command = ExportConfig::augment_args(clap::Command::new("export").no_binary_name(true));
    let matches = command.try_get_matches_from(flags).unwrap_or_else(|e| panic!("export flags {flags:?}: {e}"));
    ExportConfig { name: name.to_string(), ..ExportConfig::from_arg_matches(&matches).unwrap() }
}

/// The server table of a test server: TCP on a free loopback port with
/// /metrics on another.
pub fn loopback() -> ServerConfig {
    ServerConfig {
        listen: vec!["127.0.0.1:0".to_string()],
        metrics: Some("127.0.0.1:0".to_string()),
        ..ServerConfig::default()
    }
}

/// The server table of a test server on the Unix socket `path` alone.
pub fn on_unix(path: &Path) -> ServerConfig {
    ServerConfig { unix: vec![path.to_path_buf()], ..ServerConfig::default() }
}

/// A 16 MiB sparse export "disk", backed by `dir/disk.img`, with a cache of
/// `cache_size`, on a free TCP port with /metrics, plus the export flags
/// `extra`. Returns the server and the backing file.
pub fn start_disk(dir: &Path, cache_size: &str, extra: &[&str]) -> (Server, PathBuf) {
    start_disk_with(dir, cache_size, extra, |_| {})
}

/// As `start_disk`, with `server` adjusting the server table first.
pub fn start_disk_with(
    dir: &Path,
    cache_size: &str,
    extra: &[&str],
    server: impl FnOnce(&mut ServerConfig),
) -> (Server, PathBuf) {
    let disk = dir.join("disk.img");
    let mut flags = vec!["--backend", "sparse", "--size", "16MiB", "--path", disk.to_str().unwrap()];
    flags.extend(["--cache-size", cache_size]);
    flags.extend(extra);
    let mut config = Config { server: loopback(), exports: vec![export("disk", &flags)] };
    server(&mut config.server);
    (Server::start(config), disk)
}

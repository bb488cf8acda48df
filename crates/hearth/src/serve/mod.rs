//! `hearth serve`: the NBD storage server with the block cache in front of
//! each export. Configured by `--config hearth.toml` or, for one export, by
//! flags. Prints one `listening ...` line per socket on stdout once bound,
//! then `ready`; with `--run CMD`, runs CMD against itself and exits with
//! its status (nbdkit's captive mode). Under systemd socket activation it
//! serves the sockets passed to it (`activation`); `--user`/`--group` drop
//! root once everything is open (`privileges`); SIGHUP re-reads the TLS
//! credentials.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use hearth_server::config::{Config, ExportConfig, Settings, SizeValue, TlsMode};
use hearth_server::Server;
use tracing_subscriber::EnvFilter;

use crate::units;

mod activation;
mod privileges;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// TOML config with a `server` table and `export` array tables (keys: crates/hearth-server/README.md).
    #[arg(short, long, value_name = "PATH", conflicts_with_all = export_flags())]
    config: Option<PathBuf>,
    /// TCP address to listen on, repeatable (port 0 picks a free port). Default 127.0.0.1:10809, or,
    /// under systemd socket activation (LISTEN_PID is ours, LISTEN_FDS >= 1), the sockets passed as
    /// fd 3 on, TCP or Unix, and then neither --listen nor --unix may be given.
    #[arg(long, value_name = "ADDR")]
    listen: Vec<String>,
    /// Unix socket path to listen on, repeatable.
    #[arg(long, value_name = "PATH")]
    unix: Vec<PathBuf>,
    /// Address for the Prometheus endpoint, e.g. 127.0.0.1:9109 (serves /metrics).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Also answer POST /mode?export=NAME&mode=through|around|back|pass on the --metrics address,
    /// switching an export's cache mode while it serves. Without --admin-token-file, --metrics must
    /// be a loopback address.
    #[arg(long)]
    admin: bool,
    /// A file holding the token POST /mode must carry (Authorization: Bearer TOKEN); needed to
    /// serve --admin on a non-loopback --metrics address.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// Time a client may take to finish the handshake, in whole seconds, e.g. 30s (0 = no limit)
    /// [default: 30s, or the config's].
    #[arg(long, value_name = "DURATION", value_parser = units::duration_or_seconds("--handshake-timeout"))]
    handshake_timeout: Option<Duration>,
    /// Time a connection may stay idle (no request, no reply) before it is closed, in whole seconds,
    /// e.g. 5m (0 = never) [default: 0, or the config's].
    #[arg(long, value_name = "DURATION", value_parser = units::duration_or_seconds("--idle-timeout"))]
    idle_timeout: Option<Duration>,
    /// Client connections served at once; more are closed at accept [default: 256, or the config's].
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Largest READ or WRITE accepted, advertised to clients as the maximum block size, e.g. 64MiB
    /// [default: 64MiB, or the config's].
    #[arg(long, value_name = "SIZE")]
    max_request: Option<String>,
    /// Client buffers one connection may name in cache hints (8 bytes of table each)
    /// [default: 1048576, or the config's].
    #[arg(long, value_name = "N")]
    max_client_buffers: Option<u64>,
    /// TLS: off, on (at the client's choice) or require (nothing but NBD_OPT_STARTTLS before the
    /// upgrade) [default: off, or the config's].
    #[arg(long, value_name = "MODE")]
    tls: Option<TlsMode>,
    /// Directory with server-cert.pem and server-key.pem (and ca-cert.pem for --tls-verify-peer), as
    /// qemu-nbd and nbdkit lay it out. SIGHUP reads them (or the --tls-psk file) again for new
    /// connections; established ones keep theirs, and a file that cannot be used keeps the old ones.
    #[arg(long, value_name = "DIR")]
    tls_certificates: Option<PathBuf>,
    /// Accept only clients presenting a certificate signed by ca-cert.pem; needs --tls require.
    #[arg(long)]
    tls_verify_peer: bool,
    /// TLS with pre-shared keys instead of certificates: a username:hexkey file (what psktool
    /// writes; qemu's keys.psk), as nbdkit's --tls-psk; needs --tls require.
    #[arg(long, value_name = "FILE", conflicts_with = "tls_certificates")]
    tls_psk: Option<PathBuf>,
    /// Serve the export only to TLS clients whose verified certificate has this subject, e.g.
    /// "CN=alice,O=Example" (RFC 4514; openssl's default order matches too), or with --tls-psk to
    /// this key-file user; repeatable. Needs --tls-verify-peer or --tls-psk.
    #[arg(long, value_name = "DN", conflicts_with = "config")]
    tls_identity: Vec<String>,
    /// TCP client address or CIDR block allowed to connect, repeatable (default: all).
    #[arg(long, value_name = "CIDR")]
    allow: Vec<String>,
    /// TCP client address or CIDR block refused, repeatable (over --allow).
    #[arg(long, value_name = "CIDR")]
    deny: Vec<String>,
    /// Every export read-only, a --config file's too: NBD_FLAG_READ_ONLY is advertised and writes,
    /// trims and zeroes get EPERM (as qemu-nbd -r and nbdkit -r).
    #[arg(short, long)]
    read_only: bool,
    /// Write the server's process id to this file once every listener is bound (as nbdkit's
    /// --pidfile); it is removed when the server exits.
    #[arg(long, value_name = "FILE")]
    pidfile: Option<PathBuf>,
    /// Once every listener, backend, cache device and the pidfile are open, switch to this user
    /// (a name or uid) and its primary group, as nbdkit's -u; needs root. Files read later (the TLS
    /// files on SIGHUP) must be readable by it, and it may not be able to remove the pidfile or a
    /// Unix socket in a directory only root writes.
    #[arg(short = 'u', long, value_name = "USER")]
    user: Option<String>,
    /// With --user, this group (a name or gid) instead of the user's own; alone, only the group
    /// changes, as nbdkit's -g. Supplementary groups are dropped.
    #[arg(short = 'g', long, value_name = "GROUP")]
    group: Option<String>,
    /// Captive mode, as nbdkit's --run: once serving, run CMD through `sh -c` with $uri (and $nbd),
    /// $port, $unixsocket, $exportname and $tls in its environment; when it exits the server stops
    /// and exits with its status (128+N if signal N killed it).
    #[arg(long, value_name = "CMD")]
    run: Option<String>,
    /// Log filter (error, warn, info, debug, trace or a tracing directive); RUST_LOG overrides.
    #[arg(long, value_name = "FILTER", default_value = "info")]
    log: String,

    /// Export name (flags describe one export).
    #[arg(long, default_value = "hearth")]
    name: String,
    /// The old spelling of --warmup-preload, refused: --warmup is the uncounted start of a trace.
    #[arg(long = "warmup", hide = true, conflicts_with = "config")]
    warmup_moved: bool,
    /// One export described by flags: the config file's export keys as flags.
    #[command(flatten)]
    export: ExportConfig,
}

impl ServeArgs {
    /// The settings; `activated` when systemd passed the listening sockets,
    /// which then stand in for `--listen`/`--unix`.
    fn config(&self, activated: usize) -> anyhow::Result<Settings> {
        anyhow::ensure!(
            !self.warmup_moved,
            "--warmup is now --warmup-preload (--warmup is the uncounted start of a trace in sim and prefetch)"
        );
        let mut config = match &self.config {
            Some(path) => Config::load(path)?,
            None => {
                let mut export = ExportConfig {
                    name: self.name.clone(),
                    tls_identities: self.tls_identity.clone(),
                    // One export from flags: the server's --max-connections is its limit.
                    max_connections: None,
                    ..self.export.clone()
                };
                if export.what_if.as_deref() == Some(&["none".to_string()]) {
                    export.what_if = Some(Vec::new());
                }
                Config { exports: vec![export], ..Default::default() }
            }
        };
        if self.read_only {
            config.exports.iter_mut().for_each(|e| e.read_only = true);
        }
        // Listener flags add to (or stand in for) the file's [server] table.
        config.server.listen.extend(self.listen.iter().cloned());
        config.server.unix.extend(self.unix.iter().cloned());
        config.server.admin |= self.admin;
        if self.admin_token_file.is_some() {
            config.server.admin_token_file = self.admin_token_file.clone();
        }
        if self.metrics.is_some() {
            config.server.metrics = self.metrics.clone();
        }
        if let Some(timeout) = self.handshake_timeout {
            config.server.handshake_timeout = whole_seconds(timeout, "--handshake-timeout")?;
        }
        if let Some(timeout) = self.idle_timeout {
            config.server.idle_timeout = whole_seconds(timeout, "--idle-timeout")?;
        }
        if let Some(n) = self.max_connections {
            config.server.max_connections = n;
        }
        if let Some(size) = &self.max_request {
            config.server.max_request = Some(SizeValue::Text(size.clone()));
        }
        if let Some(n) = self.max_client_buffers {
            config.server.max_client_buffers = Some(n);
        }
        if let Some(mode) = self.tls {
            config.server.tls = mode;
        }
        if self.tls_certificates.is_some() {
            config.server.tls_certificates = self.tls_certificates.clone();
        }
        config.server.tls_verify_peer |= self.tls_verify_peer;
        if self.tls_psk.is_some() {
            config.server.tls_psk = self.tls_psk.clone();
        }
        config.server.allow.extend(self.allow.iter().cloned());
        config.server.deny.extend(self.deny.iter().cloned());
        let origin = self.config.as_ref().map_or("flags".to_string(), |p| p.display().to_string());
        if activated > 0 && !(config.server.listen.is_empty() && config.server.unix.is_empty()) {
            anyhow::bail!(
                "{origin}: --listen/--unix (server.listen/server.unix) cannot be combined with systemd socket \
                 activation (LISTEN_FDS={activated}): the sockets come from the socket unit"
            );
        }
        let mut settings = config.validate().map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        if activated > 0 {
            // Not the default 127.0.0.1:10809: only the sockets passed to us.
            settings.server.listen.clear();
        }
        Ok(settings)
    }
}

/// Every export flag: each conflicts with `--config`, whose file describes its exports.
fn export_flags() -> Vec<clap::Id> {
    let export = ExportConfig::augment_args(clap::Command::new("export"));
    export.get_arguments().map(|arg| arg.get_id().clone()).collect()
}

/// The config counts these timeouts in seconds; a fraction would be lost.
fn whole_seconds(d: Duration, flag: &str) -> anyhow::Result<u64> {
    anyhow::ensure!(d.subsec_nanos() == 0, "{flag} counts whole seconds (got {})", hearth_core::format_duration(d));
    Ok(d.as_secs())
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let filter = EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(&args.log)).context("--log")?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
    // Before the runtime's threads start: it edits the environment.
    let inherited = activation::take_listen_fds()?;
    let config = args.config(inherited.len())?;
    let leave_root = privileges::resolve(args.user.as_deref(), args.group.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let served = runtime.block_on(async {
        // Handlers go in before we announce ourselves, so a signal sent right
        // after the `listening` lines is never lost.
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).context("SIGTERM handler")?;
        let mut int =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).context("SIGINT handler")?;
        let mut hup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).context("SIGHUP handler")?;
        let server = Server::bind(&config, inherited).await?;
        let tls = server.tls_credentials();
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                reload_tls(tls.as_ref());
            }
        });
        let _pidfile = args.pidfile.as_deref().map(PidFile::write).transpose()?;
        if let Some(target) = &leave_root {
            target.switch()?;
        }
        let mut out = std::io::stdout().lock();
        for a in server.tcp_addrs() {
            writeln!(out, "listening tcp {a}")?;
        }
        for p in server.unix_paths() {
            writeln!(out, "listening unix {}", p.display())?;
        }
        if let Some(a) = server.metrics_addr() {
            writeln!(out, "metrics http://{a}/metrics")?;
        }
        writeln!(out, "ready")?;
        out.flush()?;
        drop(out);
        let mut captive = match &args.run {
            Some(command) => Some(captive_command(command, &config, &server).spawn().context("--run: starting sh")?),
            None => None,
        };
        let mut status = None;
        server
            .run(async {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    _ = int.recv() => tracing::info!("SIGINT received"),
                    exited = async { captive.as_mut()?.wait().await.ok() }, if captive.is_some() => {
                        tracing::info!(status = ?exited, "--run command exited");
                        status = exited;
                    }
                }
            })
            .await?;
        anyhow::Ok(status)
    });
    // Requests of closed connections may still run on the blocking pool;
    // their replies go nowhere, and the data is flushed: do not wait long.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    if let Some(status) = served? {
        // Everything is flushed and the pidfile removed: only the status is left to give.
        use std::os::unix::process::ExitStatusExt;
        std::process::exit(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
    }
    Ok(())
}

/// SIGHUP: new handshakes use the certificates, key and CA (or PSK file)
/// as they are on disk now; connections already up keep theirs. A file
/// that cannot be used keeps the old credentials, in one line naming it.
fn reload_tls(tls: Option<&hearth_server::ReloadableTls>) {
    match tls.map(|t| t.reload()) {
        None => tracing::info!("SIGHUP received: no TLS credentials to reload"),
        Some(Ok(())) => tracing::info!("SIGHUP received: TLS credentials reloaded"),
        Some(Err(e)) => {
            tracing::error!("SIGHUP received: TLS credentials not reloaded, serving with the old ones: {e}")
        }
    }
}

/// `sh -c COMMAND` with nbdkit's captive-mode variables: the URI of the
/// first export (over the first Unix socket if there is one, as nbdkit
/// prefers), and the empty string for what is not served.
fn captive_command(command: &str, config: &Settings, server: &Server) -> tokio::process::Command {
    let export = config.exports.first().map_or("", |e| e.name.as_str());
    let tls = config.server.tls;
    let s = if tls == TlsMode::Require { "s" } else { "" };
    let port = server.tcp_addrs().first().map(|a| a.port().to_string()).unwrap_or_default();
    let unixsocket = server.unix_paths().first().map(|p| p.display().to_string()).unwrap_or_default();
    let uri = match (server.unix_paths().first(), server.tcp_addrs().first()) {
        (Some(path), _) => format!("nbd{s}+unix:///{export}?socket={}", path.display()),
        (None, Some(addr)) => {
            // A wildcard address is reached on loopback.
            let mut addr = *addr;
            if addr.ip().is_unspecified() {
                addr.set_ip(if addr.is_ipv4() { [127, 0, 0, 1].into() } else { std::net::Ipv6Addr::LOCALHOST.into() });
            }
            format!("nbd{s}://{addr}/{export}")
        }
        (None, None) => String::new(),
    };
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c").arg(command);
    cmd.env("uri", &uri).env("nbd", &uri).env("port", port).env("unixsocket", unixsocket).env("exportname", export);
    match tls {
        TlsMode::Off => cmd.env_remove("tls"),
        TlsMode::On => cmd.env("tls", "1"),
        TlsMode::Require => cmd.env("tls", "2"),
    };
    cmd
}

/// `--pidfile`, written whole (a reader never sees part of it) and removed on drop.
struct PidFile(PathBuf);

impl PidFile {
    fn write(path: &std::path::Path) -> anyhow::Result<PidFile> {
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        std::fs::write(&partial, format!("{}\n", std::process::id()))
            .and_then(|()| std::fs::rename(&partial, path))
            .with_context(|| format!("--pidfile {}", path.display()))?;
        Ok(PidFile(path.to_path_buf()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

//! `hearth.toml`: listeners and exports. This module holds the file's raw
//! values as serde reads them; parsing reports the line and key of a syntax
//! or unknown-key error. [`Config::validate`] (in `spec`) turns them into
//! [`Settings`], naming `export[i] ("name").key` for a bad value, and `open`
//! opens what a validated export describes.

mod open;
mod spec;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use crate::cache_device::DeviceWriteMode;

pub use spec::{
    BackendSpec, CacheDeviceSpec, ExportSpec, ServerSettings, Settings, TierSpec, TlsCredentials,
    DEFAULT_DIRTY_MAX_AGE, DEFAULT_MAX_CLIENT_BUFFERS, DEFAULT_MAX_REQUEST,
};

/// Why a configuration cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// TOML syntax, an unknown key or a value of the wrong type; the message
    /// has the line, column and key.
    #[error("{}{message}", path.as_ref().map(|p| format!("config {}: ", p.display())).unwrap_or_default())]
    Syntax { path: Option<PathBuf>, message: String },
    #[error("no [[export]] defined")]
    NoExports,
    /// A bad value or a rule between values; `key` is `server.key` or
    /// `export[i] ("name").key`.
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
    /// A bad `allow`/`deny`/`tls_identities` entry.
    #[error(transparent)]
    Access(#[from] crate::error::AccessError),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default, rename = "export")]
    pub exports: Vec<ExportConfig>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// TCP addresses (`host:port`; port 0 picks a free one).
    #[serde(default)]
    pub listen: Vec<String>,
    /// Unix socket paths.
    #[serde(default)]
    pub unix: Vec<PathBuf>,
    /// `host:port` for the Prometheus endpoint (`/metrics`).
    pub metrics: Option<String>,
    /// Also answer `POST /mode?export=NAME&mode=MODE` there, switching an
    /// export's cache mode while it serves. Off by default. Without
    /// `admin_token_file` the metrics address must be loopback.
    #[serde(default)]
    pub admin: bool,
    /// A file holding the bearer token `POST /mode` must carry
    /// (`Authorization: Bearer TOKEN`); needed to serve admin beyond loopback.
    pub admin_token_file: Option<PathBuf>,
    /// Seconds a client may take to finish the handshake before it is
    /// disconnected, so idle or trickling sockets cannot pile up; 0 = no limit.
    #[serde(default = "default_handshake_timeout", deserialize_with = "whole_seconds")]
    pub handshake_timeout: u64,
    /// Seconds a connection may stay idle (no request arriving, no reply
    /// leaving) before it is closed; 0 = never (the default, as nbdkit).
    #[serde(default, deserialize_with = "whole_seconds")]
    pub idle_timeout: u64,
    /// Client connections served at once; one more is closed at accept.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Largest READ or WRITE accepted, advertised as the maximum block size
    /// (NBD_INFO_BLOCK_SIZE). Default 64 MiB (what nbdkit accepts), at most 1 GiB.
    pub max_request: Option<SizeValue>,
    /// Client buffers a connection may name in BUFFER hints (its client
    /// content tracking table holds 8 bytes per buffer); a hint naming a
    /// buffer beyond it is refused with EINVAL. Default 1 Mi (4 GiB of 4 KiB pages).
    pub max_client_buffers: Option<u64>,
    /// TLS (NBD_OPT_STARTTLS): "off" (default), "on" (at the client's
    /// choice) or "require" (nothing but STARTTLS before the upgrade).
    #[serde(default)]
    pub tls: TlsMode,
    /// Directory holding `server-cert.pem` and `server-key.pem`, and
    /// `ca-cert.pem` to verify clients with: qemu-nbd's and nbdkit's layout.
    pub tls_certificates: Option<PathBuf>,
    /// Accept only clients presenting a certificate signed by `ca-cert.pem`.
    #[serde(default)]
    pub tls_verify_peer: bool,
    /// A `username:hexkey` file (what `psktool` writes, qemu's `keys.psk`):
    /// TLS with pre-shared keys instead of certificates.
    pub tls_psk: Option<PathBuf>,
    /// TCP client addresses or CIDR blocks allowed to connect; empty = all.
    #[serde(default)]
    pub allow: Vec<String>,
    /// TCP client addresses or CIDR blocks refused (over `allow`).
    #[serde(default)]
    pub deny: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    #[default]
    Off,
    On,
    Require,
}

impl TlsMode {
    pub fn negotiation(self) -> hearth_nbd::handshake::Tls {
        use hearth_nbd::handshake::Tls;
        match self {
            TlsMode::Off => Tls::Off,
            TlsMode::On => Tls::On,
            TlsMode::Require => Tls::Require,
        }
    }
}

impl std::str::FromStr for TlsMode {
    type Err = NotATlsMode;
    fn from_str(s: &str) -> Result<TlsMode, NotATlsMode> {
        match s {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            _ => Err(NotATlsMode(s.to_string())),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not off, on or require")]
pub struct NotATlsMode(String);

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: Vec::new(),
            unix: Vec::new(),
            metrics: None,
            admin: false,
            admin_token_file: None,
            handshake_timeout: default_handshake_timeout(),
            idle_timeout: 0,
            max_connections: default_max_connections(),
            max_request: None,
            max_client_buffers: None,
            tls: TlsMode::Off,
            tls_certificates: None,
            tls_verify_peer: false,
            tls_psk: None,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }
}

/// Whole seconds from a duration (`"30s"`, `"2m"`, as the flags and the
/// other duration keys take it) or, as older files have it, a bare number of
/// seconds.
fn whole_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Seconds {
        Number(u64),
        Text(String),
    }
    match Seconds::deserialize(d)? {
        Seconds::Number(n) => Ok(n),
        Seconds::Text(text) => {
            let d = parse_duration(&text).map_err(serde::de::Error::custom)?;
            if d.subsec_nanos() != 0 {
                return Err(serde::de::Error::custom(format!("{text}: counts whole seconds")));
            }
            Ok(d.as_secs())
        }
    }
}

fn default_handshake_timeout() -> u64 {
    30
}

fn default_max_connections() -> usize {
    256
}

/// A size: an integer number of bytes or a string such as `"64MiB"`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    pub fn bytes(&self) -> Result<u64, hearth_core::ValueError> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => hearth_core::parse_bytes(t),
        }
    }

    /// Bytes per second: an integer, or a string with its unit and `/s`
    /// (`"100MiB/s"`, `"250MB/s"`). A size with a unit but no `/s`
    /// (`"100MiB"`, as configs were first written) still reads per second.
    pub fn rate(&self) -> Result<u64, hearth_core::ValueError> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) if t.trim().ends_with("/s") => hearth_core::parse_rate(t),
            SizeValue::Text(t) if t.trim().ends_with(|c: char| c.is_ascii_alphabetic()) => hearth_core::parse_bytes(t),
            SizeValue::Text(t) => hearth_core::parse_rate(t),
        }
    }
}

/// What an export stores its data in: `backend` in a config file, `--backend`
/// with flags (the variants' help names the flags; the keys are the same
/// without `--`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// An existing file or block device (--path).
    #[default]
    File,
    /// A file created sparse with --size if missing (--path).
    Sparse,
    /// RAM of --size bytes, lost at exit.
    Memory,
    /// Another NBD server (--upstream): a caching proxy.
    Nbd,
    /// A file on a web server answering byte ranges (--upstream URL), read-only (--read-only).
    Http,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WriteModeConfig {
    #[default]
    Through,
    /// Write-around: writes go to the backend and leave the cache.
    Around,
    Back,
    /// Pass-through: nothing enters the cache (switch to another mode later).
    Pass,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub backend: BackendKind,
    pub path: Option<PathBuf>,
    pub size: Option<SizeValue>,
    /// Open the file with O_DIRECT (bypass the page cache).
    #[serde(default)]
    pub direct: bool,
    #[serde(default)]
    pub read_only: bool,
    /// Client addresses or CIDR blocks that may use this export (within the
    /// server's `allow`/`deny`); empty = all. Others do not see it.
    #[serde(default)]
    pub allow: Vec<String>,
    /// TLS client identities that may use this export; empty = any. Subject
    /// names of verified client certificates (`"CN=alice,O=Example"`, needs
    /// `server.tls_verify_peer`), or with `server.tls_psk` users of its key
    /// file. Others do not see it.
    #[serde(default)]
    pub tls_identities: Vec<String>,
    /// Cache capacity; 0 disables caching. Default 64 MiB.
    pub cache_size: Option<SizeValue>,
    /// Policy spec (`hearth_policy::PolicySpec`), e.g. `"lru"` or `"mq:m=8"`;
    /// parsed when the configuration is validated.
    pub policy: Option<String>,
    /// When blocks enter the cache: `"ac"` (on access, default) or `"ev"` /
    /// `"ev:THRESHOLD"` (when a client reports evicting them, through the
    /// cache-hint extension; see docs/nbd-extension.md).
    pub placement: Option<String>,
    /// Prefetcher spec (`hearth prefetch schemes`), e.g. `"quickmine"` or
    /// `"seq"`; default none. Contexts come from the hint extension, one per
    /// connection for clients that do not send them.
    pub prefetch: Option<String>,
    /// Policies the live advice shadows beside the configured one (see
    /// `hearth_server::advice`); `[]` turns the advice off. Default
    /// lru, arc, s3fifo, wtinylfu, mq.
    pub what_if: Option<Vec<String>>,
    /// Background reads (prefetches, eviction-based reloads) in flight at
    /// once: the device parallelism they may use. Default 8.
    pub background_reads: Option<usize>,
    /// Cache block size (power of two, 512 B to 1 MiB). Default 4 KiB.
    pub block_size: Option<SizeValue>,
    /// "through" (default), "around", "back" or "pass"; an operator may
    /// switch it while serving (`POST /mode` on the metrics listener, with
    /// `server.admin`).
    #[serde(default)]
    pub write_mode: WriteModeConfig,
    /// Write-back only: flush once more than this is dirty. Default half the cache.
    pub dirty_limit: Option<SizeValue>,
    /// A second, persistent cache level under the RAM cache: a local file
    /// (created sparse if missing) or block device, kept across restarts.
    pub cache_device: Option<PathBuf>,
    /// Bytes of `cache_device` to use, e.g. "100GiB"; required with it.
    pub cache_device_size: Option<SizeValue>,
    /// "through" (default) or "back": writes land on the cache device as
    /// dirty blocks and reach the backend after `dirty_max_age`.
    pub cache_device_write_mode: Option<DeviceWriteMode>,
    /// Start even if the cache device's slot table is damaged (unreadable
    /// entries, or emptied while it held dirty blocks), dropping what
    /// cannot be read: dirty blocks among it are lost. Default false: refused.
    #[serde(default)]
    pub cache_device_discard_damaged: bool,
    /// Serve a file backend that a cache device holds writes for (its mark
    /// says so) without that device: those writes are lost, and the device
    /// drops what it holds when next attached. Default false: refused.
    #[serde(default)]
    pub ignore_dirty_cache_device: bool,
    /// Write-back only (the RAM cache's or the cache device's): background
    /// cleaning writes dirty data back once it has waited this long (as
    /// Linux's dirty_expire and bcache's writeback do), e.g. "30s" (the
    /// default); "0" leaves it for FLUSH, the dirty limit and eviction.
    pub dirty_max_age: Option<String>,
    /// Reads continuing a sequential stream past this many bytes bypass the
    /// cache, as bcache's sequential_cutoff (whose default is 4 MiB); default
    /// 0: off.
    pub sequential_cutoff: Option<SizeValue>,
    /// Connections this export takes at once (within the server's
    /// `max_connections`); a client choosing it past that is refused
    /// (NBD_REP_ERR_POLICY) and closed. Default: no limit of its own.
    pub max_connections: Option<usize>,
    /// Log every client READ and WRITE (cache hits included) here, as a
    /// CloudPhysics CSV trace for `hearth tier plan` or `hearth sim`.
    pub access_log: Option<PathBuf>,
    /// The NBD server behind a `nbd` backend: `nbd://host[:port]/export`
    /// or `nbd+unix:///export?socket=PATH`.
    pub upstream: Option<String>,
    /// Connections to `upstream` (backend calls at once). Default 4.
    pub upstream_connections: Option<usize>,
    /// Backends "nbd" and "http": how long one backend call may take,
    /// waiting for a connection and retries included, before it fails with
    /// EIO, e.g. "10s". Default 30s.
    pub upstream_timeout: Option<String>,
    /// Slow-device simulation: latency added to every backend call, e.g. `"2ms"`.
    pub latency: Option<String>,
    /// Slow-device simulation: backend bytes per second, e.g. `"100MiB/s"`.
    pub bandwidth: Option<SizeValue>,
    /// Two-tier storage: a fast file in front of this backend (`[export.tier]`).
    pub tier: Option<TierExportConfig>,
    /// Cache warmup: log what the cache loads, pre-load it at start (`[export.warmup]`).
    pub warmup: Option<crate::warmup::WarmupConfig>,
}

/// `[export.tier]`: the export's backend becomes the slow tier (after any
/// latency/bandwidth simulation) behind a fast file; see `crate::tier`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierExportConfig {
    /// The fast file, created sparse with `fast_size` if missing.
    pub fast_path: PathBuf,
    pub fast_size: SizeValue,
    /// The block map's journal; default `fast_path` + `.journal`.
    pub journal: Option<PathBuf>,
    /// A partition plan from `hearth tier plan`, migrated in the background.
    pub plan: Option<PathBuf>,
    /// Migration bytes per second, e.g. `"64MiB/s"`; default 16 MiB/s.
    pub migrate_bandwidth: Option<SizeValue>,
    /// Migrate only after clients have been quiet this long; default "10ms".
    pub idle: Option<String>,
    /// The same as the export's `access_log` (kept for configs written before it moved).
    pub access_log: Option<PathBuf>,
}

/// The default policy: MQ once it is registered, LRU until then.
pub fn default_policy() -> &'static str {
    if hearth_policy::names().contains(&"mq") {
        "mq"
    } else {
        "lru"
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Config::parse(&text).map_err(|e| match e {
            ConfigError::Syntax { message, .. } => ConfigError::Syntax { path: Some(path.into()), message },
            other => other,
        })
    }

    /// Parses TOML; errors carry line, column and the offending key.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Syntax { path: None, message: one_line(text, &e) })
    }
}

/// `line L, column C (the line): what is wrong`: the TOML error on one
/// line, naming the key through its line, instead of the snippet the toml
/// crate draws over several.
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().trim();
    let Some(span) = e.span() else { return what.to_string() };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    let source: String = text.lines().nth(line - 1).unwrap_or("").trim().chars().take(80).collect();
    format!("line {line}, column {column} ({source}): {what}")
}

/// `"250us"`, `"2ms"`, `"1.5s"`: the workspace's one duration syntax.
pub fn parse_duration(s: &str) -> Result<Duration, hearth_core::ValueError> {
    hearth_core::parse_duration(s)
}

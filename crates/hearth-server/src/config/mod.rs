//! `hearth.toml`: listeners and exports. This module holds the file's raw
//! values as serde reads them (an export's also as `hearth serve`'s
//! flags); parsing reports the line and key of a syntax or unknown-key
//! error. [`Config::validate`] (in `spec`) turns them into
//! [`Settings`], naming `export[i] ("name").key` for a bad value, and `open`
//! opens what a validated export describes.

mod flags;
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

fn yes() -> bool {
    true
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

/// A flag's size or rate: its text, parsed with the configuration's.
impl std::str::FromStr for SizeValue {
    type Err = std::convert::Infallible;
    fn from_str(text: &str) -> Result<SizeValue, std::convert::Infallible> {
        Ok(SizeValue::Text(text.to_string()))
    }
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
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, clap::ValueEnum)]
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

/// One `[[export]]`: every per-export option, declared once. serde reads
/// it from the file, clap makes the same fields `hearth serve`'s export
/// flags (the key with dashes; the doc comment is the flag's help and the
/// key's doc). A new option is a field here and the code that reads it
/// (`ExportSpec::options` carries it there as given). `arg(skip)` fields
/// have no flag of their own: server-wide flags (`--name`, `-r`,
/// `--tls-identity`) set them. `write_mode` and `cache_device_write_mode`
/// are switches (`flags`).
#[derive(Clone, Debug, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    #[arg(skip)]
    pub name: String,
    /// Description shown by NBD_OPT_LIST (nbdinfo --list).
    #[serde(default)]
    #[arg(long, value_name = "TEXT", default_value_t, hide_default_value = true)]
    pub description: String,
    /// What the export stores its data in.
    #[serde(default)]
    #[arg(long, value_enum, default_value_t)]
    pub backend: BackendKind,
    /// Backing file or block device.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Export size for sparse and memory backends, e.g. 1GiB.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<SizeValue>,
    /// The server behind --backend nbd (nbd://host[:port]/export or nbd+unix:///export?socket=PATH; nbds:// and
    /// nbds+unix:// for TLS, with ?tls-certificates=DIR or ?tls-psk-file=FILE as libnbd reads them; the export name,
    /// user and query values percent-decoded, e.g. my%20disk) or --backend http (an http:// or https:// URL).
    #[arg(long, value_name = "URI")]
    pub upstream: Option<String>,
    /// Connections to the upstream (backend calls at once) [default: 4].
    #[arg(long, value_name = "N")]
    pub upstream_connections: Option<usize>,
    /// How long one call to the --upstream may take, waiting for a connection and retries included, before the client
    /// gets EIO, e.g. 10s [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub upstream_timeout: Option<String>,
    /// Open the backing file with O_DIRECT.
    #[serde(default)]
    #[arg(long)]
    pub direct: bool,
    #[serde(default)]
    #[arg(skip)]
    pub read_only: bool,
    /// Client addresses or CIDR blocks that may use this export (within the
    /// server's `allow`/`deny`); empty = all. Others do not see it.
    #[serde(default)]
    #[arg(skip)]
    pub allow: Vec<String>,
    /// TLS client identities that may use this export; empty = any. Subject
    /// names of verified client certificates (`"CN=alice,O=Example"`, needs
    /// `server.tls_verify_peer`), or with `server.tls_psk` users of its key
    /// file. Others do not see it.
    #[serde(default)]
    #[arg(skip)]
    pub tls_identities: Vec<String>,
    /// Cache capacity, e.g. 256MiB (0 disables the cache). Default 64MiB.
    #[arg(long, value_name = "SIZE")]
    pub cache_size: Option<SizeValue>,
    /// Replacement policy spec (see `hearth policies`). Default mq, or lru where mq is absent.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,
    /// When blocks enter the cache: ac (on access), or ev or ev:THRESHOLD (when a client reports evicting them through
    /// the cache-hint extension, docs/nbd-extension.md). Default ac.
    #[arg(long, value_name = "PLACEMENT")]
    pub placement: Option<String>,
    /// Prefetcher (see `hearth prefetch schemes`), e.g. quickmine or seq; contexts come from the hint extension, one
    /// per connection otherwise. Default none.
    #[arg(long, value_name = "SCHEME")]
    pub prefetch: Option<String>,
    /// Size the prefetch partition as the traffic goes (SARC's rule, as `hearth prefetch sim --adaptive-partition`):
    /// from its fixed 4% of the cache, never below it, up to half. Default: the fixed 4%.
    #[serde(default)]
    #[arg(long, requires = "prefetch")]
    pub adaptive_partition: bool,
    /// A policy the live advice (GET /advice, hearth_advice_* in /metrics) shadows beside --policy, repeatable; `none`
    /// turns the advice off. Default lru, arc, s3fifo, wtinylfu and mq.
    #[arg(long, value_name = "POLICY")]
    pub what_if: Option<Vec<String>>,
    /// Background reads (prefetches, eviction-based reloads) in flight at once, 1-256. Default 8.
    #[arg(long, value_name = "N")]
    pub background_reads: Option<usize>,
    /// Cache block size, a power of two from 512B to 1MiB. Default 4KiB.
    #[arg(long, value_name = "SIZE")]
    pub block_size: Option<SizeValue>,
    /// "through" (default), "around", "back" or "pass"; an operator may
    /// switch it while serving (`POST /mode` on the metrics listener, with
    /// `server.admin`).
    #[serde(default)]
    #[command(flatten)]
    pub write_mode: WriteModeConfig,
    /// Write-back: flush once this much is dirty. Default half the cache.
    #[arg(long, value_name = "SIZE", requires = "write_back")]
    pub dirty_limit: Option<SizeValue>,
    /// Write-back (--write-back or --cache-device-write-back): background cleaning writes dirty data back once it has
    /// waited this long, e.g. 30s (the default); 0 turns cleaning off.
    #[arg(long, value_name = "DURATION")]
    pub dirty_max_age: Option<String>,
    /// A persistent second cache level under the RAM cache: a local file (created sparse if missing) or block device; a
    /// restart keeps what it caches.
    #[arg(long, value_name = "PATH", requires = "cache_device_size")]
    pub cache_device: Option<PathBuf>,
    /// Bytes of --cache-device to use, e.g. 100GiB.
    #[arg(long, value_name = "SIZE", requires = "cache_device")]
    pub cache_device_size: Option<SizeValue>,
    /// "through" (default) or "back": writes land on the cache device as
    /// dirty blocks and reach the backend after `dirty_max_age`.
    #[command(flatten)]
    pub cache_device_write_mode: Option<DeviceWriteMode>,
    /// Start even if the cache device's slot table is damaged, dropping what cannot be read (dirty blocks among it are
    /// lost; without this the start is refused, saying how many).
    #[serde(default)]
    #[arg(long, requires = "cache_device")]
    pub cache_device_discard_damaged: bool,
    /// Serve a backend file that a cache device holds writes for without that device: those writes are lost, and the
    /// device drops what it holds when next attached (default: refused).
    #[serde(default)]
    #[arg(long, conflicts_with = "cache_device")]
    pub ignore_dirty_cache_device: bool,
    /// Reads continuing a sequential stream past this many bytes bypass the cache, e.g. 4MiB (bcache's default).
    /// Default: off.
    #[arg(long, value_name = "SIZE")]
    pub sequential_cutoff: Option<SizeValue>,
    /// Do not offer clients TRIM (NBD_FLAG_SEND_TRIM; `trim = false` in a config file): a TRIM sent anyway gets EINVAL,
    /// and WRITE_ZEROES writes zeroes instead of punching holes, so the backend keeps its blocks allocated.
    #[serde(default = "yes")]
    #[arg(long = "no-trim", action = clap::ArgAction::SetFalse)]
    pub trim: bool,
    /// Connections this export takes at once (within the server's
    /// `max_connections`); a client choosing it past that is refused
    /// (NBD_REP_ERR_POLICY) and closed. Default: no limit of its own.
    #[arg(skip)]
    pub max_connections: Option<usize>,
    /// Log every client READ and WRITE (cache hits included) to this file as a CloudPhysics CSV trace, for `hearth tier
    /// plan` or `hearth sim`.
    #[arg(long, value_name = "PATH")]
    pub access_log: Option<PathBuf>,
    /// Simulated slow device: latency added to each backend call, e.g. 2ms.
    #[arg(long, value_name = "DURATION")]
    pub latency: Option<String>,
    /// Simulated slow device: backend bandwidth, e.g. 100MiB/s or 250MB/s.
    #[arg(long, value_name = "RATE", value_parser = SizeValue::rate_flag)]
    pub bandwidth: Option<SizeValue>,
    /// Cache warmup: log what the cache loads, pre-load it at start (`[export.warmup]`).
    #[command(flatten)]
    pub warmup: Option<crate::warmup::WarmupConfig>,
    /// Two-tier storage: a fast file in front of this backend (`[export.tier]`).
    #[command(flatten)]
    pub tier: Option<TierExportConfig>,
}

/// `[export.tier]`: the export's backend becomes the slow tier (after any
/// latency/bandwidth simulation) behind a fast file; see `crate::tier`.
#[derive(Clone, Debug, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct TierExportConfig {
    /// Two tiers: the fast file in front of the backend (created sparse with --tier-fast-size if missing).
    #[arg(
        long = "tier-fast-path",
        id = "tier_fast_path",
        value_name = "PATH",
        required = false,
        requires = "tier_fast_size"
    )]
    pub fast_path: PathBuf,
    /// Size of the fast tier, e.g. 10GiB.
    #[arg(
        long = "tier-fast-size",
        id = "tier_fast_size",
        value_name = "SIZE",
        required = false,
        requires = "tier_fast_path"
    )]
    pub fast_size: SizeValue,
    /// The fast tier's block-map journal. Default: the fast path + .journal.
    #[arg(long = "tier-journal", id = "tier_journal", value_name = "PATH", requires = "tier_fast_path")]
    pub journal: Option<PathBuf>,
    /// A partition plan from `hearth tier plan`, migrated in the background.
    #[arg(long = "tier-plan", id = "tier_plan", value_name = "PATH", requires = "tier_fast_path")]
    pub plan: Option<PathBuf>,
    /// Migration bandwidth, e.g. 64MiB/s. Default 16MiB/s.
    #[arg(long = "tier-migrate-bandwidth", id = "tier_migrate_bandwidth", value_name = "RATE",
          value_parser = SizeValue::rate_flag, requires = "tier_fast_path")]
    pub migrate_bandwidth: Option<SizeValue>,
    /// Migrate only after clients have been quiet this long. Default 10ms.
    #[arg(long = "tier-idle", id = "tier_idle", value_name = "DURATION", requires = "tier_fast_path")]
    pub idle: Option<String>,
    /// The same as --access-log (kept for scripts written before it moved).
    #[arg(long = "tier-access-log", id = "tier_access_log", value_name = "PATH", requires = "tier_fast_path")]
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

//! `hearth.toml`: listeners and exports. Parsing reports the line and key of
//! a syntax or unknown-key error; validation names `export[i].key`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hearth_placement::Placement;
use serde::Deserialize;

use crate::backend::nbd::{NbdBackend, Upstream};
use crate::backend::{Backend, FileBackend, MemoryBackend, SlowBackend};
use crate::cache::{BlockCache, WriteMode};

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
    /// Seconds a client may take to finish the handshake before it is
    /// disconnected, so idle or trickling sockets cannot pile up; 0 = no limit.
    #[serde(default = "default_handshake_timeout")]
    pub handshake_timeout: u64,
    /// Seconds a connection may stay idle (no request arriving, no reply
    /// leaving) before it is closed; 0 = never (the default, as nbdkit).
    #[serde(default)]
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
    type Err = String;
    fn from_str(s: &str) -> Result<TlsMode, String> {
        match s {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            _ => Err(format!("{s:?} is not off, on or require")),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: Vec::new(),
            unix: Vec::new(),
            metrics: None,
            handshake_timeout: default_handshake_timeout(),
            idle_timeout: 0,
            max_connections: default_max_connections(),
            max_request: None,
            max_client_buffers: None,
            tls: TlsMode::Off,
            tls_certificates: None,
            tls_verify_peer: false,
            allow: Vec::new(),
            deny: Vec::new(),
        }
    }
}

fn default_handshake_timeout() -> u64 {
    30
}

fn default_max_connections() -> usize {
    256
}

/// Default and ceiling of `server.max_request`.
pub const DEFAULT_MAX_REQUEST: u32 = 64 << 20;
const MAX_MAX_REQUEST: u64 = 1 << 30;
/// Default of `server.max_client_buffers`.
pub const DEFAULT_MAX_CLIENT_BUFFERS: u64 = 1 << 20;

impl ServerConfig {
    /// The largest READ or WRITE payload, in bytes.
    pub fn max_request(&self) -> Result<u32, String> {
        let Some(v) = &self.max_request else { return Ok(DEFAULT_MAX_REQUEST) };
        let bytes = v.bytes()?;
        if !(4096..=MAX_MAX_REQUEST).contains(&bytes) {
            return Err(format!("{bytes} bytes is outside 4KiB..1GiB"));
        }
        Ok(bytes as u32)
    }

    pub fn max_client_buffers(&self) -> Result<u64, String> {
        let n = self.max_client_buffers.unwrap_or(DEFAULT_MAX_CLIENT_BUFFERS);
        if !(1..=hearth_placement::MAX_SLOTS).contains(&n) {
            return Err(format!("{n} is outside 1..={}", hearth_placement::MAX_SLOTS));
        }
        Ok(n)
    }
}

/// A size: an integer number of bytes or a string such as `"64MiB"`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => hearth_core::parse_bytes(t),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// An existing file or block device.
    #[default]
    File,
    /// A file created sparse with `size` if it does not exist.
    Sparse,
    /// RAM, lost at exit (tests, benchmarks).
    Memory,
    /// Another NBD server (`upstream`): a caching proxy.
    Nbd,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WriteModeConfig {
    #[default]
    Through,
    Back,
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
    /// Cache capacity; 0 disables caching. Default 64 MiB.
    pub cache_size: Option<SizeValue>,
    /// Policy spec for `hearth_policy::build`, e.g. `"lru"` or `"mq:m=8"`.
    pub policy: Option<String>,
    /// When blocks enter the cache: `"ac"` (on access, default) or `"ev"` /
    /// `"ev:THRESHOLD"` (when a client reports evicting them, through the
    /// cache-hint extension; see docs/nbd-extension.md).
    pub placement: Option<String>,
    /// Prefetcher spec (`hearth prefetch schemes`), e.g. `"quickmine"` or
    /// `"seq"`; default none. Contexts come from the hint extension, one per
    /// connection for clients that do not send them.
    pub prefetch: Option<String>,
    /// Background reads (prefetches, eviction-based reloads) in flight at
    /// once: the device parallelism they may use. Default 8.
    pub background_reads: Option<usize>,
    /// Cache block size (power of two, 512 B to 1 MiB). Default 4 KiB.
    pub block_size: Option<SizeValue>,
    #[serde(default)]
    pub write_mode: WriteModeConfig,
    /// Write-back only: flush once more than this is dirty. Default half the cache.
    pub dirty_limit: Option<SizeValue>,
    /// The NBD server behind a `nbd` backend: `nbd://host[:port]/export`
    /// or `nbd+unix:///export?socket=PATH`.
    pub upstream: Option<String>,
    /// Connections to `upstream` (backend calls at once). Default 4.
    pub upstream_connections: Option<usize>,
    /// Slow-device simulation: latency added to every backend call, e.g. `"2ms"`.
    pub latency: Option<String>,
    /// Slow-device simulation: backend bytes per second, e.g. `"100MiB"`.
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
    /// Migration bytes per second; default 16 MiB.
    pub migrate_bandwidth: Option<SizeValue>,
    /// Migrate only after clients have been quiet this long; default "10ms".
    pub idle: Option<String>,
    /// Log client requests here as a trace for `hearth tier plan`.
    pub access_log: Option<PathBuf>,
}

impl TierExportConfig {
    /// Wraps `slow` into the two-tier backend and starts migrating the plan.
    fn open(&self, slow: Box<dyn Backend>, block_size: u64) -> anyhow::Result<Box<dyn Backend>> {
        let fast_size = self.fast_size.bytes().map_err(anyhow::Error::msg)?;
        let blocks_in_export = slow.size().div_ceil(block_size);
        let fast = Box::new(FileBackend::sparse(&self.fast_path, fast_size, false)?);
        let journal =
            self.journal.clone().unwrap_or_else(|| PathBuf::from(format!("{}.journal", self.fast_path.display())));
        let mut tier = crate::tier::TierBackend::open(fast, slow, block_size, &journal)?;
        if let Some(path) = &self.access_log {
            tier = tier.with_access_log(path)?;
        }
        let tier = std::sync::Arc::new(tier);
        if let Some(path) = &self.plan {
            let plan = hearth_tier::plan::Plan::load(path).map_err(anyhow::Error::msg)?;
            if u64::from(plan.block_size) != block_size {
                anyhow::bail!(
                    "{}: plan block size {} differs from the export's {block_size}",
                    path.display(),
                    plan.block_size
                );
            }
            let bandwidth =
                self.migrate_bandwidth.as_ref().map_or(Ok(16 << 20), SizeValue::bytes).map_err(anyhow::Error::msg)?;
            let idle = self
                .idle
                .as_deref()
                .map_or(Ok(Duration::from_millis(10)), parse_duration)
                .map_err(anyhow::Error::msg)?;
            let (blocks, beyond): (Vec<u64>, Vec<u64>) = plan.blocks().partition(|&b| b < blocks_in_export);
            if !beyond.is_empty() {
                tracing::warn!(
                    plan = %path.display(),
                    skipped = beyond.len(),
                    of = beyond.len() + blocks.len(),
                    export_blocks = blocks_in_export,
                    "plan blocks beyond the export's end are skipped (was the plan learned from another device?)"
                );
            }
            // Detached: it runs until the plan is migrated; a crash midway is safe.
            drop(crate::tier::Migrator::spawn(tier.clone(), blocks, bandwidth, idle));
        }
        Ok(Box::new(tier))
    }
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
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading config {}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))
    }

    /// Parses TOML; errors carry line, column and the offending key.
    pub fn parse(text: &str) -> Result<Config, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Checks cross-field rules the types cannot express; the error names
    /// the key as `export[i].key`.
    pub fn validate(&mut self) -> Result<(), String> {
        if self.exports.is_empty() {
            return Err("no [[export]] defined".into());
        }
        if self.server.listen.is_empty() && self.server.unix.is_empty() {
            self.server.listen.push("127.0.0.1:10809".into());
        }
        self.server.max_request().map_err(|m| format!("server.max_request: {m}"))?;
        self.server.max_client_buffers().map_err(|m| format!("server.max_client_buffers: {m}"))?;
        if self.server.max_connections == 0 {
            return Err("server.max_connections: must be positive".into());
        }
        match (self.server.tls, &self.server.tls_certificates) {
            (TlsMode::Off, Some(_)) => return Err("server.tls_certificates: given, but server.tls is \"off\"".into()),
            (TlsMode::On | TlsMode::Require, None) => {
                return Err("server.tls_certificates: required when server.tls is \"on\" or \"require\"".into())
            }
            _ => {}
        }
        crate::access::Access::parse(&self.server.allow, &self.server.deny, "server.")?;
        if self.server.tls_verify_peer && self.server.tls == TlsMode::Off {
            return Err("server.tls_verify_peer: needs server.tls \"on\" or \"require\"".into());
        }
        for (i, e) in self.exports.iter().enumerate() {
            let at = |key: &str| format!("export[{i}] ({:?}).{key}", e.name);
            crate::access::Access::parse(&e.allow, &[], &at(""))?;
            if self.exports[..i].iter().any(|o| o.name == e.name) {
                return Err(format!("{}: duplicate export name", at("name")));
            }
            if e.name.len() > hearth_nbd::MAX_STRING {
                return Err(format!("{}: longer than 4096 bytes", at("name")));
            }
            match e.backend {
                BackendKind::File if e.path.is_none() => {
                    return Err(format!("{}: required for backend \"file\"", at("path")))
                }
                BackendKind::File if e.size.is_some() => {
                    return Err(format!("{}: a file backend takes its size from the file", at("size")))
                }
                BackendKind::Sparse if e.path.is_none() => {
                    return Err(format!("{}: required for backend \"sparse\"", at("path")))
                }
                BackendKind::Sparse | BackendKind::Memory if e.size.is_none() => {
                    return Err(format!("{}: required for backend \"{:?}\"", at("size"), e.backend).to_lowercase())
                }
                BackendKind::Memory if e.path.is_some() => {
                    return Err(format!("{}: not used by backend \"memory\"", at("path")))
                }
                BackendKind::Memory if e.direct => {
                    return Err(format!("{}: not used by backend \"memory\"", at("direct")))
                }
                BackendKind::Nbd => {
                    let Some(uri) = &e.upstream else {
                        return Err(format!("{}: required for backend \"nbd\"", at("upstream")));
                    };
                    Upstream::parse(uri).map_err(|m| format!("{}: {m}", at("upstream")))?;
                    for (set, key) in [(e.path.is_some(), "path"), (e.size.is_some(), "size"), (e.direct, "direct")] {
                        if set {
                            return Err(format!(
                                "{}: not used by backend \"nbd\" (the upstream has the size)",
                                at(key)
                            ));
                        }
                    }
                    if e.upstream_connections == Some(0) {
                        return Err(format!("{}: must be positive", at("upstream_connections")));
                    }
                }
                _ => {}
            }
            if e.backend != BackendKind::Nbd && (e.upstream.is_some() || e.upstream_connections.is_some()) {
                return Err(format!("{}: only for backend \"nbd\"", at("upstream")));
            }
            if let Some(s) = &e.size {
                let size = s.bytes().map_err(|m| format!("{}: {m}", at("size")))?;
                if size == 0 {
                    return Err(format!("{}: must be positive", at("size")));
                }
            }
            let bs = e.block_size().map_err(|m| format!("{}: {m}", at("block_size")))?;
            let cache = e.cache_bytes().map_err(|m| format!("{}: {m}", at("cache_size")))?;
            let policy = e.policy.clone().unwrap_or_else(|| default_policy().into());
            hearth_policy::build(&policy, cache).map_err(|m| format!("{}: {m}", at("policy")))?;
            e.placement().map_err(|m| format!("{}: {m}", at("placement")))?;
            e.prefetcher(4096).map_err(|m| format!("{}: {m}", at("prefetch")))?;
            if !(1..=256).contains(&e.background_reads()) {
                return Err(format!("{}: must be 1 to 256", at("background_reads")));
            }
            match e.write_mode().map_err(|m| format!("{}: {m}", at("dirty_limit")))? {
                WriteMode::Back { dirty_limit } => {
                    if cache < u64::from(bs) {
                        return Err(format!(
                            "{}: write_mode \"back\" needs a cache of at least one block",
                            at("cache_size")
                        ));
                    }
                    if dirty_limit > cache {
                        return Err(format!("{}: larger than cache_size", at("dirty_limit")));
                    }
                }
                WriteMode::Through if e.dirty_limit.is_some() => {
                    return Err(format!("{}: only used with write_mode = \"back\"", at("dirty_limit")))
                }
                WriteMode::Through => {}
            }
            e.latency().map_err(|m| format!("{}: {m}", at("latency")))?;
            if let Some(w) = &e.warmup {
                w.settings(cache).map_err(|(key, m)| format!("{}: {m}", at(&format!("warmup.{key}"))))?;
                // Two writers on one log, or a log over the data, destroy each other.
                let shared = self.exports[..i].iter().position(|o| o.warmup.as_ref().is_some_and(|ow| ow.log == w.log));
                if let Some(j) = shared {
                    return Err(format!("{}: {} is export[{j}]'s warmup log too", at("warmup.log"), w.log.display()));
                }
                if e.path.as_ref() == Some(&w.log) {
                    return Err(format!("{}: {} is the export's own backend", at("warmup.log"), w.log.display()));
                }
            }
            if let Some(b) = &e.bandwidth {
                b.bytes().map_err(|m| format!("{}: {m}", at("bandwidth")))?;
            }
        }
        Ok(())
    }
}

impl ExportConfig {
    pub fn block_size(&self) -> Result<u32, String> {
        let bs = self.block_size.as_ref().map_or(Ok(4096), SizeValue::bytes)?;
        if !bs.is_power_of_two() || !(512..=1 << 20).contains(&bs) {
            return Err(format!("{bs} is not a power of two between 512 B and 1 MiB"));
        }
        Ok(bs as u32)
    }

    pub fn cache_bytes(&self) -> Result<u64, String> {
        self.cache_size.as_ref().map_or(Ok(64 << 20), SizeValue::bytes)
    }

    pub fn write_mode(&self) -> Result<WriteMode, String> {
        Ok(match self.write_mode {
            WriteModeConfig::Through => WriteMode::Through,
            WriteModeConfig::Back => {
                let limit = match &self.dirty_limit {
                    Some(v) => v.bytes()?,
                    None => self.cache_bytes()? / 2,
                };
                WriteMode::Back { dirty_limit: limit }
            }
        })
    }

    pub fn latency(&self) -> Result<Duration, String> {
        self.latency.as_deref().map_or(Ok(Duration::ZERO), parse_duration)
    }

    /// Opens the backend and builds the cache (call after `validate`).
    pub fn open(&self) -> anyhow::Result<BlockCache> {
        let size = || self.size.as_ref().expect("validated").bytes().map_err(anyhow::Error::msg);
        let mut backend: Box<dyn Backend> = match self.backend {
            BackendKind::File => {
                Box::new(FileBackend::open(self.path.as_ref().expect("validated"), self.read_only, self.direct)?)
            }
            BackendKind::Sparse => {
                Box::new(FileBackend::sparse(self.path.as_ref().expect("validated"), size()?, self.direct)?)
            }
            BackendKind::Memory => Box::new(MemoryBackend::new(size()?)),
            BackendKind::Nbd => {
                let upstream =
                    Upstream::parse(self.upstream.as_deref().expect("validated")).map_err(anyhow::Error::msg)?;
                Box::new(NbdBackend::connect(upstream, self.upstream_connections.unwrap_or(4))?)
            }
        };
        let latency = self.latency().map_err(anyhow::Error::msg)?;
        let bandwidth = self.bandwidth.as_ref().map(SizeValue::bytes).transpose().map_err(anyhow::Error::msg)?;
        if !latency.is_zero() || bandwidth.is_some() {
            backend = Box::new(SlowBackend::new(backend, latency, bandwidth));
        }
        if let Some(tier) = &self.tier {
            backend = tier.open(backend, u64::from(self.block_size().map_err(anyhow::Error::msg)?))?;
        }
        let cache = self.cache_bytes().map_err(anyhow::Error::msg)?;
        let policy = hearth_policy::build(self.policy.as_deref().unwrap_or(default_policy()), cache)
            .map_err(anyhow::Error::msg)?;
        Ok(BlockCache::with_placement(
            backend,
            policy,
            self.block_size().map_err(anyhow::Error::msg)?,
            self.write_mode().map_err(anyhow::Error::msg)?,
            self.placement().map_err(anyhow::Error::msg)?,
        ))
    }

    pub fn background_reads(&self) -> usize {
        self.background_reads.unwrap_or(8)
    }

    /// The export's prefetcher, if any. Offline miners (C-Miner*) have no
    /// training trace in the server and start empty.
    pub fn prefetcher(&self, block_size: u32) -> Result<Option<Box<dyn hearth_prefetch::Prefetcher>>, String> {
        match self.prefetch.as_deref() {
            None | Some("none") => Ok(None),
            Some(spec) => hearth_prefetch::build(spec, block_size, &[]).map(Some),
        }
    }

    fn placement(&self) -> Result<Placement, String> {
        match self.placement.as_deref().unwrap_or("ac").parse()? {
            // DEMOTE needs the client to ship evicted data, which NBD has no command for.
            Placement::Demote => Err("\"demote\" is simulator-only; the server supports \"ac\" and \"ev\"".into()),
            p => Ok(p),
        }
    }
}

/// `"250us"`, `"2ms"`, `"1.5s"`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("bad duration {s:?} (use e.g. 250us, 2ms, 1s)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        other => return Err(format!("bad duration unit {other:?} in {s:?} (use ns, us, ms or s)")),
    };
    Duration::try_from_secs_f64(v * scale).map_err(|_| format!("duration {s:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_config_parses_and_validates() {
        let mut c = Config::parse(
            r#"
            [server]
            listen = ["127.0.0.1:0"]
            unix = ["/tmp/h.sock"]
            metrics = "127.0.0.1:0"

            [[export]]
            name = "disk"
            backend = "memory"
            size = "8MiB"
            cache_size = 1048576
            policy = "lru"
            block_size = "4KiB"
            write_mode = "back"
            dirty_limit = "256KiB"
            latency = "1ms"
            bandwidth = "100MiB"
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        let e = &c.exports[0];
        assert_eq!(e.write_mode(), Ok(WriteMode::Back { dirty_limit: 256 << 10 }));
        assert_eq!(e.latency(), Ok(Duration::from_millis(1)));
        let cache = e.open().unwrap();
        assert_eq!(cache.size(), 8 << 20);
    }

    #[test]
    fn errors_name_the_key() {
        let e = Config::parse("[[export]]\nname = \"a\"\ncache = \"1MiB\"\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("cache"), "{e}");
        let mut c =
            Config::parse("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nblock_size = 1000\n")
                .unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.starts_with("export[0] (\"a\").block_size:"), "{e}");
        let mut c =
            Config::parse("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\npolicy = \"nope\"\n")
                .unwrap();
        assert!(c.validate().unwrap_err().contains(".policy:"));
        let mut c = Config::parse("[[export]]\nname = \"a\"\nbackend = \"sparse\"\nsize = \"1MiB\"\n").unwrap();
        assert!(c.validate().unwrap_err().contains(".path: required"));
        let mut c =
            Config::parse("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nlatency = \"3 parsecs\"\n")
                .unwrap();
        assert!(c.validate().unwrap_err().contains(".latency:"));
        let e = Config::parse("[[export]]\nname = \"a\"\nbackend = \"tape\"\n").unwrap_err();
        assert!(e.contains("tape"), "{e}");
        let mut c = Config::parse("").unwrap();
        assert!(c.validate().unwrap_err().contains("no [[export]]"));
    }

    /// Found by fuzzing (fuzz/regressions/server_config): each panicked or
    /// tried to allocate 64 GB inside `validate`.
    #[test]
    fn fuzzed_configs_are_errors_not_panics() {
        for (value, key) in [
            ("latency = \"18446744073709551616s\"", ".latency:"),
            ("latency = \"27777777777777777777s\"", ".latency:"),
            ("policy = \"fbr:cmax=4000000000\"", ".policy:"),
        ] {
            let mut c =
                Config::parse(&format!("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = 1\n{value}\n")).unwrap();
            let e = c.validate().unwrap_err();
            assert!(e.contains(key), "{value}: {e}");
        }
    }
}

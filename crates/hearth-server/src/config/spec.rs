//! The validated configuration: [`Config::validate`] turns the file's raw
//! values into [`Settings`], every size, duration and choice parsed once
//! and defaults applied, so nothing downstream parses again or can fail on
//! a value.

use std::path::PathBuf;
use std::time::Duration;

use hearth_placement::Placement;
use hearth_policy::PolicySpec;
use hearth_prefetch::PrefetchSpec;

use super::{
    default_policy, parse_duration, BackendKind, Config, ConfigError, ExportConfig, ServerConfig, SizeValue,
    TierExportConfig, TlsMode, WriteModeConfig,
};
use crate::access::Access;
use crate::backend::nbd::Upstream;
use crate::cache::CacheMode;
use crate::cache_device::DeviceWriteMode;
use crate::warmup::WarmupSettings;

/// A configuration ready to serve.
#[derive(Debug)]
pub struct Settings {
    pub server: ServerSettings,
    pub exports: Vec<ExportSpec>,
}

/// `[server]`, validated.
#[derive(Debug)]
pub struct ServerSettings {
    /// TCP addresses; `127.0.0.1:10809` when neither these nor `unix` are given.
    pub listen: Vec<String>,
    pub unix: Vec<PathBuf>,
    pub metrics: Option<String>,
    /// `POST /mode` on the metrics listener.
    pub admin: bool,
    /// The bearer token's file; `POST /mode` must carry the token.
    pub admin_token_file: Option<PathBuf>,
    pub handshake_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub max_connections: usize,
    pub max_request: u32,
    pub max_client_buffers: u64,
    pub tls: TlsMode,
    /// Present exactly when `tls` is not off.
    pub tls_credentials: Option<TlsCredentials>,
    pub(crate) access: Access,
}

/// Where the server's TLS credentials come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsCredentials {
    /// A certificate directory; with `verify_peer`, clients must present a
    /// certificate signed by its `ca-cert.pem`.
    Certificates { dir: PathBuf, verify_peer: bool },
    /// A `username:hexkey` file: clients prove they hold one of its keys.
    Psk(PathBuf),
}

impl TlsCredentials {
    /// Whether clients prove an identity export lists can name.
    fn identify_clients(&self) -> bool {
        matches!(self, TlsCredentials::Certificates { verify_peer: true, .. } | TlsCredentials::Psk(_))
    }
}

/// Where an export's data lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendSpec {
    File { path: PathBuf, direct: bool },
    Sparse { path: PathBuf, size: u64, direct: bool },
    Memory { size: u64 },
    Nbd { upstream: Upstream, connections: usize },
    Http { url: String },
}

/// One `[[export]]`, validated.
#[derive(Debug)]
pub struct ExportSpec {
    pub name: String,
    /// `ignore_dirty_cache_device`: serve a file backend a cache device holds dirty data for, without it.
    pub ignore_dirty_cache_device: bool,
    pub description: String,
    pub read_only: bool,
    pub backend: BackendSpec,
    /// Power of two, 512 B to 1 MiB.
    pub block_size: u32,
    pub cache_bytes: u64,
    /// Online (not an offline bound).
    pub policy: PolicySpec,
    pub placement: Placement,
    /// The prefetcher; `None` for none.
    pub prefetch: Option<PrefetchSpec>,
    /// The prefetch partition sized as the traffic goes.
    pub adaptive_partition: bool,
    /// Policies the live advice shadows beside `policy`; `None`: no advice.
    pub what_if: Option<Vec<PolicySpec>>,
    /// 1 to 256.
    pub background_reads: usize,
    pub latency: Duration,
    pub bandwidth: Option<u64>,
    /// Remote backends: the deadline of one backend call (`upstream_timeout`).
    pub upstream_timeout: Duration,
    pub tier: Option<TierSpec>,
    pub warmup: Option<WarmupSettings>,
    /// Write-back: how long dirty data may wait before background cleaning
    /// writes it back; `None` when turned off. Other modes get the default,
    /// for a later switch to write-back.
    pub dirty_max_age: Option<Duration>,
    /// Bytes a sequential stream reads before its reads bypass the cache; `None`: off.
    pub sequential_cutoff: Option<u64>,
    /// Connections the export takes at once; `None`: only the server's limit.
    pub max_connections: Option<usize>,
    /// Every client request is logged here (`access_log`, or `[export.tier] access_log`).
    pub access_log: Option<PathBuf>,
    /// The persistent second cache level (`cache_device`).
    pub cache_device: Option<CacheDeviceSpec>,
    /// Every key as given: an option used as it is (a switch such as
    /// `trim`) is read from here; the fields above are the ones validation
    /// parses, defaults or derives.
    pub options: ExportConfig,
    pub(crate) write_mode: CacheMode,
    /// The dirty limit in write-back, from the start or after a switch:
    /// `dirty_limit`, or half the cache.
    pub(crate) write_back_limit: u64,
    pub(crate) access: Access,
}

/// `cache_device`, `cache_device_size` and `cache_device_write_mode`, validated.
#[derive(Debug)]
pub struct CacheDeviceSpec {
    pub path: PathBuf,
    pub size: u64,
    pub mode: DeviceWriteMode,
    /// Write-back: dirty blocks older than this are cleaned; `None`: only at
    /// eviction, BLOCK_STATUS and shutdown.
    pub dirty_max_age: Option<Duration>,
    /// `cache_device_discard_damaged`.
    pub discard_damaged: bool,
}

/// Default of `dirty_max_age`.
pub const DEFAULT_DIRTY_MAX_AGE: Duration = Duration::from_secs(30);

/// `[export.tier]`, validated.
#[derive(Debug)]
pub struct TierSpec {
    pub fast_path: PathBuf,
    pub fast_size: u64,
    pub journal: PathBuf,
    pub plan: Option<PathBuf>,
    pub migrate_bandwidth: u64,
    pub idle: Duration,
}

/// Default and ceiling of `server.max_request`.
pub const DEFAULT_MAX_REQUEST: u32 = 64 << 20;
const MAX_MAX_REQUEST: u64 = 1 << 30;
/// Default of `server.max_client_buffers`.
pub const DEFAULT_MAX_CLIENT_BUFFERS: u64 = 1 << 20;

impl Config {
    /// Checks every value and the rules between them; an error names the key
    /// as `server.key` or `export[i] ("name").key`.
    pub fn validate(self) -> Result<Settings, ConfigError> {
        if self.exports.is_empty() {
            return Err(ConfigError::NoExports);
        }
        let server = server_settings(self.server)?;
        let mut exports: Vec<ExportSpec> = Vec::with_capacity(self.exports.len());
        let psk_users = matches!(server.tls_credentials, Some(TlsCredentials::Psk(_)));
        for (i, e) in self.exports.into_iter().enumerate() {
            let spec = export_spec(i, e, &exports, psk_users)?;
            if spec.access.wants_identity() && !server.tls_credentials.as_ref().is_some_and(|c| c.identify_clients()) {
                let key = format!("export[{i}] ({:?}).tls_identities", spec.name);
                return Err(invalid(
                    key,
                    "needs server.tls_verify_peer or server.tls_psk: identities come from verified client certificates or pre-shared keys",
                ));
            }
            exports.push(spec);
        }
        Ok(Settings { server, exports })
    }
}

fn invalid(key: impl Into<String>, message: impl ToString) -> ConfigError {
    ConfigError::Invalid { key: key.into(), message: message.to_string() }
}

fn server_settings(s: ServerConfig) -> Result<ServerSettings, ConfigError> {
    let mut listen = s.listen;
    if listen.is_empty() && s.unix.is_empty() {
        listen.push("127.0.0.1:10809".into());
    }
    let max_request = match &s.max_request {
        None => DEFAULT_MAX_REQUEST,
        Some(v) => {
            let bytes = v.bytes().map_err(|m| invalid("server.max_request", m))?;
            if !(4096..=MAX_MAX_REQUEST).contains(&bytes) {
                return Err(invalid("server.max_request", format!("{bytes} bytes is outside 4KiB..1GiB")));
            }
            bytes as u32
        }
    };
    let max_client_buffers = s.max_client_buffers.unwrap_or(DEFAULT_MAX_CLIENT_BUFFERS);
    if !(1..=hearth_placement::MAX_SLOTS).contains(&max_client_buffers) {
        return Err(invalid(
            "server.max_client_buffers",
            format!("{max_client_buffers} is outside 1..={}", hearth_placement::MAX_SLOTS),
        ));
    }
    if s.admin && s.metrics.is_none() {
        return Err(invalid("server.admin", "needs server.metrics: the admin endpoint is served beside /metrics"));
    }
    if s.admin_token_file.is_some() && !s.admin {
        return Err(invalid("server.admin_token_file", "given, but server.admin is off"));
    }
    if s.max_connections == 0 {
        return Err(invalid("server.max_connections", "must be positive"));
    }
    let tls_credentials = match (s.tls, s.tls_certificates, s.tls_psk) {
        (TlsMode::Off, Some(_), _) => {
            return Err(invalid("server.tls_certificates", "given, but server.tls is \"off\""))
        }
        (TlsMode::Off, _, Some(_)) => return Err(invalid("server.tls_psk", "given, but server.tls is \"off\"")),
        (TlsMode::Off, None, None) => None,
        (_, Some(_), Some(_)) => {
            return Err(invalid("server.tls_psk", "given with server.tls_certificates: a server uses one or the other"))
        }
        (_, None, None) => {
            return Err(invalid(
                "server.tls_certificates",
                "required (or server.tls_psk) when server.tls is \"on\" or \"require\"",
            ))
        }
        (_, Some(dir), None) => Some(TlsCredentials::Certificates { dir, verify_peer: s.tls_verify_peer }),
        (_, None, Some(keys)) => Some(TlsCredentials::Psk(keys)),
    };
    if s.tls_verify_peer && !matches!(tls_credentials, Some(TlsCredentials::Certificates { .. })) {
        let why = match tls_credentials {
            None => "needs server.tls = \"require\"",
            Some(_) => "is for certificates; with server.tls_psk the key verifies the client",
        };
        return Err(invalid("server.tls_verify_peer", why));
    }
    if s.tls_verify_peer && s.tls == TlsMode::On {
        // "on" lets a client skip STARTTLS, and with it the certificate check.
        return Err(invalid(
            "server.tls_verify_peer",
            "needs server.tls = \"require\": with \"on\" (--tls on --tls-verify-peer) a plain-text client \
             is served without a certificate",
        ));
    }
    if matches!(tls_credentials, Some(TlsCredentials::Psk(_))) && s.tls == TlsMode::On {
        // The key is the client's credential, as the certificate is under
        // verify-peer: "on" would let a client skip it the same way.
        return Err(invalid(
            "server.tls_psk",
            "needs server.tls = \"require\": with \"on\" (--tls on --tls-psk) a plain-text client \
             is served without a key",
        ));
    }
    let access = Access::parse(&s.allow, &s.deny, "server.").map_err(ConfigError::Access)?;
    let seconds = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    Ok(ServerSettings {
        listen,
        unix: s.unix,
        metrics: s.metrics,
        admin: s.admin,
        admin_token_file: s.admin_token_file,
        handshake_timeout: seconds(s.handshake_timeout),
        idle_timeout: seconds(s.idle_timeout),
        max_connections: s.max_connections,
        max_request,
        max_client_buffers,
        tls: s.tls,
        tls_credentials,
        access,
    })
}

/// Validates export `i`; `earlier` are the exports before it.
/// With `psk_users`, `tls_identities` names key-file users, not certificate subjects.
fn export_spec(i: usize, e: ExportConfig, earlier: &[ExportSpec], psk_users: bool) -> Result<ExportSpec, ConfigError> {
    let at = |key: &str| format!("export[{i}] ({:?}).{key}", e.name);
    let access = Access::parse(&e.allow, &[], &at(""))
        .and_then(|a| a.with_identities(&e.tls_identities, &at("tls_identities"), psk_users))
        .map_err(ConfigError::Access)?;
    if earlier.iter().any(|o| o.name == e.name) {
        return Err(invalid(at("name"), "duplicate export name"));
    }
    if e.name.len() > hearth_nbd::MAX_STRING {
        return Err(invalid(at("name"), "longer than 4096 bytes"));
    }
    let size = match &e.size {
        None => None,
        Some(s) => {
            let size = s.bytes().map_err(|m| invalid(at("size"), m))?;
            if size == 0 {
                return Err(invalid(at("size"), "must be positive"));
            }
            Some(size)
        }
    };
    let backend = backend_spec(&e, size, &at)?;
    let block_size = block_size(&e.block_size, at("block_size"))?;
    let cache_bytes =
        e.cache_size.as_ref().map_or(Ok(64 << 20), SizeValue::bytes).map_err(|m| invalid(at("cache_size"), m))?;
    let policy: PolicySpec =
        e.policy.as_deref().unwrap_or(default_policy()).parse().map_err(|m| invalid(at("policy"), m))?;
    if policy.is_offline() {
        return Err(invalid(
            at("policy"),
            "opt is an offline bound: it needs every request's next use, which a server cannot know",
        ));
    }
    let placement = placement(e.placement.as_deref(), at("placement"))?;
    let prefetch = match e.prefetch.as_deref().map(str::parse::<PrefetchSpec>).transpose() {
        Ok(spec) => spec.filter(|spec| spec.name() != "none"),
        Err(m) => return Err(invalid(at("prefetch"), m)),
    };
    // As the flag's `requires`: `prefetch = "none"` is accepted (A/B runs
    // keep every other setting), a missing key is not.
    if e.adaptive_partition && e.prefetch.is_none() {
        return Err(invalid(at("adaptive_partition"), "needs prefetch: only prefetched blocks enter the partition"));
    }
    let what_if = match &e.what_if {
        None => Some(crate::advice::default_what_if()),
        Some(list) if list.is_empty() => None,
        Some(list) => {
            let mut specs = Vec::with_capacity(list.len());
            for (j, text) in list.iter().enumerate() {
                let spec: PolicySpec = text.parse().map_err(|m| invalid(at(&format!("what_if[{j}]")), m))?;
                if spec.is_offline() {
                    return Err(invalid(at(&format!("what_if[{j}]")), "an offline bound cannot run on live traffic"));
                }
                specs.push(spec);
            }
            Some(specs)
        }
    };
    let background_reads = e.background_reads.unwrap_or(8);
    if !(1..=256).contains(&background_reads) {
        return Err(invalid(at("background_reads"), "must be 1 to 256"));
    }
    let default_dirty_limit = cache_bytes / 2;
    let write_mode = match e.write_mode {
        WriteModeConfig::Through | WriteModeConfig::Around | WriteModeConfig::Pass if e.dirty_limit.is_some() => {
            return Err(invalid(at("dirty_limit"), "only used with write_mode = \"back\""))
        }
        WriteModeConfig::Through => CacheMode::Through,
        WriteModeConfig::Around => CacheMode::Around,
        WriteModeConfig::Pass => CacheMode::PassThrough,
        WriteModeConfig::Back => {
            let dirty_limit = match &e.dirty_limit {
                Some(v) => v.bytes().map_err(|m| invalid(at("dirty_limit"), m))?,
                None => default_dirty_limit,
            };
            if cache_bytes < u64::from(block_size) {
                return Err(invalid(at("cache_size"), "write_mode \"back\" needs a cache of at least one block"));
            }
            if dirty_limit > cache_bytes {
                return Err(invalid(at("dirty_limit"), "larger than cache_size"));
            }
            CacheMode::Back { dirty_limit }
        }
    };
    // What a switch to write-back while serving uses.
    let write_back_limit = match write_mode {
        CacheMode::Back { dirty_limit } => dirty_limit,
        _ => default_dirty_limit,
    };
    let device_write_back = e.cache_device_write_mode == Some(DeviceWriteMode::Back);
    let dirty_max_age = match (&write_mode, e.dirty_max_age.as_deref()) {
        (CacheMode::Through | CacheMode::Around | CacheMode::PassThrough, Some(_)) if !device_write_back => {
            return Err(invalid(
                at("dirty_max_age"),
                "only used with write_mode = \"back\" or cache_device_write_mode = \"back\"",
            ))
        }
        (_, None) => Some(DEFAULT_DIRTY_MAX_AGE),
        (_, Some(age)) => {
            Some(parse_duration(age).map_err(|m| invalid(at("dirty_max_age"), m))?).filter(|d| !d.is_zero())
        }
    };
    let cache_device = cache_device_spec(&e, dirty_max_age.filter(|_| device_write_back), &at)?;
    if e.max_connections == Some(0) {
        return Err(invalid(at("max_connections"), "must be positive"));
    }
    let sequential_cutoff = match &e.sequential_cutoff {
        None => None,
        Some(v) => Some(v.bytes().map_err(|m| invalid(at("sequential_cutoff"), m))?).filter(|&b| b > 0),
    };
    let latency =
        e.latency.as_deref().map_or(Ok(Duration::ZERO), parse_duration).map_err(|m| invalid(at("latency"), m))?;
    let warmup = match &e.warmup {
        None => None,
        Some(w) => {
            let settings = w.settings(cache_bytes).map_err(|e| invalid(at(&format!("warmup.{}", e.key)), e))?;
            // Two writers on one log, or a log over the data, destroy each other.
            let shared = earlier.iter().position(|o| o.warmup.as_ref().is_some_and(|ow| ow.log == settings.log));
            if let Some(j) = shared {
                return Err(invalid(at("warmup.log"), format!("{} is export[{j}]'s warmup log too", w.log.display())));
            }
            if e.path.as_ref() == Some(&w.log) {
                return Err(invalid(at("warmup.log"), format!("{} is the export's own backend", w.log.display())));
            }
            Some(settings)
        }
    };
    let bandwidth = e.bandwidth.as_ref().map(SizeValue::rate).transpose().map_err(|m| invalid(at("bandwidth"), m))?;
    let upstream_timeout = upstream_timeout(&e, &at)?;
    let tier = e.tier.as_ref().map(|t| tier_spec(t, &at)).transpose()?;
    Ok(ExportSpec {
        ignore_dirty_cache_device: e.ignore_dirty_cache_device,
        name: e.name.clone(),
        description: e.description.clone(),
        read_only: e.read_only,
        backend,
        block_size,
        cache_bytes,
        policy,
        placement,
        prefetch,
        adaptive_partition: e.adaptive_partition,
        what_if,
        background_reads,
        latency,
        bandwidth,
        upstream_timeout,
        tier,
        warmup,
        dirty_max_age,
        sequential_cutoff,
        max_connections: e.max_connections,
        access_log: e.access_log.clone().or_else(|| e.tier.as_ref().and_then(|t| t.access_log.clone())),
        cache_device,
        write_mode,
        write_back_limit,
        access,
        options: e,
    })
}

fn backend_spec(e: &ExportConfig, size: Option<u64>, at: &dyn Fn(&str) -> String) -> Result<BackendSpec, ConfigError> {
    let kind = format!("{:?}", e.backend).to_lowercase();
    if e.backend != BackendKind::Nbd && e.upstream_connections.is_some() {
        return Err(invalid(at("upstream_connections"), "only for backend \"nbd\""));
    }
    if !matches!(e.backend, BackendKind::Nbd | BackendKind::Http) && e.upstream.is_some() {
        return Err(invalid(at("upstream"), "only for backends \"nbd\" and \"http\""));
    }
    let required = |key: &str| invalid(at(key), format!("required for backend \"{kind}\""));
    Ok(match e.backend {
        BackendKind::File => {
            if size.is_some() {
                return Err(invalid(at("size"), "a file backend takes its size from the file"));
            }
            BackendSpec::File { path: e.path.clone().ok_or_else(|| required("path"))?, direct: e.direct }
        }
        BackendKind::Sparse => {
            let path = e.path.clone().ok_or_else(|| required("path"))?;
            BackendSpec::Sparse { path, size: size.ok_or_else(|| required("size"))?, direct: e.direct }
        }
        BackendKind::Memory => {
            let size = size.ok_or_else(|| required("size"))?;
            for (set, key) in [(e.path.is_some(), "path"), (e.direct, "direct")] {
                if set {
                    return Err(invalid(at(key), "not used by backend \"memory\""));
                }
            }
            BackendSpec::Memory { size }
        }
        BackendKind::Nbd => {
            let uri = e.upstream.as_deref().ok_or_else(|| required("upstream"))?;
            let upstream = Upstream::parse(uri).map_err(|m| invalid(at("upstream"), m))?;
            for (set, key) in [(e.path.is_some(), "path"), (size.is_some(), "size"), (e.direct, "direct")] {
                if set {
                    return Err(invalid(at(key), "not used by backend \"nbd\" (the upstream has the size)"));
                }
            }
            let connections = e.upstream_connections.unwrap_or(4);
            if connections == 0 {
                return Err(invalid(at("upstream_connections"), "must be positive"));
            }
            BackendSpec::Nbd { upstream, connections }
        }
        BackendKind::Http => {
            let url = e.upstream.clone().ok_or_else(|| required("upstream"))?;
            crate::backend::http::check_url(&url).map_err(|m| invalid(at("upstream"), m))?;
            for (set, key) in [(e.path.is_some(), "path"), (size.is_some(), "size"), (e.direct, "direct")] {
                if set {
                    return Err(invalid(at(key), "not used by backend \"http\" (the server has the size)"));
                }
            }
            if !e.read_only {
                return Err(invalid(
                    at("read_only"),
                    "backend \"http\" is read-only: set read_only = true (--read-only)",
                ));
            }
            BackendSpec::Http { url }
        }
    })
}

fn upstream_timeout(e: &ExportConfig, at: &dyn Fn(&str) -> String) -> Result<Duration, ConfigError> {
    let Some(text) = &e.upstream_timeout else { return Ok(crate::backend::upstream::DEFAULT_TIMEOUT) };
    if !matches!(e.backend, BackendKind::Nbd | BackendKind::Http) {
        return Err(invalid(at("upstream_timeout"), "only for backends \"nbd\" and \"http\""));
    }
    let timeout = parse_duration(text).map_err(|m| invalid(at("upstream_timeout"), m))?;
    if timeout.is_zero() {
        // No limit would let a stopped upstream hang every client.
        return Err(invalid(at("upstream_timeout"), "must be positive"));
    }
    Ok(timeout)
}

fn cache_device_spec(
    e: &ExportConfig,
    dirty_max_age: Option<Duration>,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<CacheDeviceSpec>, ConfigError> {
    let Some(path) = &e.cache_device else {
        for (set, key) in [
            (e.cache_device_size.is_some(), "cache_device_size"),
            (e.cache_device_write_mode.is_some(), "cache_device_write_mode"),
            (e.cache_device_discard_damaged, "cache_device_discard_damaged"),
        ] {
            if set {
                return Err(invalid(at(key), "needs cache_device"));
            }
        }
        return Ok(None);
    };
    let size = e
        .cache_device_size
        .as_ref()
        .ok_or_else(|| invalid(at("cache_device_size"), "required with cache_device"))?
        .bytes()
        .map_err(|m| invalid(at("cache_device_size"), m))?;
    if e.path.as_ref() == Some(path) {
        return Err(invalid(at("cache_device"), format!("{} is the export's own backend", path.display())));
    }
    if e.backend == BackendKind::Memory {
        // The backend is empty after a restart, so the kept cache would serve data it no longer has.
        return Err(invalid(
            at("cache_device"),
            "a persistent cache of backend \"memory\" (lost at exit) would go stale",
        ));
    }
    Ok(Some(CacheDeviceSpec {
        path: path.clone(),
        size,
        mode: e.cache_device_write_mode.unwrap_or_default(),
        dirty_max_age,
        discard_damaged: e.cache_device_discard_damaged,
    }))
}

fn block_size(v: &Option<SizeValue>, key: String) -> Result<u32, ConfigError> {
    let bs = v.as_ref().map_or(Ok(4096), SizeValue::bytes).map_err(|m| invalid(&key, m))?;
    if !bs.is_power_of_two() || !(512..=1 << 20).contains(&bs) {
        return Err(invalid(key, format!("{bs} is not a power of two between 512 B and 1 MiB")));
    }
    Ok(bs as u32)
}

fn placement(spec: Option<&str>, key: String) -> Result<Placement, ConfigError> {
    match spec.unwrap_or("ac").parse().map_err(|m| invalid(&key, m))? {
        // DEMOTE needs the client to ship evicted data, which NBD has no command for.
        Placement::Demote => Err(invalid(key, "\"demote\" is simulator-only; the server supports \"ac\" and \"ev\"")),
        p => Ok(p),
    }
}

fn tier_spec(t: &TierExportConfig, at: &dyn Fn(&str) -> String) -> Result<TierSpec, ConfigError> {
    Ok(TierSpec {
        fast_path: t.fast_path.clone(),
        fast_size: t.fast_size.bytes().map_err(|m| invalid(at("tier.fast_size"), m))?,
        journal: t.journal.clone().unwrap_or_else(|| PathBuf::from(format!("{}.journal", t.fast_path.display()))),
        plan: t.plan.clone(),
        migrate_bandwidth: t
            .migrate_bandwidth
            .as_ref()
            .map_or(Ok(16 << 20), SizeValue::rate)
            .map_err(|m| invalid(at("tier.migrate_bandwidth"), m))?,
        idle: t
            .idle
            .as_deref()
            .map_or(Ok(Duration::from_millis(10)), parse_duration)
            .map_err(|m| invalid(at("tier.idle"), m))?,
    })
}

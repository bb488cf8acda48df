//! Why the server could not start or stop cleanly. Each variant says what
//! and where; the cause, if any, is its `source` (the CLI prints the chain
//! on one line).

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// An export could not be opened: its backend, fast tier, plan, policy,
    /// prefetcher or warmup log.
    #[error("export[{index}] ({name:?})")]
    Export {
        index: usize,
        name: String,
        #[source]
        source: OpenError,
    },
    /// A listener could not bind: `what` is the key (`server.listen`, ...).
    #[error("{what} {address}")]
    Bind {
        what: &'static str,
        address: String,
        #[source]
        source: io::Error,
    },
    #[error("TLS credentials")]
    Tls(#[source] TlsError),
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A thread the server needs could not be started.
    #[error("starting a thread")]
    Thread(#[source] io::Error),
    /// Shutdown could not write every export's dirty data back.
    #[error("flush failed for export(s) {}", .0.join(", "))]
    Flush(Vec<String>),
}

/// Why the admin endpoint cannot be served as configured.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("server.admin_token_file {}: {message}", path.display())]
    Token { path: PathBuf, message: String },
    /// Admin on an address beyond loopback, with no token to guard it.
    #[error(
        "server.admin on {0} (not loopback) needs server.admin_token_file (--admin-token-file): \
         anyone reaching it could switch cache modes"
    )]
    Unguarded(std::net::SocketAddr),
}

/// Why one export could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Policy(#[from] hearth_policy::SpecError),
    #[error(transparent)]
    Prefetch(#[from] hearth_prefetch::PrefetchError),
    /// A tier plan that cannot be read.
    #[error(transparent)]
    Tier(#[from] hearth_tier::TierError),
    /// The live advice's sampling set-up.
    #[error(transparent)]
    Advice(#[from] hearth_estimate::SettingError),
    /// The cache device cannot be used.
    #[error(transparent)]
    CacheDevice(#[from] CacheDeviceError),
    /// A tier plan that cannot be used with this export.
    #[error("{}: {message}", path.display())]
    Plan { path: PathBuf, message: String },
}

/// A bad `allow`, `deny` or `tls_identities` entry: `entry` names its key
/// and index (`server.allow[2]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{entry}: {problem}")]
pub struct AccessError {
    pub entry: String,
    pub problem: EntryProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    #[error("{0:?} is not an address or a CIDR block such as 10.0.0.0/8")]
    NotANetwork(String),
    #[error("{0:?} is not a distinguished name such as \"CN=alice,O=Example\"")]
    NotAName(String),
    #[error("{0:?} has an empty attribute type or value")]
    EmptyAttribute(String),
    #[error("an empty distinguished name")]
    EmptyName,
}

/// An upstream that cannot be used: not an NBD or HTTP URL as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error("{uri:?}: {why} (expected nbd[s]://host[:port]/export or nbd[s]+unix:///export?socket=PATH)")]
    Nbd { uri: String, why: String },
    #[error("{0:?} is not an http:// or https:// URL")]
    NotHttp(String),
}

/// A certificate or key that cannot be used, with the file it came from.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct TlsError {
    pub path: PathBuf,
    pub message: String,
}

/// A cache device that cannot be opened: `path` is the device file.
#[derive(Debug, thiserror::Error)]
pub enum CacheDeviceError {
    #[error("cache device {}: {what}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    /// Formatted for something else, truncated, or otherwise unusable.
    #[error("cache device {}: {problem}", path.display())]
    Refused { path: PathBuf, problem: String },
}

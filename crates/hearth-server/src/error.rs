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
    #[error("server.tls_certificates")]
    Tls(#[source] TlsError),
    /// A thread the server needs could not be started.
    #[error("starting a thread")]
    Thread(#[source] io::Error),
    /// Shutdown could not write every export's dirty data back.
    #[error("flush failed for export(s) {}", .0.join(", "))]
    Flush(Vec<String>),
}

/// Why one export could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A policy or prefetcher spec its registry refused.
    #[error("{0}")]
    Spec(String),
    /// A tier plan that cannot be used with this export.
    #[error("{}: {message}", path.display())]
    Plan { path: PathBuf, message: String },
}

/// A certificate or key that cannot be used, with the file it came from.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct TlsError {
    pub path: PathBuf,
    pub message: String,
}

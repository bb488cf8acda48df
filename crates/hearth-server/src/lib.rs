//! The Hearth NBD storage server: exports served over TCP and Unix sockets,
//! each a block cache (any policy from `hearth-policy`) in front of
//! a [`backend::Backend`], with Prometheus metrics and a TOML config.
//!
//! The protocol itself lives in `hearth-nbd`; this crate does the I/O.
//!
//! Public: what a program embedding the server needs — [`Config`] and
//! [`Server`], the [`backend`]s (and the [`tier`]ed one) a cache can front,
//! and [`warmup`]'s log. The connection, cache and metrics machinery is
//! internal.

mod access;
mod access_log;
mod admin;
pub mod advice;
pub mod backend;
mod cache;
pub mod cache_device;
pub mod config;
mod error;
mod export;
mod metrics;
mod server;
mod stripes;
pub mod tier;
mod tls;
pub mod warmup;

pub use config::Config;
pub use error::{AdminError, CacheDeviceError, OpenError, ServeError, TlsError};
pub(crate) use export::{Export, ExportParts};
pub use server::Server;
pub use tls::Reloadable as ReloadableTls;

/// A low-priority backend read for the export's background threads.
pub(crate) struct Background {
    pub(crate) kind: BackgroundKind,
    pub(crate) block: u64,
    /// The connection whose request or hint it came from.
    pub(crate) origin: std::sync::Arc<Origin>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackgroundKind {
    /// Data of a block placed when its client evicted it.
    Reload,
    /// A block a prefetcher predicted.
    Prefetch,
    /// A block predicted for the prefetch partition's spare room only
    /// (never displacing a `Prefetch` block; dropped if there is none).
    SparePrefetch,
}

/// A connection's share of the background reads: how many it has queued
/// (bounded per connection) and whether it has closed (its reads are then
/// skipped).
#[derive(Default)]
pub(crate) struct Origin {
    pub(crate) queued: std::sync::atomic::AtomicUsize,
    pub(crate) closed: std::sync::atomic::AtomicBool,
}

//! The Hearth NBD storage server: exports served over TCP and Unix sockets,
//! each a [`cache::BlockCache`] (any policy from `hearth-policy`) in front of
//! a [`backend::Backend`], with Prometheus metrics and a TOML config.
//!
//! The protocol itself lives in `hearth-nbd`; this crate does the I/O.

pub mod backend;
pub mod cache;
pub mod config;
pub mod metrics;
pub mod server;
pub mod tier;

pub use config::Config;
pub use server::Server;

/// One served export: what clients are told, the cache in front of its
/// backend, and its counters.
pub struct Export {
    pub info: hearth_nbd::ExportInfo,
    pub cache: cache::BlockCache,
    pub metrics: metrics::ExportMetrics,
    /// Blocks placed on client eviction whose data a background thread
    /// reads from the backend: one at a time, so demand reads go first.
    pub reloads: std::sync::mpsc::SyncSender<u64>,
    /// Reloads dropped because the queue was full.
    pub reloads_dropped: std::sync::atomic::AtomicU64,
}

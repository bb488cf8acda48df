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

pub use config::Config;
pub use server::Server;

/// One served export: what clients are told, the cache in front of its
/// backend, and its counters.
pub struct Export {
    pub info: hearth_nbd::ExportInfo,
    pub cache: cache::BlockCache,
    pub metrics: metrics::ExportMetrics,
}

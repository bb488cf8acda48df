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
mod metrics;
mod server;
mod stripes;
pub mod tier;
mod tls;
pub mod warmup;

pub use config::Config;
pub use error::{AdminError, CacheDeviceError, OpenError, ServeError, TlsError};
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

/// One served export: what clients are told, the cache in front of its
/// backend, and its counters.
pub(crate) struct Export {
    pub(crate) info: hearth_nbd::ExportInfo,
    pub(crate) cache: cache::BlockCache,
    /// The dirty limit a switch to write-back uses (`ExportSpec::write_back_limit`).
    pub(crate) write_back_limit: u64,
    pub(crate) metrics: metrics::ExportMetrics,
    /// Background reads (eviction reloads, prefetches) for one thread that
    /// issues them one at a time, so demand reads go first.
    pub(crate) background: std::sync::mpsc::SyncSender<Background>,
    /// Eviction reloads dropped: the queue was full or their connection closed.
    pub(crate) reloads_dropped: std::sync::atomic::AtomicU64,
    /// The prefetcher, when the export has one (`prefetch = "quickmine"`).
    pub(crate) prefetcher: Option<std::sync::Mutex<Box<dyn hearth_prefetch::Prefetcher>>>,
    pub(crate) prefetch_stats: metrics::PrefetchCounters,
    /// The warmup monitor logging this export's cache (`[export.warmup]`).
    pub(crate) warmup: Option<std::sync::Arc<warmup::Monitor>>,
    /// NBD_CMD_CACHE requests running at once on this export, whichever
    /// connections sent them (as many as `background_reads`).
    pub(crate) cache_lanes: std::sync::Arc<tokio::sync::Semaphore>,
    /// Reads of long sequential streams bypass the cache (`sequential_cutoff`).
    pub(crate) sequential: Option<std::sync::Mutex<server::SequentialCutoff>>,
    /// One permit per connection the export takes (`max_connections`), if limited.
    pub(crate) connection_slots: Option<std::sync::Arc<tokio::sync::Semaphore>>,
    /// Every client READ and WRITE, hits included (`access_log`).
    pub(crate) access_log: Option<std::sync::Arc<access_log::AccessLog>>,
    /// Live advice: the LRU miss-ratio curve and what-if policies (`what_if`).
    pub(crate) advisor: Option<advice::Advisor>,
    /// The persistent second cache level under `cache` (`cache_device`).
    pub(crate) cache_device: Option<std::sync::Arc<cache_device::CacheDevice>>,
    /// A remote backend's (NBD, HTTP) health and counters.
    pub(crate) upstream: Option<std::sync::Arc<backend::upstream::UpstreamStats>>,
}

impl Export {
    /// At shutdown: writes the cache device's dirty blocks to the backend and
    /// syncs the device, so it holds no data the backend lacks.
    pub(crate) fn clean_cache_device(&self) -> std::io::Result<()> {
        let Some(device) = &self.cache_device else { return Ok(()) };
        let cleaned = device.clean(std::time::Duration::ZERO)?;
        if cleaned > 0 {
            tracing::info!(export = %self.info.name, blocks = cleaned, "cache device cleaned");
        }
        backend::Backend::flush(&**device)
    }
}

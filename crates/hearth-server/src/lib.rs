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
pub mod warmup;

pub use config::Config;
pub use server::Server;

/// A low-priority backend read the export's background thread performs.
#[derive(Clone, Copy, Debug)]
pub enum Background {
    /// Data of a block placed when its client evicted it.
    Reload(u64),
    /// A block a prefetcher predicted.
    Prefetch(u64),
}

/// One served export: what clients are told, the cache in front of its
/// backend, and its counters.
pub struct Export {
    pub info: hearth_nbd::ExportInfo,
    pub cache: cache::BlockCache,
    pub metrics: metrics::ExportMetrics,
    /// Background reads (eviction reloads, prefetches) for one thread that
    /// issues them one at a time, so demand reads go first.
    pub background: std::sync::mpsc::SyncSender<Background>,
    /// Background reads dropped because the queue was full.
    pub reloads_dropped: std::sync::atomic::AtomicU64,
    /// The prefetcher, when the export has one (`prefetch = "quickmine"`).
    pub prefetcher: Option<std::sync::Mutex<Box<dyn hearth_prefetch::Prefetcher>>>,
    pub prefetch_stats: metrics::PrefetchCounters,
    /// The warmup monitor logging this export's cache (`[export.warmup]`).
    pub warmup: Option<std::sync::Arc<warmup::Monitor>>,
    /// NBD_CMD_CACHE requests running at once on this export, whichever
    /// connections sent them (as many as `background_reads`).
    pub cache_lanes: std::sync::Arc<tokio::sync::Semaphore>,
}

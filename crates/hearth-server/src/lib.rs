//! The Hearth NBD storage server: exports served over TCP and Unix sockets,
//! each a [`cache::BlockCache`] (any policy from `hearth-policy`) in front of
//! a [`backend::Backend`], with Prometheus metrics and a TOML config.
//!
//! The protocol itself lives in `hearth-nbd`; this crate does the I/O.

pub mod access;
pub mod backend;
pub mod cache;
pub mod config;
pub mod metrics;
pub mod server;
pub mod tier;
pub mod tls;
pub mod warmup;

pub use config::Config;
pub use server::Server;

/// A low-priority backend read for the export's background threads.
pub struct Background {
    pub kind: BackgroundKind,
    pub block: u64,
    /// The connection whose request or hint it came from.
    pub origin: std::sync::Arc<Origin>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackgroundKind {
    /// Data of a block placed when its client evicted it.
    Reload,
    /// A block a prefetcher predicted.
    Prefetch,
}

/// A connection's share of the background reads: how many it has queued
/// (bounded per connection) and whether it has closed (its reads are then
/// skipped).
#[derive(Default)]
pub struct Origin {
    pub queued: std::sync::atomic::AtomicUsize,
    pub closed: std::sync::atomic::AtomicBool,
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
    /// Eviction reloads dropped: the queue was full or their connection closed.
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

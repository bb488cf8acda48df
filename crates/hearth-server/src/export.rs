//! One served export: what clients are told, the cache in front of its
//! backend, and what watches it (counters, logs, advice, the prefetcher).
//! Its parts are private: the server reads, writes and observes through the
//! methods here.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hearth_core::Op;
use hearth_nbd::ExportInfo;
use hearth_prefetch::Prefetcher;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::access_log::AccessLog;
use crate::advice::Advisor;
use crate::backend::upstream::UpstreamStats;
use crate::cache::{BlockCache, CacheMode};
use crate::cache_device::CacheDevice;
use crate::metrics::{ExportMetrics, PrefetchCounters};
use crate::server::SequentialCutoff;
use crate::warmup::Monitor;
use crate::Background;

pub(crate) struct Export {
    info: ExportInfo,
    cache: BlockCache,
    /// The dirty limit a switch to write-back uses (`ExportSpec::write_back_limit`).
    write_back_limit: u64,
    metrics: ExportMetrics,
    /// Background reads (eviction reloads, prefetches) for the threads that
    /// issue them, so demand reads go first.
    background: std::sync::mpsc::SyncSender<Background>,
    /// Client evictions not acted on past the placement's own skips: the
    /// reload queue was full, the connection closed, or the connection had
    /// not earned the placement (see `ClientView::evicted_notice`).
    evictions_skipped: AtomicU64,
    prefetcher: Option<Mutex<Box<dyn Prefetcher>>>,
    prefetch_stats: PrefetchCounters,
    warmup: Option<Arc<Monitor>>,
    /// NBD_CMD_CACHE requests running at once on this export, whichever
    /// connections sent them (as many as `background_reads`).
    cache_lanes: Arc<Semaphore>,
    sequential: Option<Mutex<SequentialCutoff>>,
    /// One permit per connection the export takes (`max_connections`), if limited.
    connection_slots: Option<Arc<Semaphore>>,
    access_log: Option<Arc<AccessLog>>,
    advisor: Option<Advisor>,
    cache_device: Option<Arc<CacheDevice>>,
    upstream: Option<Arc<UpstreamStats>>,
}

/// What an export is made of, as the server opens it from its settings.
pub(crate) struct ExportParts {
    pub(crate) info: ExportInfo,
    pub(crate) cache: BlockCache,
    pub(crate) write_back_limit: u64,
    /// The prefetcher, when the export has one (`prefetch = "quickmine"`).
    pub(crate) prefetcher: Option<Box<dyn Prefetcher>>,
    /// The warmup monitor logging this export's cache (`[export.warmup]`).
    pub(crate) warmup: Option<Arc<Monitor>>,
    /// NBD_CMD_CACHE requests running at once (`background_reads`).
    pub(crate) cache_lanes: usize,
    /// Reads of long sequential streams bypass the cache (`sequential_cutoff`).
    pub(crate) sequential_cutoff: Option<u64>,
    /// Connections this export takes at once (`max_connections`).
    pub(crate) max_connections: Option<usize>,
    /// Every client READ and WRITE, hits included (`access_log`).
    pub(crate) access_log: Option<Arc<AccessLog>>,
    /// Live advice: the LRU miss-ratio curve and what-if policies (`what_if`).
    pub(crate) advisor: Option<Advisor>,
    /// The persistent second cache level under `cache` (`cache_device`).
    pub(crate) cache_device: Option<Arc<CacheDevice>>,
    /// A remote backend's (NBD, HTTP) health and counters.
    pub(crate) upstream: Option<Arc<UpstreamStats>>,
}

impl Export {
    /// The export, sending its background reads to `background`.
    pub(crate) fn new(parts: ExportParts, background: std::sync::mpsc::SyncSender<Background>) -> Export {
        Export {
            info: parts.info,
            cache: parts.cache,
            write_back_limit: parts.write_back_limit,
            metrics: Default::default(),
            background,
            evictions_skipped: Default::default(),
            prefetcher: parts.prefetcher.map(Mutex::new),
            prefetch_stats: Default::default(),
            warmup: parts.warmup,
            cache_lanes: Arc::new(Semaphore::new(parts.cache_lanes)),
            sequential: parts.sequential_cutoff.map(|c| Mutex::new(SequentialCutoff::new(c))),
            connection_slots: parts.max_connections.map(|n| Arc::new(Semaphore::new(n))),
            access_log: parts.access_log,
            advisor: parts.advisor,
            cache_device: parts.cache_device,
            upstream: parts.upstream,
        }
    }

    pub(crate) fn info(&self) -> &ExportInfo {
        &self.info
    }

    pub(crate) fn name(&self) -> &str {
        &self.info.name
    }

    pub(crate) fn cache(&self) -> &BlockCache {
        &self.cache
    }

    pub(crate) fn metrics(&self) -> &ExportMetrics {
        &self.metrics
    }

    /// The write-back mode an operator's switch (`POST /mode`) selects.
    pub(crate) fn write_back_mode(&self) -> CacheMode {
        CacheMode::Back { dirty_limit: self.write_back_limit }
    }

    /// Takes a connection slot if the export limits its connections
    /// (`Ok(None)` if not); `Err` if every slot is taken.
    pub(crate) fn take_connection_slot(&self) -> Result<Option<OwnedSemaphorePermit>, ()> {
        match &self.connection_slots {
            Some(slots) => slots.clone().try_acquire_owned().map(Some).map_err(|_| ()),
            None => Ok(None),
        }
    }

    /// Waits for one of the export's NBD_CMD_CACHE lanes.
    pub(crate) async fn cache_lane(&self) -> OwnedSemaphorePermit {
        self.cache_lanes.clone().acquire_owned().await.expect("never closed")
    }

    /// Adds a client READ or WRITE to the access log, if the export keeps one.
    pub(crate) fn record_access(&self, op: Op, offset: u64, length: u32) {
        if let Some(log) = &self.access_log {
            log.record(op, offset, length);
        }
    }

    /// Whether a client read of `len` bytes at `offset` bypasses the cache:
    /// it continues a long sequential stream (every read counts towards its
    /// stream, cached or not), or the cache passes everything through.
    pub(crate) fn read_bypasses(&self, offset: u64, len: u64) -> bool {
        let streaming =
            self.sequential.as_ref().is_some_and(|s| s.lock().unwrap_or_else(|e| e.into_inner()).bypass(offset, len));
        streaming || self.cache.mode() == CacheMode::PassThrough
    }

    /// Shows a demand read of `blocks` to the live advice, if it is on.
    pub(crate) fn advise_read(&self, blocks: Range<u64>) {
        if let Some(advisor) = &self.advisor {
            advisor.observe_read(blocks);
        }
    }

    /// A FLUSH reached the export: its logs are synced too (the warmup log
    /// best effort: its failure does not fail the FLUSH).
    pub(crate) fn flush_logs(&self) {
        if let Some(log) = &self.access_log {
            log.flush();
        }
        if let Some(w) = &self.warmup {
            w.sync();
        }
    }

    /// The prefetcher, locked, if the export has one.
    pub(crate) fn prefetcher(&self) -> Option<MutexGuard<'_, Box<dyn Prefetcher>>> {
        self.prefetcher.as_ref().map(|p| p.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub(crate) fn prefetch_stats(&self) -> &PrefetchCounters {
        &self.prefetch_stats
    }

    /// Queues a background read; false if the queue is full.
    pub(crate) fn send_background(&self, job: Background) -> bool {
        self.background.try_send(job).is_ok()
    }

    pub(crate) fn count_eviction_skipped(&self) {
        self.evictions_skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn evictions_skipped(&self) -> u64 {
        self.evictions_skipped.load(Ordering::Relaxed)
    }

    pub(crate) fn warmup(&self) -> Option<&Arc<Monitor>> {
        self.warmup.as_ref()
    }

    pub(crate) fn access_log(&self) -> Option<&Arc<AccessLog>> {
        self.access_log.as_ref()
    }

    pub(crate) fn advisor(&self) -> Option<&Advisor> {
        self.advisor.as_ref()
    }

    pub(crate) fn cache_device(&self) -> Option<&Arc<CacheDevice>> {
        self.cache_device.as_ref()
    }

    pub(crate) fn upstream(&self) -> Option<&Arc<UpstreamStats>> {
        self.upstream.as_ref()
    }

    /// At shutdown: writes the cache device's dirty blocks to the backend and
    /// syncs the device, so it holds no data the backend lacks.
    pub(crate) fn clean_cache_device(&self) -> std::io::Result<()> {
        let Some(device) = &self.cache_device else { return Ok(()) };
        let cleaned = device.clean(std::time::Duration::ZERO)?;
        if cleaned > 0 {
            tracing::info!(export = %self.info.name, blocks = cleaned, "cache device cleaned");
        }
        crate::backend::Backend::flush(&**device)
    }
}

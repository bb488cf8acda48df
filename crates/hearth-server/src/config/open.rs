//! Opening what a validated export describes: its backend (with any
//! slow-device simulation, fast tier and cache device in front), its policy
//! and its cache.

use std::sync::Arc;

use super::{BackendSpec, ExportSpec, TierSpec};
use crate::backend::http::HttpBackend;
use crate::backend::nbd::NbdBackend;
use crate::backend::upstream::UpstreamStats;
use crate::backend::{Backend, FileBackend, MemoryBackend, SlowBackend};
use crate::cache::BlockCache;
use crate::cache_device::{CacheDevice, DeviceOptions};
use crate::error::OpenError;
use crate::tier::{Migrator, TierBackend};

/// An opened export: its cache, its cache device, a remote backend's upstream counters.
pub(crate) type Opened = (BlockCache, Option<Arc<CacheDevice>>, Option<Arc<UpstreamStats>>);

impl ExportSpec {
    /// Opens the backend and builds the cache in front of it; the cache
    /// device, if any, is also returned (for its counters and shutdown), and
    /// a remote backend's upstream counters.
    pub(crate) fn open(&self) -> Result<Opened, OpenError> {
        let mut upstream: Option<Arc<UpstreamStats>> = None;
        let mut backend: Box<dyn Backend> = match &self.backend {
            BackendSpec::File { path, direct } => Box::new(FileBackend::open(path, self.read_only, *direct)?),
            BackendSpec::Sparse { path, size, direct } => Box::new(FileBackend::sparse(path, *size, *direct)?),
            BackendSpec::Memory { size } => Box::new(MemoryBackend::new(*size)),
            BackendSpec::Nbd { upstream: uri, connections } => {
                let stats = upstream.insert(Arc::default()).clone();
                Box::new(NbdBackend::connect(uri.clone(), *connections, self.upstream_timeout, stats)?)
            }
            BackendSpec::Http { url } => {
                let stats = upstream.insert(Arc::default()).clone();
                Box::new(HttpBackend::open(url, self.upstream_timeout, stats)?)
            }
        };
        if !self.latency.is_zero() || self.bandwidth.is_some() {
            backend = Box::new(SlowBackend::new(backend, self.latency, self.bandwidth));
        }
        if let Some(tier) = &self.tier {
            backend = tier.open(backend, u64::from(self.block_size))?;
        }
        let mut device = None;
        if let (None, Some(file)) = (&self.cache_device, self.backend_file()) {
            crate::cache_device::marker::open_without_device(file, self.ignore_dirty_cache_device)
                .map_err(|problem| OpenError::Io(std::io::Error::other(problem)))?;
        }
        if let Some(spec) = &self.cache_device {
            let identity = self.identity();
            let options = DeviceOptions {
                size: spec.size,
                block_size: self.block_size,
                identity: &identity,
                policy: self.policy.clone(),
                mode: spec.mode,
                discard_damaged: spec.discard_damaged,
                backend_file: self.backend_file(),
            };
            let opened = CacheDevice::open(backend, &spec.path, &options)?;
            let opened = Arc::new(opened);
            if let Some(max_age) = spec.dirty_max_age {
                CacheDevice::spawn_cleaner(&opened, max_age)?;
            }
            backend = Box::new(opened.clone());
            device = Some(opened);
        }
        let policy = self.policy.build(self.cache_bytes);
        let mut cache = BlockCache::with_placement(backend, policy, self.block_size, self.write_mode, self.placement);
        if self.adaptive_partition {
            cache = cache.with_adaptive_partition();
        }
        Ok((cache, device, upstream))
    }

    /// What a cache device records as the export it caches: the export's
    /// name and where its data lives. A file is named by its canonical path
    /// and its device and inode numbers (called after the backend opened
    /// it), so another file under the same name, or the same name reached
    /// from another directory, is another identity.
    fn identity(&self) -> String {
        let location = match &self.backend {
            BackendSpec::File { path, .. } | BackendSpec::Sparse { path, .. } => file_identity(path),
            BackendSpec::Memory { .. } => "memory".into(),
            BackendSpec::Nbd { upstream, .. } => format!("nbd {upstream}"),
            BackendSpec::Http { url } => format!("http {url}"),
        };
        format!("export {} on {location}", self.name)
    }

    /// The export's prefetcher, if any. Offline miners (C-Miner*) have no
    /// training trace in the server and start empty.
    pub(crate) fn prefetcher(&self) -> Result<Option<Box<dyn hearth_prefetch::Prefetcher>>, OpenError> {
        let Some(spec) = &self.prefetch else { return Ok(None) };
        let mut prefetcher = spec.build(self.block_size, &[])?;
        prefetcher.shape_cache(&hearth_prefetch::CacheShape {
            policy: self.policy.clone(),
            total_bytes: self.cache_bytes,
            prefetch_fraction: crate::cache::PREFETCH_SHARE_PERCENT as f64 / 100.0,
            block_size: self.block_size,
        })?;
        Ok(Some(prefetcher))
    }

    /// The backend file the warmup log must match, `None` for one in memory
    /// or behind another server.
    pub(crate) fn backend_file(&self) -> Option<&std::path::Path> {
        match &self.backend {
            BackendSpec::File { path, .. } | BackendSpec::Sparse { path, .. } => Some(path),
            BackendSpec::Memory { .. } | BackendSpec::Nbd { .. } | BackendSpec::Http { .. } => None,
        }
    }
}

/// `file CANONICAL (dev D ino I)`, or the path as given if it cannot be resolved.
fn file_identity(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::canonicalize(path), std::fs::metadata(path)) {
        (Ok(canonical), Ok(meta)) => format!("file {} (dev {} ino {})", canonical.display(), meta.dev(), meta.ino()),
        _ => format!("file {}", path.display()),
    }
}

impl TierSpec {
    /// Wraps `slow` into the two-tier backend and starts migrating the plan.
    fn open(&self, slow: Box<dyn Backend>, block_size: u64) -> Result<Box<dyn Backend>, OpenError> {
        let blocks_in_export = slow.size().div_ceil(block_size);
        let fast = Box::new(FileBackend::sparse(&self.fast_path, self.fast_size, false)?);
        let tier = Arc::new(TierBackend::open(fast, slow, block_size, &self.journal)?);
        if let Some(path) = &self.plan {
            let plan_error = |message| OpenError::Plan { path: path.clone(), message };
            let plan = hearth_tier::plan::Plan::load(path)?;
            if u64::from(plan.block_size) != block_size {
                return Err(plan_error(format!(
                    "plan block size {} differs from the export's {block_size}",
                    plan.block_size
                )));
            }
            let (blocks, beyond): (Vec<u64>, Vec<u64>) = plan.blocks().partition(|&b| b < blocks_in_export);
            if !beyond.is_empty() {
                tracing::warn!(
                    plan = %path.display(),
                    skipped = beyond.len(),
                    of = beyond.len() + blocks.len(),
                    export_blocks = blocks_in_export,
                    "plan blocks beyond the export's end are skipped (was the plan learned from another device?)"
                );
            }
            // Detached: it runs until the plan is migrated; a crash midway is safe.
            drop(Migrator::spawn(tier.clone(), blocks, self.migrate_bandwidth, self.idle));
        }
        Ok(Box::new(tier))
    }
}

//! Cache warmup (Bonfire) in the server: a monitor that logs every change of
//! a cache's contents to a logging volume, and the pre-load that fills a new
//! or restarted cache from that log.
//!
//! The log format, its recovery and the pre-load plan are `hearth_warmup`'s
//! sans-I/O core ([`LogWriter`], [`Recovery`], [`plan_preload`]); this module
//! only does their I/O:
//!
//! 1. [`WarmupLog::open`] reads the volume's header and every slot into a
//!    [`Recovery`]. A missing, corrupt or incompatible log is not an error:
//!    the export starts with on-demand warmup and a warning, and a new log.
//! 2. [`WarmupLog::preload`] executes a [`Plan`] (newest unique blocks up to
//!    the budget, newest first): blocks whose logged data the log vouches for
//!    come from the volume, the others from the backend, so the cache never
//!    receives stale data. It runs before [`WarmupLog::start`], which is
//!    what overwrites the oldest slot.
//! 3. [`WarmupLog::start`] makes the resumed log's Open record (or a new
//!    header) durable — before the export serves, as the format requires —
//!    and returns the [`Monitor`]: the cache reports read fills and client
//!    writes to it ([`ContentLog`]) under its lock, the records collect in the
//!    staging buffer, and full buffers go to a background thread that writes
//!    them sequentially. NBD FLUSH makes the log durable; only a clean
//!    shutdown seals it. (A seal at FLUSH would vouch for records that a
//!    later crash could still lose from the staging buffer.)
//!
//! A crash loses the staging buffer; the log on the volume is then what is
//! left, and its unsealed tail makes recovery distrust logged data.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hearth_warmup::log::{Layout, LogWriter, Recovered, Recovery, Write, HEADER_LEN};
use hearth_warmup::plan::{plan_preload, Plan, Source};
use rustc_hash::FxHashMap;
use serde::Deserialize;
use tracing::{error, info, warn};

use crate::cache::{BlockCache, ContentLog};
use crate::config::SizeValue;

/// Metadata logs record LBAs; data logs also each block's contents (a
/// performance snapshot the pre-load reads sequentially).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WarmupMode {
    #[default]
    Metadata,
    Data,
}

/// `[export.warmup]` in `hearth.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmupConfig {
    /// The logging volume: a file (created sparse with `log_size` if missing
    /// or empty) or a block device.
    pub log: PathBuf,
    #[serde(default)]
    pub mode: WarmupMode,
    /// Most bytes to pre-load; default (and at most) the cache size.
    pub budget: Option<SizeValue>,
    /// Staging buffer; default 256 KiB (metadata) or 128 MiB (data).
    pub staging: Option<SizeValue>,
    /// Size of a log file this server creates; default 16 MiB (metadata: 512 Ki
    /// records; recovery holds ~24 bytes per slot) or 1 GiB (data).
    pub log_size: Option<SizeValue>,
    /// Pre-load the cache from the log at start.
    #[serde(default)]
    pub preload: bool,
}

/// A [`WarmupConfig`] with defaults applied and sizes parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmupSettings {
    pub log: PathBuf,
    pub mode: WarmupMode,
    pub budget: u64,
    pub staging: usize,
    pub log_size: u64,
    pub preload: bool,
}

impl WarmupConfig {
    /// Applies defaults for a cache of `cache_bytes`; an error names the key.
    pub fn settings(&self, cache_bytes: u64) -> Result<WarmupSettings, (&'static str, String)> {
        let data = self.mode == WarmupMode::Data;
        let size = |key: &'static str, v: &Option<SizeValue>, default: u64| {
            v.as_ref().map_or(Ok(default), SizeValue::bytes).map_err(|m| (key, m))
        };
        let staging = size("staging", &self.staging, if data { 128 << 20 } else { 256 << 10 })?;
        let log_size = size("log_size", &self.log_size, if data { 1 << 30 } else { 16 << 20 })?;
        if log_size <= HEADER_LEN {
            return Err(("log_size", format!("{log_size} bytes leave no room after the {HEADER_LEN}-byte header")));
        }
        Ok(WarmupSettings {
            log: self.log.clone(),
            mode: self.mode,
            budget: size("budget", &self.budget, cache_bytes)?.min(cache_bytes),
            staging: usize::try_from(staging).map_err(|_| ("staging", format!("{staging} bytes is too large")))?,
            log_size,
            preload: self.preload,
        })
    }
}

/// What a pre-load did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PreloadStats {
    /// Blocks the plan named.
    pub planned: u64,
    /// Blocks now resident because of the pre-load.
    pub blocks: u64,
    pub bytes: u64,
    /// Of `blocks`, those whose data came from the log rather than the backend.
    pub from_log: u64,
    pub seconds: f64,
}

/// A logging volume after recovery, before the monitor starts writing.
pub struct WarmupLog {
    settings: WarmupSettings,
    block_size: u32,
    file: File,
    volume_bytes: u64,
    /// `None`: no usable log on the volume (missing, corrupt, incompatible).
    recovered: Option<Recovered>,
    /// Why the export starts with on-demand warmup, if it does.
    pub warning: Option<String>,
}

/// Slots read per call during recovery (whole slots, about 1 MiB).
const RECOVERY_CHUNK: u64 = 1 << 20;
/// Plan items a pre-load reads and inserts at a time; backend reads within
/// one batch are sorted and merged into runs.
const PRELOAD_BATCH: usize = 4096;

impl WarmupLog {
    /// Opens (or creates) the logging volume and recovers its log for a cache
    /// of `block_size`-byte blocks. Fails only if the volume cannot be
    /// opened or read at all.
    pub fn open(settings: &WarmupSettings, block_size: u32) -> io::Result<WarmupLog> {
        let path = &settings.log;
        let named = |e: io::Error| io::Error::new(e.kind(), format!("warmup log {}: {e}", path.display()));
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(named)?;
        // Block devices report length 0 in metadata; their end is their size.
        let mut volume_bytes = file.seek(SeekFrom::End(0)).map_err(named)?;
        if volume_bytes == 0 && file.metadata().map_err(named)?.is_file() {
            file.set_len(settings.log_size).map_err(named)?;
            volume_bytes = settings.log_size;
        }
        let mut log =
            WarmupLog { settings: settings.clone(), block_size, file, volume_bytes, recovered: None, warning: None };
        let mut header = vec![0u8; HEADER_LEN as usize];
        let read = log.file.read_exact_at(&mut header, 0);
        let on_demand = "starting with on-demand warmup and a new log";
        if read.is_err() || header.iter().all(|&b| b == 0) {
            log.warning = Some(format!("no warmup log in {} yet: {on_demand}", path.display()));
            return Ok(log);
        }
        let layout = match Layout::decode_header(&header) {
            Ok(l) => l,
            Err(e) => {
                log.warning = Some(format!("{} is corrupt ({e}): {on_demand}", path.display()));
                return Ok(log);
            }
        };
        let with_data = settings.mode == WarmupMode::Data;
        if layout.block_size != block_size || layout.with_data != with_data {
            log.warning = Some(format!(
                "{} holds a log of {}-byte blocks {} data, this export needs {block_size}-byte blocks {} data: {on_demand}",
                path.display(),
                layout.block_size,
                if layout.with_data { "with" } else { "without" },
                if with_data { "with" } else { "without" },
            ));
            return Ok(log);
        }
        if layout.volume_bytes() > volume_bytes {
            log.warning = Some(format!(
                "{} ends at byte {volume_bytes} but its log needs {} bytes (truncated?): {on_demand}",
                path.display(),
                layout.volume_bytes()
            ));
            return Ok(log);
        }
        let mut recovery = Recovery::new(layout);
        let per_chunk = (RECOVERY_CHUNK / u64::from(layout.slot_size)).max(1);
        let mut buf = Vec::new();
        let mut first = 0;
        while first < layout.slot_count {
            let n = per_chunk.min(layout.slot_count - first);
            buf.resize((n * u64::from(layout.slot_size)) as usize, 0);
            log.file.read_exact_at(&mut buf, layout.slot_offset(first)).map_err(named)?;
            for (i, slot) in buf.chunks(layout.slot_size as usize).enumerate() {
                recovery.feed(first + i as u64, slot);
            }
            first += n;
        }
        log.recovered = Some(recovery.finish());
        Ok(log)
    }

    pub fn recovered(&self) -> Option<&Recovered> {
        self.recovered.as_ref()
    }

    /// Logged data vouches only for writes that went through a monitor of
    /// this log. Distrusts it (blocks then come from the backend) when the
    /// backend does not keep its contents across restarts (`backend` is
    /// `None`, a memory backend) or when the backend file was modified after
    /// the log was last written (served without the log, or changed by other
    /// tools). Block devices' modification times say nothing and are trusted.
    pub fn check_backend(&mut self, backend: Option<&Path>) -> io::Result<()> {
        let Some(rec) = self.recovered.as_mut() else {
            return Ok(());
        };
        if !rec.blocks.iter().any(|b| b.data_trusted) {
            return Ok(());
        }
        let why = match backend {
            None => "the backend does not keep data across restarts".to_string(),
            Some(path) => {
                let backend = std::fs::metadata(path)?;
                let log_written = self.file.metadata()?.modified()?;
                if !backend.is_file() || backend.modified()? <= log_written {
                    return Ok(());
                }
                format!("{} was modified after the warmup log was last written", path.display())
            }
        };
        for b in &mut rec.blocks {
            b.data_trusted = false;
        }
        self.warning = Some(format!("{why}: logged data may be stale, so every block is pre-loaded from the backend"));
        Ok(())
    }

    /// The pre-load plan within the budget, or `None` without a usable log.
    pub fn plan(&self) -> Option<Plan> {
        let budget_blocks = self.settings.budget / u64::from(self.block_size);
        self.recovered.as_ref().map(|r| plan_preload(r, budget_blocks))
    }

    /// Executes `plan` against `cache` (before the export serves); `progress`
    /// is told how many plan items each step finished.
    pub fn preload(&self, cache: &BlockCache, plan: &Plan, progress: &dyn Fn(u64)) -> io::Result<PreloadStats> {
        let started = Instant::now();
        let bs = cache.block_size();
        let blocks_in_export = cache.size().div_ceil(bs);
        let mut stats = PreloadStats { planned: plan.items.len() as u64, ..Default::default() };
        let mut block = vec![0u8; bs as usize];
        for batch in plan.items.chunks(PRELOAD_BATCH) {
            let from_backend = self.read_backend_runs(cache, batch, blocks_in_export)?;
            // Insert newest first, as planned.
            for item in batch.iter().filter(|i| i.lba < blocks_in_export) {
                let (data, from_log) = match item.source {
                    Source::Log { offset, len } => {
                        self.file.read_exact_at(&mut block[..len as usize], offset)?;
                        (&block[..len as usize], true)
                    }
                    Source::Backend => (&from_backend[&item.lba][..], false),
                };
                let len = (cache.size() - item.lba * bs).min(bs);
                if cache.preload(item.lba, &data[..len as usize]) {
                    stats.blocks += 1;
                    stats.bytes += len;
                    stats.from_log += u64::from(from_log);
                }
            }
            progress(batch.len() as u64);
        }
        // Loaded newest first, the newest blocks look least recently used;
        // touching them oldest first makes the newest the most recent.
        for item in plan.items.iter().rev() {
            cache.touch(item.lba);
        }
        stats.seconds = started.elapsed().as_secs_f64();
        Ok(stats)
    }

    /// Reads the batch's backend-sourced blocks in runs of neighbours.
    fn read_backend_runs(
        &self,
        cache: &BlockCache,
        batch: &[hearth_warmup::plan::PreloadItem],
        blocks_in_export: u64,
    ) -> io::Result<FxHashMap<u64, Vec<u8>>> {
        let bs = cache.block_size();
        let mut lbas: Vec<u64> =
            batch.iter().filter(|i| i.source == Source::Backend && i.lba < blocks_in_export).map(|i| i.lba).collect();
        lbas.sort_unstable();
        let mut out = FxHashMap::default();
        let mut rest = &lbas[..];
        while let Some(&first) = rest.first() {
            let run = 1 + rest.windows(2).take_while(|w| w[1] == w[0] + 1).count();
            let start = first * bs;
            let end = ((first + run as u64) * bs).min(cache.size());
            let mut buf = vec![0u8; (end - start) as usize];
            cache.read_backend(start, &mut buf)?;
            for (i, data) in buf.chunks(bs as usize).enumerate() {
                out.insert(first + i as u64, data.to_vec());
            }
            rest = &rest[run..];
        }
        Ok(out)
    }

    /// Makes the log ready for new records — a resumed log's Open record, or
    /// a new log's header — durable, then starts the monitor. Call after
    /// any pre-load from the log and before serving.
    pub fn start(self, preloaded: PreloadStats) -> io::Result<Arc<Monitor>> {
        let path = self.settings.log.clone();
        let named = |e: io::Error| io::Error::new(e.kind(), format!("warmup log {}: {e}", path.display()));
        let (writer, first_writes) = match &self.recovered {
            Some(r) => LogWriter::resume(r, self.settings.staging),
            None => {
                let with_data = self.settings.mode == WarmupMode::Data;
                let layout = Layout::for_volume(self.volume_bytes, self.block_size, with_data, new_log_id())
                    .map_err(|e| named(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
                let header = Write { offset: 0, bytes: layout.encode_header() };
                (LogWriter::create(layout, self.settings.staging), vec![header])
            }
        };
        for w in &first_writes {
            self.file.write_all_at(&w.bytes, w.offset).map_err(named)?;
        }
        self.file.sync_data().map_err(named)?;
        let stats = Arc::new(MonitorStats::default());
        stats.log_bytes.fetch_add(first_writes.iter().map(|w| w.bytes.len() as u64).sum(), Ordering::Relaxed);
        // Two batches in flight at most: the thread writing one, one queued.
        let (jobs, queue) = mpsc::sync_channel(1);
        let thread_stats = stats.clone();
        let file = self.file;
        std::thread::Builder::new()
            .name("hearth-warmup-log".into())
            .spawn(move || write_jobs(file, queue, &thread_stats))?;
        let layout = *writer.layout();
        info!(log = %path.display(), slots = layout.slot_count, data = layout.with_data, "warmup monitor started");
        Ok(Arc::new(Monitor {
            writer: Mutex::new(Some(writer)),
            jobs,
            block_size: layout.block_size as usize,
            with_data: layout.with_data,
            path,
            stats,
            preloaded,
        }))
    }
}

/// A random id for a new log, so slots of an older log on the volume fail
/// their checksum.
fn new_log_id() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one((std::time::SystemTime::now(), std::process::id()))
}

enum Job {
    Write(Vec<Write>),
    /// fdatasync, then report whether the log is still intact.
    Sync(mpsc::Sender<bool>),
}

#[derive(Default)]
pub struct MonitorStats {
    pub records: AtomicU64,
    /// Bytes written to the logging volume.
    pub log_bytes: AtomicU64,
    /// A write to the volume failed: the log is incomplete and never sealed.
    pub failed: AtomicBool,
}

/// The background writer: performs the log's writes in order.
fn write_jobs(file: File, queue: mpsc::Receiver<Job>, stats: &MonitorStats) {
    for job in queue {
        match job {
            Job::Write(writes) => {
                if stats.failed.load(Ordering::Relaxed) {
                    continue;
                }
                for w in writes {
                    if let Err(e) = file.write_all_at(&w.bytes, w.offset) {
                        error!(offset = w.offset, error = %e, "writing the warmup log failed; it will not be sealed");
                        stats.failed.store(true, Ordering::Relaxed);
                        break;
                    }
                    stats.log_bytes.fetch_add(w.bytes.len() as u64, Ordering::Relaxed);
                }
            }
            Job::Sync(done) => {
                if let Err(e) = file.sync_data() {
                    error!(error = %e, "syncing the warmup log failed; it will not be sealed");
                    stats.failed.store(true, Ordering::Relaxed);
                }
                let _ = done.send(!stats.failed.load(Ordering::Relaxed));
            }
        }
    }
}

/// Logs what enters the cache and what clients change (see the module docs).
pub struct Monitor {
    /// `None` once sealed.
    writer: Mutex<Option<LogWriter>>,
    jobs: SyncSender<Job>,
    block_size: usize,
    with_data: bool,
    path: PathBuf,
    pub stats: Arc<MonitorStats>,
    /// What the pre-load at start did (zero if there was none).
    pub preloaded: PreloadStats,
}

impl Monitor {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<LogWriter>> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn record(&self, block: u64, data: Option<&[u8]>) {
        let mut guard = self.lock();
        let Some(writer) = guard.as_mut() else { return };
        // The export's last block may be short; the log holds whole blocks.
        let padded;
        let data = match data {
            Some(d) if self.with_data && d.len() < self.block_size => {
                padded = [d, &vec![0u8; self.block_size - d.len()]].concat();
                Some(&padded[..])
            }
            d if self.with_data => d,
            _ => None,
        };
        if writer.log_block(block, data).is_err() {
            // The staging buffer is full: hand it to the writer thread (waiting
            // if it is still busy with the previous one) and start a new one.
            let _ = self.jobs.send(Job::Write(writer.flush()));
            writer.log_block(block, data).expect("an empty staging buffer has room for one record");
        }
        self.stats.records.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes out the staging buffer and waits until the volume has it.
    /// Returns whether the log is intact.
    pub fn sync(&self) -> bool {
        let (done, wait) = mpsc::channel();
        {
            let mut guard = self.lock();
            let Some(writer) = guard.as_mut() else { return false };
            let _ = self.jobs.send(Job::Write(writer.flush()));
            let _ = self.jobs.send(Job::Sync(done));
        }
        wait.recv().unwrap_or(false)
    }

    /// Clean shutdown (after the export's flush): every record, then the
    /// seal, each made durable in turn. Later changes are not logged.
    /// Returns whether the log is sealed; a log whose writes failed is not.
    pub fn seal(&self) -> bool {
        let Some(mut writer) = self.lock().take() else {
            return false;
        };
        let mut writes = writer.seal();
        let seal = writes.pop().expect("seal() ends with the seal record");
        let durable = |writes: Vec<Write>| {
            let (done, wait) = mpsc::channel();
            let _ = self.jobs.send(Job::Write(writes));
            let _ = self.jobs.send(Job::Sync(done));
            wait.recv().unwrap_or(false)
        };
        let sealed = durable(writes) && durable(vec![seal]);
        if !sealed {
            warn!(log = %self.path.display(), "the warmup log could not be written in full; it stays unsealed and its data will not be trusted");
        }
        sealed
    }
}

impl ContentLog for Monitor {
    fn loaded(&self, block: u64, data: &[u8]) {
        self.record(block, Some(data));
    }
    fn changed(&self, block: u64, data: Option<&[u8]>) {
        self.record(block, data);
    }
}

/// Sets up warmup for an export's cache before it serves: recover the log,
/// pre-load if asked (with a progress bar on a terminal), make the log ready
/// and attach the monitor to the cache.
/// `backend` is the backend's file, `None` for a memory backend (see
/// [`WarmupLog::check_backend`]).
pub fn start_export(
    export: &str,
    settings: &WarmupSettings,
    cache: &BlockCache,
    backend: Option<&Path>,
) -> io::Result<Arc<Monitor>> {
    let block_size = u32::try_from(cache.block_size()).expect("block sizes are at most 1 MiB");
    let mut log = WarmupLog::open(settings, block_size)?;
    log.check_backend(backend)?;
    if let Some(w) = &log.warning {
        warn!(export, "{w}");
    }
    let mut preloaded = PreloadStats::default();
    match (settings.preload, log.plan()) {
        (true, Some(plan)) => {
            if let Some(w) = &plan.warning {
                warn!(export, "{w}");
            }
            let bar = progress_bar(plan.items.len() as u64);
            match log.preload(cache, &plan, &|n| bar.inc(n)) {
                Ok(stats) => preloaded = stats,
                Err(e) => warn!(export, error = %e, "pre-load stopped early; the rest warms on demand"),
            }
            bar.finish_and_clear();
            info!(
                export,
                planned = preloaded.planned,
                blocks = preloaded.blocks,
                bytes = preloaded.bytes,
                from_log = preloaded.from_log,
                seconds = preloaded.seconds,
                "warmup pre-load done"
            );
        }
        (true, None) => info!(export, "nothing to pre-load: on-demand warmup"),
        (false, _) => {}
    }
    let monitor = log.start(preloaded)?;
    cache.set_content_log(monitor.clone());
    Ok(monitor)
}

/// A pre-load progress bar on stderr, hidden unless stderr is a terminal.
fn progress_bar(total: u64) -> indicatif::ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("warmup pre-load [{bar:40}] {pos}/{len} blocks {per_sec} eta {eta}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}

/// The warmup families of the metrics page, for exports with a monitor.
pub fn render_metrics(out: &mut String, exports: &[Arc<crate::Export>]) {
    use std::fmt::Write as _;
    type Family = (&'static str, &'static str, &'static str, fn(&Monitor) -> f64);
    let families: [Family; 7] = [
        ("hearth_warmup_preloaded_blocks", "gauge", "Blocks the pre-load at start put into the cache.", |m| {
            m.preloaded.blocks as f64
        }),
        ("hearth_warmup_preloaded_bytes", "gauge", "Bytes the pre-load at start put into the cache.", |m| {
            m.preloaded.bytes as f64
        }),
        (
            "hearth_warmup_preloaded_from_log_blocks",
            "gauge",
            "Pre-loaded blocks whose data came from the warmup log.",
            |m| m.preloaded.from_log as f64,
        ),
        ("hearth_warmup_preload_seconds", "gauge", "How long the pre-load at start took.", |m| m.preloaded.seconds),
        (
            "hearth_warmup_log_records_total",
            "counter",
            "Blocks logged to the warmup log (loads and client changes).",
            |m| m.stats.records.load(Ordering::Relaxed) as f64,
        ),
        ("hearth_warmup_log_bytes_total", "counter", "Bytes written to the warmup logging volume.", |m| {
            m.stats.log_bytes.load(Ordering::Relaxed) as f64
        }),
        ("hearth_warmup_log_failed", "gauge", "1 if a write to the warmup log failed (it will not be sealed).", |m| {
            f64::from(u8::from(m.stats.failed.load(Ordering::Relaxed)))
        }),
    ];
    if exports.iter().all(|e| e.warmup.is_none()) {
        return;
    }
    for (name, kind, help, get) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for e in exports {
            if let Some(m) = &e.warmup {
                let _ = writeln!(out, "{name}{{export=\"{}\"}} {}", crate::metrics::label(&e.info.name), get(m));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, MemoryBackend};
    use crate::cache::WriteMode;

    const BS: u64 = 4096;

    /// A memory backend of `blocks` blocks, each filled with its number + 1.
    fn backend(blocks: u64) -> Arc<MemoryBackend> {
        let b = Arc::new(MemoryBackend::new(blocks * BS));
        for i in 0..blocks {
            b.write_at(&[i as u8 + 1; BS as usize], i * BS).unwrap();
        }
        b
    }

    fn cache(backend: &Arc<MemoryBackend>, blocks: u64) -> BlockCache {
        let policy = hearth_policy::build("lru", blocks * BS).unwrap();
        BlockCache::new(Box::new(backend.clone()), policy, BS as u32, WriteMode::Through)
    }

    fn settings(dir: &Path, mode: WarmupMode, budget_blocks: u64, staging: usize) -> WarmupSettings {
        WarmupSettings {
            log: dir.join("warmup.log"),
            mode,
            budget: budget_blocks * BS,
            staging,
            log_size: 1 << 20,
            preload: false,
        }
    }

    fn read(cache: &BlockCache, block: u64) -> Vec<u8> {
        let mut buf = vec![0u8; BS as usize];
        cache.read(block * BS, &mut buf).unwrap();
        buf
    }

    /// The block's bytes if the cache holds it (without touching the backend).
    fn cached(cache: &BlockCache, block: u64) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        cache.read_cached(block * BS, BS as usize, &mut out).then_some(out)
    }

    fn backend_block(backend: &MemoryBackend, block: u64) -> Vec<u8> {
        backend.snapshot()[(block * BS) as usize..((block + 1) * BS) as usize].to_vec()
    }

    /// Restarts on `s`: recovers the log, pre-loads a fresh cache, starts the monitor.
    fn restart(s: &WarmupSettings, backend: &Arc<MemoryBackend>, blocks: u64) -> (BlockCache, Plan, PreloadStats) {
        let c = cache(backend, blocks);
        let log = WarmupLog::open(s, BS as u32).unwrap();
        assert_eq!(log.warning, None);
        let plan = log.plan().expect("a usable log");
        let stats = log.preload(&c, &plan, &|_| {}).unwrap();
        let monitor = log.start(stats).unwrap();
        c.set_content_log(monitor);
        (c, plan, stats)
    }

    #[test]
    fn metadata_log_preloads_the_newest_blocks_from_the_backend() {
        let dir = tempfile::tempdir().unwrap();
        // A 2-record staging buffer: most records reach the volume through the writer thread.
        let s = settings(dir.path(), WarmupMode::Metadata, 4, 64);
        let backend = backend(64);
        let first = cache(&backend, 16);
        let monitor = start_export("t", &s, &first, None).unwrap();
        for b in 1..=6 {
            read(&first, b);
        }
        read(&first, 2); // a hit: nothing new is loaded
        first.write(9 * BS, &[0xee; BS as usize], false).unwrap();
        assert_eq!(monitor.stats.records.load(Ordering::Relaxed), 7);
        assert!(monitor.seal());
        drop(first);

        let (second, plan, stats) = restart(&s, &backend, 16);
        let planned: Vec<u64> = plan.items.iter().map(|i| i.lba).collect();
        assert_eq!(planned, vec![9, 6, 5, 4], "newest unique blocks first, within the budget");
        assert!(plan.items.iter().all(|i| i.source == Source::Backend));
        assert_eq!((stats.blocks, stats.bytes, stats.from_log), (4, 4 * BS, 0));
        for b in [9, 6, 5, 4] {
            assert_eq!(cached(&second, b), Some(backend_block(&backend, b)), "block {b}");
        }
        assert_eq!(cached(&second, 3), None, "beyond the budget");
        assert_eq!(second.stats.hits.load(Ordering::Relaxed) + second.stats.misses.load(Ordering::Relaxed), 4);

        // The resumed log's Open record was made durable before serving: the
        // volume is no longer sealed, and what this run loads comes after it.
        let volume = std::fs::read(&s.log).unwrap();
        let rec = hearth_warmup::log::recover(&volume).unwrap();
        assert!(!rec.sealed);
        assert_eq!(rec.next_seq, 7 + 2, "7 blocks, the seal and the Open record");
    }

    #[test]
    fn preloaded_blocks_keep_the_logs_recency_order() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path(), WarmupMode::Metadata, 2, 1 << 10);
        let backend = backend(64);
        let first = cache(&backend, 4);
        let monitor = start_export("t", &s, &first, None).unwrap();
        for b in [1, 2, 3] {
            read(&first, b);
        }
        assert!(monitor.seal());
        // Blocks 3 then 2 are pre-loaded into an LRU cache of 4 blocks; two
        // new blocks fill it, a third evicts the least recent: block 2.
        let (second, plan, _) = restart(&s, &backend, 4);
        assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![3, 2]);
        for b in [10, 11, 12] {
            read(&second, b);
        }
        assert_eq!(cached(&second, 2), None, "the older logged block goes first");
        assert!(cached(&second, 3).is_some(), "the newest logged block stays");
    }

    #[test]
    fn a_prefetched_block_is_logged_when_a_demand_promotes_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path(), WarmupMode::Metadata, 16, 1 << 10);
        let backend = backend(64);
        // 50 blocks: a 2-block prefetch partition.
        let c = cache(&backend, 50);
        let monitor = start_export("t", &s, &c, None).unwrap();
        assert!(c.start_prefetch(7));
        c.prefetch(7).unwrap();
        assert_eq!(monitor.stats.records.load(Ordering::Relaxed), 0, "not while it waits in the partition");
        assert_eq!(c.classify_demand(7), hearth_prefetch::Class::Promote);
        assert_eq!(monitor.stats.records.load(Ordering::Relaxed), 1);
        assert!(monitor.seal());
        let (_, plan, _) = restart(&s, &backend, 50);
        assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![7]);
    }

    #[test]
    fn data_log_supplies_current_blocks_after_a_clean_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path(), WarmupMode::Data, 16, 8 << 10);
        let backend = backend(64);
        let first = cache(&backend, 16);
        let monitor = start_export("t", &s, &first, None).unwrap();
        read(&first, 3);
        first.write(3 * BS, &[0xa1; BS as usize], false).unwrap(); // cached: logged with its new data
        read(&first, 5);
        first.write(6 * BS + 100, b"partial", false).unwrap(); // absent: logged without data
        assert!(monitor.seal());
        drop(first);

        let (second, plan, stats) = restart(&s, &backend, 16);
        let sources: Vec<(u64, bool)> = plan.items.iter().map(|i| (i.lba, i.source != Source::Backend)).collect();
        assert_eq!(sources, vec![(6, false), (5, true), (3, true)]);
        assert_eq!(plan.warning, None);
        assert_eq!((stats.blocks, stats.from_log), (3, 2));
        for b in [3, 5, 6] {
            assert_eq!(cached(&second, b), Some(backend_block(&backend, b)), "block {b}");
        }
        assert_eq!(&cached(&second, 6).unwrap()[100..107], b"partial");
    }

    #[test]
    fn after_a_crash_logged_data_is_not_trusted_and_nothing_stale_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path(), WarmupMode::Data, 16, 64 << 10);
        let backend = backend(64);
        let first = cache(&backend, 16);
        let monitor = start_export("t", &s, &first, None).unwrap();
        read(&first, 5);
        read(&first, 8);
        assert!(monitor.sync(), "as at an NBD FLUSH");
        // Block 5 changes; the record is still staged when the server dies.
        first.write(5 * BS, &[0x55; BS as usize], false).unwrap();
        drop((first, monitor)); // no seal: the staging buffer is lost

        let c = cache(&backend, 16);
        let log = WarmupLog::open(&s, BS as u32).unwrap();
        let plan = log.plan().unwrap();
        assert!(plan.warning.as_deref().is_some_and(|w| w.contains("stale")), "{:?}", plan.warning);
        assert_eq!(plan.from_log(), 0);
        let stats = log.preload(&c, &plan, &|_| {}).unwrap();
        assert_eq!((stats.blocks, stats.from_log), (2, 0));
        assert_eq!(cached(&c, 5), Some(vec![0x55; BS as usize]), "the backend's newer contents, not the logged ones");
        assert_eq!(cached(&c, 8), Some(backend_block(&backend, 8)));
    }

    #[test]
    fn logged_data_is_distrusted_when_the_backend_changed_behind_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path(), WarmupMode::Data, 16, 64 << 10);
        let disk = dir.path().join("disk.img");
        let file_cache = || {
            let file = crate::backend::FileBackend::sparse(&disk, 64 * BS, false).unwrap();
            let policy = hearth_policy::build("lru", 16 * BS).unwrap();
            BlockCache::new(Box::new(file), policy, BS as u32, WriteMode::Through)
        };
        let first = file_cache();
        let monitor = start_export("t", &s, &first, Some(&disk)).unwrap();
        first.write(3 * BS, &[3; BS as usize], false).unwrap();
        first.flush().unwrap();
        assert!(monitor.seal());
        drop((first, monitor));
        let from_log = |backend: Option<&Path>| {
            let mut log = WarmupLog::open(&s, BS as u32).unwrap();
            log.check_backend(backend).unwrap();
            (log.plan().unwrap().from_log(), log.warning)
        };
        assert_eq!(from_log(Some(&disk)), (1, None), "the backend is as the log left it");
        assert!(from_log(None).1.unwrap().contains("does not keep data"));

        // Another program writes the backend (after the clock has moved on).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let f = OpenOptions::new().write(true).open(&disk).unwrap();
        f.write_all_at(&[9; BS as usize], 3 * BS).unwrap();
        drop(f);
        let (n, warning) = from_log(Some(&disk));
        assert_eq!(n, 0);
        assert!(warning.unwrap().contains("modified after the warmup log"));
        let c = file_cache();
        let monitor = start_export("t", &WarmupSettings { preload: true, ..s.clone() }, &c, Some(&disk)).unwrap();
        assert_eq!((monitor.preloaded.blocks, monitor.preloaded.from_log), (1, 0));
        assert_eq!(cached(&c, 3), Some(vec![9; BS as usize]), "the backend's bytes, not the log's");
    }

    #[test]
    fn missing_corrupt_or_incompatible_logs_start_on_demand_with_a_new_log() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path(), WarmupMode::Metadata, 16, 1 << 10);
        let backend = backend(64);

        let log = WarmupLog::open(&s, BS as u32).unwrap();
        assert!(log.warning.as_deref().is_some_and(|w| w.contains("no warmup log") && w.contains("on-demand")));
        assert!(log.plan().is_none());
        let c = cache(&backend, 16);
        let m = log.start(PreloadStats::default()).unwrap();
        c.set_content_log(m.clone());
        read(&c, 7);
        assert!(m.seal());

        // Corrupt header: the warning names the byte.
        let mut volume = std::fs::read(&s.log).unwrap();
        volume[30] ^= 1;
        std::fs::write(&s.log, &volume).unwrap();
        let log = WarmupLog::open(&s, BS as u32).unwrap();
        let w = log.warning.clone().unwrap();
        assert!(w.contains("corrupt") && w.contains("byte 60") && w.contains("on-demand"), "{w}");
        assert!(log.plan().is_none());
        let c = cache(&backend, 16);
        let m = log.start(PreloadStats::default()).unwrap();
        c.set_content_log(m.clone());
        read(&c, 11);
        assert!(m.seal());
        let (_, plan, _) = restart(&s, &backend, 16);
        assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![11], "the new log only");

        // A log of another block size.
        let log = WarmupLog::open(&s, 8192).unwrap();
        assert!(log.warning.unwrap().contains("4096-byte blocks without data"));
    }

    #[test]
    fn config_file_table_validates_and_errors_name_the_key() {
        let text =
            "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n[export.warmup]\nlog = \"/tmp/w\"\n";
        let mut c = crate::Config::parse(&format!("{text}mode = \"data\"\npreload = true\n")).unwrap();
        c.validate().unwrap();
        assert_eq!(c.exports[0].warmup.as_ref().map(|w| (w.mode, w.preload)), Some((WarmupMode::Data, true)));
        let mut c = crate::Config::parse(&format!("{text}budget = \"many\"\n")).unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.starts_with("export[0] (\"a\").warmup.budget:"), "{e}");
        let two = format!("{text}{}", text.replace("name = \"a\"", "name = \"b\""));
        let e = crate::Config::parse(&two).unwrap().validate().unwrap_err();
        assert!(e.starts_with("export[1] (\"b\").warmup.log: /tmp/w is export[0]'s warmup log too"), "{e}");
        let e = crate::Config::parse(&format!("{text}buffer = 1\n")).unwrap_err();
        assert!(e.contains("buffer"), "{e}");
    }

    #[test]
    fn settings_default_and_name_bad_keys() {
        let c: WarmupConfig = toml::from_str("log = \"/tmp/x\"").unwrap();
        let s = c.settings(1 << 30).unwrap();
        assert_eq!((s.mode, s.staging, s.budget, s.preload), (WarmupMode::Metadata, 256 << 10, 1 << 30, false));
        let c: WarmupConfig = toml::from_str("log = \"/tmp/x\"\nmode = \"data\"\nbudget = \"8GiB\"").unwrap();
        let s = c.settings(1 << 30).unwrap();
        assert_eq!((s.staging, s.budget), (128 << 20, 1 << 30), "the budget is capped at the cache size");
        let c: WarmupConfig = toml::from_str("log = \"/tmp/x\"\nstaging = \"lots\"").unwrap();
        assert_eq!(c.settings(1 << 30).unwrap_err().0, "staging");
        assert!(toml::from_str::<WarmupConfig>("log = \"/tmp/x\"\nmode = \"blocks\"").is_err());
    }
}

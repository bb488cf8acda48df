//! The logging volume: recovery at start, the pre-load plan and its
//! execution, and the hand-over to the [`Monitor`].

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use hearth_warmup::log::{Layout, LogWriter, Recovered, Recovery, Write, HEADER_LEN};
use hearth_warmup::plan::{plan_preload, Plan, Source};
use rustc_hash::FxHashMap;

use super::{Monitor, WarmupMode, WarmupSettings};
use crate::cache::BlockCache;

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
        let bytes_written = first_writes.iter().map(|w| w.bytes.len() as u64).sum();
        Monitor::spawn(writer, self.file, path, bytes_written, preloaded)
    }
}

/// A random id for a new log, so slots of an older log on the volume fail
/// their checksum.
fn new_log_id() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one((std::time::SystemTime::now(), std::process::id()))
}

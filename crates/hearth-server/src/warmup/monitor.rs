//! The monitor: records what enters the cache and what clients change, and
//! a background thread that writes the records to the volume in order.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};

use hearth_warmup::log::{LogWriter, Write};
use tracing::{error, info, warn};

use super::PreloadStats;
use crate::cache::ContentLog;

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
    /// Starts the background writer on the volume `file` and returns the
    /// monitor that feeds it; `bytes_written` were written before (header or
    /// Open record).
    pub(super) fn spawn(
        writer: LogWriter,
        file: File,
        path: PathBuf,
        bytes_written: u64,
        preloaded: PreloadStats,
    ) -> io::Result<Arc<Monitor>> {
        let stats = Arc::new(MonitorStats::default());
        stats.log_bytes.fetch_add(bytes_written, Ordering::Relaxed);
        // Two batches in flight at most: the thread writing one, one queued.
        let (jobs, queue) = mpsc::sync_channel(1);
        let thread_stats = stats.clone();
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

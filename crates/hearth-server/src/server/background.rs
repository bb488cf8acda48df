//! The export's background reads: blocks placed when a client evicted them
//! (eviction-based placement) and blocks a prefetcher predicted, read at low
//! priority by a few threads of the export's own, each connection holding a
//! bounded share of the queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::warn;

use crate::{Background, BackgroundKind, Export, Origin};

/// Most dirty blocks one tick of idle cleaning writes back (1 MiB of 4 KiB blocks).
const IDLE_CLEAN_BLOCKS: usize = 256;

/// Background reads (reloads, prefetches) one connection may have queued.
const MAX_BACKGROUND_PER_CONNECTION: usize = 256;

/// The background threads that read client-evicted blocks placed by the
/// cache and predicted blocks. A few threads per export, apart from the
/// blocking pool, keep these reads from crowding out demand reads while
/// letting several proceed at once on a device that serves them in
/// parallel; they end when the export is dropped.
pub(super) fn spawn_background(
    export: std::sync::Weak<Export>,
    queue: std::sync::mpsc::Receiver<Background>,
    threads: usize,
) -> std::io::Result<()> {
    let queue = Arc::new(std::sync::Mutex::new(queue));
    for _ in 0..threads {
        let (export, queue) = (export.clone(), queue.clone());
        std::thread::Builder::new().name("hearth-background".into()).spawn(move || loop {
            let Ok(job) = queue.lock().unwrap_or_else(|e| e.into_inner()).recv() else { return };
            let Some(export) = export.upgrade() else { return };
            job.origin.queued.fetch_sub(1, Ordering::Relaxed);
            if job.origin.closed.load(Ordering::Relaxed) {
                dropped(&export, job.kind, job.block);
                continue;
            }
            let r = match job.kind {
                BackgroundKind::Reload => export.cache().reload(job.block),
                BackgroundKind::Prefetch => export.cache().prefetch(job.block),
                BackgroundKind::SparePrefetch => export.cache().prefetch_spare(job.block),
            };
            if let Err(e) = r {
                warn!(export = %export.name(), block = job.block, error = %e, "background read failed");
            }
        })?;
    }
    Ok(())
}

/// Queues a background read for `origin`'s connection, unless it has its
/// share queued already or the export's queue is full.
pub(super) fn queue_background(export: &Export, origin: &Arc<Origin>, kind: BackgroundKind, block: u64) -> bool {
    if origin.queued.fetch_add(1, Ordering::Relaxed) >= MAX_BACKGROUND_PER_CONNECTION {
        origin.queued.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    let job = Background { kind, block, origin: origin.clone() };
    if !export.send_background(job) {
        origin.queued.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    true
}

/// A background read that will not run: counted by kind, and a prefetch's
/// claim released (its first demand is then a plain miss).
pub(super) fn dropped(export: &Export, kind: BackgroundKind, block: u64) {
    match kind {
        BackgroundKind::Reload => export.count_eviction_skipped(),
        BackgroundKind::Prefetch | BackgroundKind::SparePrefetch => {
            export.cache().cancel_prefetch(block);
            export.prefetch_stats().dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Writes back, on a blocking thread, the dirty blocks that evictions on the
/// connection's reader (client evictions, prefetch promotes) held instead.
pub(super) fn write_back_held(export: &Arc<Export>) {
    if export.cache().take_held() {
        let export = export.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = export.cache().write_back_held() {
                warn!(export = %export.name(), error = %e, "writing back evicted dirty blocks failed; kept in memory");
            }
        });
    }
}

/// Background cleaning of a write-back export, in two ways (decided before
/// measuring, after Open CAS's ALRU cleaning policy, which waits for an
/// activity threshold and then flushes a bounded batch per wake-up):
///
/// * by age: every quarter of `max_age` (at most a second), once dirty data
///   has waited half of it, everything dirty is written back, so no
///   acknowledged write waits much over three quarters of `max_age`;
/// * when idle: once no client has dirtied a block for an eighth of
///   `max_age`, each tick writes back at most [`IDLE_CLEAN_BLOCKS`] dirty
///   blocks, so a quiet export drains early at a bounded rate and a busy
///   one is left to its writes.
///
/// Ends with the export.
pub(super) fn spawn_cleaner(export: std::sync::Weak<Export>, max_age: Duration) -> std::io::Result<()> {
    let tick = (max_age / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let idle_after = max_age / 8;
    let mut last_dirtied = None;
    let mut quiet_since = Instant::now();
    std::thread::Builder::new().name("hearth-cleaner".into()).spawn(move || loop {
        std::thread::sleep(tick);
        let Some(export) = export.upgrade() else { return };
        let Some(age) = export.cache().dirty_age() else { continue };
        let dirtied = export.cache().dirtied();
        if last_dirtied != Some(dirtied) {
            (last_dirtied, quiet_since) = (Some(dirtied), Instant::now());
        }
        let pass = if age >= max_age / 2 {
            export.cache().clean()
        } else if quiet_since.elapsed() >= idle_after {
            export.cache().clean_some(IDLE_CLEAN_BLOCKS)
        } else {
            continue;
        };
        match pass {
            Ok(()) => {
                export.metrics().cleanings.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => warn!(export = %export.name(), error = %e, "background cleaning failed; retrying"),
        }
    })?;
    Ok(())
}

//! The export's access log: every client READ and WRITE, cache hits
//! included, as a CloudPhysics CSV trace (`version,time,op,size,lbn`, Unix
//! seconds, 512-byte sectors) that `hearth tier plan` (or `hearth sim`) reads
//! back. Records go through a bounded queue to a writer thread, so a
//! connection never waits for the log's disk; if the queue is full a record
//! is dropped and counted.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hearth_core::Op;

/// Records queued for the writer at most.
const QUEUE: usize = 1 << 16;

enum Record {
    Access {
        op: Op,
        offset: u64,
        len: u32,
        at: Duration,
    },
    /// Write out what is buffered, then answer.
    Flush(mpsc::Sender<()>),
}

pub(crate) struct AccessLog {
    queue: SyncSender<Record>,
    pub(crate) dropped: AtomicU64,
}

impl AccessLog {
    /// Opens `path` for appending (writing the header if it is new) and
    /// starts its writer thread.
    pub(crate) fn open(path: &Path) -> io::Result<Arc<AccessLog>> {
        let annotate = |e: io::Error| io::Error::new(e.kind(), format!("access log {}: {e}", path.display()));
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(annotate)?;
        let mut out = BufWriter::new(file);
        if out.get_ref().metadata().map_err(annotate)?.len() == 0 {
            writeln!(out, "version,time,op,size,lbn").map_err(annotate)?;
        }
        let (queue, records) = mpsc::sync_channel(QUEUE);
        let log = Arc::new(AccessLog { queue, dropped: AtomicU64::new(0) });
        std::thread::Builder::new().name("hearth-access-log".into()).spawn(move || write_records(out, records))?;
        Ok(log)
    }

    /// Logs one client request.
    pub(crate) fn record(&self, op: Op, offset: u64, len: u32) {
        let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        if let Err(TrySendError::Full(_)) = self.queue.try_send(Record::Access { op, offset, len, at }) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until every record logged so far is written to the file.
    pub(crate) fn flush(&self) {
        let (done, written) = mpsc::channel();
        if self.queue.send(Record::Flush(done)).is_ok() {
            let _ = written.recv();
        }
    }
}

fn write_records(mut out: BufWriter<File>, records: mpsc::Receiver<Record>) {
    for record in records {
        let written = match record {
            Record::Access { op, offset, len, at } => {
                let opcode = if op == Op::Write { "2a" } else { "28" };
                // Sectors round the start down; the size grows to cover the same bytes.
                let size = u64::from(len) + offset % 512;
                writeln!(out, "1,{}.{:06},{opcode},{size},{}", at.as_secs(), at.subsec_micros(), offset / 512)
            }
            Record::Flush(done) => {
                let r = out.flush();
                let _ = done.send(());
                r
            }
        };
        if let Err(e) = written {
            tracing::error!(error = %e, "writing the access log failed; it stops here");
            return;
        }
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_a_trace_hearth_reads_back_and_reopening_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.csv");
        let log = AccessLog::open(&path).unwrap();
        log.record(Op::Write, 3 * 4096 + 100, 1000);
        log.record(Op::Read, 9 * 4096, 4096);
        log.flush();
        drop(log);
        let log = AccessLog::open(&path).unwrap();
        log.record(Op::Read, 0, 512);
        log.flush();
        let reqs: Vec<_> = hearth_trace::open(&path, None).unwrap().collect::<Result<_, _>>().unwrap();
        let got: Vec<_> = reqs.iter().map(|r| (r.op, r.offset, r.len)).collect();
        assert_eq!(got, vec![(Op::Write, 3 * 4096, 1100), (Op::Read, 9 * 4096, 4096), (Op::Read, 0, 512)]);
    }
}

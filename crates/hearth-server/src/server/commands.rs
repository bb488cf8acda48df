//! One function per NBD command but READ (`read`). What the reader runs itself it answers
//! through the socket's buffer (`outbox`), the rest through the writer
//! task's queue; a command that may wait for the backend runs on the blocking
//! pool as one of the connection's workers, so a backend call never blocks
//! the connection's async reader. What cannot wait runs on the reader
//! itself, since handing it to another thread would cost more than doing
//! it: reads served from the cache, write-back writes that stay in memory,
//! and every request up to [`INLINE_MAX`] to a backend that never waits.
//! Past [`INLINE_MAX`] the reader only hands requests on: copying (or
//! zero-filling) tens of MiB there would hold a runtime thread, and with it
//! other connections' accepts and greetings, while a flood of large
//! requests drains.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hearth_core::Op;
use hearth_nbd::transmission::{put_block_status_reply, put_status};
use hearth_nbd::{cmd_flags, tflags, Errno, Request, Session};
use tokio::io::{AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, warn};

use super::connection::{Conn, Reply, Ticket};
use super::hints::ClientView;
use crate::cache::BlockCache;
use crate::Export;

/// Most extents one NBD_CMD_BLOCK_STATUS reply describes.
const MAX_EXTENTS: usize = 256;
/// Largest request the reader runs itself on a backend that never waits, or
/// serves from the cache: past it, the copy alone would hold up the
/// connection's next requests and the runtime thread it runs on.
pub(super) const INLINE_MAX: u32 = 1 << 20;
/// The step in which NBD_CMD_CACHE reads, checking between steps whether its
/// connection is gone.
const CACHE_STEP: u64 = 1 << 20;

/// A validated request on its way to its command, with what it holds.
pub(super) struct Job {
    pub(super) req: Request,
    pub(super) ticket: Ticket,
    pub(super) started: Instant,
}

pub(super) type Workers = Arc<Semaphore>;

/// Where a reply goes: from the reader, straight to the socket when it can
/// (see `outbox`); from a worker, through the writer task's queue.
#[derive(Clone, Copy)]
pub(super) enum ReplyTo<'a> {
    Reader(&'a Conn),
    Queue(&'a mpsc::UnboundedSender<Reply>),
}

impl ReplyTo<'_> {
    pub(super) fn send(self, reply: Reply) {
        match self {
            ReplyTo::Reader(conn) => conn.reply(reply),
            ReplyTo::Queue(tx) => {
                let _ = tx.send(reply);
            }
        }
    }
}

/// Whether `req` runs on the reader: its backend never waits and it is small.
pub(super) fn runs_inline(conn: &Conn, req: &Request) -> bool {
    req.length <= INLINE_MAX && !conn.export.cache().backend_waits()
}

/// Runs `work` on the reader if it cannot wait, else on a worker, and
/// replies with its status.
async fn run(conn: &Conn, job: Job, workers: &Workers, work: impl FnOnce(&Export) -> io::Result<()> + Send + 'static) {
    if runs_inline(conn, &job.req) {
        let r = work(&conn.export);
        return finish(ReplyTo::Reader(conn), &conn.session, &conn.export, job, r);
    }
    status_on_worker(conn, job, workers, work).await
}

/// Runs `work` on the blocking pool as one of the connection's workers and
/// replies with its status.
async fn status_on_worker(
    conn: &Conn,
    job: Job,
    workers: &Workers,
    work: impl FnOnce(&Export) -> io::Result<()> + Send + 'static,
) {
    on_worker(conn, workers, move |export, session, to| {
        let r = work(export);
        finish(to, session, export, job, r);
    })
    .await
}

/// Takes one of the connection's workers (waiting for one if all are busy)
/// and runs `work` with it on the blocking pool; `work` replies through the
/// writer task's queue.
pub(super) async fn on_worker(
    conn: &Conn,
    workers: &Workers,
    work: impl FnOnce(&Export, &Session, ReplyTo<'_>) + Send + 'static,
) {
    let worker = workers.clone().acquire_owned().await.expect("never closed");
    let (tx, session, export) = (conn.replies.clone(), conn.session, conn.export.clone());
    tokio::task::spawn_blocking(move || {
        work(&export, &session, ReplyTo::Queue(&tx));
        drop(worker);
    });
}

/// NBD_CMD_WRITE: the payload is read here, written on a worker.
pub(super) async fn write<R: AsyncRead + Unpin + Send>(
    rd: &mut BufReader<R>,
    conn: &Conn,
    job: Job,
    workers: &Workers,
) -> io::Result<()> {
    let req = job.req;
    let len = req.length as usize;
    let mut data = conn.buffers.take(len);
    (&mut *rd).take(len as u64).read_to_end(&mut data).await?;
    if data.len() < len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "client closed during a write payload"));
    }
    conn.export.record_access(Op::Write, req.offset, req.length);
    if !req.fua() && req.length <= INLINE_MAX && conn.export.cache().write_cached(req.offset, &data) {
        count_written(&conn.export, &req);
        conn.buffers.give(data);
        super::background::write_back_held(&conn.export);
        finish(ReplyTo::Reader(conn), &conn.session, &conn.export, job, Ok(()));
        return Ok(());
    }
    let buffers = conn.buffers.clone();
    run(conn, job, workers, move |export| {
        let r = export.cache().write(req.offset, &data, req.fua()).inspect(|()| count_written(export, &req));
        buffers.give(data);
        r
    })
    .await;
    Ok(())
}

/// Counts write `req`'s bytes, written, in the export's metrics.
fn count_written(export: &Export, req: &Request) {
    export.metrics().bytes_written.fetch_add(u64::from(req.length), Ordering::Relaxed);
}

/// NBD_CMD_FLUSH, always on a worker: it also syncs the export's logs.
pub(super) async fn flush(conn: &Conn, job: Job, workers: &Workers) {
    status_on_worker(conn, job, workers, |export| {
        let r = export.cache().flush();
        export.flush_logs();
        r
    })
    .await
}

pub(super) async fn trim(conn: &Conn, job: Job, workers: &Workers) {
    let (offset, length, fua) = (job.req.offset, u64::from(job.req.length), job.req.fua());
    run(conn, job, workers, move |export| export.cache().discard(offset, length, true, true, fua)).await
}

pub(super) async fn write_zeroes(conn: &Conn, job: Job, workers: &Workers) {
    let (offset, length, fua) = (job.req.offset, u64::from(job.req.length), job.req.fua());
    // Holes only where the client may trim: not on an export that does not advertise it.
    let may_trim = job.req.flags & cmd_flags::NO_HOLE == 0 && conn.session.flags & tflags::SEND_TRIM != 0;
    run(conn, job, workers, move |export| export.cache().discard(offset, length, false, may_trim, fua)).await
}

/// NBD_CMD_CACHE may read up to the whole export: the export runs only a few
/// at a time, and each stops when its connection ends.
pub(super) async fn cache(conn: &Conn, job: Job, workers: &Workers) {
    let lane = conn.export.cache_lane().await;
    let (offset, length, closed) = (job.req.offset, u64::from(job.req.length), conn.closed.clone());
    status_on_worker(conn, job, workers, move |export| {
        let r = load_range(export.cache(), offset, length, &closed);
        drop(lane);
        r
    })
    .await
}

/// Pulls a range into the cache, one bounded step at a time, until done or
/// the connection that asked is gone.
fn load_range(cache: &BlockCache, offset: u64, len: u64, closed: &AtomicBool) -> io::Result<()> {
    let mut scratch = vec![0u8; CACHE_STEP.min(len) as usize];
    let mut at = offset;
    while at < offset + len {
        if closed.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "connection closed"));
        }
        let n = CACHE_STEP.min(offset + len - at) as usize;
        cache.read(at, &mut scratch[..n])?;
        at += n as u64;
    }
    Ok(())
}

pub(super) async fn block_status(conn: &Conn, job: Job, workers: &Workers) {
    on_worker(conn, workers, move |export, session, to| {
        let req = job.req;
        let max = if req.flags & cmd_flags::REQ_ONE != 0 { 1 } else { MAX_EXTENTS };
        let map = export.cache().extents(req.offset, u64::from(req.length), max);
        let ok = matches!(&map, Ok(m) if !m.is_empty());
        // Holes read as zeroes: NBD_STATE_HOLE | NBD_STATE_ZERO.
        let extents = map
            .map(|m| m.iter().map(|e| (e.len as u32, if e.hole { 3 } else { 0 })).collect::<Vec<_>>())
            .map_err(|e| (Errno::from_io(&e), e.to_string()));
        let mut head = Vec::new();
        let extents = extents.as_deref().map_err(|(errno, why)| (*errno, why.as_str()));
        put_block_status_reply(&mut head, session, req.cookie, extents);
        to.send(Reply { bytes: head, cached: Vec::new(), _ticket: job.ticket });
        export.metrics().record(req.command, ok, job.started.elapsed());
    })
    .await
}

/// NBD_CMD_HEARTH_HINT (docs/nbd-extension.md): applied in request order,
/// answered at once.
pub(super) async fn hint<R: AsyncRead + Unpin>(
    rd: &mut R,
    conn: &Conn,
    client: &mut ClientView,
    job: Job,
) -> io::Result<()> {
    let mut payload = vec![0u8; job.req.length as usize];
    rd.read_exact(&mut payload).await?;
    let r = client.apply(&conn.export, &payload);
    super::background::write_back_held(&conn.export);
    if let Err(why) = &r {
        debug!(export = %conn.export.name(), error = %why, "hint refused");
    }
    let why = r.as_ref().err().map(ToString::to_string);
    let status = why.as_deref().map_or(Ok(()), |why| Err((Errno::Inval, why)));
    send_status(ReplyTo::Reader(conn), &conn.session, job.req, status, job.ticket);
    conn.export.metrics().record(job.req.command, r.is_ok(), job.started.elapsed());
    Ok(())
}

/// Answers `req` with its status alone (no data).
pub(super) fn send_status(
    to: ReplyTo<'_>,
    session: &Session,
    req: Request,
    r: Result<(), (Errno, &str)>,
    ticket: Ticket,
) {
    let mut head = Vec::with_capacity(32);
    put_status(&mut head, session, req.command, req.cookie, r);
    to.send(Reply { bytes: head, cached: Vec::new(), _ticket: ticket });
}

fn finish(to: ReplyTo<'_>, session: &Session, export: &Export, job: Job, r: io::Result<()>) {
    let req = job.req;
    match &r {
        Ok(()) => send_status(to, session, req, Ok(()), job.ticket),
        Err(e) => {
            let errno = Errno::from_io(e);
            warn!(export = %export.name(), command = req.command.name(), offset = req.offset, length = req.length, error = %e, "request failed");
            send_status(to, session, req, Err((errno, &e.to_string())), job.ticket);
        }
    }
    export.metrics().record(req.command, r.is_ok(), job.started.elapsed());
}

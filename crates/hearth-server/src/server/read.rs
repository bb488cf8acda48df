//! NBD_CMD_READ, end to end. The reader (`connection::transmission`) has
//! decoded and validated the request; from there:
//!
//! 1. [`announce`], on the reader in request order, before the request may
//!    wait for its payload budget: the client buffer a BUFFER hint named
//!    (`hints`: a reused buffer reveals an eviction) and the prefetch round
//!    (`prefetch`: the prefetcher sees the demand and its predictions are
//!    queued as background reads);
//! 2. [`read`]: the access log, the reply header (its shape is
//!    `hearth-nbd`'s choice), whether the read bypasses the cache (a long
//!    sequential stream past `sequential_cutoff`, or the pass-through mode),
//!    the live advice; then a cache hit is answered from the reader with the
//!    cached blocks' slices (no copy), a small read of a backend that never
//!    waits is read there too, and anything else runs on one of the
//!    connection's workers;
//! 3. [`read_through`]: `BlockCache::read` (hits copied, each run of misses
//!    one backend read, then inserted) or `read_around` (nothing inserted);
//! 4. [`finish_read`]: bytes and latency counted, the reply handed to the
//!    socket's buffer (reader) or the writer task's queue (worker).

use std::sync::atomic::Ordering;

use hearth_core::Op;
use hearth_nbd::transmission::{put_read_reply_header, put_status};
use hearth_nbd::{Command, Errno, Request, Session};

use super::commands::{on_worker, runs_inline, Job, ReplyTo, Workers, INLINE_MAX};
use super::connection::{Conn, Reply};
use super::hints::ClientView;
use crate::backend::SharedSlice;
use crate::Export;

/// Longest read reply header (a structured OFFSET_DATA chunk header).
const READ_HEADER_MAX: usize = 28;

/// What a READ tells the server about its client, in request order: the
/// hinted buffer it reads into and, for the prefetcher, the demand itself.
pub(super) fn announce(export: &Export, client: &mut ClientView, req: &Request) {
    client.data_request(export, req);
    client.observe_read(export, req);
}

/// Answers READ `job`: cache hits from the reader, the rest on the reader
/// (small, backend never waits) or on a worker.
pub(super) async fn read(conn: &Conn, job: Job, workers: &Workers) {
    let (session, export, req) = (&conn.session, &conn.export, job.req);
    let len = req.length as usize;
    export.record_access(Op::Read, req.offset, req.length);
    // Header and data share one buffer, unless the data is sent from cached blocks.
    let mut header = Vec::with_capacity(READ_HEADER_MAX);
    put_read_reply_header(&mut header, session, &req);
    if len == 0 {
        return finish_read(ReplyTo::Reader(conn), export, job, Ok((header, Vec::new())));
    }
    let bypass = export.read_bypasses(req.offset, u64::from(req.length));
    if !bypass {
        export.advise_read(export.cache().block_range(req.offset, u64::from(req.length)));
    }
    let mut cached = Vec::new();
    if req.length <= INLINE_MAX && !bypass && export.cache().read_cached(req.offset, len, &mut cached) {
        return finish_read(ReplyTo::Reader(conn), export, job, Ok((header, cached)));
    }
    let mut reply = conn.buffers.take(header.len() + len);
    reply.extend_from_slice(&header);
    let header = reply.len();
    if runs_inline(conn, &req) {
        reply.resize(header + len, 0);
        let r = read_through(export, session, &req, bypass, reply, header);
        return finish_read(ReplyTo::Reader(conn), export, job, r);
    }
    on_worker(conn, workers, move |export, session, to| {
        reply.resize(header + len, 0);
        let r = read_through(export, session, &req, bypass, reply, header);
        finish_read(to, export, job, r);
    })
    .await
}

/// A read that may touch the backend, into `reply` after its `header`
/// bytes (all data in `reply`, none left in cached blocks).
fn read_through(
    export: &Export,
    session: &Session,
    req: &Request,
    bypass: bool,
    mut reply: Vec<u8>,
    header: usize,
) -> ReadReply {
    let into = &mut reply[header..];
    let read =
        if bypass { export.cache().read_around(req.offset, into) } else { export.cache().read(req.offset, into) };
    read.map(|()| (reply, Vec::new())).map_err(|e| {
        tracing::warn!(export = %export.name(), offset = req.offset, length = req.length, error = %e, "read failed");
        let mut status = Vec::new();
        put_status(&mut status, session, Command::Read, req.cookie, Err((Errno::from_io(&e), &e.to_string())));
        status
    })
}

/// A read's reply: `Ok((header and any data, then data from cached
/// blocks))` or `Err(error reply)`.
type ReadReply = Result<(Vec<u8>, Vec<SharedSlice>), Vec<u8>>;

/// Counts a read and sends its reply.
fn finish_read(to: ReplyTo<'_>, export: &Export, job: Job, r: ReadReply) {
    let ok = r.is_ok();
    if ok {
        export.metrics().bytes_read.fetch_add(u64::from(job.req.length), Ordering::Relaxed);
    }
    let (bytes, cached) = r.unwrap_or_else(|e| (e, Vec::new()));
    to.send(Reply { bytes, cached, _ticket: job.ticket });
    export.metrics().record(job.req.command, ok, job.started.elapsed());
}

//! A connection's reply side: the socket's write half behind one buffer,
//! shared by the reader task and the writer task.
//!
//! Why two writers: handing every reply from the reader (which produced it)
//! to a writer task costs a task switch per request, 9-15% of the server's
//! CPU on 4 KiB random I/O. So replies the reader produces itself (cache
//! hits, writes to a backend that never waits, refusals, hints) go straight
//! into the buffer, and the reader sends what gathered there in one write
//! when it is about to wait for the client: its read buffer holds no
//! complete next request (or payload), or a queue slot or payload budget is
//! not free. Replies of requests that ran on the blocking pool still go
//! through the writer task's queue, as do the reader's when direct is not
//! possible.
//!
//! The reader never waits on the socket or on the writer task, so every
//! limit on what a client may pipeline without reading replies still holds:
//! - it appends only if the buffer is free (`try_lock`: the writer task is
//!   not mid-write) and the whole reply fits without a flush;
//! - it writes with one poll and a no-op waker; if the socket cannot take it
//!   all, the rest stays in the buffer and the writer task is nudged to send
//!   it (it waits for the socket as before);
//! - otherwise the reply is queued to the writer task, its ticket held until
//!   written, exactly as before.
//!
//! No `.await` happens while the reader holds the buffer, so a reader
//! cancelled at shutdown or idle timeout never leaves half a reply behind.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, Mutex, Notify};

use super::buffers::BufferPool;
use super::connection::Reply;
use super::server_clock_ns;

/// The reply buffer's size: small replies gather here; writes of at least
/// this size (a large read's cached blocks) pass straight to the socket.
const BUFFER: usize = 256 * 1024;
/// Largest reply the reader puts in the buffer itself; larger ones (big
/// reads) are rare enough per byte that the hand-off does not matter.
const DIRECT_MAX: usize = 64 * 1024;

/// The write half and its buffer, and the writer task's wake-up call.
pub(super) struct Outbox<W> {
    out: Mutex<BufWriter<W>>,
    /// Rung when the reader left bytes in the buffer the socket did not take.
    nudge: Notify,
}

/// The reader's side of an [`Outbox`], with the write half's type erased so
/// per-connection state and commands need not be generic over it.
pub(super) trait Direct: Send + Sync {
    /// Appends `reply` to the buffer; false if it cannot go there now
    /// without waiting (the caller then queues it to the writer task).
    fn offer(&self, reply: &Reply) -> bool;
    /// Sends what the reader appended, as far as the socket takes it now.
    fn send(&self);
}

impl<W: AsyncWrite + Unpin + Send> Outbox<W> {
    pub(super) fn new(wr: W) -> Arc<Self> {
        Arc::new(Outbox { out: Mutex::new(BufWriter::with_capacity(BUFFER, wr)), nudge: Notify::new() })
    }
}

impl<W: AsyncWrite + Unpin + Send> Direct for Outbox<W> {
    fn offer(&self, reply: &Reply) -> bool {
        let len = reply.bytes.len() + reply.cached.iter().map(|s| s.len()).sum::<usize>();
        if len > DIRECT_MAX {
            return false;
        }
        let Ok(mut out) = self.out.try_lock() else { return false };
        let mut cx = Context::from_waker(Waker::noop());
        if out.buffer().len() + len >= BUFFER {
            // Make room if the socket takes the buffer now; else the writer task will.
            if !matches!(Pin::new(&mut *out).poll_flush(&mut cx), Poll::Ready(Ok(()))) {
                self.nudge.notify_one();
                return false;
            }
        }
        // Each piece fits the buffer's spare room, so each is copied whole
        // and this never touches the socket.
        let pieces = std::iter::once(&reply.bytes[..]).chain(reply.cached.iter().map(|s| &s[..]));
        for piece in pieces {
            let copied = Pin::new(&mut *out).poll_write(&mut cx, piece);
            debug_assert!(matches!(copied, Poll::Ready(Ok(n)) if n == piece.len()));
        }
        true
    }

    fn send(&self) {
        // Busy: the writer task is mid-write and flushes before letting go.
        let Ok(mut out) = self.out.try_lock() else { return };
        if out.buffer().is_empty() {
            return;
        }
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(&mut *out).poll_flush(&mut cx) {
            Poll::Ready(Ok(())) => {}
            // An error ends the writer task, which meets it too.
            Poll::Ready(Err(_)) | Poll::Pending => self.nudge.notify_one(),
        }
    }
}

/// The writer task: writes queued replies (and what the reader left
/// unsent) until every sender is gone, then closes the write half.
pub(super) async fn write_replies<W: AsyncWrite + Unpin>(
    outbox: Arc<Outbox<W>>,
    mut rx: mpsc::UnboundedReceiver<Reply>,
    buffers: Arc<BufferPool>,
    last_activity: Arc<AtomicU64>,
) {
    loop {
        let mut next = tokio::select! {
            reply = rx.recv() => match reply {
                Some(reply) => Some(reply),
                None => break,
            },
            () = outbox.nudge.notified() => None,
        };
        let mut out = outbox.out.lock().await;
        // Batch whatever is queued into as few syscalls as possible.
        while let Some(reply) = next {
            if write_reply(&mut out, &reply).await.is_err() {
                return;
            }
            buffers.give(reply.bytes);
            next = rx.try_recv().ok();
        }
        if out.flush().await.is_err() {
            return;
        }
        last_activity.store(server_clock_ns(), Ordering::Relaxed);
    }
    let _ = outbox.out.lock().await.shutdown().await;
}

/// Writes one reply's bytes, then its cached slices, as vectored writes of
/// at most `IOV_MAX` pieces. A reply of at least the buffer's size goes
/// straight to the socket after what is buffered: through the buffer, the
/// part left after a short write (the socket full) would be copied into it,
/// up to a quarter of a 1 MiB read's data (measured: 4.5% of the server's
/// CPU on 1 MiB cached reads).
async fn write_reply<W: AsyncWrite + Unpin>(out: &mut BufWriter<W>, reply: &Reply) -> io::Result<()> {
    const IOV_MAX: usize = 1024;
    let mut pieces: Vec<IoSlice<'_>> = Vec::with_capacity(1 + reply.cached.len());
    pieces.push(IoSlice::new(&reply.bytes));
    pieces.extend(reply.cached.iter().map(|s| IoSlice::new(s)));
    let len: usize = pieces.iter().map(|p| p.len()).sum();
    if len >= BUFFER {
        out.flush().await?;
        return write_all_vectored(out.get_mut(), &mut pieces, IOV_MAX).await;
    }
    write_all_vectored(out, &mut pieces, IOV_MAX).await
}

async fn write_all_vectored<W: AsyncWrite + Unpin>(
    out: &mut W,
    pieces: &mut [IoSlice<'_>],
    iov_max: usize,
) -> io::Result<()> {
    let mut rest = pieces;
    while !rest.is_empty() {
        let n = out.write_vectored(&rest[..rest.len().min(iov_max)]).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    Ok(())
}

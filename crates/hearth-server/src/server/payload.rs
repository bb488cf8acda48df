//! Reading a write's payload straight into the cache's block buffers.
//!
//! A write of whole blocks to a backend that keeps block buffers (RAM) ends
//! up in fresh block buffers either way. Reading the payload into one
//! contiguous buffer and then copying it into the blocks costs a second pass
//! over every byte, the larger part of a 1 MiB write's CPU; here what the
//! connection's read buffer already holds is copied, and the rest is read
//! from the socket with vectored reads, one piece per block.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncBufRead, AsyncRead, AsyncReadExt, BufReader};

/// A read half that can fill several buffers with one read.
pub(super) trait ReadVectored: AsyncRead + Unpin + Send {
    /// Reads into `bufs` in order; 0 only at end of stream. By default
    /// into the first non-empty buffer alone (TLS, in-memory pipes).
    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> impl Future<Output = io::Result<usize>> + Send {
        async move {
            match bufs.iter_mut().find(|b| !b.is_empty()) {
                Some(first) => self.read(first).await,
                None => Ok(0),
            }
        }
    }
}

/// One readiness wait, then `readv(2)`: the socket halves.
macro_rules! socket_read_vectored {
    ($half:ty) => {
        impl ReadVectored for $half {
            async fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
                loop {
                    self.readable().await?;
                    match self.try_read_vectored(bufs) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        r => return r,
                    }
                }
            }
        }
    };
}
socket_read_vectored!(tokio::net::tcp::OwnedReadHalf);
socket_read_vectored!(tokio::net::unix::OwnedReadHalf);
impl<S: AsyncRead + Send> ReadVectored for tokio::io::ReadHalf<S> {}

/// Most pieces one `readv(2)` is given (the kernel's `UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// Fills `blocks` with the next `len` bytes of `rd`, in order, and zeroes
/// every byte past them; each buffer must be unshared.
pub(super) async fn read_into_blocks<R: ReadVectored>(
    rd: &mut BufReader<R>,
    blocks: &mut [Arc<[u8]>],
    len: usize,
) -> io::Result<()> {
    let mut pieces: Vec<&mut [u8]> = Vec::with_capacity(blocks.len());
    let mut left = len;
    for block in blocks.iter_mut() {
        let bytes = Arc::get_mut(block).expect("write buffers are unshared");
        let n = left.min(bytes.len());
        let (data, tail) = bytes.split_at_mut(n);
        tail.fill(0);
        left -= n;
        if n > 0 {
            pieces.push(data);
        }
    }
    if left > 0 {
        return Err(io::Error::other("write buffers smaller than the payload"));
    }
    // What the read buffer holds first, so the stream stays in order.
    let mut rest = &mut pieces[..];
    let mut at = 0;
    while !rest.is_empty() && !rd.buffer().is_empty() {
        let held = rd.buffer();
        let n = held.len().min(rest[0].len() - at);
        rest[0][at..at + n].copy_from_slice(&held[..n]);
        Pin::new(&mut *rd).consume(n);
        at += n;
        if at == rest[0].len() {
            rest = &mut rest[1..];
            at = 0;
        }
    }
    if let Some(first) = rest.first_mut() {
        *first = &mut std::mem::take(first)[at..];
    }
    // The rest straight from the socket: the read buffer is empty now.
    let mut slices: Vec<IoSliceMut<'_>> = rest.iter_mut().map(|p| IoSliceMut::new(p)).collect();
    let mut slices = &mut slices[..];
    while !slices.is_empty() {
        let at_once = slices.len().min(IOV_MAX);
        let n = rd.get_mut().read_vectored(&mut slices[..at_once]).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "client closed during a write payload"));
        }
        IoSliceMut::advance_slices(&mut slices, n);
    }
    Ok(())
}

//! Reading a write payload straight into many buffers (the cache blocks it
//! becomes): on sockets one readv per wakeup, so the kernel's copy out of
//! the socket is the payload's only copy before the backend's.

use std::future::poll_fn;
use std::io::{self, IoSliceMut};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncBufRead, AsyncRead, BufReader, ReadBuf, ReadHalf};

/// Most buffers one readv takes (Linux's IOV_MAX).
const MAX_IOVECS: usize = 1024;

/// A connection's read half that can fill several buffers in one read.
pub(super) trait ReadParts: AsyncRead + Unpin {
    /// Reads into `parts` in order, as readv does; Ok(0) at end of stream.
    fn poll_read_parts(&mut self, cx: &mut Context<'_>, parts: &mut [IoSliceMut<'_>]) -> Poll<io::Result<usize>>;
}

macro_rules! socket_read_parts {
    ($half:ty, $stream:ty) => {
        impl ReadParts for $half {
            fn poll_read_parts(
                &mut self,
                cx: &mut Context<'_>,
                parts: &mut [IoSliceMut<'_>],
            ) -> Poll<io::Result<usize>> {
                loop {
                    ready!(AsRef::<$stream>::as_ref(self).poll_read_ready(cx))?;
                    match self.try_read_vectored(parts) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        r => return Poll::Ready(r),
                    }
                }
            }
        }
    };
}
socket_read_parts!(tokio::net::tcp::OwnedReadHalf, tokio::net::TcpStream);
socket_read_parts!(tokio::net::unix::OwnedReadHalf, tokio::net::UnixStream);

/// TLS (and test pipes): one buffer at a time, through the stream's reads.
impl<T: AsyncRead> ReadParts for ReadHalf<T> {
    fn poll_read_parts(&mut self, cx: &mut Context<'_>, parts: &mut [IoSliceMut<'_>]) -> Poll<io::Result<usize>> {
        let Some(first) = parts.iter_mut().find(|p| !p.is_empty()) else { return Poll::Ready(Ok(0)) };
        let mut buf = ReadBuf::new(first);
        ready!(Pin::new(self).poll_read(cx, &mut buf))?;
        Poll::Ready(Ok(buf.filled().len()))
    }
}

/// Fills `parts`, in order, with the next bytes of `rd`: first what its
/// buffer holds, then straight from the stream underneath.
pub(super) async fn read_parts<R: ReadParts>(rd: &mut BufReader<R>, parts: &mut [&mut [u8]]) -> io::Result<()> {
    // The next byte goes to parts[i][at..].
    let (mut i, mut at) = (0, 0);
    let advance = |i: &mut usize, at: &mut usize, mut n: usize, parts: &[&mut [u8]]| {
        while n > 0 {
            let room = parts[*i].len() - *at;
            let step = n.min(room);
            (n, *at) = (n - step, *at + step);
            if *at == parts[*i].len() {
                (*i, *at) = (*i + 1, 0);
            }
        }
    };
    while i < parts.len() && !rd.buffer().is_empty() {
        let buffered = rd.buffer();
        let n = buffered.len().min(parts[i].len() - at);
        parts[i][at..at + n].copy_from_slice(&buffered[..n]);
        Pin::new(&mut *rd).consume(n);
        advance(&mut i, &mut at, n, parts);
    }
    while i < parts.len() {
        let n = {
            let (first, rest) = parts[i..].split_first_mut().expect("i < parts.len()");
            let mut iov: Vec<IoSliceMut<'_>> = std::iter::once(IoSliceMut::new(&mut first[at..]))
                .chain(rest.iter_mut().map(|p| IoSliceMut::new(p)))
                .take(MAX_IOVECS)
                .collect();
            poll_fn(|cx| rd.get_mut().poll_read_parts(cx, &mut iov)).await?
        };
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "client closed during a write payload"));
        }
        advance(&mut i, &mut at, n, parts);
    }
    Ok(())
}

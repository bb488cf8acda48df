//! Accepting connections, the same way for TCP and Unix listeners, within
//! the server's connection limit.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use tracing::warn;

use super::connection::connection;
use super::payload::ReadVectored;
use super::Shared;

/// A client's byte stream, split into a reader and a writer half once the
/// handshake (and any TLS upgrade) is done.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Read: ReadVectored + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    fn into_halves(self) -> (Self::Read, Self::Write);
}

impl Stream for TcpStream {
    type Read = tokio::net::tcp::OwnedReadHalf;
    type Write = tokio::net::tcp::OwnedWriteHalf;
    fn into_halves(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
}

impl Stream for UnixStream {
    type Read = tokio::net::unix::OwnedReadHalf;
    type Write = tokio::net::unix::OwnedWriteHalf;
    fn into_halves(self) -> (Self::Read, Self::Write) {
        self.into_split()
    }
}

/// An in-memory pipe: a connection tested without sockets.
#[cfg(test)]
impl Stream for tokio::io::DuplexStream {
    type Read = ReadHalf<Self>;
    type Write = WriteHalf<Self>;
    fn into_halves(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
}

impl<S: Stream> Stream for crate::tls::TlsStream<S> {
    type Read = ReadHalf<Self>;
    type Write = WriteHalf<Self>;
    fn into_halves(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self)
    }
}

/// Who connected: an address for TCP clients, for access rules and logs.
pub(super) struct Peer {
    pub(super) ip: Option<IpAddr>,
    pub(super) name: String,
}

/// A listener of TCP or Unix connections.
pub(super) trait Listener: Send + 'static {
    type Stream: Stream;
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Stream, Peer)>> + Send;
}

impl Listener for TcpListener {
    type Stream = TcpStream;
    async fn accept(&self) -> io::Result<(TcpStream, Peer)> {
        let (stream, peer) = TcpListener::accept(self).await?;
        let _ = stream.set_nodelay(true);
        Ok((stream, Peer { ip: Some(peer.ip()), name: peer.to_string() }))
    }
}

impl Listener for UnixListener {
    type Stream = UnixStream;
    async fn accept(&self) -> io::Result<(UnixStream, Peer)> {
        let (stream, _) = UnixListener::accept(self).await?;
        Ok((stream, Peer { ip: None, name: "unix".into() }))
    }
}

/// Binds a Unix socket at `path`. A socket file left by a server that has
/// gone (nothing accepts on it) is replaced; one a live server listens on is
/// refused as in use, and a path that is not a socket is never removed.
pub(super) fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if is_socket {
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "Address already in use: a server is listening on this socket",
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path)?,
            // Cannot tell whether it is alive (e.g. no permission): leave it to bind.
            Err(_) => {}
        }
    }
    UnixListener::bind(path)
}

pub(super) async fn accept_loop<L: Listener>(
    l: L,
    ctx: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    loop {
        tokio::select! {
            r = l.accept() => match r {
                Ok((stream, peer)) => {
                    if !ctx.access.permits(peer.ip) {
                        warn!(peer = %peer.name, "connection refused: address not allowed (server.allow/deny)");
                        continue;
                    }
                    let Ok(permit) = ctx.limits.connections.clone().try_acquire_owned() else {
                        warn!(peer = %peer.name, "connection refused: server.max_connections reached");
                        continue;
                    };
                    let conn = connection(stream, peer, ctx.clone(), stop.clone(), drain.clone());
                    tokio::spawn(async move {
                        conn.await;
                        drop(permit);
                    });
                }
                Err(e) => {
                    warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            _ = stop.changed() => return,
        }
    }
}

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
use super::Shared;

/// A client's byte stream, split into a reader and a writer half once the
/// handshake (and any TLS upgrade) is done.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Read: AsyncRead + Unpin + Send + 'static;
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
        widen_send_buffer(&stream);
        Ok((stream, Peer { ip: None, name: "unix".into() }))
    }
}

/// What a Unix connection's send buffer asks for: a whole 1 MiB read reply.
/// A Unix socket's buffer is fixed (208 KiB by default, no autotuning as
/// TCP has), so a large reply took five waits for room, each a wake-up of
/// the writer task and a short read for the client. The kernel doubles the
/// value and caps it at net.core.wmem_max; TCP keeps its autotuning.
const UNIX_SEND_BUFFER: usize = 1 << 20;

fn widen_send_buffer(stream: &UnixStream) {
    // Best effort, as before: a refused size leaves the default.
    let _ = socket2::SockRef::from(stream).set_send_buffer_size(UNIX_SEND_BUFFER);
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

/// A listening socket handed down by a service manager, by its kind.
pub(super) enum Adopted {
    Tcp(TcpListener),
    /// With its path (`(unnamed)` for an abstract or unnamed socket).
    Unix(UnixListener, std::path::PathBuf),
}

/// Takes over an inherited listening socket (systemd's `LISTEN_FDS`),
/// telling TCP from Unix by its address family. A socket that does not
/// listen (a unit with `Accept=yes` passes connections) is refused.
pub(super) fn adopt(fd: std::os::fd::OwnedFd) -> io::Result<Adopted> {
    use std::os::fd::AsRawFd;
    let (mut listening, mut len): (libc::c_int, libc::socklen_t) = (0, std::mem::size_of::<libc::c_int>() as _);
    // SAFETY: fd is open for the call; the option's buffer and length are ours.
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ACCEPTCONN, (&raw mut listening).cast(), &mut len)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if listening == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a listening socket (a socket unit for hearth needs Accept=no)",
        ));
    }
    // SAFETY: an all-zero sockaddr_storage is valid; getsockname fills at most len bytes of it.
    let mut address: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&address) as libc::socklen_t;
    // SAFETY: as above.
    if unsafe { libc::getsockname(fd.as_raw_fd(), (&raw mut address).cast(), &mut len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    match address.ss_family as libc::c_int {
        libc::AF_INET | libc::AF_INET6 => {
            let l = std::net::TcpListener::from(fd);
            l.set_nonblocking(true)?;
            Ok(Adopted::Tcp(TcpListener::from_std(l)?))
        }
        libc::AF_UNIX => {
            let l = std::os::unix::net::UnixListener::from(fd);
            l.set_nonblocking(true)?;
            let path = l.local_addr()?.as_pathname().map_or_else(|| "(unnamed)".into(), Path::to_path_buf);
            Ok(Adopted::Unix(UnixListener::from_std(l)?, path))
        }
        family => {
            Err(io::Error::new(io::ErrorKind::InvalidInput, format!("address family {family} is neither TCP nor Unix")))
        }
    }
}

pub(super) async fn accept_loop<L: Listener>(
    l: L,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    loop {
        tokio::select! {
            r = l.accept() => match r {
                Ok((stream, peer)) => {
                    if !shared.access.permits(peer.ip) {
                        warn!(peer = %peer.name, "connection refused: address not allowed (server.allow/deny)");
                        continue;
                    }
                    let Ok(permit) = shared.limits.connections.clone().try_acquire_owned() else {
                        warn!(peer = %peer.name, "connection refused: server.max_connections reached");
                        continue;
                    };
                    let conn = connection(stream, peer, shared.clone(), stop.clone(), drain.clone());
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

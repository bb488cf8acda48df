//! Accepting connections, the same way for TCP and Unix listeners, within
//! the server's connection limit.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};
use tracing::warn;

use super::connection::connection;
use super::Shared;

/// A listener whose connections split into a reader and a writer half.
pub(super) trait Listener: Send + 'static {
    type Read: AsyncRead + Unpin + Send + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Read, Self::Write, String)>> + Send;
}

impl Listener for TcpListener {
    type Read = tokio::net::tcp::OwnedReadHalf;
    type Write = tokio::net::tcp::OwnedWriteHalf;
    async fn accept(&self) -> io::Result<(Self::Read, Self::Write, String)> {
        let (stream, peer) = TcpListener::accept(self).await?;
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        Ok((rd, wr, peer.to_string()))
    }
}

impl Listener for UnixListener {
    type Read = tokio::net::unix::OwnedReadHalf;
    type Write = tokio::net::unix::OwnedWriteHalf;
    async fn accept(&self) -> io::Result<(Self::Read, Self::Write, String)> {
        let (stream, _) = UnixListener::accept(self).await?;
        let (rd, wr) = stream.into_split();
        Ok((rd, wr, "unix".into()))
    }
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
                Ok((rd, wr, peer)) => {
                    let Ok(permit) = ctx.limits.connections.clone().try_acquire_owned() else {
                        warn!(%peer, "connection refused: server.max_connections reached");
                        continue;
                    };
                    let conn = connection(rd, wr, peer, ctx.clone(), stop.clone(), drain.clone());
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

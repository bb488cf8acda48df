//! One client connection: the handshake, then the transmission loop that
//! frames requests, holds each to the connection's limits and hands it to
//! its command, and the writer that sends replies in completion order.
//!
//! Per connection, one task reads requests and one writes replies. What
//! cannot wait (cache hits, a backend that never waits) is answered inline
//! by the reader, which also writes those replies itself (see `outbox`);
//! everything that may wait for the backend runs on the blocking pool and
//! queues its reply to the writer task when done.

use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_nbd::handshake::{greeting, Negotiation, OptionHeader, Outcome};
use hearth_nbd::{Command, ExportInfo, Request, Session};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info, warn};

use super::background;
use super::buffers::BufferPool;
use super::commands::{self, Job, ReplyTo};
use super::hints::ClientView;
use super::listener::{Peer, Stream};
use super::outbox::{self, Direct, Outbox};
use super::read;
use super::{server_clock_ns, Limits, Shared};
use crate::backend::SharedSlice;
use crate::Export;

/// Payload bytes (in KiB) one connection may hold in flight, or the largest
/// request if that is more; bounds memory per client whatever it pipelines.
const CONNECTION_BUDGET_KIB: u32 = 64 * 1024;
/// Requests one connection may have between reading their header and writing
/// their reply. Past it the server stops reading the socket (back-pressure,
/// as nbdkit does), so a client that never reads replies cannot make the
/// server queue them without bound.
const MAX_QUEUED_REQUESTS: usize = 1024;
/// Requests of one connection running on the blocking pool at once.
const MAX_BLOCKING_PER_CONNECTION: usize = 64;
/// Bytes read from the socket at once: the headers of pipelined requests
/// (and small payloads) arrive in one read instead of two per request.
const READ_BUFFER: usize = 64 * 1024;
/// How long a closing connection keeps trying to deliver queued replies to a
/// client that does not read them.
const REPLY_DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// What a request holds from the moment its header is read until its reply
/// is written: a queue slot and, for READ/WRITE, its payload budget.
pub(super) struct Ticket {
    _slot: OwnedSemaphorePermit,
    _budget: Option<OwnedSemaphorePermit>,
}

/// One reply on its way to the socket: header and any data, then any data
/// sent straight from cached blocks.
pub(super) struct Reply {
    pub(super) bytes: Vec<u8>,
    pub(super) cached: Vec<SharedSlice>,
    /// Released once written, so queued replies count against the limits.
    pub(super) _ticket: Ticket,
}

/// Per-connection state shared by the reader, the writer and the requests.
pub(super) struct Conn {
    pub(super) session: Session,
    pub(super) export: Arc<Export>,
    /// The writer task's queue, for replies of requests run on workers.
    pub(super) replies: mpsc::UnboundedSender<Reply>,
    /// The socket's buffer, for replies the reader writes itself.
    direct: Arc<dyn Direct>,
    /// Buffers for read replies and write payloads, back from the writer.
    pub(super) buffers: Arc<BufferPool>,
    /// Set when the connection ends: CACHE work still running stops.
    pub(super) closed: Arc<AtomicBool>,
    /// `server_clock_ns` of the last request read or reply written.
    last_activity: Arc<AtomicU64>,
}

impl Conn {
    fn touch(&self) {
        self.last_activity.store(server_clock_ns(), Ordering::Relaxed);
    }

    /// Answers a request the reader ran itself: into the socket's buffer if
    /// that needs no waiting, else through the writer task.
    pub(super) fn reply(&self, reply: Reply) {
        if self.direct.offer(&reply) {
            self.buffers.give(reply.bytes);
        } else {
            let _ = self.replies.send(reply);
        }
    }

    /// Sends the replies the reader gathered; called before it may wait.
    fn send_replies(&self) {
        self.direct.send();
    }
}

pub(super) async fn connection<S: Stream>(
    stream: S,
    peer: Peer,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    drain: mpsc::Sender<()>,
) {
    let (ip, peer) = (peer.ip, peer.name);
    let negotiate = async {
        match shared.limits.handshake_timeout {
            Some(limit) => tokio::time::timeout(limit, negotiate(stream, &shared, ip, &peer)).await.map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, format!("not finished within {}s", limit.as_secs()))
            })?,
            None => negotiate(stream, &shared, ip, &peer).await,
        }
    };
    let negotiated = tokio::select! {
        r = negotiate => r,
        _ = stop.changed() => return,
    };
    // Each arm holds the export's connection slot (if it has a limit) until the session ends.
    match negotiated {
        Ok(Some((Negotiated::Plain(stream, session), _slot))) => {
            let (rd, wr) = stream.into_halves();
            serve(rd, wr, session, peer, shared, stop, drain).await
        }
        Ok(Some((Negotiated::Tls(stream, session), _slot))) => {
            let (rd, wr) = stream.into_halves();
            serve(rd, wr, session, peer, shared, stop, drain).await
        }
        Ok(None) => debug!(%peer, "client ended the handshake"),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => debug!(%peer, "client hung up during the handshake"),
        Err(e) => warn!(%peer, error = %e, "handshake failed"),
    }
}

/// Serves one negotiated session until the client leaves, the server stops
/// or the connection idles out.
async fn serve<R, W>(
    rd: R,
    wr: W,
    session: Session,
    peer: String,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    _drain: mpsc::Sender<()>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut rd = BufReader::with_capacity(READ_BUFFER, rd);
    let export = shared.exports[session.export].clone();
    info!(%peer, export = %export.name(), structured = session.structured_replies, "client connected");
    export.metrics().connections.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::unbounded_channel();
    let last_activity = Arc::new(AtomicU64::new(server_clock_ns()));
    let buffers = Arc::new(BufferPool::default());
    let out = Outbox::new(wr);
    let mut writer = tokio::spawn(outbox::write_replies(out.clone(), rx, buffers.clone(), last_activity.clone()));
    let conn = Conn {
        session,
        export: export.clone(),
        replies: tx,
        direct: out,
        buffers,
        closed: Default::default(),
        last_activity,
    };
    let mut client = ClientView::new(&export, shared.limits.max_client_buffers);
    let end = tokio::select! {
        r = transmission(&mut rd, &conn, &mut client, &shared.limits) => r,
        _ = stop.changed() => Ok("server shutting down"),
        why = idle(&conn.last_activity, shared.limits.idle_timeout) => Ok(why),
    };
    match end {
        Ok(why) => info!(%peer, export = %export.name(), why, "client disconnected"),
        Err(e) => warn!(%peer, export = %export.name(), error = %e, "connection closed"),
    }
    conn.closed.store(true, Ordering::Relaxed);
    client.close(&export);
    // In-flight requests hold clones of the sender; the writer ends after
    // their replies, unless the client stopped reading them.
    drop(conn);
    if tokio::time::timeout(REPLY_DRAIN_TIMEOUT, &mut writer).await.is_err() {
        debug!(%peer, "replies left unread; dropping them");
        writer.abort();
    }
    export.metrics().connections.fetch_sub(1, Ordering::Relaxed);
}

/// Resolves once no request has arrived and no reply left for `limit`.
async fn idle(last_activity: &AtomicU64, limit: Option<Duration>) -> &'static str {
    let Some(limit) = limit else { return std::future::pending().await };
    loop {
        let quiet = Duration::from_nanos(server_clock_ns().saturating_sub(last_activity.load(Ordering::Relaxed)));
        if quiet >= limit {
            return "idle timeout";
        }
        tokio::time::sleep(limit - quiet).await;
    }
}

/// A finished handshake: the session and the stream it runs over.
enum Negotiated<S> {
    Plain(S, Session),
    Tls(crate::tls::TlsStream<S>, Session),
}

/// How one round of option haggling ended.
enum Haggled {
    /// With the export's connection slot, if it limits its connections.
    Transmit(Session, Option<OwnedSemaphorePermit>),
    StartTls,
    Close,
}

/// A connection's claim on its export's `max_connections`.
type Slot = Option<OwnedSemaphorePermit>;

/// The exports one client may see (those whose allow list admits its
/// address and, after a TLS upgrade, its identity).
enum Visible {
    All,
    /// Indexes into the server's exports, and their infos.
    Some(Vec<usize>, Vec<ExportInfo>),
}

impl Visible {
    fn to(shared: &Shared, ip: Option<IpAddr>, identity: Option<&crate::tls::Identity>) -> Visible {
        let admits = |i: usize| shared.export_access[i].admits(ip, identity);
        if (0..shared.infos.len()).all(admits) {
            return Visible::All;
        }
        let indexes: Vec<usize> = (0..shared.infos.len()).filter(|&i| admits(i)).collect();
        let infos = indexes.iter().map(|&i| shared.infos[i].clone()).collect();
        Visible::Some(indexes, infos)
    }

    fn infos<'a>(&'a self, shared: &'a Shared) -> &'a [ExportInfo] {
        match self {
            Visible::All => &shared.infos,
            Visible::Some(_, infos) => infos,
        }
    }

    /// The server's number for the export this client numbers `visible`.
    fn index(&self, visible: usize) -> usize {
        match self {
            Visible::All => visible,
            Visible::Some(indexes, _) => indexes[visible],
        }
    }

    /// The session with its export numbered as the server numbers it.
    fn session(&self, mut session: Session) -> Session {
        session.export = self.index(session.export);
        session
    }
}

/// The handshake: greeting, client flags, options — in plain text, then over
/// TLS if the client asks for it (`None`: the client ended it, or chose an
/// export that has all the connections it takes).
async fn negotiate<S: Stream>(
    mut stream: S,
    shared: &Shared,
    ip: Option<IpAddr>,
    peer: &str,
) -> io::Result<Option<(Negotiated<S>, Slot)>> {
    let visible = &Visible::to(shared, ip, None);
    stream.write_all(&greeting()).await?;
    stream.flush().await?;
    let mut flags = [0u8; 4];
    stream.read_exact(&mut flags).await?;
    let mut negotiation = Negotiation::new(flags)?.with_tls(shared.tls_mode);
    match haggle(&mut stream, &mut negotiation, shared, visible).await? {
        Haggled::Transmit(session, slot) => Ok(Some((Negotiated::Plain(stream, visible.session(session)), slot))),
        Haggled::Close => Ok(None),
        Haggled::StartTls => {
            let acceptor = shared.tls.as_ref().expect("STARTTLS is acknowledged only with TLS set up").current();
            let (mut stream, identity) = acceptor.accept(stream).await?;
            if let Some(identity) = &identity {
                info!(%peer, %identity, "TLS client identified");
            }
            let visible = &Visible::to(shared, ip, identity.as_ref());
            match haggle(&mut stream, &mut negotiation, shared, visible).await? {
                Haggled::Transmit(session, slot) => Ok(Some((Negotiated::Tls(stream, visible.session(session)), slot))),
                Haggled::Close => Ok(None),
                Haggled::StartTls => unreachable!("STARTTLS is acknowledged once"),
            }
        }
    }
}

/// Reads options and answers them until one ends the haggling.
async fn haggle<S>(
    stream: &mut S,
    negotiation: &mut Negotiation,
    shared: &Shared,
    visible: &Visible,
) -> io::Result<Haggled>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let infos = visible.infos(shared);
    let mut header = [0u8; OptionHeader::LEN];
    let mut data = Vec::new();
    let mut out = Vec::new();
    loop {
        stream.read_exact(&mut header).await?;
        let h = OptionHeader::decode(&header)?;
        data.resize(h.length as usize, 0);
        stream.read_exact(&mut data).await?;
        out.clear();
        // A chosen export that limits its connections must have a slot free.
        let mut slot = None;
        let outcome = negotiation.handle_admitting(h, &data, infos, &mut out, &mut |chosen| {
            let export = &shared.exports[visible.index(chosen)];
            slot = export.take_connection_slot().map_err(|()| {
                warn!(export = %export.name(), "connection refused: the export's max_connections reached");
                format!("export {:?} has all the connections it takes", export.name())
            })?;
            Ok(())
        });
        let sent = async {
            stream.write_all(&out).await?;
            stream.flush().await
        };
        match outcome {
            Outcome::Continue => sent.await?,
            Outcome::Transmit(s) => {
                sent.await?;
                return Ok(Haggled::Transmit(s, slot));
            }
            Outcome::StartTls => {
                sent.await?;
                return Ok(Haggled::StartTls);
            }
            Outcome::Close => {
                // Clients may hang up after NBD_OPT_ABORT without reading our ACK.
                let _ = sent.await;
                return Ok(Haggled::Close);
            }
        }
    }
}

/// Reads requests and hands each to its command until the client
/// disconnects; returns why.
async fn transmission<R: AsyncRead + Unpin + Send>(
    rd: &mut BufReader<R>,
    conn: &Conn,
    client: &mut ClientView,
    limits: &Limits,
) -> io::Result<&'static str> {
    let (session, export) = (&conn.session, &conn.export);
    let mut header = [0u8; Request::LEN];
    let slots = Arc::new(Semaphore::new(MAX_QUEUED_REQUESTS));
    let workers = Arc::new(Semaphore::new(MAX_BLOCKING_PER_CONNECTION));
    let budget_kib = CONNECTION_BUDGET_KIB.max(limits.max_request.div_ceil(1024));
    let budget = Arc::new(Semaphore::new(budget_kib as usize));
    loop {
        // Waiting here, not reading, is the back-pressure on a client that
        // pipelines more than it reads.
        let slot = acquire(conn, &slots, 1).await;
        if rd.buffer().len() < Request::LEN {
            conn.send_replies();
        }
        match rd.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok("client closed the connection"),
            Err(e) => return Err(e),
        }
        conn.touch();
        let req = Request::decode(&header)?;
        let started = Instant::now();
        if req.command == Command::Disc {
            return Ok("NBD_CMD_DISC");
        }
        if rd.buffer().len() < req.payload_len() as usize {
            conn.send_replies();
        }
        if let Err(errno) = req.validate(session, export.info().size, limits.max_request) {
            skip(rd, u64::from(req.payload_len())).await?;
            debug!(command = req.command.name(), offset = req.offset, length = req.length, %errno, "request refused");
            let msg =
                format!("{} of {} bytes at offset {} refused: {errno}", req.command.name(), req.length, req.offset);
            let ticket = Ticket { _slot: slot, _budget: None };
            commands::send_status(ReplyTo::Reader(conn), session, req, Err((errno, &msg)), ticket);
            export.metrics().record(req.command, false, started.elapsed());
            continue;
        }
        match req.command {
            Command::Read => read::announce(export, client, &req),
            Command::Write => client.data_request(export, &req),
            _ => {}
        }
        background::write_back_held(export);
        // Payload-carrying requests wait for budget (a request is at most
        // max_request, never more than the whole budget).
        let payload_budget = match req.command {
            Command::Read | Command::Write => Some(acquire(conn, &budget, req.length.div_ceil(1024)).await),
            _ => None,
        };
        let job = Job { req, ticket: Ticket { _slot: slot, _budget: payload_budget }, started };
        match req.command {
            Command::Read => read::read(conn, job, &workers).await,
            Command::Write => commands::write(rd, conn, job, &workers).await?,
            Command::Flush => commands::flush(conn, job, &workers).await,
            Command::Trim => commands::trim(conn, job, &workers).await,
            Command::WriteZeroes => commands::write_zeroes(conn, job, &workers).await,
            Command::Cache => commands::cache(conn, job, &workers).await,
            Command::BlockStatus => commands::block_status(conn, job, &workers).await,
            Command::HearthHint => commands::hint(rd, conn, client, job).await?,
            Command::Disc | Command::Unknown(_) => unreachable!("handled above"),
        }
    }
}

/// Takes `n` permits; if they are not free, first sends the replies the
/// reader gathered: it is about to wait, and the client may be waiting for
/// them.
async fn acquire(conn: &Conn, semaphore: &Arc<Semaphore>, n: u32) -> OwnedSemaphorePermit {
    if let Ok(permit) = semaphore.clone().try_acquire_many_owned(n) {
        return permit;
    }
    conn.send_replies();
    semaphore.clone().acquire_many_owned(n).await.expect("never closed")
}

/// Reads and drops `n` payload bytes of a refused write, in bounded chunks.
async fn skip<R: AsyncRead + Unpin>(rd: &mut R, mut n: u64) -> io::Result<()> {
    let mut sink = [0u8; 64 * 1024];
    while n > 0 {
        let want = n.min(sink.len() as u64) as usize;
        rd.read_exact(&mut sink[..want]).await?;
        n -= want as u64;
    }
    Ok(())
}

//! Sockets: accept loops for TCP and Unix listeners, the handshake, and the
//! transmission loop of each connection.
//!
//! Per connection, one task reads requests and one writes replies. Reads the
//! cache can serve entirely are answered inline by the reader; everything
//! that may touch the backend runs on the blocking pool and queues its reply
//! when done, so replies leave in completion order, not request order.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::Op;
use hearth_nbd::handshake::{greeting, Negotiation, OptionHeader, Outcome};
use hearth_nbd::hints::Hint;
use hearth_nbd::transmission::{put_block_status, put_read_data_header, put_status, simple_reply};
use hearth_nbd::{cmd_flags, tflags, Command, Errno, ExportInfo, Request, Session};
use hearth_prefetch::{Class, Demand as PrefetchDemand};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::{Background, BackgroundKind, Export, Origin};

/// Nanoseconds since the server process first asked: the prefetchers' clock.
fn server_clock_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

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
/// Background reads (reloads, prefetches) one connection may have queued.
const MAX_BACKGROUND_PER_CONNECTION: usize = 256;
/// Contexts one connection may have open (CONTEXT_BEGIN without END).
const MAX_OPEN_CONTEXTS: usize = 1024;
/// How long shutdown waits for in-flight requests before flushing anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a closing connection keeps trying to deliver queued replies to a
/// client that does not read them.
const REPLY_DRAIN_TIMEOUT: Duration = Duration::from_secs(3);
/// Most extents one NBD_CMD_BLOCK_STATUS reply describes.
const MAX_EXTENTS: usize = 256;
/// Longest read reply header (a structured OFFSET_DATA chunk header).
const READ_HEADER_MAX: usize = 28;
/// Background reads (reloads, prefetches) waiting for the backend, per export; more are dropped.
const BACKGROUND_QUEUE: usize = 4096;
/// Context ids the server gives connections that name none: the top bit set,
/// apart from the small ids clients choose.
const CONNECTION_CTX_BASE: u32 = 1 << 31;

/// The background threads that read client-evicted blocks placed by the
/// cache and predicted blocks. A few threads per export, apart from the
/// blocking pool, keep these reads from crowding out demand reads while
/// letting several proceed at once on a device that serves them in
/// parallel; they end when the export is dropped.
fn spawn_background(
    export: std::sync::Weak<Export>,
    queue: std::sync::mpsc::Receiver<Background>,
    threads: usize,
) -> anyhow::Result<()> {
    let queue = Arc::new(std::sync::Mutex::new(queue));
    for _ in 0..threads {
        let (export, queue) = (export.clone(), queue.clone());
        std::thread::Builder::new().name("hearth-background".into()).spawn(move || loop {
            let Ok(job) = queue.lock().unwrap_or_else(|e| e.into_inner()).recv() else { return };
            let Some(export) = export.upgrade() else { return };
            job.origin.queued.fetch_sub(1, Ordering::Relaxed);
            if job.origin.closed.load(Ordering::Relaxed) {
                dropped(&export, job.kind, job.block);
                continue;
            }
            let r = match job.kind {
                BackgroundKind::Reload => export.cache.reload(job.block),
                BackgroundKind::Prefetch => export.cache.prefetch(job.block),
            };
            if let Err(e) = r {
                warn!(export = %export.info.name, block = job.block, error = %e, "background read failed");
            }
        })?;
    }
    Ok(())
}

/// Queues a background read for `origin`'s connection, unless it has its
/// share queued already or the export's queue is full.
fn queue_background(export: &Export, origin: &Arc<Origin>, kind: BackgroundKind, block: u64) -> bool {
    if origin.queued.fetch_add(1, Ordering::Relaxed) >= MAX_BACKGROUND_PER_CONNECTION {
        origin.queued.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    let job = Background { kind, block, origin: origin.clone() };
    if export.background.try_send(job).is_err() {
        origin.queued.fetch_sub(1, Ordering::Relaxed);
        return false;
    }
    true
}

/// A background read that will not run: counted by kind, and a prefetch's
/// claim released (its first demand is then a plain miss).
fn dropped(export: &Export, kind: BackgroundKind, block: u64) {
    match kind {
        BackgroundKind::Reload => export.reloads_dropped.fetch_add(1, Ordering::Relaxed),
        BackgroundKind::Prefetch => {
            export.cache.cancel_prefetch(block);
            export.prefetch_stats.dropped.fetch_add(1, Ordering::Relaxed)
        }
    };
}

/// What one connection told us about its client (hint extension).
struct ClientView {
    /// Which block each client buffer holds: reused buffers reveal evictions.
    cct: hearth_placement::Cct,
    /// Buffer address for the next READ or WRITE.
    next_buffer: Option<u64>,
    /// Context of the requests that follow (the connection's own by default).
    ctx: u32,
    own_ctx: u32,
    /// Contexts this connection began and has not ended: ended for it when
    /// it disconnects, so a client cannot leave prefetcher state behind.
    open_contexts: std::collections::HashSet<u32>,
    /// BUFFER hints may name buffers below this address.
    buffer_limit: u64,
    /// This connection's background reads.
    origin: Arc<Origin>,
}

impl ClientView {
    fn new(export: &Export, max_client_buffers: u64) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(CONNECTION_CTX_BASE);
        let own_ctx = NEXT.fetch_add(1, Ordering::Relaxed) | CONNECTION_CTX_BASE;
        ClientView {
            cct: hearth_placement::Cct::new(export.cache.block_size()),
            next_buffer: None,
            ctx: own_ctx,
            own_ctx,
            open_contexts: Default::default(),
            buffer_limit: max_client_buffers.saturating_mul(export.cache.block_size()),
            origin: Default::default(),
        }
    }

    /// The connection is gone: end every context it left open, its own too.
    fn close(&mut self, export: &Export) {
        self.origin.closed.store(true, Ordering::Relaxed);
        if let Some(p) = &export.prefetcher {
            let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
            for ctx in self.open_contexts.drain().chain([self.own_ctx]) {
                p.end(ctx);
            }
        }
    }

    /// The client evicted `block`: let the cache place it and queue its reload.
    fn evicted(&self, export: &Export, block: u64) {
        if let Some(b) = export.cache.client_evicted(block) {
            if !queue_background(export, &self.origin, BackgroundKind::Reload, b) {
                dropped(export, BackgroundKind::Reload, b);
            }
        }
    }

    /// A client-chosen context id, kept clear of the ids connections get.
    fn client_ctx(ctx: u64) -> u32 {
        (ctx as u32) & !CONNECTION_CTX_BASE
    }

    /// Shows a demand read to the export's prefetcher and queues what it predicts.
    fn observe_read(&self, export: &Export, req: &Request) {
        let Some(prefetcher) = &export.prefetcher else { return };
        let blocks = export.cache.block_range(req.offset, u64::from(req.length).max(1));
        let mut p = prefetcher.lock().unwrap_or_else(|e| e.into_inner());
        for block in export.cache.take_wasted() {
            export.prefetch_stats.wasted.fetch_add(1, Ordering::Relaxed);
            p.outcome(block, false);
        }
        let mut predicted = Vec::new();
        for block in blocks {
            let class = export.cache.classify_demand(block);
            if class == Class::Promote {
                export.prefetch_stats.promotes.fetch_add(1, Ordering::Relaxed);
                p.outcome(block, true);
            }
            let demand = PrefetchDemand { block, ctx: self.ctx, time_ns: server_clock_ns(), op: Op::Read, class };
            p.access(&demand, &|b| export.cache.cached_or_prefetching(b), &mut predicted);
        }
        drop(p);
        for b in predicted {
            if export.cache.start_prefetch(b) {
                if queue_background(export, &self.origin, BackgroundKind::Prefetch, b) {
                    export.prefetch_stats.issued.fetch_add(1, Ordering::Relaxed);
                } else {
                    dropped(export, BackgroundKind::Prefetch, b);
                }
            }
        }
    }

    fn begin(&mut self, export: &Export, ctx: u64, class: u64) -> Result<(), String> {
        self.begin_implicitly(Self::client_ctx(ctx))?;
        if let Some(p) = &export.prefetcher {
            p.lock().unwrap_or_else(|e| e.into_inner()).begin(self.ctx, class as u32);
        }
        Ok(())
    }

    fn end(&mut self, export: &Export, ctx: u64) {
        let ctx = Self::client_ctx(ctx);
        self.open_contexts.remove(&ctx);
        if let Some(p) = &export.prefetcher {
            p.lock().unwrap_or_else(|e| e.into_inner()).end(ctx);
        }
        self.ctx = self.own_ctx;
    }

    /// Context `ctx` is used without BEGIN; the prefetcher opens it implicitly.
    fn switch_to(&mut self, ctx: u64) -> Result<(), String> {
        if ctx == 0 {
            self.ctx = self.own_ctx;
            return Ok(());
        }
        self.begin_implicitly(Self::client_ctx(ctx))
    }

    fn begin_implicitly(&mut self, ctx: u32) -> Result<(), String> {
        if !self.open_contexts.contains(&ctx) && self.open_contexts.len() >= MAX_OPEN_CONTEXTS {
            return Err(format!("more than {MAX_OPEN_CONTEXTS} contexts open on one connection"));
        }
        self.open_contexts.insert(ctx);
        self.ctx = ctx;
        Ok(())
    }

    /// Applies a hint payload; an error is the request's EINVAL message.
    fn apply(&mut self, export: &Export, payload: &[u8]) -> Result<(), String> {
        for hint in hearth_nbd::hints::decode(payload)? {
            match hint {
                Hint::Buffer { addr } => {
                    if addr >= self.buffer_limit {
                        return Err(format!(
                            "buffer address {addr:#x} is beyond the {} client buffers this server tracks \
                             (server.max_client_buffers)",
                            self.buffer_limit / export.cache.block_size()
                        ));
                    }
                    self.next_buffer = Some(addr);
                }
                Hint::Evicted { offset, length } => {
                    if !offset.checked_add(length).is_some_and(|e| e <= export.info.size && length > 0) {
                        return Err(format!("eviction hint {offset}+{length} is outside the export"));
                    }
                    for block in export.cache.block_range(offset, length) {
                        self.evicted(export, block);
                    }
                }
                Hint::Context { ctx } => self.switch_to(ctx)?,
                Hint::ContextBegin { ctx, class } => self.begin(export, ctx, class)?,
                Hint::ContextEnd { ctx } => self.end(export, ctx),
            }
        }
        Ok(())
    }

    /// A READ or WRITE is about to use the hinted buffer (if any).
    fn data_request(&mut self, export: &Export, req: &Request) -> Result<(), String> {
        let Some(addr) = self.next_buffer.take() else { return Ok(()) };
        let bs = export.cache.block_size();
        for (i, block) in export.cache.block_range(req.offset, u64::from(req.length).max(1)).enumerate() {
            let slot_addr = addr.checked_add(i as u64 * bs).filter(|&a| a < self.buffer_limit).ok_or_else(|| {
                format!("buffers from {addr:#x} run past the client buffers tracked (server.max_client_buffers)")
            })?;
            if let hearth_placement::Observed::Replaced(old) = self.cct.record(slot_addr, block)? {
                self.evicted(export, old);
            }
        }
        Ok(())
    }
}

pub struct Server {
    exports: Arc<Vec<Arc<Export>>>,
    infos: Arc<Vec<ExportInfo>>,
    tcp: Vec<TcpListener>,
    unix: Vec<(UnixListener, PathBuf)>,
    metrics: Option<TcpListener>,
    limits: Limits,
}

/// What one client may take of the server.
#[derive(Clone)]
struct Limits {
    handshake_timeout: Option<Duration>,
    idle_timeout: Option<Duration>,
    max_request: u32,
    max_client_buffers: u64,
    /// One permit per connection served.
    connections: Arc<Semaphore>,
}

impl Server {
    /// Opens every export and binds every listener (call after
    /// `Config::validate`).
    pub async fn bind(config: &Config) -> anyhow::Result<Server> {
        let max_request = config.server.max_request().map_err(anyhow::Error::msg)?;
        let mut exports = Vec::new();
        for (i, e) in config.exports.iter().enumerate() {
            let cache = e.open().map_err(|err| anyhow::anyhow!("export[{i}] ({:?}): {err}", e.name))?;
            let mut flags = tflags::HAS_FLAGS
                | tflags::SEND_FLUSH
                | tflags::SEND_CACHE
                // One cache per export, shared by all its connections, and
                // FLUSH/FUA act on the whole export: safe for multi-conn.
                | tflags::CAN_MULTI_CONN;
            if e.read_only {
                // Advertise only what is allowed, as qemu-nbd -r and nbdkit -r do.
                flags |= tflags::READ_ONLY;
            } else {
                flags |= tflags::SEND_FUA | tflags::SEND_TRIM | tflags::SEND_WRITE_ZEROES;
            }
            let info = ExportInfo {
                name: e.name.clone(),
                description: e.description.clone(),
                size: cache.size(),
                flags,
                min_block: 1,
                preferred_block: cache.block_size() as u32,
                max_block: max_request,
            };
            info!(export = %e.name, backend = %cache.describe_backend(), size = cache.size(), mode = ?cache.mode(), "export ready");
            let warmup = match &e.warmup {
                Some(w) => {
                    let cache_bytes = e.cache_bytes().map_err(anyhow::Error::msg)?;
                    let settings = w
                        .settings(cache_bytes)
                        .map_err(|(key, m)| anyhow::anyhow!("export[{i}] ({:?}).warmup.{key}: {m}", e.name))?;
                    let persistent = e.path.as_deref().filter(|_| e.backend != crate::config::BackendKind::Memory);
                    let monitor = crate::warmup::start_export(&e.name, &settings, &cache, persistent)
                        .map_err(|err| anyhow::anyhow!("export[{i}] ({:?}): {err}", e.name))?;
                    Some(monitor)
                }
                None => None,
            };
            let (background, queue) = std::sync::mpsc::sync_channel(BACKGROUND_QUEUE);
            let prefetcher = e
                .prefetcher(cache.block_size() as u32)
                .map_err(|err| anyhow::anyhow!("export[{i}] ({:?}): {err}", e.name))?
                .map(std::sync::Mutex::new);
            let export = Arc::new(Export {
                info,
                cache,
                metrics: Default::default(),
                background,
                reloads_dropped: Default::default(),
                prefetcher,
                prefetch_stats: Default::default(),
                warmup,
                cache_lanes: Arc::new(Semaphore::new(e.background_reads())),
            });
            spawn_background(Arc::downgrade(&export), queue, e.background_reads())?;
            exports.push(export);
        }
        let mut tcp = Vec::new();
        for addr in &config.server.listen {
            let l = TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("server.listen {addr:?}: {e}"))?;
            tcp.push(l);
        }
        let mut unix = Vec::new();
        for path in &config.server.unix {
            if std::fs::symlink_metadata(path).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
            {
                // A stale socket from a previous run; anything else we refuse to touch.
                let _ = std::fs::remove_file(path);
            }
            let l = UnixListener::bind(path).map_err(|e| anyhow::anyhow!("server.unix {}: {e}", path.display()))?;
            unix.push((l, path.clone()));
        }
        let metrics = match &config.server.metrics {
            Some(addr) => {
                Some(TcpListener::bind(addr).await.map_err(|e| anyhow::anyhow!("server.metrics {addr:?}: {e}"))?)
            }
            None => None,
        };
        let infos = Arc::new(exports.iter().map(|e| e.info.clone()).collect());
        let seconds = |s: u64| (s > 0).then(|| Duration::from_secs(s));
        let limits = Limits {
            handshake_timeout: seconds(config.server.handshake_timeout),
            idle_timeout: seconds(config.server.idle_timeout),
            max_request,
            max_client_buffers: config.server.max_client_buffers().map_err(anyhow::Error::msg)?,
            connections: Arc::new(Semaphore::new(config.server.max_connections)),
        };
        Ok(Server { exports: Arc::new(exports), infos, tcp, unix, metrics, limits })
    }

    pub fn tcp_addrs(&self) -> Vec<SocketAddr> {
        self.tcp.iter().filter_map(|l| l.local_addr().ok()).collect()
    }
    pub fn unix_paths(&self) -> Vec<PathBuf> {
        self.unix.iter().map(|(_, p)| p.clone()).collect()
    }
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets
    /// in-flight requests finish and flushes every export.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        let (stop_tx, stop_rx) = watch::channel(false);
        // Every connection holds a clone; recv() returns None once all are gone.
        let (drain_tx, mut drained) = mpsc::channel::<()>(1);
        let metrics_task = self.metrics.map(|l| tokio::spawn(crate::metrics::serve(l, self.exports.clone())));
        let ctx = Arc::new(Shared { exports: self.exports.clone(), infos: self.infos, limits: self.limits });
        for l in self.tcp {
            tokio::spawn(accept_loop(l, ctx.clone(), stop_rx.clone(), drain_tx.clone()));
        }
        let mut socket_paths = Vec::new();
        for (l, path) in self.unix {
            socket_paths.push(path);
            tokio::spawn(accept_loop(l, ctx.clone(), stop_rx.clone(), drain_tx.clone()));
        }
        drop(drain_tx);

        shutdown.await;
        info!("shutting down: no new connections, finishing in-flight requests");
        let _ = stop_tx.send(true);
        let all_drained = tokio::time::timeout(DRAIN_TIMEOUT, drained.recv()).await.is_ok();
        if !all_drained {
            warn!("in-flight requests still running after {DRAIN_TIMEOUT:?}; flushing anyway");
        }
        let mut failed = Vec::new();
        for e in self.exports.iter() {
            // A thread of its own: the blocking pool may still be busy with
            // requests of connections that just closed.
            let (export, (done, flushed)) = (e.clone(), tokio::sync::oneshot::channel());
            std::thread::spawn(move || done.send(export.cache.flush()));
            match flushed.await {
                Ok(Ok(())) => {
                    info!(export = %e.info.name, "flushed");
                    // Seal only after a good flush with no request left running:
                    // the seal vouches that no change escaped the log.
                    if let Some(w) = e.warmup.clone().filter(|_| all_drained) {
                        if tokio::task::spawn_blocking(move || w.seal()).await.unwrap_or(false) {
                            info!(export = %e.info.name, "warmup log sealed");
                        }
                    }
                }
                Ok(Err(err)) => {
                    error!(export = %e.info.name, error = %err, "flush at shutdown failed");
                    failed.push(e.info.name.clone());
                }
                Err(_) => {
                    error!(export = %e.info.name, "flush at shutdown panicked");
                    failed.push(e.info.name.clone());
                }
            }
        }
        if let Some(t) = metrics_task {
            t.abort();
        }
        for p in socket_paths {
            let _ = std::fs::remove_file(p);
        }
        if failed.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("flush failed for export(s) {}", failed.join(", "))
        }
    }
}

struct Shared {
    exports: Arc<Vec<Arc<Export>>>,
    infos: Arc<Vec<ExportInfo>>,
    limits: Limits,
}

/// A listener whose connections split into a reader and a writer half.
trait Listener: Send + 'static {
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

async fn accept_loop<L: Listener>(l: L, ctx: Arc<Shared>, mut stop: watch::Receiver<bool>, drain: mpsc::Sender<()>) {
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

/// What a request holds from the moment its header is read until its reply
/// is written: a queue slot and, for READ/WRITE, its payload budget.
struct Ticket {
    _slot: OwnedSemaphorePermit,
    _budget: Option<OwnedSemaphorePermit>,
}

/// One reply on its way to the socket (header and any data).
struct Reply {
    bytes: Vec<u8>,
    /// Released once written, so queued replies count against the limits.
    _ticket: Ticket,
}

/// Per-connection state shared by the reader, the writer and the requests.
struct Conn {
    session: Session,
    export: Arc<Export>,
    replies: mpsc::UnboundedSender<Reply>,
    /// Set when the connection ends: CACHE work still running stops.
    closed: Arc<AtomicBool>,
    /// `server_clock_ns` of the last request read or reply written.
    last_activity: Arc<AtomicU64>,
}

impl Conn {
    fn touch(&self) {
        self.last_activity.store(server_clock_ns(), Ordering::Relaxed);
    }
}

async fn connection<R, W>(
    mut rd: R,
    mut wr: W,
    peer: String,
    ctx: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    _drain: mpsc::Sender<()>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let negotiate = async {
        match ctx.limits.handshake_timeout {
            Some(limit) => {
                tokio::time::timeout(limit, handshake(&mut rd, &mut wr, &ctx.infos)).await.map_err(|_| {
                    io::Error::new(io::ErrorKind::TimedOut, format!("not finished within {}s", limit.as_secs()))
                })?
            }
            None => handshake(&mut rd, &mut wr, &ctx.infos).await,
        }
    };
    let session = tokio::select! {
        r = negotiate => r,
        _ = stop.changed() => return,
    };
    let session = match session {
        Ok(Some(s)) => s,
        Ok(None) => {
            debug!(%peer, "client ended the handshake");
            return;
        }
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            debug!(%peer, "client hung up during the handshake");
            return;
        }
        Err(e) => {
            warn!(%peer, error = %e, "handshake failed");
            return;
        }
    };
    let export = ctx.exports[session.export].clone();
    info!(%peer, export = %export.info.name, structured = session.structured_replies, "client connected");
    export.metrics.connections.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::unbounded_channel();
    let last_activity = Arc::new(AtomicU64::new(server_clock_ns()));
    let mut writer = tokio::spawn(write_replies(wr, rx, last_activity.clone()));
    let conn = Conn { session, export: export.clone(), replies: tx, closed: Default::default(), last_activity };
    let mut client = ClientView::new(&export, ctx.limits.max_client_buffers);
    let end = tokio::select! {
        r = transmission(&mut rd, &conn, &mut client, &ctx.limits) => r,
        _ = stop.changed() => Ok("server shutting down"),
        why = idle(&conn.last_activity, ctx.limits.idle_timeout) => Ok(why),
    };
    match end {
        Ok(why) => info!(%peer, export = %export.info.name, why, "client disconnected"),
        Err(e) => warn!(%peer, export = %export.info.name, error = %e, "connection closed"),
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
    export.metrics.connections.fetch_sub(1, Ordering::Relaxed);
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

async fn handshake<R, W>(rd: &mut R, wr: &mut W, infos: &[ExportInfo]) -> io::Result<Option<Session>>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    wr.write_all(&greeting()).await?;
    wr.flush().await?;
    let mut flags = [0u8; 4];
    rd.read_exact(&mut flags).await?;
    let mut negotiation = Negotiation::new(flags).map_err(protocol)?;
    let mut header = [0u8; OptionHeader::LEN];
    let mut data = Vec::new();
    let mut out = Vec::new();
    loop {
        rd.read_exact(&mut header).await?;
        let h = OptionHeader::decode(&header).map_err(protocol)?;
        data.resize(h.length as usize, 0);
        rd.read_exact(&mut data).await?;
        out.clear();
        let outcome = negotiation.handle(h, &data, infos, &mut out);
        let sent = async {
            wr.write_all(&out).await?;
            wr.flush().await
        };
        match outcome {
            Outcome::Continue => sent.await?,
            Outcome::Transmit(s) => {
                sent.await?;
                return Ok(Some(s));
            }
            Outcome::Close => {
                // Clients may hang up after NBD_OPT_ABORT without reading our ACK.
                let _ = sent.await;
                return Ok(None);
            }
        }
    }
}

fn protocol(e: hearth_nbd::ProtocolError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.0)
}

async fn write_replies<W: AsyncWrite + Unpin>(
    wr: W,
    mut rx: mpsc::UnboundedReceiver<Reply>,
    last_activity: Arc<AtomicU64>,
) {
    let mut out = BufWriter::with_capacity(256 * 1024, wr);
    while let Some(mut reply) = rx.recv().await {
        // Batch whatever is queued into as few syscalls as possible.
        loop {
            if out.write_all(&reply.bytes).await.is_err() {
                return;
            }
            match rx.try_recv() {
                Ok(next) => reply = next,
                Err(_) => break,
            }
        }
        if out.flush().await.is_err() {
            return;
        }
        last_activity.store(server_clock_ns(), Ordering::Relaxed);
    }
    let _ = out.shutdown().await;
}

/// Reads and dispatches requests until the client disconnects; returns why.
async fn transmission<R: AsyncRead + Unpin>(
    rd: &mut R,
    conn: &Conn,
    client: &mut ClientView,
    limits: &Limits,
) -> io::Result<&'static str> {
    let (session, export) = (&conn.session, &conn.export);
    let size = export.info.size;
    let mut header = [0u8; Request::LEN];
    let slots = Arc::new(Semaphore::new(MAX_QUEUED_REQUESTS));
    let workers = Arc::new(Semaphore::new(MAX_BLOCKING_PER_CONNECTION));
    let budget_kib = CONNECTION_BUDGET_KIB.max(limits.max_request.div_ceil(1024));
    let budget = Arc::new(Semaphore::new(budget_kib as usize));
    loop {
        // Waiting here, not reading, is the back-pressure on a client that
        // pipelines more than it reads.
        let slot = slots.clone().acquire_owned().await.expect("never closed");
        match rd.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok("client closed the connection"),
            Err(e) => return Err(e),
        }
        conn.touch();
        let req = Request::decode(&header).map_err(protocol)?;
        let started = Instant::now();
        if req.command == Command::Disc {
            return Ok("NBD_CMD_DISC");
        }
        if let Err(errno) = req.validate(session, size, limits.max_request) {
            skip(rd, u64::from(req.payload_len())).await?;
            debug!(command = req.command.name(), offset = req.offset, length = req.length, %errno, "request refused");
            let msg =
                format!("{} of {} bytes at offset {} refused: {errno}", req.command.name(), req.length, req.offset);
            let ticket = Ticket { _slot: slot, _budget: None };
            send_status(&conn.replies, session, req.cookie, Err((errno, &msg)), ticket);
            export.metrics.record(req.command, false, started.elapsed());
            continue;
        }
        if matches!(req.command, Command::Read | Command::Write) {
            if let Err(why) = client.data_request(export, &req) {
                warn!(export = %export.info.name, error = %why, "buffer hint ignored");
            }
        }
        if req.command == Command::Read {
            client.observe_read(export, &req);
        }
        let len = req.length as usize;
        // Payload-carrying requests wait for budget (a request is at most
        // max_request, never more than the whole budget).
        let payload_budget = match req.command {
            Command::Read | Command::Write => budget.clone().acquire_many_owned(req.length.div_ceil(1024)).await.ok(),
            _ => None,
        };
        let ticket = Ticket { _slot: slot, _budget: payload_budget };
        let tx = &conn.replies;
        match req.command {
            Command::Read => {
                // Header and data share one buffer: one write per reply.
                let mut reply = Vec::with_capacity(READ_HEADER_MAX + len);
                if len == 0 {
                    // An OFFSET_DATA chunk must carry at least one byte.
                    put_status(&mut reply, session, req.cookie, Ok(()));
                    finish_read(tx, export, &req, Ok(reply), ticket, started);
                    continue;
                }
                if session.structured_replies {
                    put_read_data_header(&mut reply, req.cookie, req.offset, req.length);
                } else {
                    reply.extend_from_slice(&simple_reply(req.cookie, None));
                }
                if export.cache.read_cached(req.offset, len, &mut reply) {
                    finish_read(tx, export, &req, Ok(reply), ticket, started);
                    continue;
                }
                let header = reply.len();
                reply.resize(header + len, 0);
                let worker = workers.clone().acquire_owned().await.expect("never closed");
                let (tx, session, export) = (tx.clone(), *session, export.clone());
                tokio::task::spawn_blocking(move || {
                    let r = export.cache.read(req.offset, &mut reply[header..]).map(|()| reply).map_err(|e| {
                        warn!(export = %export.info.name, offset = req.offset, length = req.length, error = %e, "read failed");
                        let mut status = Vec::new();
                        put_status(&mut status, &session, req.cookie, Err((Errno::from_io(&e), &e.to_string())));
                        status
                    });
                    finish_read(&tx, &export, &req, r, ticket, started);
                    drop(worker);
                });
            }
            Command::Write => {
                let mut data = Vec::with_capacity(len);
                (&mut *rd).take(len as u64).read_to_end(&mut data).await?;
                if data.len() < len {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "client closed during a write payload"));
                }
                let worker = workers.clone().acquire_owned().await.expect("never closed");
                let (tx, session, export) = (tx.clone(), *session, export.clone());
                tokio::task::spawn_blocking(move || {
                    let r = export.cache.write(req.offset, &data, req.fua());
                    if r.is_ok() {
                        export.metrics.bytes_written.fetch_add(data.len() as u64, Ordering::Relaxed);
                    }
                    drop(data);
                    finish(&tx, &session, &export, &req, r, started, ticket);
                    drop(worker);
                });
            }
            Command::Flush | Command::Trim | Command::WriteZeroes | Command::Cache => {
                // CACHE may read up to the whole export: the export runs only
                // a few at a time, and they stop when their connection ends.
                let lane = match req.command {
                    Command::Cache => Some(export.cache_lanes.clone().acquire_owned().await.expect("never closed")),
                    _ => None,
                };
                let worker = workers.clone().acquire_owned().await.expect("never closed");
                let (tx, session, export, closed) = (tx.clone(), *session, export.clone(), conn.closed.clone());
                tokio::task::spawn_blocking(move || {
                    let c = &export.cache;
                    let (offset, length, fua) = (req.offset, u64::from(req.length), req.fua());
                    let r = match req.command {
                        Command::Flush => {
                            let r = c.flush();
                            // The warmup log is best effort: its failure does not fail the FLUSH.
                            if let Some(w) = &export.warmup {
                                w.sync();
                            }
                            r
                        }
                        Command::Trim => c.discard(offset, length, true, true, fua),
                        Command::WriteZeroes => {
                            c.discard(offset, length, false, req.flags & cmd_flags::NO_HOLE == 0, fua)
                        }
                        _ => prefetch(c, offset, length, &closed),
                    };
                    drop(lane);
                    finish(&tx, &session, &export, &req, r, started, ticket);
                    drop(worker);
                });
            }
            Command::BlockStatus => {
                let worker = workers.clone().acquire_owned().await.expect("never closed");
                let (tx, session, export) = (tx.clone(), *session, export.clone());
                tokio::task::spawn_blocking(move || {
                    let max = if req.flags & cmd_flags::REQ_ONE != 0 { 1 } else { MAX_EXTENTS };
                    let map = export.cache.extents(req.offset, u64::from(req.length), max);
                    let ok = matches!(&map, Ok(m) if !m.is_empty());
                    let mut head = Vec::new();
                    match map {
                        Ok(m) if !m.is_empty() => {
                            // Holes read as zeroes: NBD_STATE_HOLE | NBD_STATE_ZERO.
                            let extents: Vec<(u32, u32)> =
                                m.iter().map(|e| (e.len as u32, if e.hole { 3 } else { 0 })).collect();
                            put_block_status(
                                &mut head,
                                req.cookie,
                                session.base_allocation.expect("validated"),
                                &extents,
                            );
                        }
                        Ok(_) => put_status(
                            &mut head,
                            &session,
                            req.cookie,
                            Err((Errno::Inval, "block status of zero bytes")),
                        ),
                        Err(e) => {
                            put_status(&mut head, &session, req.cookie, Err((Errno::from_io(&e), &e.to_string())))
                        }
                    }
                    let _ = tx.send(Reply { bytes: head, _ticket: ticket });
                    export.metrics.record(req.command, ok, started.elapsed());
                    drop(worker);
                });
            }
            Command::HearthHint => {
                let mut payload = vec![0u8; len];
                rd.read_exact(&mut payload).await?;
                let r = client.apply(export, &payload);
                if let Err(why) = &r {
                    debug!(export = %export.info.name, error = %why, "hint refused");
                }
                let status = r.as_ref().map(|_| ()).map_err(|why| (Errno::Inval, why.as_str()));
                send_status(tx, session, req.cookie, status, ticket);
                export.metrics.record(req.command, r.is_ok(), started.elapsed());
            }
            Command::Disc | Command::Unknown(_) => unreachable!("handled above"),
        }
    }
}

/// NBD_CMD_CACHE: pull the range into the cache, one bounded chunk at a
/// time, until done or the connection that asked is gone.
fn prefetch(cache: &crate::cache::BlockCache, offset: u64, len: u64, closed: &AtomicBool) -> io::Result<()> {
    const CHUNK: u64 = 1 << 20;
    let mut scratch = vec![0u8; CHUNK.min(len) as usize];
    let mut at = offset;
    while at < offset + len {
        if closed.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "connection closed"));
        }
        let n = CHUNK.min(offset + len - at) as usize;
        cache.read(at, &mut scratch[..n])?;
        at += n as u64;
    }
    Ok(())
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

fn send_status(
    tx: &mpsc::UnboundedSender<Reply>,
    session: &Session,
    cookie: u64,
    r: Result<(), (Errno, &str)>,
    ticket: Ticket,
) {
    let mut head = Vec::with_capacity(32);
    put_status(&mut head, session, cookie, r);
    let _ = tx.send(Reply { bytes: head, _ticket: ticket });
}

fn finish(
    tx: &mpsc::UnboundedSender<Reply>,
    session: &Session,
    export: &Export,
    req: &Request,
    r: io::Result<()>,
    started: Instant,
    ticket: Ticket,
) {
    match &r {
        Ok(()) => send_status(tx, session, req.cookie, Ok(()), ticket),
        Err(e) => {
            let errno = Errno::from_io(e);
            warn!(export = %export.info.name, command = req.command.name(), offset = req.offset, length = req.length, error = %e, "request failed");
            send_status(tx, session, req.cookie, Err((errno, &e.to_string())), ticket);
        }
    }
    export.metrics.record(req.command, r.is_ok(), started.elapsed());
}

/// Queues a read's reply: `Ok(header and data)` or `Err(error reply)`.
fn finish_read(
    tx: &mpsc::UnboundedSender<Reply>,
    export: &Export,
    req: &Request,
    r: Result<Vec<u8>, Vec<u8>>,
    ticket: Ticket,
    started: Instant,
) {
    let ok = r.is_ok();
    if ok {
        export.metrics.bytes_read.fetch_add(u64::from(req.length), Ordering::Relaxed);
    }
    let _ = tx.send(Reply { bytes: r.unwrap_or_else(|e| e), _ticket: ticket });
    export.metrics.record(req.command, ok, started.elapsed());
}

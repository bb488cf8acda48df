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
use std::sync::atomic::Ordering;
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

use crate::config::{Config, MAX_REQUEST};
use crate::{Background, Export};

/// Nanoseconds since the server process first asked: the prefetchers' clock.
fn server_clock_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Payload bytes (in KiB) one connection may hold in flight; bounds memory
/// per client whatever it pipelines.
const CONNECTION_BUDGET_KIB: u32 = 64 * 1024;
/// How long shutdown waits for in-flight requests before flushing anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);
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
            let (r, what) = match job {
                Background::Reload(b) => (export.cache.reload(b), b),
                Background::Prefetch(b) => (export.cache.prefetch(b), b),
            };
            if let Err(e) = r {
                warn!(export = %export.info.name, block = what, error = %e, "background read failed");
            }
        })?;
    }
    Ok(())
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
}

impl ClientView {
    fn new(export: &Export) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(CONNECTION_CTX_BASE);
        let own_ctx = NEXT.fetch_add(1, Ordering::Relaxed) | CONNECTION_CTX_BASE;
        ClientView {
            cct: hearth_placement::Cct::new(export.cache.block_size()),
            next_buffer: None,
            ctx: own_ctx,
            own_ctx,
        }
    }

    /// The client evicted `block`: let the cache place it and queue its reload.
    fn evicted(export: &Export, block: u64) {
        if let Some(b) = export.cache.client_evicted(block) {
            if export.background.try_send(Background::Reload(b)).is_err() {
                export.reloads_dropped.fetch_add(1, Ordering::Relaxed);
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
                if export.background.try_send(Background::Prefetch(b)).is_ok() {
                    export.prefetch_stats.issued.fetch_add(1, Ordering::Relaxed);
                } else {
                    export.reloads_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn begin(&mut self, export: &Export, ctx: u64, class: u64) {
        self.ctx = Self::client_ctx(ctx);
        if let Some(p) = &export.prefetcher {
            p.lock().unwrap_or_else(|e| e.into_inner()).begin(self.ctx, class as u32);
        }
    }

    fn end(&mut self, export: &Export, ctx: u64) {
        if let Some(p) = &export.prefetcher {
            p.lock().unwrap_or_else(|e| e.into_inner()).end(Self::client_ctx(ctx));
        }
        self.ctx = self.own_ctx;
    }

    /// Applies a hint payload; an error is the request's EINVAL message.
    fn apply(&mut self, export: &Export, payload: &[u8]) -> Result<(), String> {
        for hint in hearth_nbd::hints::decode(payload)? {
            match hint {
                Hint::Buffer { addr } => self.next_buffer = Some(addr),
                Hint::Evicted { offset, length } => {
                    if !offset.checked_add(length).is_some_and(|e| e <= export.info.size && length > 0) {
                        return Err(format!("eviction hint {offset}+{length} is outside the export"));
                    }
                    for block in export.cache.block_range(offset, length) {
                        Self::evicted(export, block);
                    }
                }
                Hint::Context { ctx } => self.ctx = if ctx == 0 { self.own_ctx } else { Self::client_ctx(ctx) },
                Hint::ContextBegin { ctx, class } => self.begin(export, ctx, class),
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
            let slot_addr = addr.checked_add(i as u64 * bs).ok_or("buffer address overflows")?;
            if let hearth_placement::Observed::Replaced(old) = self.cct.record(slot_addr, block)? {
                Self::evicted(export, old);
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
    handshake_timeout: Option<Duration>,
}

impl Server {
    /// Opens every export and binds every listener (call after
    /// `Config::validate`).
    pub async fn bind(config: &Config) -> anyhow::Result<Server> {
        let mut exports = Vec::new();
        for (i, e) in config.exports.iter().enumerate() {
            let cache = e.open().map_err(|err| anyhow::anyhow!("export[{i}] ({:?}): {err}", e.name))?;
            let mut flags = tflags::HAS_FLAGS
                | tflags::SEND_FLUSH
                | tflags::SEND_FUA
                | tflags::SEND_TRIM
                | tflags::SEND_WRITE_ZEROES
                | tflags::SEND_CACHE
                // One cache per export, shared by all its connections, and
                // FLUSH/FUA act on the whole export: safe for multi-conn.
                | tflags::CAN_MULTI_CONN;
            if e.read_only {
                flags |= tflags::READ_ONLY;
            }
            let info = ExportInfo {
                name: e.name.clone(),
                description: e.description.clone(),
                size: cache.size(),
                flags,
                min_block: 1,
                preferred_block: cache.block_size() as u32,
                max_block: MAX_REQUEST,
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
        let handshake_timeout =
            (config.server.handshake_timeout > 0).then(|| Duration::from_secs(config.server.handshake_timeout));
        Ok(Server { exports: Arc::new(exports), infos, tcp, unix, metrics, handshake_timeout })
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
        let ctx = Arc::new(Shared {
            exports: self.exports.clone(),
            infos: self.infos,
            handshake_timeout: self.handshake_timeout,
        });
        for l in self.tcp {
            tokio::spawn(accept_tcp(l, ctx.clone(), stop_rx.clone(), drain_tx.clone()));
        }
        let mut socket_paths = Vec::new();
        for (l, path) in self.unix {
            socket_paths.push(path);
            tokio::spawn(accept_unix(l, ctx.clone(), stop_rx.clone(), drain_tx.clone()));
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
            let export = e.clone();
            match tokio::task::spawn_blocking(move || export.cache.flush()).await {
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
                Err(join) => {
                    error!(export = %e.info.name, error = %join, "flush at shutdown panicked");
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
    handshake_timeout: Option<Duration>,
}

async fn accept_tcp(l: TcpListener, ctx: Arc<Shared>, mut stop: watch::Receiver<bool>, drain: mpsc::Sender<()>) {
    loop {
        tokio::select! {
            r = l.accept() => match r {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let (rd, wr) = stream.into_split();
                    tokio::spawn(connection(rd, wr, peer.to_string(), ctx.clone(), stop.clone(), drain.clone()));
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

async fn accept_unix(l: UnixListener, ctx: Arc<Shared>, mut stop: watch::Receiver<bool>, drain: mpsc::Sender<()>) {
    loop {
        tokio::select! {
            r = l.accept() => match r {
                Ok((stream, _)) => {
                    let (rd, wr) = stream.into_split();
                    tokio::spawn(connection(rd, wr, "unix".into(), ctx.clone(), stop.clone(), drain.clone()));
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

/// One reply on its way to the socket (header and any data).
struct Reply {
    bytes: Vec<u8>,
    /// Released once written, so queued replies count against the budget.
    _budget: Option<OwnedSemaphorePermit>,
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
        match ctx.handshake_timeout {
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
    let writer = tokio::spawn(write_replies(wr, rx));
    let budget = Arc::new(Semaphore::new(CONNECTION_BUDGET_KIB as usize));
    let end = tokio::select! {
        r = transmission(&mut rd, &session, &export, &tx, &budget) => r,
        _ = stop.changed() => Ok("server shutting down"),
    };
    match end {
        Ok(why) => info!(%peer, export = %export.info.name, why, "client disconnected"),
        Err(e) => warn!(%peer, export = %export.info.name, error = %e, "connection closed"),
    }
    // In-flight requests hold clones of tx; the writer ends after their replies.
    drop(tx);
    let _ = writer.await;
    export.metrics.connections.fetch_sub(1, Ordering::Relaxed);
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

async fn write_replies<W: AsyncWrite + Unpin>(wr: W, mut rx: mpsc::UnboundedReceiver<Reply>) {
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
    }
    let _ = out.shutdown().await;
}

/// Reads and dispatches requests until the client disconnects; returns why.
async fn transmission<R: AsyncRead + Unpin>(
    rd: &mut R,
    session: &Session,
    export: &Arc<Export>,
    tx: &mpsc::UnboundedSender<Reply>,
    budget: &Arc<Semaphore>,
) -> io::Result<&'static str> {
    let size = export.info.size;
    let mut header = [0u8; Request::LEN];
    let mut client = ClientView::new(export);
    loop {
        match rd.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok("client closed the connection"),
            Err(e) => return Err(e),
        }
        let req = Request::decode(&header).map_err(protocol)?;
        let started = Instant::now();
        if req.command == Command::Disc {
            return Ok("NBD_CMD_DISC");
        }
        if let Err(errno) = req.validate(session, size, MAX_REQUEST) {
            skip(rd, u64::from(req.payload_len())).await?;
            debug!(command = req.command.name(), offset = req.offset, length = req.length, %errno, "request refused");
            let msg =
                format!("{} of {} bytes at offset {} refused: {errno}", req.command.name(), req.length, req.offset);
            send_status(tx, session, req.cookie, Err((errno, &msg)));
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
        // Only payload-carrying requests count against the memory budget
        // (their length is at most MAX_REQUEST, well under the budget).
        let permit = match req.command {
            Command::Read | Command::Write => budget.clone().acquire_many_owned(req.length.div_ceil(1024)).await.ok(),
            _ => None,
        };
        match req.command {
            Command::Read => {
                // Header and data share one buffer: one write per reply.
                let mut reply = Vec::with_capacity(READ_HEADER_MAX + len);
                if len == 0 {
                    // An OFFSET_DATA chunk must carry at least one byte.
                    put_status(&mut reply, session, req.cookie, Ok(()));
                    finish_read(tx, export, &req, Ok(reply), permit, started);
                    continue;
                }
                if session.structured_replies {
                    put_read_data_header(&mut reply, req.cookie, req.offset, req.length);
                } else {
                    reply.extend_from_slice(&simple_reply(req.cookie, None));
                }
                if export.cache.read_cached(req.offset, len, &mut reply) {
                    finish_read(tx, export, &req, Ok(reply), permit, started);
                    continue;
                }
                let header = reply.len();
                reply.resize(header + len, 0);
                let (tx, session, export) = (tx.clone(), *session, export.clone());
                tokio::task::spawn_blocking(move || {
                    let r = export.cache.read(req.offset, &mut reply[header..]).map(|()| reply).map_err(|e| {
                        warn!(export = %export.info.name, offset = req.offset, length = req.length, error = %e, "read failed");
                        let mut status = Vec::new();
                        put_status(&mut status, &session, req.cookie, Err((Errno::from_io(&e), &e.to_string())));
                        status
                    });
                    finish_read(&tx, &export, &req, r, permit, started);
                });
            }
            Command::Write => {
                let mut data = Vec::with_capacity(len);
                (&mut *rd).take(len as u64).read_to_end(&mut data).await?;
                if data.len() < len {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "client closed during a write payload"));
                }
                let (tx, session, export) = (tx.clone(), *session, export.clone());
                tokio::task::spawn_blocking(move || {
                    let r = export.cache.write(req.offset, &data, req.fua());
                    if r.is_ok() {
                        export.metrics.bytes_written.fetch_add(data.len() as u64, Ordering::Relaxed);
                    }
                    drop(permit);
                    finish(&tx, &session, &export, &req, r, started);
                });
            }
            Command::Flush | Command::Trim | Command::WriteZeroes | Command::Cache => {
                let (tx, session, export) = (tx.clone(), *session, export.clone());
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
                        _ => prefetch(c, offset, length),
                    };
                    finish(&tx, &session, &export, &req, r, started);
                });
            }
            Command::BlockStatus => {
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
                    let _ = tx.send(Reply { bytes: head, _budget: None });
                    export.metrics.record(req.command, ok, started.elapsed());
                });
            }
            Command::HearthHint => {
                let mut payload = vec![0u8; len];
                rd.read_exact(&mut payload).await?;
                let r = client.apply(export, &payload);
                if let Err(why) = &r {
                    debug!(export = %export.info.name, error = %why, "hint refused");
                }
                send_status(
                    tx,
                    session,
                    req.cookie,
                    r.as_ref().map(|_| ()).map_err(|why| (Errno::Inval, why.as_str())),
                );
                export.metrics.record(req.command, r.is_ok(), started.elapsed());
            }
            Command::Disc | Command::Unknown(_) => unreachable!("handled above"),
        }
    }
}

/// NBD_CMD_CACHE: pull the range into the cache, one bounded chunk at a time.
fn prefetch(cache: &crate::cache::BlockCache, offset: u64, len: u64) -> io::Result<()> {
    const CHUNK: u64 = 1 << 20;
    let mut scratch = vec![0u8; CHUNK.min(len) as usize];
    let mut at = offset;
    while at < offset + len {
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

fn send_status(tx: &mpsc::UnboundedSender<Reply>, session: &Session, cookie: u64, r: Result<(), (Errno, &str)>) {
    let mut head = Vec::with_capacity(32);
    put_status(&mut head, session, cookie, r);
    let _ = tx.send(Reply { bytes: head, _budget: None });
}

fn finish(
    tx: &mpsc::UnboundedSender<Reply>,
    session: &Session,
    export: &Export,
    req: &Request,
    r: io::Result<()>,
    started: Instant,
) {
    match &r {
        Ok(()) => send_status(tx, session, req.cookie, Ok(())),
        Err(e) => {
            let errno = Errno::from_io(e);
            warn!(export = %export.info.name, command = req.command.name(), offset = req.offset, length = req.length, error = %e, "request failed");
            send_status(tx, session, req.cookie, Err((errno, &e.to_string())));
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
    permit: Option<OwnedSemaphorePermit>,
    started: Instant,
) {
    let ok = r.is_ok();
    if ok {
        export.metrics.bytes_read.fetch_add(u64::from(req.length), Ordering::Relaxed);
    }
    let _ = tx.send(Reply { bytes: r.unwrap_or_else(|e| e), _budget: permit });
    export.metrics.record(req.command, ok, started.elapsed());
}

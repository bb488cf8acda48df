//! The NBD server: binds every export and listener, serves connections
//! until shutdown, then drains them and flushes every export.
//!
//! A map of the module:
//! - `listener`: one accept loop for TCP and Unix listeners, with the
//!   connection limit;
//! - `connection`: one client — handshake (upgraded to TLS on STARTTLS),
//!   request framing and per-connection limits, the reply writer;
//! - `read`: NBD_CMD_READ end to end;
//! - `commands`: one function per other NBD command, and running work on
//!   a connection's workers;
//! - `hints`: what a connection's hints say about its client's cache;
//! - `prefetch`: the prefetch driver, a READ's round with the prefetcher;
//! - `background`: the export's low-priority reads (reloads, prefetches);
//! - `buffers`: payload buffers a connection reuses.

mod background;
mod buffers;
mod commands;
mod connection;
mod hints;
mod listener;
mod outbox;
mod prefetch;
mod read;
mod sequential;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_nbd::handshake::Tls;
use hearth_nbd::{tflags, ExportInfo};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch, Semaphore};
use tracing::{error, info, warn};

use crate::access::Access;
use crate::config::Settings;
use crate::error::ServeError;
use crate::{Export, ExportParts};
pub(crate) use sequential::SequentialCutoff;

/// Nanoseconds since the server process first asked: the prefetchers' clock.
fn server_clock_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// How long shutdown waits for in-flight requests before flushing anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Background reads (reloads, prefetches) waiting for the backend, per export; more are dropped.
const BACKGROUND_QUEUE: usize = 4096;

pub struct Server {
    exports: Arc<Vec<Arc<Export>>>,
    infos: Arc<Vec<ExportInfo>>,
    tcp: Vec<TcpListener>,
    unix: Vec<UnixSocket>,
    metrics: Option<TcpListener>,
    /// `POST /mode` on the metrics listener, when on.
    admin: Option<crate::admin::Admin>,
    limits: Limits,
    tls_mode: Tls,
    tls: Option<crate::tls::Reloadable>,
    access: Access,
    export_access: Vec<Access>,
}

/// A Unix listener and its path; `remove_at_exit` unless it was inherited
/// (the service manager that bound it owns the file).
struct UnixSocket {
    listener: UnixListener,
    path: PathBuf,
    remove_at_exit: bool,
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
    /// Binds every listener, then opens every export (so a listener that
    /// cannot bind fails before any backend is opened or pre-loaded).
    /// `inherited` are listening sockets a service manager bound for us
    /// (systemd socket activation), TCP or Unix, served as well.
    pub async fn bind(config: &Settings, inherited: Vec<std::os::fd::OwnedFd>) -> Result<Server, ServeError> {
        let max_request = config.server.max_request;
        let metrics = match &config.server.metrics {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|source| ServeError::Bind {
                what: "server.metrics",
                address: format!("{addr:?}"),
                source,
            })?),
            None => None,
        };
        // Checked before any other listener binds or export opens: a refused start leaves nothing behind.
        let admin = match &metrics {
            Some(listener) if config.server.admin => {
                let admin = crate::admin::Admin::new(config.server.admin_token_file.as_deref())?;
                let bound = listener.local_addr().map_err(|source| ServeError::Bind {
                    what: "server.metrics",
                    address: format!("{:?}", config.server.metrics.as_deref().unwrap_or_default()),
                    source,
                })?;
                admin.check_address(bound)?;
                Some(admin)
            }
            _ => None,
        };
        let mut tcp = Vec::new();
        for addr in &config.server.listen {
            let l = TcpListener::bind(addr).await.map_err(|source| ServeError::Bind {
                what: "server.listen",
                address: format!("{addr:?}"),
                source,
            })?;
            tcp.push(l);
        }
        let mut unix = Vec::new();
        for path in &config.server.unix {
            let l = listener::bind_unix(path).map_err(|source| ServeError::Bind {
                what: "server.unix",
                address: path.display().to_string(),
                source,
            })?;
            unix.push(UnixSocket { listener: l, path: path.clone(), remove_at_exit: true });
        }
        for fd in inherited {
            let number = std::os::fd::AsRawFd::as_raw_fd(&fd);
            let inherited_error =
                |source| ServeError::Bind { what: "LISTEN_FDS", address: format!("fd {number}"), source };
            match listener::adopt(fd).map_err(inherited_error)? {
                listener::Adopted::Tcp(l) => tcp.push(l),
                listener::Adopted::Unix(l, path) => unix.push(UnixSocket { listener: l, path, remove_at_exit: false }),
            }
        }
        let mut exports = Vec::new();
        for (i, e) in config.exports.iter().enumerate() {
            let failed = |source| ServeError::Export { index: i, name: e.name.clone(), source };
            let (cache, cache_device, upstream) = e.open().map_err(failed)?;
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
                flags |= tflags::SEND_FUA | tflags::SEND_WRITE_ZEROES;
                if e.options.trim {
                    flags |= tflags::SEND_TRIM;
                }
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
            info!(export = %e.name, backend = %cache.describe_backend(), size = cache.size(), mode = cache.mode().name(), "export ready");
            let warmup = match &e.warmup {
                Some(settings) => Some(
                    crate::warmup::start_export(&e.name, settings, &cache, e.backend_file())
                        .map_err(|err| failed(err.into()))?,
                ),
                None => None,
            };
            let access_log = match &e.access_log {
                Some(path) => Some(crate::access_log::AccessLog::open(path).map_err(|err| failed(err.into()))?),
                None => None,
            };
            let advisor = match &e.what_if {
                Some(what_if) => crate::advice::Advisor::new(&e.policy, e.cache_bytes, cache.block_size(), what_if)
                    .map_err(failed)?,
                None => None,
            };
            let (background, queue) = std::sync::mpsc::sync_channel(BACKGROUND_QUEUE);
            let parts = ExportParts {
                info,
                cache,
                write_back_limit: e.write_back_limit,
                prefetcher: e.prefetcher().map_err(failed)?,
                warmup,
                cache_lanes: e.background_reads,
                sequential_cutoff: e.sequential_cutoff,
                max_connections: e.max_connections,
                access_log,
                advisor,
                cache_device,
                upstream,
            };
            let export = Arc::new(Export::new(parts, background));
            background::spawn_background(Arc::downgrade(&export), queue, e.background_reads)
                .map_err(ServeError::Thread)?;
            if let Some(max_age) = e.dirty_max_age {
                background::spawn_cleaner(Arc::downgrade(&export), max_age).map_err(ServeError::Thread)?;
            }
            exports.push(export);
        }
        let infos = Arc::new(exports.iter().map(|e| e.info().clone()).collect());
        let limits = Limits {
            handshake_timeout: config.server.handshake_timeout,
            idle_timeout: config.server.idle_timeout,
            max_request,
            max_client_buffers: config.server.max_client_buffers,
            connections: Arc::new(Semaphore::new(config.server.max_connections)),
        };
        let tls = match &config.server.tls_credentials {
            Some(credentials) => Some(crate::tls::Reloadable::new(credentials).map_err(ServeError::Tls)?),
            None => None,
        };
        let tls_mode = config.server.tls.negotiation();
        let access = config.server.access.clone();
        let export_access = config.exports.iter().map(|e| e.access.clone()).collect();
        Ok(Server {
            exports: Arc::new(exports),
            infos,
            tcp,
            unix,
            metrics,
            admin,
            limits,
            tls_mode,
            tls,
            access,
            export_access,
        })
    }

    pub fn tcp_addrs(&self) -> Vec<SocketAddr> {
        self.tcp.iter().filter_map(|l| l.local_addr().ok()).collect()
    }
    pub fn unix_paths(&self) -> Vec<PathBuf> {
        self.unix.iter().map(|u| u.path.clone()).collect()
    }
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }
    /// The TLS credentials, to read again (SIGHUP) while serving; `None` without TLS.
    pub fn tls_credentials(&self) -> Option<crate::tls::Reloadable> {
        self.tls.clone()
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets
    /// in-flight requests finish and flushes every export.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        // Every connection holds a clone; recv() returns None once all are gone.
        let (drain_tx, mut drained) = mpsc::channel::<()>(1);
        let metrics_task = self.metrics.map(|l| {
            let (exports, access, export_access) =
                (self.exports.clone(), self.access.clone(), self.export_access.clone());
            tokio::spawn(crate::metrics::serve(l, exports, self.admin, access, export_access))
        });
        let shared = Arc::new(Shared {
            exports: self.exports.clone(),
            infos: self.infos,
            limits: self.limits,
            tls_mode: self.tls_mode,
            tls: self.tls,
            access: self.access,
            export_access: self.export_access,
        });
        for l in self.tcp {
            tokio::spawn(listener::accept_loop(l, shared.clone(), stop_rx.clone(), drain_tx.clone()));
        }
        let mut socket_paths = Vec::new();
        for u in self.unix {
            if u.remove_at_exit {
                socket_paths.push(u.path);
            }
            tokio::spawn(listener::accept_loop(u.listener, shared.clone(), stop_rx.clone(), drain_tx.clone()));
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
            std::thread::spawn(move || done.send(export.cache().flush().and_then(|()| export.clean_cache_device())));
            if let Some(log) = e.access_log().cloned() {
                let _ = tokio::task::spawn_blocking(move || log.flush()).await;
            }
            match flushed.await {
                Ok(Ok(())) => {
                    info!(export = %e.name(), "flushed");
                    // Seal only after a good flush with no request left running:
                    // the seal vouches that no change escaped the log.
                    if let Some(w) = e.warmup().cloned().filter(|_| all_drained) {
                        if tokio::task::spawn_blocking(move || w.seal()).await.unwrap_or(false) {
                            info!(export = %e.name(), "warmup log sealed");
                        }
                    }
                }
                Ok(Err(err)) => {
                    error!(export = %e.name(), error = %err, "flush at shutdown failed");
                    failed.push(e.name().to_string());
                }
                Err(_) => {
                    error!(export = %e.name(), "flush at shutdown panicked");
                    failed.push(e.name().to_string());
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
            Err(ServeError::Flush(failed))
        }
    }
}

struct Shared {
    exports: Arc<Vec<Arc<Export>>>,
    infos: Arc<Vec<ExportInfo>>,
    limits: Limits,
    tls_mode: Tls,
    /// Set when `tls_mode` is not `Off`.
    tls: Option<crate::tls::Reloadable>,
    /// Who may connect at all (TCP addresses).
    access: Access,
    /// Who may use each export, in export order.
    export_access: Vec<Access>,
}

#[cfg(test)]
mod tests {
    //! Connections driven in-process, no listener: by the Rust client
    //! (`hearth-client`) over a socket pair, and by raw protocol bytes over
    //! an in-memory pipe (`tokio::io::duplex`), no socket at all.

    use std::sync::atomic::Ordering;

    use hearth_placement::Placement;

    use hearth_nbd::{Command, Request};

    use super::*;
    use crate::backend::testing::TestBackend;
    use crate::backend::{Backend, MemoryBackend};
    use crate::cache::{BlockCache, CacheMode};

    const BS: u64 = 4096;

    /// One write-back export "disk" with eviction-based placement over
    /// `backend`, as the server's shared state.
    fn shared_for(backend: Box<dyn Backend>, cache_blocks: u64) -> Arc<Shared> {
        shared_in_mode(backend, cache_blocks, CacheMode::Back { dirty_limit: cache_blocks * BS })
    }

    fn shared_in_mode(backend: Box<dyn Backend>, cache_blocks: u64, mode: CacheMode) -> Arc<Shared> {
        let size = backend.size();
        let policy = hearth_policy::build("lru", cache_blocks * BS).unwrap();
        let cache =
            BlockCache::with_placement(backend, policy, BS as u32, mode, Placement::Eviction { reload_threshold: 0 });
        let info = ExportInfo {
            name: "disk".into(),
            description: String::new(),
            size,
            flags: tflags::HAS_FLAGS | tflags::SEND_FLUSH | tflags::SEND_FUA,
            min_block: 1,
            preferred_block: BS as u32,
            max_block: 1 << 20,
        };
        let (background, queue) = std::sync::mpsc::sync_channel(BACKGROUND_QUEUE);
        let parts = ExportParts {
            info: info.clone(),
            cache,
            write_back_limit: cache_blocks * BS,
            prefetcher: None,
            warmup: None,
            cache_lanes: 1,
            sequential_cutoff: None,
            max_connections: None,
            access_log: None,
            advisor: None,
            cache_device: None,
            upstream: None,
        };
        let export = Arc::new(Export::new(parts, background));
        background::spawn_background(Arc::downgrade(&export), queue, 1).unwrap();
        let limits = Limits {
            handshake_timeout: None,
            idle_timeout: None,
            max_request: 1 << 20,
            max_client_buffers: 1 << 10,
            connections: Arc::new(Semaphore::new(1)),
        };
        Arc::new(Shared {
            exports: Arc::new(vec![export]),
            infos: Arc::new(vec![info]),
            limits,
            tls_mode: Tls::Off,
            tls: None,
            access: Access::default(),
            export_access: vec![Access::default()],
        })
    }

    /// Runs one connection over `stream` on `rt`, as the listener would.
    fn spawn_connection<S: listener::Stream>(
        stream: S,
        shared: Arc<Shared>,
        rt: &tokio::runtime::Runtime,
    ) -> tokio::task::JoinHandle<()> {
        let (stop, stop_rx) = watch::channel(false);
        let (drain, _) = mpsc::channel(1);
        rt.spawn(async move {
            let peer = listener::Peer { ip: None, name: "in-process".into() };
            connection::connection(stream, peer, shared, stop_rx, drain).await;
            drop(stop);
        })
    }

    /// `backend` served to one in-process client over a socket pair;
    /// returns the client's side.
    fn serve_one(
        backend: TestBackend,
        cache_blocks: u64,
        rt: &tokio::runtime::Runtime,
    ) -> std::os::unix::net::UnixStream {
        let shared = shared_for(Box::new(backend), cache_blocks);
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        theirs.set_nonblocking(true).unwrap();
        let _guard = rt.enter();
        spawn_connection(tokio::net::UnixStream::from_std(theirs).unwrap(), shared, rt);
        ours
    }

    #[test]
    fn no_backend_call_runs_on_the_async_thread() {
        // One thread runs every async task; backend calls belong on others.
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let backend = TestBackend::new(64 * BS).watching(std::thread::current().id());
        let switches = backend.switches.clone();
        let stream = serve_one(backend, 4, &rt);
        let client = std::thread::spawn(move || {
            let mut c = hearth_client::Client::over(stream, "disk").unwrap();
            assert!(c.hints());
            // Dirty blocks fill the write-back cache ...
            for b in 0..4u64 {
                c.write(b * BS, &vec![b as u8 + 1; BS as usize], false).unwrap();
            }
            // ... then reads through reused buffers reveal client evictions,
            // which EV places, evicting dirty blocks on the reader's path.
            for b in 8..24u64 {
                c.read_into_buffer(b * BS, BS as u32, (b % 2) * BS).unwrap();
            }
            c.flush().unwrap();
            for b in 0..4u64 {
                assert_eq!(c.read(b * BS, BS as u32).unwrap(), vec![b as u8 + 1; BS as usize], "block {b}");
            }
        });
        rt.block_on(async {
            while !client.is_finished() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        });
        client.join().unwrap();
        let calls_on_async_thread = switches.calls_on_watched_thread.load(Ordering::Relaxed);
        assert_eq!(calls_on_async_thread, 0, "backend calls made on the async thread");
    }

    /// Sends `requests` (header and any payload) and reads as many simple
    /// replies, in whatever order they complete: cookie -> (error, data).
    async fn exchange(
        c: &mut tokio::io::DuplexStream,
        requests: &[(Request, Vec<u8>)],
    ) -> std::collections::HashMap<u64, (u32, Vec<u8>)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for (r, payload) in requests {
            c.write_all(&r.encode()).await.unwrap();
            c.write_all(payload).await.unwrap();
        }
        let mut replies = std::collections::HashMap::new();
        for _ in requests {
            let mut h = [0u8; 16];
            c.read_exact(&mut h).await.unwrap();
            assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), hearth_nbd::SIMPLE_REPLY_MAGIC);
            let error = u32::from_be_bytes(h[4..8].try_into().unwrap());
            let cookie = u64::from_be_bytes(h[8..].try_into().unwrap());
            let (req, _) = requests.iter().find(|(r, _)| r.cookie == cookie).expect("a reply to a request sent");
            let mut data = vec![0u8; if error == 0 && req.command == Command::Read { req.length as usize } else { 0 }];
            c.read_exact(&mut data).await.unwrap();
            replies.insert(cookie, (error, data));
        }
        replies
    }

    /// Negotiates export "disk" (64 blocks) with NBD_OPT_GO.
    async fn handshake(c: &mut tokio::io::DuplexStream) {
        assert_eq!(handshake_any(c).await, 64 * BS);
    }

    /// Negotiates export "disk" with NBD_OPT_GO; returns its size.
    async fn handshake_any<C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(c: &mut C) -> u64 {
        use hearth_nbd::{client, opt, rep, FLAG_C_FIXED_NEWSTYLE};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut greeting = [0u8; 18];
        c.read_exact(&mut greeting).await.unwrap();
        client::check_greeting(&greeting).unwrap();
        c.write_all(&FLAG_C_FIXED_NEWSTYLE.to_be_bytes()).await.unwrap();
        let mut go = Vec::new();
        client::put_option(&mut go, opt::GO, &client::go_data("disk", &[]));
        c.write_all(&go).await.unwrap();
        let mut size = None;
        loop {
            let mut h = [0u8; client::OptionReply::LEN];
            c.read_exact(&mut h).await.unwrap();
            let reply = client::OptionReply::decode(&h, opt::GO).unwrap();
            let mut data = vec![0u8; reply.length as usize];
            c.read_exact(&mut data).await.unwrap();
            assert!(!reply.is_error(), "GO refused: {}", String::from_utf8_lossy(&data));
            size = size.or(client::export_info(&data).map(|(s, _)| s));
            if reply.kind == rep::ACK {
                break;
            }
        }
        size.expect("GO answered with the export's size")
    }

    #[test]
    fn a_connection_runs_over_an_in_memory_pipe() {
        use hearth_nbd::Errno;

        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let shared = shared_for(Box::new(MemoryBackend::new(64 * BS)), 16);
        let (mut c, theirs) = tokio::io::duplex(1 << 16);
        let served = spawn_connection(theirs, shared, &rt);
        rt.block_on(async move {
            handshake(&mut c).await;

            let request = |command, cookie, offset, length| Request { flags: 0, command, cookie, offset, length };
            let block = vec![0x5a; BS as usize];
            let wrote = exchange(&mut c, &[(request(Command::Write, 1, 3 * BS, BS as u32), block.clone())]).await;
            assert_eq!(wrote[&1], (0, vec![]));
            // Pipelined: a read of what was written, one past the end, a flush.
            let replies = exchange(
                &mut c,
                &[
                    (request(Command::Read, 2, 3 * BS, BS as u32), vec![]),
                    (request(Command::Read, 3, 64 * BS, BS as u32), vec![]),
                    (request(Command::Flush, 4, 0, 0), vec![]),
                ],
            )
            .await;
            assert_eq!(replies[&2], (0, block));
            assert_eq!(replies[&3].0, Errno::Inval as u32);
            assert_eq!(replies[&4], (0, vec![]));
            drop(c);
            served.await.unwrap();
        });
    }

    /// Replies the reader writes itself must all arrive when the pipe fills
    /// before the client reads any: the reader hands what the pipe does not
    /// take to the writer task instead of waiting (or dropping it).
    #[test]
    fn pipelined_replies_arrive_whole_when_the_pipe_fills() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let shared = shared_for(Box::new(MemoryBackend::new(64 * BS)), 16);
        let (mut c, theirs) = tokio::io::duplex(4096);
        let served = spawn_connection(theirs, shared, &rt);
        rt.block_on(async move {
            handshake(&mut c).await;
            let request = |command, cookie, offset, length| Request { flags: 0, command, cookie, offset, length };
            let writes: Vec<_> = (0..64u64)
                .map(|b| (request(Command::Write, b, b * BS, BS as u32), vec![b as u8; BS as usize]))
                .collect();
            let wrote = exchange(&mut c, &writes).await;
            assert!(wrote.values().all(|r| *r == (0, vec![])), "a write failed");
            let reads: Vec<_> =
                (0..256u64).map(|i| (request(Command::Read, i, (i % 64) * BS, BS as u32), vec![])).collect();
            let replies = exchange(&mut c, &reads).await;
            assert_eq!(replies.len(), 256);
            for (cookie, (error, data)) in &replies {
                assert_eq!((*error, data), (0, &vec![(cookie % 64) as u8; BS as usize]), "read {cookie}");
            }
            drop(c);
            served.await.unwrap();
        });
    }

    /// Writes of several blocks whose bytes arrive in small pieces over a
    /// real socket land whole: partly from what the connection's read
    /// buffer holds, partly read from the socket, with the next request's
    /// header in the same pieces; the last write ends in a partial block at
    /// the export's end.
    #[test]
    fn multi_block_writes_arriving_in_pieces_land_whole() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let size = 64 * BS - 100;
        let shared = shared_in_mode(Box::new(MemoryBackend::new(size)), 16, CacheMode::Through);
        let _guard = rt.enter();
        let (mut c, theirs) = tokio::net::UnixStream::pair().unwrap();
        let served = spawn_connection(theirs, shared, &rt);
        rt.block_on(async move {
            assert_eq!(handshake_any(&mut c).await, size);
            let request = |command, cookie, offset, length| Request { flags: 0, command, cookie, offset, length };
            let mut expected = vec![0u8; size as usize];
            let mut sent = Vec::new();
            let writes = [(0, 8 * BS), (20 * BS, 3 * BS), (9 * BS, BS), (62 * BS, size - 62 * BS)];
            for (cookie, &(offset, len)) in writes.iter().enumerate() {
                let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ (cookie as u8 + 1)).collect();
                expected[offset as usize..(offset + len) as usize].copy_from_slice(&payload);
                sent.extend_from_slice(&request(Command::Write, cookie as u64, offset, len as u32).encode());
                sent.extend_from_slice(&payload);
            }
            sent.extend_from_slice(&request(Command::Read, 99, 0, size as u32).encode());
            for piece in sent.chunks(1000) {
                c.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            for _ in 0..writes.len() {
                let mut h = [0u8; 16];
                c.read_exact(&mut h).await.unwrap();
                assert_eq!(u32::from_be_bytes(h[4..8].try_into().unwrap()), 0, "a write failed");
            }
            let mut h = [0u8; 16];
            c.read_exact(&mut h).await.unwrap();
            assert_eq!(
                (u32::from_be_bytes(h[4..8].try_into().unwrap()), u64::from_be_bytes(h[8..].try_into().unwrap())),
                (0, 99)
            );
            let mut data = vec![0u8; size as usize];
            c.read_exact(&mut data).await.unwrap();
            let first_wrong = data.iter().zip(&expected).position(|(a, b)| a != b);
            assert_eq!(first_wrong, None, "the export's bytes differ from what was written");
            drop(c);
            served.await.unwrap();
        });
    }
}

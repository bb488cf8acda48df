//! A small blocking NBD client for applications that tell Hearth about
//! their work: which context (transaction, query) issues each read, and
//! which client buffer it lands in (docs/nbd-extension.md). One request at a
//! time; against servers without the extension, hints are silently skipped.
//! TLS (`NBD_OPT_STARTTLS`, sent before any other option) goes through a
//! [`StartTls`] the caller provides, so this crate carries no TLS library.
//!
//! ```no_run
//! let mut c = hearth_client::Client::connect_tcp("127.0.0.1:10809", "hearth")?;
//! c.begin(42, 7)?; // context 42 runs template 7
//! let page = c.read(8192, 4096)?;
//! c.end(42)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use hearth_nbd::hints::{self, Hint};
use hearth_nbd::{client, cmd_flags, opt, rep, Command, Request};
use hearth_nbd::{FLAG_C_FIXED_NEWSTYLE, SIMPLE_REPLY_MAGIC};

/// A byte stream to the server: a socket, a TLS session over one, a tunnel.
pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// The TLS client an upgrade (NBD_OPT_STARTTLS) hands the socket to, as
/// `nbds://` asks: it runs the whole TLS handshake, verifying the server
/// as it was configured to, and returns the encrypted stream.
pub trait StartTls: Send + Sync {
    fn handshake(&self, socket: Box<dyn Stream>) -> io::Result<Box<dyn Stream>>;
}

/// A socket the client dialled; [`Client::into_socket`] hands it over after
/// the handshake, for callers that drive the transmission phase themselves
/// (a pipelined load generator keeps many requests in flight).
pub enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    /// Bounds the next reads and writes by `left` (`None`: no bound).
    fn set_timeouts(&self, left: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_read_timeout(left).and(s.set_write_timeout(left)),
            Socket::Unix(s) => s.set_read_timeout(left).and(s.set_write_timeout(left)),
        }
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.set_nonblocking(true),
            Socket::Unix(s) => s.set_nonblocking(true),
        }
    }

    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write_vectored(bufs),
            Socket::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum Transport {
    Plain(Socket),
    /// TLS over a socket; `socket` is a handle on the same socket, which
    /// carries the deadline's timeouts.
    Tls {
        socket: Socket,
        stream: Box<dyn Stream>,
    },
    /// A stream handed to [`Client::over`]: no deadline can interrupt it.
    Other(Box<dyn Stream>),
}

/// The byte stream to the server. On a socket the client dialled, each
/// read and write waits at most until the deadline (a socket timeout, set
/// again before every call, so a request that trickles cannot outlast it).
struct Conn {
    transport: Transport,
    deadline: Option<Instant>,
}

impl Conn {
    fn dialled(socket: Socket, deadline: Option<Instant>) -> Conn {
        Conn { transport: Transport::Plain(socket), deadline }
    }

    /// The time left, or a TimedOut error once the deadline has passed.
    fn time_left(&self) -> io::Result<Option<Duration>> {
        let Some(deadline) = self.deadline else { return Ok(None) };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        Ok(Some(left))
    }

    /// The socket under the stream, if the client dialled it.
    fn socket(&self) -> Option<&Socket> {
        match &self.transport {
            Transport::Plain(s) | Transport::Tls { socket: s, .. } => Some(s),
            Transport::Other(_) => None,
        }
    }

    /// The stream reads and writes go through.
    fn stream(&mut self) -> &mut dyn Stream {
        match &mut self.transport {
            Transport::Plain(s) => s,
            Transport::Tls { stream, .. } | Transport::Other(stream) => stream,
        }
    }

    /// Sets the socket's timeouts to the time left (only under a deadline:
    /// without one they stay as `clear_timeouts` left them).
    fn arm(&self) -> io::Result<()> {
        let left = self.time_left()?;
        match self.socket() {
            Some(s) if left.is_some() => s.set_timeouts(left),
            _ => Ok(()),
        }
    }

    /// Writes `buf` only if the socket takes it at once: a server that
    /// stopped reading must not hold up the caller.
    fn send_without_waiting(&mut self, buf: &[u8]) -> io::Result<()> {
        if let Some(s) = self.socket() {
            s.set_nonblocking()?;
        }
        let stream = self.stream();
        stream.write_all(buf).and_then(|()| stream.flush())
    }

    fn clear_timeouts(&self) -> io::Result<()> {
        self.socket().map_or(Ok(()), |s| s.set_timeouts(None))
    }

    /// Hands the dialled socket to `tls` after the server accepted
    /// NBD_OPT_STARTTLS; the handshake is bounded by the deadline too.
    fn start_tls(self, tls: &dyn StartTls) -> io::Result<Conn> {
        self.arm()?;
        let Transport::Plain(socket) = self.transport else {
            return Err(invalid("TLS is only for sockets the client dialled".into()));
        };
        let handle = socket.try_clone()?;
        let stream = tls.handshake(Box::new(socket)).map_err(|e| expired(e, "TLS handshake"))?;
        Ok(Conn { transport: Transport::Tls { socket: handle, stream }, deadline: self.deadline })
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the server did not answer before the deadline")
}

/// A socket timeout shows as EAGAIN (WouldBlock): name it for what it is;
/// other errors say `during` what they happened.
fn expired(e: io::Error, during: &str) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        timed_out()
    } else if during.is_empty() {
        e
    } else {
        io::Error::new(e.kind(), format!("{during}: {e}"))
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        self.stream().read(buf).map_err(|e| expired(e, ""))
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        self.stream().write(buf).map_err(|e| expired(e, ""))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.arm()?;
        self.stream().flush().map_err(|e| expired(e, ""))
    }
}

pub struct Client {
    stream: Conn,
    cookie: u64,
    hints: bool,
    size: u64,
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

impl Client {
    pub fn connect_tcp(addr: &str, export: &str) -> io::Result<Client> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Client::handshake(Conn::dialled(Socket::Tcp(s), None), export, None)
    }

    pub fn connect_unix(path: &Path, export: &str) -> io::Result<Client> {
        Client::handshake(Conn::dialled(Socket::Unix(UnixStream::connect(path)?), None), export, None)
    }

    /// [`connect_tcp`](Self::connect_tcp) that gives up at `deadline`, which
    /// then bounds every request until [`set_deadline`](Self::set_deadline)
    /// changes it: a server that accepts but never answers (stopped, hung)
    /// costs a TimedOut error, not a wait without end.
    pub fn connect_tcp_until(addr: &str, export: &str, deadline: Instant) -> io::Result<Client> {
        Client::connect_tcp_tls_until(addr, export, deadline, None)
    }

    /// [`connect_tcp_until`](Self::connect_tcp_until), upgrading to TLS
    /// (NBD_OPT_STARTTLS, before any other option) through `tls` if given.
    pub fn connect_tcp_tls_until(
        addr: &str,
        export: &str,
        deadline: Instant,
        tls: Option<&dyn StartTls>,
    ) -> io::Result<Client> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr} resolves to no address"));
        for a in addr.to_socket_addrs()? {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out());
            }
            match TcpStream::connect_timeout(&a, left) {
                Ok(s) => {
                    s.set_nodelay(true)?;
                    return Client::handshake(Conn::dialled(Socket::Tcp(s), Some(deadline)), export, tls);
                }
                Err(e) => last = expired(e, ""),
            }
        }
        Err(last)
    }

    /// [`connect_unix`](Self::connect_unix) with a deadline, as
    /// [`connect_tcp_until`](Self::connect_tcp_until). (A local connect
    /// itself returns at once unless the server's accept queue is full.)
    pub fn connect_unix_until(path: &Path, export: &str, deadline: Instant) -> io::Result<Client> {
        Client::connect_unix_tls_until(path, export, deadline, None)
    }

    /// [`connect_unix_until`](Self::connect_unix_until), upgrading to TLS
    /// through `tls` if given, as [`connect_tcp_tls_until`](Self::connect_tcp_tls_until).
    pub fn connect_unix_tls_until(
        path: &Path,
        export: &str,
        deadline: Instant,
        tls: Option<&dyn StartTls>,
    ) -> io::Result<Client> {
        Client::handshake(Conn::dialled(Socket::Unix(UnixStream::connect(path)?), Some(deadline)), export, tls)
    }

    /// Negotiates over any byte stream already connected to a server (an
    /// in-process socket pair in tests, a tunnel). Deadlines do not apply to it.
    pub fn over(stream: impl Read + Write + Send + 'static, export: &str) -> io::Result<Client> {
        Client::handshake(Conn { transport: Transport::Other(Box::new(stream)), deadline: None }, export, None)
    }

    /// Requests from now on fail with TimedOut once `deadline` passes (on a
    /// socket this client dialled); `None` lets them wait for ever. After a
    /// timeout the connection is mid-request: drop it and dial again.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        self.stream.deadline = deadline;
        if deadline.is_none() {
            self.stream.clear_timeouts()?;
        }
        Ok(())
    }

    /// The negotiated connection's socket, blocking and without timeouts,
    /// for a caller that speaks the transmission phase itself (simple
    /// replies: the handshake negotiates no structured replies). Fails on a
    /// TLS session or a stream given to [`over`](Self::over).
    pub fn into_socket(mut self) -> io::Result<Socket> {
        let taken = std::mem::replace(&mut self.stream.transport, Transport::Other(Box::new(io::empty())));
        match taken {
            Transport::Plain(socket) => {
                socket.set_timeouts(None)?;
                Ok(socket)
            }
            other => {
                self.stream.transport = other;
                Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "only a plain socket the client dialled can be handed over",
                ))
            }
        }
    }

    /// Whether the server accepted the hint extension.
    pub fn hints(&self) -> bool {
        self.hints
    }
    /// Export size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn handshake(mut stream: Conn, export: &str, tls: Option<&dyn StartTls>) -> io::Result<Client> {
        let mut greeting = [0u8; 18];
        stream.read_exact(&mut greeting)?;
        client::check_greeting(&greeting)?;
        stream.write_all(&FLAG_C_FIXED_NEWSTYLE.to_be_bytes())?;
        if let Some(tls) = tls {
            // First, so nothing (not even the export's name) crosses in plain text.
            send_option(&mut stream, opt::STARTTLS, &[])?;
            let (kind, data) = option_reply(&mut stream, opt::STARTTLS)?;
            if kind != rep::ACK {
                let why = String::from_utf8_lossy(&data);
                let why = if why.is_empty() { String::new() } else { format!(": {why}") };
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("the server does not offer TLS (NBD_OPT_STARTTLS refused{why})"),
                ));
            }
            stream = stream.start_tls(tls)?;
        }
        let mut c = Client { stream, cookie: 0, hints: false, size: 0 };
        let hints = send_option(&mut c.stream, opt::HEARTH_HINTS, &[])
            .and_then(|()| option_reply(&mut c.stream, opt::HEARTH_HINTS))
            .map_err(|e| match e.kind() {
                // Under TLS 1.3 a server that refuses the client's certificate
                // (or its lack of one) can only hang up after the handshake.
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
                    if tls.is_some() =>
                {
                    io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("the server hung up after the TLS handshake, as it does when it refuses the client's certificate or the lack of one ({e})"),
                    )
                }
                _ => e,
            })?;
        c.hints = hints.0 == rep::ACK;
        send_option(&mut c.stream, opt::GO, &client::go_data(export, &[]))?;
        loop {
            let (kind, data) = option_reply(&mut c.stream, opt::GO)?;
            match kind {
                rep::ACK => return Ok(c),
                rep::INFO => {
                    if let Some((size, _flags)) = client::export_info(&data) {
                        c.size = size;
                    }
                }
                rep::ERR_TLS_REQD => {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "the server requires TLS (NBD_REP_ERR_TLS_REQD): connect with nbds://",
                    ))
                }
                k if k & (1 << 31) != 0 => {
                    return Err(invalid(format!(
                        "server refused export {export:?}: {}",
                        String::from_utf8_lossy(&data)
                    )))
                }
                k => return Err(invalid(format!("unexpected option reply {k}"))),
            }
        }
    }

    /// Sends one request and waits for its reply; `into` receives read data.
    fn request(
        &mut self,
        command: Command,
        flags: u16,
        offset: u64,
        length: u32,
        payload: &[u8],
        into: &mut [u8],
    ) -> io::Result<()> {
        self.cookie += 1;
        let header = Request { flags, command, cookie: self.cookie, offset, length }.encode();
        let mut b = Vec::with_capacity(header.len() + payload.len());
        b.extend_from_slice(&header);
        b.extend_from_slice(payload);
        self.stream.write_all(&b)?;
        self.stream.flush()?;
        let mut r = [0u8; 16];
        self.stream.read_exact(&mut r)?;
        let magic = u32::from_be_bytes(r[..4].try_into().expect("4 bytes"));
        let error = u32::from_be_bytes(r[4..8].try_into().expect("4 bytes"));
        let cookie = u64::from_be_bytes(r[8..].try_into().expect("8 bytes"));
        if magic != SIMPLE_REPLY_MAGIC || cookie != self.cookie {
            return Err(invalid(format!("bad reply (magic {magic:#x}, cookie {cookie})")));
        }
        if error != 0 {
            return Err(io::Error::other(format!("NBD error {error} for {} at {offset}+{length}", command.name())));
        }
        self.stream.read_exact(into)
    }

    /// Sends hints if the server accepted the extension; returns whether it did.
    pub fn hint(&mut self, hs: &[Hint]) -> io::Result<bool> {
        if !self.hints {
            return Ok(false);
        }
        let payload = hints::encode(hs);
        self.request(Command::HearthHint, 0, 0, payload.len() as u32, &payload, &mut [])?;
        Ok(true)
    }

    pub fn read(&mut self, offset: u64, length: u32) -> io::Result<Vec<u8>> {
        let mut data = vec![0u8; length as usize];
        self.request(Command::Read, 0, offset, length, &[], &mut data)?;
        Ok(data)
    }

    /// A read into client buffer `buffer` (for eviction-based placement).
    pub fn read_into_buffer(&mut self, offset: u64, length: u32, buffer: u64) -> io::Result<Vec<u8>> {
        self.hint(&[Hint::Buffer { addr: buffer }])?;
        self.read(offset, length)
    }

    pub fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let len = u32::try_from(data.len()).map_err(|_| invalid("write larger than 4 GiB".into()))?;
        self.request(Command::Write, if fua { cmd_flags::FUA } else { 0 }, offset, len, data, &mut [])
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.request(Command::Flush, 0, 0, 0, &[], &mut [])
    }

    /// Context `ctx` starts a unit of work of template `template`; later requests belong to it.
    pub fn begin(&mut self, ctx: u64, template: u64) -> io::Result<bool> {
        self.hint(&[Hint::ContextBegin { ctx, class: template }, Hint::Context { ctx }])
    }

    /// Context `ctx` finished; later requests belong to the connection again.
    pub fn end(&mut self, ctx: u64) -> io::Result<bool> {
        self.hint(&[Hint::ContextEnd { ctx }, Hint::Context { ctx: 0 }])
    }

    /// The client dropped bytes `offset..offset+length` from its cache.
    pub fn evicted(&mut self, offset: u64, length: u64) -> io::Result<bool> {
        self.hint(&[Hint::Evicted { offset, length }])
    }
}

fn send_option(stream: &mut Conn, option: u32, data: &[u8]) -> io::Result<()> {
    let mut b = Vec::with_capacity(16 + data.len());
    client::put_option(&mut b, option, data);
    stream.write_all(&b)?;
    stream.flush()
}

fn option_reply(stream: &mut Conn, option: u32) -> io::Result<(u32, Vec<u8>)> {
    let mut h = [0u8; client::OptionReply::LEN];
    stream.read_exact(&mut h)?;
    let reply = client::OptionReply::decode(&h, option)?;
    let mut data = vec![0u8; reply.length as usize];
    stream.read_exact(&mut data)?;
    Ok((reply.kind, data))
}

impl Drop for Client {
    fn drop(&mut self) {
        let disc = Request { flags: 0, command: Command::Disc, cookie: 0, offset: 0, length: 0 };
        let _ = self.stream.send_without_waiting(&disc.encode());
    }
}

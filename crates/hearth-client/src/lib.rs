//! A small blocking NBD client for applications that tell Hearth about
//! their work: which context (transaction, query) issues each read, and
//! which client buffer it lands in (docs/nbd-extension.md). One request at a
//! time; against servers without the extension, hints are silently skipped.
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

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
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
    /// The time left, or a TimedOut error once the deadline has passed.
    fn time_left(&self) -> io::Result<Option<Duration>> {
        let Some(deadline) = self.deadline else { return Ok(None) };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        Ok(Some(left))
    }

    /// Writes `buf` only if the socket takes it at once: a server that
    /// stopped reading must not hold up the caller.
    fn send_without_waiting(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.transport {
            Transport::Tcp(s) => s.set_nonblocking(true).and_then(|()| s.write_all(buf)),
            Transport::Unix(s) => s.set_nonblocking(true).and_then(|()| s.write_all(buf)),
            Transport::Other(s) => s.write_all(buf),
        }
    }

    fn clear_timeouts(&self) -> io::Result<()> {
        match &self.transport {
            Transport::Tcp(s) => s.set_read_timeout(None).and(s.set_write_timeout(None)),
            Transport::Unix(s) => s.set_read_timeout(None).and(s.set_write_timeout(None)),
            Transport::Other(_) => Ok(()),
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the server did not answer before the deadline")
}

/// A socket timeout shows as EAGAIN (WouldBlock): name it for what it is.
fn expired(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        timed_out()
    } else {
        e
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.time_left()?;
        let read = match &mut self.transport {
            Transport::Tcp(s) if left.is_some() => s.set_read_timeout(left).and_then(|()| s.read(buf)),
            Transport::Unix(s) if left.is_some() => s.set_read_timeout(left).and_then(|()| s.read(buf)),
            Transport::Tcp(s) => s.read(buf),
            Transport::Unix(s) => s.read(buf),
            Transport::Other(s) => s.read(buf),
        };
        read.map_err(expired)
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.time_left()?;
        let written = match &mut self.transport {
            Transport::Tcp(s) if left.is_some() => s.set_write_timeout(left).and_then(|()| s.write(buf)),
            Transport::Unix(s) if left.is_some() => s.set_write_timeout(left).and_then(|()| s.write(buf)),
            Transport::Tcp(s) => s.write(buf),
            Transport::Unix(s) => s.write(buf),
            Transport::Other(s) => s.write(buf),
        };
        written.map_err(expired)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.transport {
            Transport::Other(s) => s.flush(),
            Transport::Tcp(_) | Transport::Unix(_) => Ok(()),
        }
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

fn protocol(e: hearth_nbd::ProtocolError) -> io::Error {
    invalid(e.0)
}

impl Client {
    pub fn connect_tcp(addr: &str, export: &str) -> io::Result<Client> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Client::handshake(Conn { transport: Transport::Tcp(s), deadline: None }, export)
    }

    pub fn connect_unix(path: &Path, export: &str) -> io::Result<Client> {
        Client::handshake(Conn { transport: Transport::Unix(UnixStream::connect(path)?), deadline: None }, export)
    }

    /// [`connect_tcp`](Self::connect_tcp) that gives up at `deadline`, which
    /// then bounds every request until [`set_deadline`](Self::set_deadline)
    /// changes it: a server that accepts but never answers (stopped, hung)
    /// costs a TimedOut error, not a wait without end.
    pub fn connect_tcp_until(addr: &str, export: &str, deadline: Instant) -> io::Result<Client> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr} resolves to no address"));
        for a in addr.to_socket_addrs()? {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out());
            }
            match TcpStream::connect_timeout(&a, left) {
                Ok(s) => {
                    s.set_nodelay(true)?;
                    return Client::handshake(Conn { transport: Transport::Tcp(s), deadline: Some(deadline) }, export);
                }
                Err(e) => last = expired(e),
            }
        }
        Err(last)
    }

    /// [`connect_unix`](Self::connect_unix) with a deadline, as
    /// [`connect_tcp_until`](Self::connect_tcp_until). (A local connect
    /// itself returns at once unless the server's accept queue is full.)
    pub fn connect_unix_until(path: &Path, export: &str, deadline: Instant) -> io::Result<Client> {
        let conn = Conn { transport: Transport::Unix(UnixStream::connect(path)?), deadline: Some(deadline) };
        Client::handshake(conn, export)
    }

    /// Negotiates over any byte stream already connected to a server (an
    /// in-process socket pair in tests, a tunnel). Deadlines do not apply to it.
    pub fn over(stream: impl Read + Write + Send + 'static, export: &str) -> io::Result<Client> {
        Client::handshake(Conn { transport: Transport::Other(Box::new(stream)), deadline: None }, export)
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

    /// Whether the server accepted the hint extension.
    pub fn hints(&self) -> bool {
        self.hints
    }
    /// Export size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn handshake(mut stream: Conn, export: &str) -> io::Result<Client> {
        let mut greeting = [0u8; 18];
        stream.read_exact(&mut greeting)?;
        client::check_greeting(&greeting).map_err(protocol)?;
        stream.write_all(&FLAG_C_FIXED_NEWSTYLE.to_be_bytes())?;
        let mut c = Client { stream, cookie: 0, hints: false, size: 0 };
        c.send_option(opt::HEARTH_HINTS, &[])?;
        c.hints = c.option_reply(opt::HEARTH_HINTS)?.0 == rep::ACK;
        c.send_option(opt::GO, &client::go_data(export, &[]))?;
        loop {
            let (kind, data) = c.option_reply(opt::GO)?;
            match kind {
                rep::ACK => return Ok(c),
                rep::INFO => {
                    if let Some((size, _flags)) = client::export_info(&data) {
                        c.size = size;
                    }
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

    fn send_option(&mut self, option: u32, data: &[u8]) -> io::Result<()> {
        let mut b = Vec::with_capacity(16 + data.len());
        client::put_option(&mut b, option, data);
        self.stream.write_all(&b)
    }

    fn option_reply(&mut self, option: u32) -> io::Result<(u32, Vec<u8>)> {
        let mut h = [0u8; client::OptionReply::LEN];
        self.stream.read_exact(&mut h)?;
        let reply = client::OptionReply::decode(&h, option).map_err(protocol)?;
        let mut data = vec![0u8; reply.length as usize];
        self.stream.read_exact(&mut data)?;
        Ok((reply.kind, data))
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

impl Drop for Client {
    fn drop(&mut self) {
        let disc = Request { flags: 0, command: Command::Disc, cookie: 0, offset: 0, length: 0 };
        let _ = self.stream.send_without_waiting(&disc.encode());
    }
}

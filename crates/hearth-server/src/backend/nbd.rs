//! Another NBD server as the backend: `hearth serve` as a caching proxy in
//! front of remote storage (nbdkit, qemu-nbd, another Hearth), in plain
//! text (`nbd://`) or over TLS (`nbds://`, [`crate::tls::client`]).
//!
//! Requests go out over a small pool of connections, one request at a time
//! each (the Rust client is blocking), so up to `connections` backend calls
//! run at once. A connection that fails (the upstream restarted, the network
//! dropped) is closed and dialled again with backoff, and the request is
//! sent again: reads and writes of whole ranges are idempotent. An error the
//! upstream *answers* with (EIO, ENOSPC) is passed on, not retried.
//!
//! Each call has a deadline (`upstream_timeout`) covering the wait for a
//! pooled connection, re-dialling, retries and the I/O itself; past it the
//! call fails with TimedOut (EIO to the client). The deadline also bounds
//! each socket read and write, so an upstream that accepts and never
//! answers (stopped, hung) is found out; that connection is closed, as its
//! state is unknown, and the next call dials again.
//!
//! FLUSH: the protocol only promises that a flush covers writes completed on
//! the same connection, so a flush flushes every connection that has taken
//! a write since its last flush. If a connection is lost while holding such
//! writes, the upstream may have dropped them: the next flush fails, as the
//! client must then assume those writes are not durable.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_client::Client;
use parking_lot::{Mutex, MutexGuard};

use super::upstream::{UpstreamStats, FIRST_BACKOFF, MAX_BACKOFF};
use super::Backend;
use crate::error::{TlsError, UpstreamError};
use crate::tls::client::{Connector, UpstreamCredentials};

/// Largest single request sent upstream (servers commonly accept 32 MiB).
const MAX_UPSTREAM_REQUEST: usize = 32 << 20;

/// Where the upstream export is, and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    address: Address,
    export: String,
    /// `nbds://`: TLS first, with these credentials.
    tls: Option<UpstreamCredentials>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Address {
    Tcp(String),
    Unix(PathBuf),
}

impl Upstream {
    /// Parses `nbd[s]://[user@]host[:port]/[export]` (port 10809 by
    /// default) or `nbd[s]+unix://[user@]/[export]?socket=PATH`, with
    /// libnbd's query parameters for TLS: `tls-certificates=DIR` or
    /// `tls-psk-file=FILE` (the user: the URI's, `tls-username=`, or the
    /// login name). The user, the export name and every query value are
    /// percent-decoded as libnbd does (`my%20disk`, `socket=/run/a%20b.sock`).
    pub fn parse(uri: &str) -> Result<Upstream, UpstreamError> {
        let bad = |why: &str| UpstreamError::Nbd { uri: uri.to_string(), why: why.to_string() };
        let text = |what: &str, raw: &str| {
            percent_encoding::percent_decode_str(raw)
                .decode_utf8()
                .map(|s| s.into_owned())
                .map_err(|_| bad(&format!("the {what} is not UTF-8 once percent-decoded")))
        };
        let path = |raw: &str| {
            use std::os::unix::ffi::OsStrExt;
            PathBuf::from(std::ffi::OsStr::from_bytes(&percent_encoding::percent_decode_str(raw).collect::<Vec<u8>>()))
        };
        let (scheme, rest) = uri.split_once("://").ok_or_else(|| bad("not an NBD URI"))?;
        let (tls, unix) = match scheme {
            "nbd" => (false, false),
            "nbds" => (true, false),
            "nbd+unix" => (false, true),
            "nbds+unix" => (true, true),
            _ => return Err(bad("not an NBD URI")),
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, export) = rest.split_once('/').unwrap_or((rest, ""));
        let (user, host) = match authority.rsplit_once('@') {
            Some((user, host)) => (Some(text("user", user)?), host),
            None => (None, authority),
        };
        let (mut socket, mut certificates, mut psk_file, mut username) = (None, None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let slot = match key {
                "socket" => &mut socket,
                "tls-certificates" => &mut certificates,
                "tls-psk-file" => &mut psk_file,
                "tls-username" => &mut username,
                _ => return Err(bad(&format!("unknown query parameter {key:?}"))),
            };
            *slot = Some(value);
        }
        let address = if unix {
            if !host.is_empty() {
                return Err(bad("a Unix socket URI has no host"));
            }
            Address::Unix(path(socket.ok_or_else(|| bad("no socket="))?))
        } else {
            if host.is_empty() {
                return Err(bad("no host"));
            }
            if socket.is_some() {
                return Err(bad("socket= is for nbd+unix:// and nbds+unix://"));
            }
            let has_port = host.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) && !host.ends_with(']');
            Address::Tcp(if has_port { host.to_string() } else { format!("{host}:10809") })
        };
        let tls = match (tls, certificates, psk_file) {
            (false, None, None) if username.is_none() => None,
            (false, ..) => return Err(bad("TLS parameters need nbds:// or nbds+unix://")),
            (true, Some(_), Some(_)) => return Err(bad("tls-certificates= and tls-psk-file= exclude each other")),
            (true, Some(dir), None) => Some(UpstreamCredentials::Certificates(path(dir))),
            (true, None, Some(file)) => {
                let login = || std::env::var("LOGNAME").or_else(|_| std::env::var("USER")).ok();
                let username = username.map(|u| text("tls-username", u)).transpose()?;
                let user = user.or(username).or_else(login).ok_or_else(|| bad("no user for tls-psk-file="))?;
                Some(UpstreamCredentials::Psk { file: path(file), user })
            }
            // libnbd would fall back on the system's CAs; a proxy names the one it trusts.
            (true, None, None) => return Err(bad("nbds:// needs tls-certificates=DIR or tls-psk-file=FILE")),
        };
        Ok(Upstream { address, export: text("export name", export)?, tls })
    }

    /// The TLS client for `nbds://`, its files read; `None` for plain `nbd://`.
    fn connector(&self) -> Result<Option<Connector>, TlsError> {
        let Some(credentials) = &self.tls else { return Ok(None) };
        let host = match &self.address {
            Address::Tcp(addr) => Some(addr.rsplit_once(':').map_or(addr.as_str(), |(host, _)| host)),
            Address::Unix(_) => None,
        };
        Connector::new(credentials, host).map(Some)
    }

    fn connect(&self, tls: Option<&Connector>, deadline: Instant) -> io::Result<Client> {
        let tls = tls.map(|c| c as &dyn hearth_client::StartTls);
        match &self.address {
            Address::Tcp(addr) => Client::connect_tcp_tls_until(addr, &self.export, deadline, tls),
            Address::Unix(path) => Client::connect_unix_tls_until(path, &self.export, deadline, tls),
        }
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.tls.is_some() { "s" } else { "" };
        match &self.address {
            Address::Tcp(addr) => write!(f, "nbd{s}://{addr}/{}", self.export),
            Address::Unix(path) => write!(f, "nbd{s}+unix:///{}?socket={}", self.export, path.display()),
        }
    }
}

/// One pooled connection and what it owes a flush.
#[derive(Default)]
struct Slot {
    client: Option<Client>,
    /// Writes completed on `client` since its last flush.
    unflushed: bool,
    /// A connection holding unflushed writes was lost.
    lost_writes: bool,
}

pub struct NbdBackend {
    upstream: Upstream,
    tls: Option<Connector>,
    size: u64,
    timeout: Duration,
    stats: Arc<UpstreamStats>,
    slots: Vec<Mutex<Slot>>,
    next: AtomicUsize,
}

impl NbdBackend {
    /// Connects once (to learn the size; failing at once if the upstream is
    /// not there) and keeps up to `connections` connections; each call gets
    /// `timeout`.
    pub fn connect(
        upstream: Upstream,
        connections: usize,
        timeout: Duration,
        stats: Arc<UpstreamStats>,
    ) -> io::Result<NbdBackend> {
        let tls = upstream.connector().map_err(|e| io::Error::other(format!("upstream {upstream}: {e}")))?;
        let first = upstream
            .connect(tls.as_ref(), Instant::now() + timeout)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot reach upstream {upstream}: {e}")))?;
        let size = first.size();
        let mut slots: Vec<Mutex<Slot>> = (0..connections.max(1)).map(|_| Mutex::default()).collect();
        slots[0].get_mut().client = Some(first);
        Ok(NbdBackend { upstream, tls, size, timeout, stats, slots, next: AtomicUsize::new(0) })
    }

    /// Slot `i`, waiting for it no later than `deadline`.
    fn lock(&self, i: usize, deadline: Instant) -> io::Result<MutexGuard<'_, Slot>> {
        self.slots[i].try_lock_until(deadline).ok_or_else(|| {
            let busy = io::Error::new(io::ErrorKind::TimedOut, "its connection stayed busy");
            self.stats.timed_out(&self.upstream, self.timeout, &busy)
        })
    }

    /// Runs `op` on a pooled connection, re-dialling a lost one, until the deadline.
    fn with_client<T>(&self, wrote: bool, mut op: impl FnMut(&mut Client) -> io::Result<T>) -> io::Result<T> {
        let deadline = Instant::now() + self.timeout;
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.lock(i, deadline)?;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let failed = match &mut slot.client {
                Some(client) => match client.set_deadline(Some(deadline)).and_then(|()| op(client)) {
                    Ok(v) => {
                        slot.unflushed |= wrote;
                        self.stats.succeeded(&self.upstream);
                        return Ok(v);
                    }
                    // The upstream answered with an error: the connection is fine.
                    Err(e) if e.kind() == io::ErrorKind::Other => {
                        self.stats.succeeded(&self.upstream);
                        return Err(e);
                    }
                    Err(e) => e,
                },
                None => match self.upstream.connect(self.tls.as_ref(), deadline) {
                    Ok(client) if client.size() == self.size => {
                        slot.client = Some(client);
                        continue;
                    }
                    Ok(client) => {
                        let why =
                            format!("upstream {} changed size from {} to {}", self.upstream, self.size, client.size());
                        return Err(io::Error::other(why));
                    }
                    Err(e) => e,
                },
            };
            self.stats.failed(&self.upstream, &failed);
            if slot.client.take().is_some() && slot.unflushed {
                slot.unflushed = false;
                slot.lost_writes = true;
            }
            // Retries that could not finish before the deadline are not begun.
            if Instant::now() + backoff >= deadline {
                return Err(self.stats.timed_out(&self.upstream, self.timeout, &failed));
            }
            tracing::debug!(upstream = %self.upstream, error = %failed, "upstream call failed; retrying");
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

impl Backend for NbdBackend {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        for (i, chunk) in buf.chunks_mut(MAX_UPSTREAM_REQUEST).enumerate() {
            let at = offset + (i * MAX_UPSTREAM_REQUEST) as u64;
            let data = self.with_client(false, |c| c.read(at, chunk.len() as u32))?;
            chunk.copy_from_slice(&data);
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        for (i, chunk) in buf.chunks(MAX_UPSTREAM_REQUEST).enumerate() {
            let at = offset + (i * MAX_UPSTREAM_REQUEST) as u64;
            self.with_client(true, |c| c.write(at, chunk, false))?;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        let deadline = Instant::now() + self.timeout;
        for i in 0..self.slots.len() {
            let mut slot = self.lock(i, deadline)?;
            if std::mem::take(&mut slot.lost_writes) {
                return Err(io::Error::other(format!(
                    "upstream {}: a connection holding unflushed writes was lost; they may not be durable",
                    self.upstream
                )));
            }
            if std::mem::take(&mut slot.unflushed) {
                let flushed = match slot.client.as_mut() {
                    Some(c) => c.set_deadline(Some(deadline)).and_then(|()| c.flush()),
                    None => Ok(()),
                };
                match flushed {
                    Ok(()) => self.stats.succeeded(&self.upstream),
                    Err(e) => {
                        if e.kind() != io::ErrorKind::Other {
                            slot.client = None; // lost: the next request dials again
                            self.stats.failed(&self.upstream, &e);
                        }
                        if e.kind() == io::ErrorKind::TimedOut {
                            self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        return Err(io::Error::new(
                            e.kind(),
                            format!(
                                "upstream {}: flush failed ({e}); writes since the last flush may not be durable",
                                self.upstream
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("nbd {} ({} connections)", self.upstream, self.slots.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_as_nbdinfo_writes_them() {
        let tcp = |a: &str, e: &str| Upstream { address: Address::Tcp(a.into()), export: e.into(), tls: None };
        assert_eq!(Upstream::parse("nbd://storage:10810/disk"), Ok(tcp("storage:10810", "disk")));
        assert_eq!(Upstream::parse("nbd://storage"), Ok(tcp("storage:10809", "")));
        assert_eq!(Upstream::parse("nbd://[::1]:7000/x"), Ok(tcp("[::1]:7000", "x")));
        assert_eq!(
            Upstream::parse("nbd+unix:///disk?socket=/run/up.sock"),
            Ok(Upstream { address: Address::Unix("/run/up.sock".into()), export: "disk".into(), tls: None })
        );
        let spaced = Upstream::parse("nbds+unix://a%20b@/my%20disk?socket=/run/up%20here.sock&tls-psk-file=/k%3D.psk");
        let spaced = spaced.unwrap();
        assert_eq!((spaced.export.as_str(), spaced.address), ("my disk", Address::Unix("/run/up here.sock".into())));
        assert_eq!(spaced.tls, Some(UpstreamCredentials::Psk { file: "/k=.psk".into(), user: "a b".into() }));
        assert_eq!(Upstream::parse("nbd://h/100%").unwrap().export, "100%", "a broken escape is kept");
        let e = Upstream::parse("nbd://h/%ff").unwrap_err().to_string();
        assert!(e.contains("export name is not UTF-8"), "{e}");
        for bad in ["http://x/y", "nbd:///disk", "nbd+unix:///disk"] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tls_uris_as_libnbd_reads_them() {
        let certificates = Some(UpstreamCredentials::Certificates("/pki".into()));
        assert_eq!(
            Upstream::parse("nbds://storage/disk?tls-certificates=/pki"),
            Ok(Upstream { address: Address::Tcp("storage:10809".into()), export: "disk".into(), tls: certificates })
        );
        let psk = |user: &str| Some(UpstreamCredentials::Psk { file: "/k.psk".into(), user: user.into() });
        let unix = Upstream::parse("nbds+unix://alice@/disk?socket=/run/up.sock&tls-psk-file=/k.psk").unwrap();
        assert_eq!((unix.address, unix.tls), (Address::Unix("/run/up.sock".into()), psk("alice")));
        let named = Upstream::parse("nbds://storage:7000/?tls-psk-file=/k.psk&tls-username=bob").unwrap();
        assert_eq!(named.tls, psk("bob"));
        assert_eq!(named.to_string(), "nbds://storage:7000/");
        for (uri, why) in [
            ("nbd://storage/disk?tls-certificates=/pki", "TLS parameters need nbds://"),
            ("nbds://storage/disk", "needs tls-certificates=DIR or tls-psk-file=FILE"),
            ("nbds://storage/?tls-certificates=/pki&tls-psk-file=/k", "exclude each other"),
            ("nbds://storage/?tls-verify-peer=false&tls-certificates=/pki", "unknown query parameter"),
            ("nbd://storage/disk?socket=/s", "socket= is for nbd+unix://"),
        ] {
            let e = Upstream::parse(uri).unwrap_err().to_string();
            assert!(e.contains(why), "{uri}: {e}");
        }
    }
}

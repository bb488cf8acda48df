//! Another NBD server as the backend: `hearth serve` as a caching proxy in
//! front of remote storage (nbdkit, qemu-nbd, another Hearth).
//!
//! Requests go out over a small pool of connections, one request at a time
//! each (the Rust client is blocking), so up to `connections` backend calls
//! run at once. A connection that fails (the upstream restarted, the network
//! dropped) is closed and dialled again with backoff for up to
//! [`RETRY_FOR`], and the request is sent again: reads and writes of whole
//! ranges are idempotent. An error the upstream *answers* with (EIO, ENOSPC)
//! is passed on, not retried.
//!
//! FLUSH: the protocol only promises that a flush covers writes completed on
//! the same connection, so a flush flushes every connection that has taken
//! a write since its last flush. If a connection is lost while holding such
//! writes, the upstream may have dropped them: the next flush fails, as the
//! client must then assume those writes are not durable.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hearth_client::Client;

use super::Backend;
use crate::error::UpstreamError;

/// How long a request keeps re-dialling a lost upstream before failing.
pub const RETRY_FOR: Duration = Duration::from_secs(30);
/// Largest single request sent upstream (servers commonly accept 32 MiB).
const MAX_UPSTREAM_REQUEST: usize = 32 << 20;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Where the upstream export is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    address: Address,
    export: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Address {
    Tcp(String),
    Unix(PathBuf),
}

impl Upstream {
    /// Parses `nbd://host[:port]/[export]` (port 10809 by default) or
    /// `nbd+unix:///[export]?socket=PATH`, as nbdinfo and qemu write them.
    pub fn parse(uri: &str) -> Result<Upstream, UpstreamError> {
        let bad = |why: &'static str| UpstreamError::Nbd { uri: uri.to_string(), why };
        if let Some(rest) = uri.strip_prefix("nbd://") {
            let (host, export) = rest.split_once('/').unwrap_or((rest, ""));
            if host.is_empty() {
                return Err(bad("no host"));
            }
            let has_port = host.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) && !host.ends_with(']');
            let address = if has_port { host.to_string() } else { format!("{host}:10809") };
            Ok(Upstream { address: Address::Tcp(address), export: export.to_string() })
        } else if let Some(rest) = uri.strip_prefix("nbd+unix://") {
            let (path, query) = rest.split_once('?').ok_or_else(|| bad("no ?socket="))?;
            let export = path.strip_prefix('/').unwrap_or(path);
            let socket = query.split('&').find_map(|kv| kv.strip_prefix("socket=")).ok_or_else(|| bad("no socket="))?;
            Ok(Upstream { address: Address::Unix(PathBuf::from(socket)), export: export.to_string() })
        } else {
            Err(bad("not an NBD URI"))
        }
    }

    fn connect(&self) -> io::Result<Client> {
        match &self.address {
            Address::Tcp(addr) => Client::connect_tcp(addr, &self.export),
            Address::Unix(path) => Client::connect_unix(path, &self.export),
        }
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.address {
            Address::Tcp(addr) => write!(f, "nbd://{addr}/{}", self.export),
            Address::Unix(path) => write!(f, "nbd+unix:///{}?socket={}", self.export, path.display()),
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
    size: u64,
    slots: Vec<Mutex<Slot>>,
    next: AtomicUsize,
}

impl NbdBackend {
    /// Connects once (to learn the size; failing at once if the upstream is
    /// not there) and keeps up to `connections` connections.
    pub fn connect(upstream: Upstream, connections: usize) -> io::Result<NbdBackend> {
        let first = upstream
            .connect()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot reach upstream {upstream}: {e}")))?;
        let size = first.size();
        let mut slots: Vec<Mutex<Slot>> = (0..connections.max(1)).map(|_| Mutex::default()).collect();
        slots[0].get_mut().expect("fresh").client = Some(first);
        Ok(NbdBackend { upstream, size, slots, next: AtomicUsize::new(0) })
    }

    /// Runs `op` on a pooled connection, re-dialling a lost one.
    fn with_client<T>(&self, wrote: bool, mut op: impl FnMut(&mut Client) -> io::Result<T>) -> io::Result<T> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().unwrap_or_else(|e| e.into_inner());
        let deadline = Instant::now() + RETRY_FOR;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let failed = match &mut slot.client {
                Some(client) => match op(client) {
                    Ok(v) => {
                        slot.unflushed |= wrote;
                        return Ok(v);
                    }
                    // The upstream answered with an error: the connection is fine.
                    Err(e) if e.kind() == io::ErrorKind::Other => return Err(e),
                    Err(e) => e,
                },
                None => match self.upstream.connect() {
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
            if slot.client.take().is_some() && slot.unflushed {
                slot.unflushed = false;
                slot.lost_writes = true;
            }
            if Instant::now() + backoff > deadline {
                return Err(io::Error::new(failed.kind(), format!("upstream {}: {failed}", self.upstream)));
            }
            tracing::warn!(upstream = %self.upstream, error = %failed, "upstream connection lost; retrying");
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
        for slot in &self.slots {
            let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
            if std::mem::take(&mut slot.lost_writes) {
                return Err(io::Error::other(format!(
                    "upstream {}: a connection holding unflushed writes was lost; they may not be durable",
                    self.upstream
                )));
            }
            if std::mem::take(&mut slot.unflushed) {
                let flushed = slot.client.as_mut().map_or(Ok(()), Client::flush);
                if let Err(e) = flushed {
                    if e.kind() != io::ErrorKind::Other {
                        slot.client = None; // lost: the next request dials again
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
        let tcp = |a: &str, e: &str| Upstream { address: Address::Tcp(a.into()), export: e.into() };
        assert_eq!(Upstream::parse("nbd://storage:10810/disk"), Ok(tcp("storage:10810", "disk")));
        assert_eq!(Upstream::parse("nbd://storage"), Ok(tcp("storage:10809", "")));
        assert_eq!(Upstream::parse("nbd://[::1]:7000/x"), Ok(tcp("[::1]:7000", "x")));
        assert_eq!(
            Upstream::parse("nbd+unix:///disk?socket=/run/up.sock"),
            Ok(Upstream { address: Address::Unix("/run/up.sock".into()), export: "disk".into() })
        );
        for bad in ["http://x/y", "nbd:///disk", "nbd+unix:///disk"] {
            assert!(Upstream::parse(bad).is_err(), "{bad}");
        }
    }
}

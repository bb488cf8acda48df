//! What the remote backends (NBD, HTTP) share: the deadline of a request
//! to the upstream, and the upstream's health as the log and `/metrics`
//! show it.

use std::fmt::Display;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one backend call may take, queueing for a connection,
/// re-dialling and retrying included (`upstream_timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(50);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Counters for `/metrics`, and whether the upstream is down now, so that
/// an outage is logged once when it starts and once when it ends.
#[derive(Debug, Default)]
pub struct UpstreamStats {
    /// Backend calls that failed at their deadline.
    pub timeouts: AtomicU64,
    /// Attempts that did not reach the upstream or got no answer (lost or
    /// refused connections, stalls, HTTP 5xx); each is retried until the deadline.
    pub failures: AtomicU64,
    /// Read on every success, so that a healthy upstream costs no lock.
    down: AtomicBool,
    /// When the outage began.
    since: Mutex<Option<Instant>>,
}

impl UpstreamStats {
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// One attempt failed in transit; the first failure of an outage is logged.
    pub(crate) fn failed(&self, upstream: &dyn Display, error: &io::Error) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let mut since = self.since.lock().unwrap_or_else(|e| e.into_inner());
        if since.is_none() {
            *since = Some(Instant::now());
            self.down.store(true, Ordering::Relaxed);
            tracing::warn!(%upstream, %error, "upstream unavailable; requests retry until their deadline");
        }
    }

    /// A call succeeded; the first success after an outage is logged.
    pub(crate) fn succeeded(&self, upstream: &dyn Display) {
        if !self.down.load(Ordering::Relaxed) {
            return;
        }
        let mut since = self.since.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(began) = since.take() {
            self.down.store(false, Ordering::Relaxed);
            let outage = hearth_core::format_duration(began.elapsed());
            tracing::info!(%upstream, %outage, "upstream available again");
        }
    }

    /// The error a call ends with at its deadline: TimedOut (EIO to an NBD
    /// client), naming the upstream and the last failure.
    pub(crate) fn timed_out(&self, upstream: &dyn Display, timeout: Duration, last: &io::Error) -> io::Error {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
        let timeout = hearth_core::format_duration(timeout);
        io::Error::new(io::ErrorKind::TimedOut, format!("upstream {upstream}: no answer within {timeout} ({last})"))
    }
}

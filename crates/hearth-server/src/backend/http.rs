//! A file on a web server as a read-only backend, as nbdkit's curl plugin
//! serves one: the cache in front of object storage or a plain HTTP(S)
//! server that answers byte-range requests.
//!
//! The size comes from the first range request's `Content-Range`; a server
//! that ignores ranges is refused at open, since every read would fetch
//! the whole file. Reads are `GET` with `Range: bytes=a-b`, over a pool of
//! kept-alive connections (calls come from several blocking threads at
//! once). A request that fails in transit, or that the server answers with
//! 5xx, is sent again with backoff; any other answer is an error. Each read
//! has a deadline (`upstream_timeout`) covering its retries and each
//! request end to end (a server that stops answering included); past it the
//! read fails with TimedOut (EIO to the client). Writes are refused: the
//! export must be read-only.

use std::io::{self, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::upstream::{UpstreamStats, FIRST_BACKOFF, MAX_BACKOFF};
use super::Backend;
use crate::error::UpstreamError;

pub struct HttpBackend {
    agent: ureq::Agent,
    url: String,
    size: u64,
    timeout: Duration,
    stats: Arc<UpstreamStats>,
}

/// Why one range request did not deliver its bytes, and whether trying
/// again may help.
enum Failure {
    Transient(io::Error),
    Fatal(io::Error),
}

/// Refuses anything but an http:// or https:// URL (the config checks with
/// this before anything is opened; [`HttpBackend::open`] checks again).
pub fn check_url(url: &str) -> Result<(), UpstreamError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(UpstreamError::NotHttp(url.to_string()))
    }
}

impl HttpBackend {
    /// Checks that `url` (http:// or https://) answers range requests and
    /// learns its size; an error names the URL. Each read gets `timeout`.
    pub fn open(url: &str, timeout: Duration, stats: Arc<UpstreamStats>) -> io::Result<HttpBackend> {
        check_url(url).map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut backend = HttpBackend { agent, url: url.to_string(), size: 0, timeout, stats };
        let mut first = [0u8; 1];
        backend.size = backend.with_retries(|b, deadline| b.range(&mut first, 0, deadline))?;
        Ok(backend)
    }

    fn with_retries<T>(&self, mut attempt: impl FnMut(&Self, Instant) -> Result<T, Failure>) -> io::Result<T> {
        let deadline = Instant::now() + self.timeout;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let failed = match attempt(self, deadline) {
                Ok(v) => {
                    self.stats.succeeded(&self.url);
                    return Ok(v);
                }
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Transient(e)) => e,
            };
            self.stats.failed(&self.url, &failed);
            // Retries that could not finish before the deadline are not begun.
            if Instant::now() + backoff >= deadline {
                return Err(self.stats.timed_out(&self.url, self.timeout, &failed));
            }
            tracing::debug!(url = %self.url, error = %failed, "HTTP read failed; retrying");
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Fetches `buf.len()` bytes at `offset` by `deadline`; returns the
    /// file's size as the server's `Content-Range` gives it.
    fn range(&self, buf: &mut [u8], offset: u64, deadline: Instant) -> Result<u64, Failure> {
        let error = |kind, what: String| io::Error::new(kind, format!("{}: {what}", self.url));
        let last = offset + buf.len() as u64 - 1;
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let mut response = self
            .agent
            .get(&self.url)
            .config()
            .timeout_global(Some(left))
            .build()
            .header("Range", format!("bytes={offset}-{last}"))
            .call()
            .map_err(|e| match certificate_refused(&e) {
                // A certificate does not mend with retries: say so at once.
                Some(why) => Failure::Fatal(error(
                    io::ErrorKind::PermissionDenied,
                    format!("the server's certificate is refused ({why}; https:// is verified against the public CAs of webpki-roots)"),
                )),
                None => Failure::Transient(error(io::ErrorKind::Other, e.to_string())),
            })?;
        let status = response.status().as_u16();
        match status {
            206 => {}
            200 => {
                let what = "the server ignores byte-range requests (answered 200, not 206)".to_string();
                return Err(Failure::Fatal(error(io::ErrorKind::Unsupported, what)));
            }
            416 if offset == 0 => {
                return Err(Failure::Fatal(error(io::ErrorKind::InvalidData, "the file is empty".into())))
            }
            500..=599 => return Err(Failure::Transient(error(io::ErrorKind::Other, format!("HTTP status {status}")))),
            _ => return Err(Failure::Fatal(error(io::ErrorKind::Other, format!("HTTP status {status}")))),
        }
        let content_range = response.headers().get("content-range").and_then(|v| v.to_str().ok()).unwrap_or("");
        let size = parse_content_range(content_range, offset, last)
            .map_err(|what| Failure::Fatal(error(io::ErrorKind::InvalidData, what.to_string())))?;
        let mut body = response.body_mut().with_config().limit(buf.len() as u64 + 1).reader();
        body.read_exact(buf).map_err(|e| Failure::Transient(error(e.kind(), format!("reading the body: {e}"))))?;
        Ok(size)
    }

    fn read_only(&self) -> io::Error {
        io::Error::new(io::ErrorKind::ReadOnlyFilesystem, format!("{}: an HTTP backend is read-only", self.url))
    }
}

/// The TLS certificate error behind a failed call, if that is what it was.
fn certificate_refused(e: &ureq::Error) -> Option<&rustls::Error> {
    let rustls = match e {
        ureq::Error::Rustls(e) => e,
        ureq::Error::Io(e) => e.get_ref()?.downcast_ref::<rustls::Error>()?,
        _ => return None,
    };
    matches!(rustls, rustls::Error::InvalidCertificate(_)).then_some(rustls)
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum ContentRangeError {
    #[error("unexpected Content-Range {header:?} for bytes {first}-{last}")]
    Unexpected { header: String, first: u64, last: u64 },
    #[error("Content-Range {header:?} gives no size (the file must have one)")]
    NoSize { header: String },
}

/// The total size from `bytes FIRST-LAST/TOTAL`, checked against the range asked for.
fn parse_content_range(header: &str, first: u64, last: u64) -> Result<u64, ContentRangeError> {
    let bad = || ContentRangeError::Unexpected { header: header.to_string(), first, last };
    let (range, total) = header.strip_prefix("bytes ").and_then(|r| r.split_once('/')).ok_or_else(bad)?;
    let (from, to) = range.split_once('-').ok_or_else(bad)?;
    let (from, to) = (from.parse::<u64>().map_err(|_| bad())?, to.parse::<u64>().map_err(|_| bad())?);
    let total = total.parse::<u64>().map_err(|_| ContentRangeError::NoSize { header: header.to_string() })?;
    // A range asked past the end comes back shortened only at the very end.
    if from != first || to > last || (to < last && to + 1 != total) {
        return Err(bad());
    }
    Ok(total)
}

impl Backend for HttpBackend {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        self.with_retries(|b, deadline| b.range(buf, offset, deadline)).map(|_| ())
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        Err(self.read_only())
    }
    fn write_zeroes(&self, _offset: u64, _len: u64, _may_punch: bool) -> io::Result<()> {
        Err(self.read_only())
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn describe(&self) -> String {
        format!("http {}", self.url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_gives_the_size_and_must_match_the_request() {
        assert_eq!(parse_content_range("bytes 0-0/1234", 0, 0), Ok(1234));
        assert_eq!(parse_content_range("bytes 4096-8191/1048576", 4096, 8191), Ok(1_048_576));
        assert_eq!(parse_content_range("bytes 1000-1023/1024", 1000, 2000), Ok(1024), "cut short at the end");
        assert!(parse_content_range("bytes 0-99/*", 0, 99).unwrap_err().to_string().contains("gives no size"));
        assert!(parse_content_range("bytes 1-100/1000", 0, 99).is_err(), "another range than asked");
        assert!(parse_content_range("bytes 0-49/1000", 0, 99).is_err(), "short of the end");
        assert!(parse_content_range("", 0, 99).is_err());
    }

    /// A web server that answers its first request and then stops
    /// answering (hung, or stopped with SIGSTOP) while keeping the connection.
    fn answers_once() -> String {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/disk.img", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let mut answered = false;
            for conn in listener.incoming() {
                let mut conn = BufReader::new(conn.unwrap());
                let mut line = String::new();
                while conn.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                if !answered {
                    let reply =
                        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-0/4096\r\nContent-Length: 1\r\n\r\nx";
                    conn.get_mut().write_all(reply.as_bytes()).unwrap();
                    answered = true;
                }
                // Kept open and silent: requests on it wait for an answer.
                std::mem::forget(conn);
            }
        });
        url
    }

    #[test]
    fn a_server_that_stops_answering_fails_the_read_at_its_deadline() {
        let stats = Arc::new(UpstreamStats::default());
        let timeout = Duration::from_millis(500);
        let backend = HttpBackend::open(&answers_once(), timeout, stats.clone()).unwrap();
        assert_eq!(backend.size(), 4096);
        let started = Instant::now();
        let e = backend.read_at(&mut [0u8; 512], 0).unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(took >= timeout && took < timeout + Duration::from_secs(1), "{took:?}");
        assert_eq!(stats.timeouts.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(stats.is_down());
    }

    #[test]
    fn only_web_urls_are_opened() {
        let stats = Arc::default();
        let e = HttpBackend::open("ftp://example.com/disk.img", Duration::from_secs(1), stats).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("not an http:// or https:// URL"), "{e}");
    }
}

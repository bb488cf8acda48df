//! A file on a web server as a read-only backend, as nbdkit's curl plugin
//! serves one: the cache in front of object storage or a plain HTTP(S)
//! server that answers byte-range requests.
//!
//! The size comes from the first range request's `Content-Range`; a server
//! that ignores ranges is refused at open, since every read would fetch
//! the whole file. Reads are `GET` with `Range: bytes=a-b`, over a pool of
//! kept-alive connections (calls come from several blocking threads at
//! once). A request that fails in transit, or that the server answers with
//! 5xx, is sent again with backoff for up to [`RETRY_FOR`]; any other
//! answer is an error. Writes are refused: the export must be read-only.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use super::Backend;
use crate::error::UpstreamError;

/// How long a read keeps retrying a server that fails or is unreachable.
pub const RETRY_FOR: Duration = Duration::from_secs(30);
/// How long one request may take end to end.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

pub struct HttpBackend {
    agent: ureq::Agent,
    url: String,
    size: u64,
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
    /// learns its size; an error names the URL.
    pub fn open(url: &str) -> io::Result<HttpBackend> {
        check_url(url).map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        let mut backend = HttpBackend { agent, url: url.to_string(), size: 0 };
        let mut first = [0u8; 1];
        backend.size = backend.with_retries(|b| b.range(&mut first, 0))?;
        Ok(backend)
    }

    fn with_retries<T>(&self, mut attempt: impl FnMut(&Self) -> Result<T, Failure>) -> io::Result<T> {
        let started = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        loop {
            match attempt(self) {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Transient(e)) if started.elapsed() + backoff > RETRY_FOR => return Err(e),
                Err(Failure::Transient(e)) => {
                    tracing::warn!(url = %self.url, error = %e, "HTTP read failed; retrying");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Fetches `buf.len()` bytes at `offset`; returns the file's size as
    /// the server's `Content-Range` gives it.
    fn range(&self, buf: &mut [u8], offset: u64) -> Result<u64, Failure> {
        let error = |kind, what: String| io::Error::new(kind, format!("{}: {what}", self.url));
        let last = offset + buf.len() as u64 - 1;
        let mut response = self
            .agent
            .get(&self.url)
            .header("Range", format!("bytes={offset}-{last}"))
            .call()
            .map_err(|e| Failure::Transient(error(io::ErrorKind::Other, e.to_string())))?;
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
        self.with_retries(|b| b.range(buf, offset)).map(|_| ())
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

    #[test]
    fn only_web_urls_are_opened() {
        let e = HttpBackend::open("ftp://example.com/disk.img").err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("not an http:// or https:// URL"), "{e}");
    }
}

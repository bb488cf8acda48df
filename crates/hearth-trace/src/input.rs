//! Byte sources shared by the readers: opening (and transparently
//! decompressing) a file, reading text lines into one reused buffer, reading
//! fixed-size binary records, and parsing the fields inside them.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{CompressedAt, Place, TraceError};

/// Large reads keep the per-record cost down on multi-GB traces; small
/// enough that a binary trace's records (read four buffers at a time,
/// [`Records`]) are still in the core's cache when they are decoded after
/// the kernel copied them in.
const READ_BUFFER: usize = 64 * 1024;

pub(crate) type Input = Box<dyn BufRead + Send>;

/// Which decompressor a file name asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

/// Splits `name` into its compression and the name without the compression
/// suffix (`a.csv.gz` -> (Gzip, `a.csv`)).
pub(crate) fn compression_of(name: &str) -> (Compression, &str) {
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".gz") {
        (Compression::Gzip, &name[..name.len() - 3])
    } else if lower.ends_with(".zst") {
        (Compression::Zstd, &name[..name.len() - 4])
    } else {
        (Compression::None, name)
    }
}

/// Opens `path` for buffered reading, decompressing `.gz` and `.zst`.
pub(crate) fn open_input(path: &Path) -> Result<Input, TraceError> {
    let file = File::open(path).map_err(|e| TraceError::io(path, Place::File, "cannot open", e))?;
    // Linux opens a directory for reading; the first read would fail with EISDIR.
    if file.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(TraceError::new(path, Place::File, "is a directory, not a trace file"));
    }
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let buffered = BufReader::with_capacity(READ_BUFFER, file);
    Ok(match compression_of(&name).0 {
        Compression::None => Box::new(buffered),
        Compression::Gzip => {
            Box::new(BufReader::with_capacity(READ_BUFFER, flate2::bufread::MultiGzDecoder::new(buffered)))
        }
        Compression::Zstd => Box::new(BufReader::with_capacity(READ_BUFFER, ZstdFrames::new(buffered))),
    })
}

/// Decodes every zstd frame in a stream one after the other (`zstd` and
/// `pzstd` may write several); ruzstd's decoder stops after one frame.
struct ZstdFrames {
    source: Option<Counted>,
    frame: Option<ruzstd::StreamingDecoder<Counted, ruzstd::FrameDecoder>>,
    /// A frame was corrupt (where, and how): nothing more is read.
    failed: Option<(u64, &'static str)>,
    /// A frame header was read: a bad one later is corruption, not another format.
    decoded_a_frame: bool,
}

/// The compressed file, counting the bytes the decoder has taken from it.
struct Counted {
    inner: BufReader<File>,
    taken: u64,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.taken += n as u64;
        Ok(n)
    }
}

impl BufRead for Counted {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.taken += amt as u64;
        self.inner.consume(amt);
    }
}

impl ZstdFrames {
    fn new(source: BufReader<File>) -> Self {
        ZstdFrames {
            source: Some(Counted { inner: source, taken: 0 }),
            frame: None,
            failed: None,
            decoded_a_frame: false,
        }
    }

    /// Fails this and every later read with `what`, at compressed byte `offset`.
    fn fail(&mut self, kind: io::ErrorKind, offset: u64, what: &'static str) -> io::Error {
        self.failed = Some((offset, what));
        io::Error::new(kind, CompressedAt { offset, what })
    }
}

impl Read for ZstdFrames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some((offset, what)) = self.failed {
            return Err(io::Error::new(io::ErrorKind::InvalidData, CompressedAt { offset, what }));
        }
        loop {
            if let Some(frame) = &mut self.frame {
                // After an error the decoder is not to be read again: ruzstd
                // 0.7 then indexes an empty FSE table and panics (found by
                // fuzzing). Every later read repeats that the data is corrupt.
                let n = match frame.read(buf) {
                    Ok(n) => n,
                    Err(e) => {
                        let mut source = self.frame.take().expect("frame is present").into_inner();
                        // ruzstd's errors print as Rust debug output: say it plainly.
                        let what = if source.fill_buf().is_ok_and(|rest| rest.is_empty()) {
                            "zstd: the file ends inside a compressed frame (truncated?)"
                        } else {
                            "zstd: corrupt compressed data"
                        };
                        return Err(self.fail(e.kind(), source.taken, what));
                    }
                };
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                let finished = self.frame.take().expect("frame is present");
                self.source = Some(finished.into_inner());
            }
            let Some(mut source) = self.source.take() else {
                return Ok(0);
            };
            if source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            let at = source.taken;
            match ruzstd::StreamingDecoder::new(source) {
                Ok(frame) => {
                    self.decoded_a_frame = true;
                    self.frame = Some(frame);
                }
                Err(_) if self.decoded_a_frame => {
                    return Err(self.fail(
                        io::ErrorKind::InvalidData,
                        at,
                        "zstd: a corrupt frame header after the first frame",
                    ))
                }
                Err(_) => {
                    let what = "not zstd-compressed data (no zstd frame header at its start)";
                    return Err(self.fail(io::ErrorKind::InvalidData, at, what));
                }
            }
        }
    }
}

/// A text trace read line by line into one reused buffer.
pub(crate) struct Lines {
    pub(crate) path: PathBuf,
    input: Input,
    buf: Vec<u8>,
    /// 1-based number of the line last returned.
    line_no: u64,
}

impl Lines {
    pub(crate) fn new(path: &Path, input: Input) -> Self {
        Lines { path: path.to_path_buf(), input, buf: Vec::with_capacity(256), line_no: 0 }
    }

    /// The next line without its line ending, or `None` at the end.
    /// Binary data is reported as such: it usually means a wrong format.
    pub(crate) fn next_line(&mut self) -> Result<Option<Line<'_>>, TraceError> {
        self.buf.clear();
        let n = self
            .input
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| TraceError::read(&self.path, Place::Line(self.line_no + 1), e))?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        let here = Place::Line(self.line_no);
        if let Some(col) = self.buf.iter().position(|&b| b == 0) {
            let what = format!("binary data (NUL byte at column {}) in a text trace; is the format right?", col + 1);
            return Err(TraceError::new(&self.path, here, what));
        }
        match std::str::from_utf8(&self.buf) {
            Ok(text) => Ok(Some(Line { text, number: self.line_no, path: &self.path })),
            Err(e) => {
                let what = format!("not UTF-8 text (bad byte at column {}); is the format right?", e.valid_up_to() + 1);
                Err(TraceError::new(&self.path, here, what))
            }
        }
    }
}

/// One line of a text trace, able to report an error about itself.
pub(crate) struct Line<'a> {
    pub(crate) text: &'a str,
    /// 1-based line number.
    pub(crate) number: u64,
    path: &'a Path,
}

impl Line<'_> {
    pub(crate) fn error(&self, what: impl Into<String>) -> TraceError {
        TraceError::new(self.path, Place::Line(self.number), what)
    }
}

/// A binary trace read as fixed-size records.
pub(crate) struct Records {
    pub(crate) path: PathBuf,
    input: Input,
    /// Byte offset of the next unread record.
    pub(crate) offset: u64,
    /// Bytes read ahead: `ahead[start..end]` are the next records. Records
    /// are copied out of this rather than asked of `input` one at a time (two
    /// dynamic calls a record, the main cost of reading a binary trace).
    ahead: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Records {
    pub(crate) fn new(path: &Path, input: Input) -> Self {
        // Larger than `input`'s buffer, so reads go straight into it.
        let ahead = vec![0; 4 * READ_BUFFER].into_boxed_slice();
        Records { path: path.to_path_buf(), input, offset: 0, ahead, start: 0, end: 0 }
    }

    /// Fills `record` with the next record; `false` at a clean end of file.
    pub(crate) fn next_record(&mut self, record: &mut [u8]) -> Result<bool, TraceError> {
        let len = record.len();
        if !self.buffer_one(len)? {
            return Ok(false);
        }
        record.copy_from_slice(&self.ahead[self.start..self.start + len]);
        self.start += len;
        self.offset += len as u64;
        Ok(true)
    }

    /// The whole records buffered next (at least one, unless the file has
    /// ended cleanly: then empty), consumed: a reader that looks at a few
    /// bytes of most records walks them in place instead of copying each.
    pub(crate) fn next_batch(&mut self, record_len: usize) -> Result<&[u8], TraceError> {
        if !self.buffer_one(record_len)? {
            return Ok(&[]);
        }
        let whole = (self.end - self.start) / record_len * record_len;
        let batch = &self.ahead[self.start..self.start + whole];
        self.start += whole;
        self.offset += whole as u64;
        Ok(batch)
    }

    /// Makes sure a whole record of `len` bytes is buffered; `false` at a
    /// clean end of file. A record cut short is an error naming where it
    /// starts.
    fn buffer_one(&mut self, len: usize) -> Result<bool, TraceError> {
        if self.end - self.start < len {
            self.read_ahead(len)?;
            let got = self.end - self.start;
            if got == 0 {
                return Ok(false);
            }
            if got < len {
                return Err(self.error(format!("truncated record: file ends after {got} of its {len} bytes")));
            }
        }
        Ok(true)
    }

    /// Moves the unread bytes to the front and reads until `want` bytes are
    /// buffered or the file ends.
    fn read_ahead(&mut self, want: usize) -> Result<(), TraceError> {
        self.ahead.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        while self.end < want {
            match self.input.read(&mut self.ahead[self.end..]) {
                Ok(0) => break,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.offset + self.end as u64;
                    return Err(TraceError::read(&self.path, Place::Byte(at), e));
                }
            }
        }
        Ok(())
    }

    /// Byte offset where the record last returned starts.
    pub(crate) fn record_start(&self, record_len: usize) -> u64 {
        self.offset - record_len as u64
    }

    /// An error at the start of the record not yet consumed (the current
    /// offset).
    pub(crate) fn error(&self, what: impl Into<String>) -> TraceError {
        TraceError::new(&self.path, Place::Byte(self.offset), what)
    }

    /// An error about the record last returned.
    pub(crate) fn record_error(&self, record_len: usize, what: impl Into<String>) -> TraceError {
        TraceError::new(&self.path, Place::Byte(self.record_start(record_len)), what)
    }
}

/// Little-endian field readers for binary records.
pub(crate) fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The comma-separated fields of one CSV line, handed out in order with
/// their column names so that a bad value can be reported precisely.
pub(crate) struct CsvFields<'a> {
    fields: std::str::Split<'a, char>,
    /// 1-based number of the next field.
    column: usize,
    /// Column names of the format, for messages.
    names: &'static [&'static str],
}

impl<'a> CsvFields<'a> {
    pub(crate) fn new(line: &'a str, names: &'static [&'static str]) -> Self {
        CsvFields { fields: line.split(','), column: 1, names }
    }

    /// The next field as raw text (trimmed).
    pub(crate) fn text(&mut self) -> Result<&'a str, String> {
        let name = self.names.get(self.column - 1).copied().unwrap_or("extra");
        let column = self.column;
        self.column += 1;
        match self.fields.next() {
            Some(f) => Ok(f.trim()),
            None => Err(format!(
                "missing field {column} ({name}); expected {} comma-separated fields: {}",
                self.names.len(),
                self.names.join(",")
            )),
        }
    }

    /// The next field parsed as `T`.
    pub(crate) fn parse<T: FromStr>(&mut self) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        let text = self.text()?;
        text.parse().map_err(|e| self.bad_last(text, e))
    }

    /// Describes why the field just taken is bad.
    pub(crate) fn bad_last(&self, text: &str, why: impl std::fmt::Display) -> String {
        let column = self.column - 1;
        let name = self.names.get(column - 1).copied().unwrap_or("extra");
        format!("bad field {column} ({name}) {text:?}: {why}")
    }
}

/// Parses decimal seconds (`12`, `0.000123456`) to whole nanoseconds, exactly
/// (digits past the ninth decimal are truncated).
pub(crate) fn parse_seconds_ns(text: &str) -> Result<u64, String> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && frac.is_empty() {
        return Err("empty".into());
    }
    if !whole.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err("expected non-negative decimal seconds".into());
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|e| format!("{e}"))? };
    let mut frac_ns = 0u64;
    for (i, digit) in frac.bytes().take(9).enumerate() {
        frac_ns += u64::from(digit - b'0') * 10u64.pow(8 - i as u32);
    }
    whole
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(frac_ns))
        .ok_or_else(|| "too large for nanoseconds in 64 bits".to_string())
}

/// Bytes in a disk sector, the unit of LBAs in the block formats here.
pub(crate) const SECTOR: u64 = 512;

/// Converts a sector number to a byte offset, refusing overflow.
pub(crate) fn sectors_to_bytes(sectors: u64) -> Result<u64, String> {
    sectors.checked_mul(SECTOR).ok_or_else(|| format!("sector {sectors} is beyond 2^64 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_exactly() {
        assert_eq!(parse_seconds_ns("0.000000001"), Ok(1));
        assert_eq!(parse_seconds_ns("12"), Ok(12_000_000_000));
        assert_eq!(parse_seconds_ns("1.5"), Ok(1_500_000_000));
        assert_eq!(parse_seconds_ns(".25"), Ok(250_000_000));
        assert_eq!(parse_seconds_ns("3.1234567899"), Ok(3_123_456_789));
        assert!(parse_seconds_ns("-1").is_err());
        assert!(parse_seconds_ns("1e3").is_err());
        assert!(parse_seconds_ns("").is_err());
        assert!(parse_seconds_ns("99999999999999999999").is_err());
    }

    #[test]
    fn compression_suffix_is_split_off() {
        assert_eq!(compression_of("a.csv.gz"), (Compression::Gzip, "a.csv"));
        assert_eq!(compression_of("a.bin.ZST"), (Compression::Zstd, "a.bin"));
        assert_eq!(compression_of("a.txt"), (Compression::None, "a.txt"));
    }
}

//! hearth-trace readers. They only read files (`open(path, format)`), so each
//! input is written to a scratch file first, in a per-process directory on
//! tmpfs (`/dev/shm`) when there is one.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use hearth_trace::buffered;
use hearth_trace::ctx::{read_ctx_trace, CtxChecker};
use hearth_trace::{accesses, open, open_blkparse, Format, Mode, Place, Request, TraceError, TraceReader};

/// Requests read from one input at most (decompression can expand a few
/// bytes into millions of lines).
const MAX_REQUESTS: usize = 100_000;
/// Accesses derived from the requests at most (one request can span 2^20 blocks).
const MAX_ACCESSES: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

fn scratch_dir() -> PathBuf {
    thread_local! {
        static DIR: RefCell<Option<PathBuf>> = const { RefCell::new(None) };
    }
    DIR.with(|d| {
        d.borrow_mut()
            .get_or_insert_with(|| {
                let base =
                    if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
                let dir = base.join(format!("hearth-fuzz-{}", std::process::id()));
                std::fs::create_dir_all(&dir).expect("scratch dir");
                dir
            })
            .clone()
    })
}

/// Writes `bytes` to the scratch file `name` (its suffix picks the decompressor).
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch_dir().join(name);
    std::fs::write(&path, bytes).expect("write scratch file");
    path
}

fn lines_in(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64 + 1
}

/// Bounds on what an input can produce when it is not compressed.
struct Bounds {
    bytes: u64,
    lines: u64,
}

fn check_error(e: &TraceError, path: &Path, bounds: Option<&Bounds>) {
    assert_eq!(e.file(), path, "error names another file");
    assert!(!e.message().is_empty());
    let _ = e.to_string();
    if let Some(b) = bounds {
        match e.place() {
            Place::File => {}
            Place::Line(n) => assert!(n >= 1 && n <= b.lines, "error at line {n} of {}", b.lines),
            Place::Byte(n) => assert!(n <= b.bytes, "error at byte {n} of {}", b.bytes),
            // An offset into the compressed input, which `bounds` does not describe.
            Place::Compressed(_) => {}
        }
    }
}

/// Minimum bytes per record of a binary format.
fn record_len(format: Format) -> Option<u64> {
    match format {
        Format::Vscsi => Some(32),
        Format::OracleGeneral => Some(24),
        // Records after an 8 KiB header, the shortest (version 1) of 24 bytes.
        Format::Lcs => Some(24),
        Format::Twr => Some(20),
        Format::TwrNs => Some(22),
        Format::Valpin => Some(8),
        _ => None,
    }
}

/// Reads everything (bounded), checking the reader's contract and invariants
/// of each format, then turns the requests into accesses.
fn drain(mut reader: TraceReader, path: &Path, bounds: Option<&Bounds>) {
    let format = reader.format();
    let mut reqs: Vec<Request> = Vec::new();
    loop {
        match reader.next() {
            None => break,
            Some(Ok(r)) => {
                reqs.push(r);
                if reqs.len() >= MAX_REQUESTS {
                    break;
                }
            }
            Some(Err(e)) => {
                check_error(&e, path, bounds);
                assert!(reader.next().is_none(), "reader yields after an error");
                break;
            }
        }
    }
    let n = reqs.len() as u64;
    if let Some(b) = bounds {
        match record_len(format) {
            Some(len) => assert!(n * len <= b.bytes, "{n} records of >= {len} bytes from {} bytes", b.bytes),
            None => assert!(n <= b.lines, "{n} requests from {} lines", b.lines),
        }
    }
    for (i, r) in reqs.iter().enumerate() {
        match format {
            Format::Text | Format::Valpin => assert_eq!((r.len, r.time_ns, r.client), (1, 0, 0)),
            Format::OracleGeneral | Format::Lcs => {
                if let Some(next) = r.next_access {
                    assert!(next > i as u64, "next access {next} not after request {i}");
                }
            }
            Format::Vscsi | Format::Spc | Format::CloudPhysicsCsv => assert_eq!(r.offset % 512, 0),
            Format::Blkparse => assert_eq!((r.offset % 512, r.len % 512), (0, 0)),
            Format::MsrCsv => assert_eq!(r.time_ns % 100, 0),
            Format::Twr => assert_eq!(r.client, 0),
            Format::TwrNs | Format::Csv | Format::Binary => {}
        }
        if !format.records_next_access() {
            assert_eq!(r.next_access, None);
        }
    }
    // Requests to accesses, as `hearth sim` does.
    let block_size = 4096u32;
    let mode = format.mode(block_size);
    let mut vtime = 0;
    for a in accesses(reqs.iter().copied().map(Ok), mode).take(MAX_ACCESSES) {
        let a = a.expect("no errors were fed in");
        assert_eq!(a.vtime, vtime);
        vtime += 1;
        match mode {
            Mode::Block { .. } => assert_eq!(a.size, block_size),
            Mode::Object => assert!(a.size >= 1),
        }
    }
    if mode == Mode::Object {
        assert_eq!(vtime, reqs.len().min(MAX_ACCESSES) as u64, "one access per object request");
    }
}

/// One format, input uncompressed.
pub fn format(format: Format, data: &[u8]) {
    let path = scratch("t.trace", data);
    let bounds = Bounds { bytes: data.len() as u64, lines: lines_in(data) };
    match open(&path, Some(format)) {
        Ok(r) => {
            assert_eq!(r.format(), format);
            drain(r, &path, Some(&bounds));
        }
        Err(e) => check_error(&e, &path, Some(&bounds)),
    }
    if format == Format::Blkparse {
        // Another action than the default Q.
        match open_blkparse(&path, 'C') {
            Ok(r) => drain(r, &path, Some(&bounds)),
            Err(e) => check_error(&e, &path, Some(&bounds)),
        }
    }
}

/// A `.csv` file without a format: the reader sniffs msr, spc or cpcsv.
pub fn sniff_csv(data: &[u8]) {
    let path = scratch("t.csv", data);
    let bounds = Bounds { bytes: data.len() as u64, lines: lines_in(data) };
    match open(&path, None) {
        Ok(r) => {
            assert!(matches!(r.format(), Format::MsrCsv | Format::Spc | Format::CloudPhysicsCsv));
            drain(r, &path, Some(&bounds));
        }
        Err(e) => check_error(&e, &path, Some(&bounds)),
    }
    // A buffered (storage-level) trace shares the .csv suffix.
    let _ = buffered::is_buffered_trace(&path);
}

/// A compressed trace: the first byte picks the format, the rest is the
/// `.gz` or `.zst` file.
pub fn compressed(compression: Compression, data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else { return };
    let format = Format::ALL[pick as usize % Format::ALL.len()];
    let name = match compression {
        Compression::None => "t.trace",
        Compression::Gzip => "t.trace.gz",
        Compression::Zstd => "t.trace.zst",
    };
    let path = scratch(name, body);
    match open(&path, Some(format)) {
        Ok(r) => drain(r, &path, None),
        Err(e) => check_error(&e, &path, None),
    }
}

/// Context-tagged traces (`.ctx`, read whole by `read_ctx_trace`).
pub fn ctx(data: &[u8]) {
    let path = scratch("t.ctx", data);
    let lines = lines_in(data);
    match read_ctx_trace(&path) {
        Ok(events) => {
            assert!(events.len() as u64 <= lines, "{} events from {lines} lines", events.len());
            let mut checker = CtxChecker::default();
            for e in &events {
                checker.check(e).expect("events the reader accepted pass the checker");
            }
        }
        Err(e) => check_error(&e, &path, Some(&Bounds { bytes: data.len() as u64, lines })),
    }
}

/// Storage-level buffered traces (`client,op,block,buffer`).
pub fn buffered_trace(data: &[u8]) {
    let path = scratch("t.buffered", data);
    let bounds = Bounds { bytes: data.len() as u64, lines: lines_in(data) };
    let _ = buffered::is_buffered_trace(&path);
    let mut reader = match buffered::open(&path) {
        Ok(r) => r,
        Err(e) => return check_error(&e, &path, Some(&bounds)),
    };
    let mut n = 0u64;
    while let Some(item) = reader.next() {
        match item {
            Ok(_) => n += 1,
            Err(e) => {
                check_error(&e, &path, Some(&bounds));
                assert!(reader.next().is_none(), "reader yields after an error");
                break;
            }
        }
    }
    assert!(n <= bounds.lines, "{n} accesses from {} lines", bounds.lines);
}

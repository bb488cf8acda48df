//! `hearth trace`: look at, sample and convert traces. Every command streams:
//! memory follows the number of distinct keys (or nothing), never the
//! trace's length.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use hearth_core::{format_bytes, key_map, Access, Op};
use hearth_trace::{sample, Mode, NextAccessFile, NextAccessReader, Request, TraceError};
use indicatif::ProgressBar;
use serde_json::json;

use crate::output_args::{Json, Quiet};
use crate::progress;
use crate::trace_args::TraceArgs;

#[derive(Subcommand)]
pub enum TraceCmd {
    /// Print the first requests, one per line.
    #[command(visible_alias = "print")]
    Head(HeadArgs),
    /// Count requests, accesses, keys, footprint, op mix, bytes, time span and request sizes.
    Stats(StatsArgs),
    /// Keep the accesses to a spatial sample of the keys (SHARDS) as an oracleGeneral trace.
    Sample(SampleArgs),
    /// Write the accesses as a libCacheSim oracleGeneral trace with next-access times filled in.
    Convert(ConvertArgs),
}

#[derive(Args, Debug)]
pub struct HeadArgs {
    #[command(flatten)]
    trace: TraceArgs,
    /// Requests to print.
    #[arg(short = 'n', long = "lines", default_value_t = 10)]
    n: usize,
    /// Accepted as by the other `trace` commands; `head` writes nothing on stderr anyway.
    #[command(flatten)]
    _quiet: Quiet,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    quiet: Quiet,
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    out: OutArgs,
    /// Share of the keys to keep, as a fraction (0.01) or a percentage (1%): a key is kept when its
    /// SplitMix64 hash is below RATE * 2^64, with all its accesses.
    #[arg(long, value_name = "PERCENT", value_parser = sample::parse_rate)]
    rate: f64,
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct OutArgs {
    /// The oracleGeneral file to write, uncompressed (compress it afterwards if needed). The next
    /// accesses are computed in temporary files in $TMPDIR (up to 29 bytes per access, gone however
    /// hearth ends).
    #[arg(short, long, value_name = "PATH")]
    output: PathBuf,
    #[command(flatten)]
    quiet: Quiet,
}

pub fn run(cmd: TraceCmd) -> anyhow::Result<()> {
    match cmd {
        TraceCmd::Head(args) => head(&args),
        TraceCmd::Stats(args) => stats(&args),
        TraceCmd::Sample(args) => export(&args.trace, &args.out, Some(sample::threshold(args.rate))),
        TraceCmd::Convert(args) => export(&args.trace, &args.out, None),
    }
}

fn head(args: &HeadArgs) -> anyhow::Result<()> {
    let (requests, mode) = args.trace.open()?;
    let (what, len) = if mode == Mode::Object { ("object", "size") } else { ("offset", "length") };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:>8}  {:>17}  {:>6}  {:<5}  {what:>20}  {len:>10}  {:>8}",
        "index", "time (s)", "client", "op", "next"
    )?;
    for (i, request) in requests.take(args.n).enumerate() {
        let r = request?;
        let next = r.next_access.map_or_else(|| "-".to_string(), |n| n.to_string());
        let (time, op, len) = (seconds(r.time_ns), op_name(r.op), format_bytes(u64::from(r.len)));
        writeln!(out, "{i:>8}  {time:>17}  {:>6}  {op:<5}  {:>20}  {len:>10}  {next:>8}", r.client, r.offset)?;
    }
    Ok(())
}

/// Counters over requests as the trace records them.
#[derive(Default)]
struct RequestStats {
    requests: u64,
    reads: u64,
    writes: u64,
    others: u64,
    bytes_read: u64,
    bytes_written: u64,
    min_len: Option<u32>,
    max_len: u32,
    total_len: u128,
    first_ns: Option<u64>,
    last_ns: u64,
    /// Some time was not the request's index in seconds: the clock that
    /// `trace convert` writes (oracleGeneral has no other) is not a time.
    clock_not_index: bool,
    /// Some time was not 0 (text traces record none).
    clock_not_zero: bool,
}

impl RequestStats {
    fn add(&mut self, r: &Request) {
        self.requests += 1;
        let len = u64::from(r.len);
        match r.op {
            Op::Read => (self.reads, self.bytes_read) = (self.reads + 1, self.bytes_read + len),
            Op::Write => (self.writes, self.bytes_written) = (self.writes + 1, self.bytes_written + len),
            Op::Other => self.others += 1,
        }
        self.min_len = Some(self.min_len.map_or(r.len, |m| m.min(r.len)));
        self.max_len = self.max_len.max(r.len);
        self.total_len += u128::from(r.len);
        self.first_ns.get_or_insert(r.time_ns);
        self.last_ns = r.time_ns;
        self.clock_not_index |= r.time_ns != (self.requests - 1) * 1_000_000_000;
        self.clock_not_zero |= r.time_ns != 0;
    }

    /// Whether the trace records times, rather than none or a request count.
    fn timed(&self) -> bool {
        self.clock_not_index && self.clock_not_zero
    }

    fn share(&self, n: u64) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            n as f64 / self.requests as f64
        }
    }

    fn mean_len(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.total_len as f64 / self.requests as f64)
    }
}

fn stats(args: &StatsArgs) -> anyhow::Result<()> {
    let (requests, mode) = args.trace.open()?;
    let bar = progress::counter("reading", args.quiet.quiet);
    let mut req = RequestStats::default();
    // Footprint: each key counts with the size of its first access.
    let mut seen = key_map::<()>(0);
    let (mut accesses, mut footprint) = (0u64, 0u64);
    let requests = counted(requests, &bar).inspect(|r| {
        if let Ok(r) = r {
            req.add(r);
        }
    });
    for access in hearth_trace::accesses(requests, mode) {
        let a = access?;
        accesses += 1;
        if seen.insert(a.key, ()).is_none() {
            footprint += u64::from(a.size);
        }
    }
    bar.finish_and_clear();
    let unique = seen.len() as u64;
    let (first, last) = (req.first_ns.unwrap_or(0), req.last_ns);
    let span = last.saturating_sub(first);
    let block_size = match mode {
        Mode::Block { block_size } => Some(block_size),
        Mode::Object => None,
    };
    if args.json.json {
        let report = json!({
            "trace": args.trace.trace.to_string(),
            "mode": if block_size.is_some() { "block" } else { "object" },
            "block_size": block_size,
            "requests": req.requests,
            "accesses": accesses,
            "unique_keys": unique,
            "footprint_bytes": footprint,
            "reads": req.reads,
            "writes": req.writes,
            "others": req.others,
            "read_share": req.share(req.reads),
            "write_share": req.share(req.writes),
            "other_share": req.share(req.others),
            "bytes_read": req.bytes_read,
            "bytes_written": req.bytes_written,
            "timed": req.timed(),
            "first_time_ns": req.first_ns.filter(|_| req.timed()),
            "last_time_ns": req.timed().then_some(last),
            "duration_ns": req.timed().then_some(span),
            "min_request_bytes": req.min_len,
            "mean_request_bytes": req.mean_len(),
            "max_request_bytes": req.first_ns.map(|_| req.max_len),
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let mode = block_size
        .map_or_else(|| "object mode".to_string(), |b| format!("block mode, {} blocks", format_bytes(b.into())));
    println!("{} ({mode})", args.trace.trace.display());
    println!("requests      {}", req.requests);
    println!("accesses      {accesses}");
    println!("unique keys   {unique}");
    println!("footprint     {} ({footprint} bytes)", format_bytes(footprint));
    let pct = |n: u64| 100.0 * req.share(n);
    println!("reads         {} ({:.1}%), {}", req.reads, pct(req.reads), format_bytes(req.bytes_read));
    println!("writes        {} ({:.1}%), {}", req.writes, pct(req.writes), format_bytes(req.bytes_written));
    println!("others        {} ({:.1}%)", req.others, pct(req.others));
    if req.timed() {
        println!("time          {} .. {} s, spanning {}", seconds(first), seconds(last), duration(span));
    } else if req.clock_not_zero {
        println!("time          not recorded (the clock counts requests, as `hearth trace convert` writes it)");
    } else {
        println!("time          not recorded");
    }
    match (req.min_len, req.mean_len()) {
        (Some(min), Some(mean)) => println!(
            "request size  min {}, mean {}, max {}",
            format_bytes(min.into()),
            format_bytes(mean.round() as u64),
            format_bytes(req.max_len.into())
        ),
        _ => println!("request size  -"),
    }
    Ok(())
}

/// Writes the accesses whose keys `threshold` samples (all without one) as
/// oracleGeneral, with vtimes renumbered from 0 and next accesses among the
/// written accesses. Two passes over the trace: the first builds the
/// next-access column on disk, the second writes the records beside it, to
/// a temporary name renamed into place only once complete.
fn export(trace: &TraceArgs, out: &OutArgs, threshold: Option<u64>) -> anyhow::Result<()> {
    let name = out.output.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    if let Some(ext) = [".zst", ".gz"].into_iter().find(|ext| name.ends_with(ext)) {
        bail!(
            "{}: cannot write {ext} output: `hearth trace` writes uncompressed oracleGeneral only; \
             name the output without {ext} and compress it afterwards (hearth reads {ext} traces)",
            out.output.display()
        );
    }
    let dir = std::env::temp_dir();

    let (requests, mode) = trace.open()?;
    let bar = progress::counter("finding next accesses", out.quiet.quiet);
    let mut total = 0u64;
    let keys = hearth_trace::accesses(counted(requests, &bar), mode)
        .inspect(|_| total += 1)
        .filter(|a| wanted(a, threshold))
        .map(|a| a.map(|a| (a.key, a.size)));
    let column = NextAccessFile::build(keys, &dir)?;
    bar.finish_and_clear();

    let (requests, mode) = trace.open()?;
    let bar = progress::bar(column.len(), "writing", out.quiet.quiet);
    let accesses = hearth_trace::accesses(requests, mode).filter(|a| wanted(a, threshold));
    let mut records = Records { accesses, next: column.reader()?, vtime: 0, bar: bar.clone(), error: None };
    let mut tmp = OsString::from(out.output.as_os_str());
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = hearth_trace::write_oracle_general(&tmp, records.by_ref())
        .map_err(anyhow::Error::from)
        .and_then(|()| records.error.take().map_or(Ok(()), Err))
        .and_then(|()| {
            let to = out.output.display();
            std::fs::rename(&tmp, &out.output).with_context(|| format!("cannot rename {} to {to}", tmp.display()))
        });
    if let Err(e) = written {
        // The error is what matters; a leftover temporary file is all this could add.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    bar.finish_and_clear();
    let kept = column.len();
    let to = out.output.display();
    match threshold {
        Some(t) => {
            let share = if total == 0 { 0.0 } else { 100.0 * kept as f64 / total as f64 };
            eprintln!("kept {kept} of {total} accesses ({share:.2}%) at rate {}; wrote {to}", sample::rate_of(t));
        }
        None => eprintln!("wrote {kept} accesses to {to}"),
    }
    Ok(())
}

fn wanted(a: &Result<Access, TraceError>, threshold: Option<u64>) -> bool {
    match (a, threshold) {
        (Ok(a), Some(t)) => sample::keeps(a.key, t),
        // Errors pass, to be reported.
        _ => true,
    }
}

/// The second pass: accesses paired with their next access, renumbered.
/// The oracleGeneral writer takes plain accesses, so the first error ends
/// the stream and waits in `error`.
struct Records<I> {
    accesses: I,
    next: NextAccessReader,
    vtime: u64,
    bar: ProgressBar,
    error: Option<anyhow::Error>,
}

impl<I: Iterator<Item = Result<Access, TraceError>>> Records<I> {
    fn step(&mut self) -> anyhow::Result<Option<Access>> {
        let (access, next_access) = match (self.accesses.next().transpose()?, self.next.next().transpose()?) {
            (Some(a), Some(next)) => (a, next),
            (None, None) => return Ok(None),
            _ => bail!("the trace changed between the two passes over it"),
        };
        let access = Access { vtime: self.vtime, next_access, ..access };
        self.vtime += 1;
        if self.vtime.is_multiple_of(TICK) {
            self.bar.inc(TICK);
        }
        Ok(Some(access))
    }
}

impl<I: Iterator<Item = Result<Access, TraceError>>> Iterator for Records<I> {
    type Item = Access;

    fn next(&mut self) -> Option<Access> {
        if self.error.is_some() {
            return None;
        }
        self.step().unwrap_or_else(|e| {
            self.error = Some(e);
            None
        })
    }
}

/// Items between progress updates: one update per item would cost more than
/// reading it.
const TICK: u64 = 1 << 16;

fn counted<I: Iterator>(items: I, bar: &ProgressBar) -> impl Iterator<Item = I::Item> {
    let bar = bar.clone();
    items.zip(1u64..).map(move |(item, n)| {
        if n.is_multiple_of(TICK) {
            bar.inc(TICK);
        }
        item
    })
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Read => "read",
        Op::Write => "write",
        Op::Other => "other",
    }
}

/// Nanoseconds as seconds with microseconds, the finest any format records.
fn seconds(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000)
}

fn duration(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let (d, h, m, s) = (s / 86_400, s / 3_600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h:02}h {m:02}m {s:02}s")
    } else if h > 0 {
        format!("{h}h {m:02}m {s:02}s")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{:.3} s", ns as f64 / 1e9)
    }
}

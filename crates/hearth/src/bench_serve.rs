//! `hearth bench serve`: a pipelined NBD load generator with a small cost
//! per request, so that a server's own cost shows where fio's hides it.
//!
//! Each job is one connection and one thread. It keeps `--iodepth` requests
//! in flight: it waits for one reply, takes every other complete reply
//! already in its receive buffer, then sends that many new requests in one
//! vectored write (a write's payload is one shared buffer, never copied).
//! Read data is consumed from the receive buffer without another copy.
//! Latency is from the send of a request to the receipt of its reply; the
//! client's own CPU time (getrusage, all jobs) is reported per operation.

use std::io::{self, BufRead, BufReader, IoSlice, Read, Write};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use hdrhistogram::Histogram;
use hearth_client::Socket;
use hearth_nbd::{Command, Request, SIMPLE_REPLY_MAGIC};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use crate::nbd_uri::Target;
use crate::output_args::Json;

#[derive(Args, Debug)]
pub struct ServeBenchArgs {
    /// The server: nbd://HOST:PORT/EXPORT or nbd+unix:///EXPORT?socket=PATH.
    uri: String,
    /// The I/O pattern: random or sequential, reads or writes (as fio's --rw).
    #[arg(long, value_enum, default_value_t = Rw::Randread)]
    rw: Rw,
    /// Bytes per request, e.g. 4KiB or 1MiB.
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = request_size)]
    bs: u64,
    /// Requests each connection keeps in flight.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=512))]
    iodepth: u16,
    /// Connections, each driven by its own thread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: u16,
    /// How long to issue requests, e.g. 5s or 500ms (in-flight requests are then waited for).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = positive_duration)]
    duration: Duration,
    #[command(flatten)]
    json: Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Rw {
    /// Reads at random block-aligned offsets.
    Randread,
    /// Writes at random block-aligned offsets.
    Randwrite,
    /// Sequential reads; job J starts at J/jobs of the export and wraps.
    Read,
    /// Sequential writes, laid out as sequential reads.
    Write,
}

impl Rw {
    fn writes(self) -> bool {
        matches!(self, Rw::Randwrite | Rw::Write)
    }
    fn random(self) -> bool {
        matches!(self, Rw::Randread | Rw::Randwrite)
    }
}

fn request_size(s: &str) -> Result<u64, String> {
    let n = hearth_core::parse_bytes(s).map_err(|e| e.to_string())?;
    if n == 0 || n > 32 << 20 {
        return Err(format!("{s:?}: a request is 1 byte to 32MiB"));
    }
    Ok(n)
}

fn positive_duration(s: &str) -> Result<Duration, String> {
    match crate::units::duration(s)? {
        d if d.is_zero() => Err(format!("{s:?}: the run needs a duration above zero")),
        d => Ok(d),
    }
}

/// One job's tally.
struct Tally {
    ops: u64,
    elapsed: Duration,
    latency_ns: Histogram<u64>,
}

/// What one job does: its pattern and its share of the export.
struct Plan {
    rw: Rw,
    bs: u64,
    depth: usize,
    job: u64,
    jobs: u64,
    duration: Duration,
}

pub fn run(args: ServeBenchArgs) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        eprintln!("warning: this is a debug build; benchmark with `cargo run --release -- bench serve`");
    }
    let target = Target::parse(&args.uri)?;
    let jobs = u64::from(args.jobs);
    let start = Barrier::new(args.jobs as usize + 1);
    let (tallies, cpu) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..jobs)
            .map(|job| {
                let plan = Plan {
                    rw: args.rw,
                    bs: args.bs,
                    depth: usize::from(args.iodepth),
                    job,
                    jobs,
                    duration: args.duration,
                };
                let (target, start) = (&target, &start);
                scope.spawn(move || run_job(target, &plan, start))
            })
            .collect();
        start.wait();
        let before = cpu_time();
        let tallies: Vec<anyhow::Result<Tally>> =
            handles.into_iter().map(|h| h.join().expect("a bench job panicked")).collect();
        (tallies, cpu_time().saturating_sub(before))
    });
    let tallies = tallies.into_iter().collect::<anyhow::Result<Vec<_>>>().with_context(|| args.uri.clone())?;
    report(&args, &tallies, cpu);
    Ok(())
}

/// This process's user and system CPU time so far (every thread).
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Connects, waits for every job to be connected, then runs the plan.
fn run_job(target: &Target, plan: &Plan, start: &Barrier) -> anyhow::Result<Tally> {
    let connected = target.connect().context("connecting");
    // Every job reaches the barrier, connected or not, so none waits for ever.
    start.wait();
    let client = connected?;
    let blocks = client.size() / plan.bs;
    anyhow::ensure!(blocks > 0, "the export ({} bytes) is smaller than one request", client.size());
    let socket = client.into_socket()?;
    let mut replies = BufReader::with_capacity((plan.bs as usize + 16).max(256 << 10), socket.try_clone()?);
    let mut requests = socket;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(plan.job + 1);
    let mut next_block = blocks * plan.job / plan.jobs;
    let mut next_offset = || {
        let block = if plan.rw.random() {
            rng.random_range(0..blocks)
        } else {
            let b = next_block;
            next_block = (next_block + 1) % blocks;
            b
        };
        block * plan.bs
    };
    let payload: Vec<u8> = if plan.rw.writes() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x6865_6172_7468);
        (0..plan.bs).map(|_| rng.random()).collect()
    } else {
        Vec::new()
    };
    let command = if plan.rw.writes() { Command::Write } else { Command::Read };
    let reply_data = if plan.rw.writes() { 0 } else { plan.bs as usize };

    let mut latency_ns = latency_histogram();
    let mut sent_at = vec![Instant::now(); plan.depth];
    let mut free: Vec<usize> = (0..plan.depth).collect();
    let mut headers: Vec<[u8; 28]> = Vec::with_capacity(plan.depth);
    let (mut ops, mut in_flight) = (0u64, 0usize);
    let began = Instant::now();
    let (end, mut now, mut last) = (began + plan.duration, began, began);
    loop {
        if now < end && !free.is_empty() {
            headers.clear();
            for &slot in &free {
                sent_at[slot] = now;
                let req =
                    Request { flags: 0, command, cookie: slot as u64, offset: next_offset(), length: plan.bs as u32 };
                headers.push(req.encode());
            }
            in_flight += free.len();
            free.clear();
            send(&mut requests, &headers, &payload).context("sending requests")?;
        }
        if in_flight == 0 {
            break;
        }
        // One reply (waiting for it), then every complete one already received.
        let answered = free.len();
        loop {
            let slot = take_reply(&mut replies, reply_data, plan.depth)?;
            free.push(slot);
            in_flight -= 1;
            ops += 1;
            if in_flight == 0 || replies.buffer().len() < 16 + reply_data {
                break;
            }
        }
        now = Instant::now();
        last = now;
        for &slot in &free[answered..] {
            latency_ns.saturating_record(now.duration_since(sent_at[slot]).as_nanos() as u64);
        }
    }
    Ok(Tally { ops, elapsed: last.duration_since(began), latency_ns })
}

/// Latencies in nanoseconds, 1 ns to an hour (longer ones count as an hour).
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3600 * 1_000_000_000, 3).expect("valid bounds")
}

/// Writes every request (each header followed by `payload`, for writes) with
/// as few system calls as the socket allows.
fn send(socket: &mut Socket, headers: &[[u8; 28]], payload: &[u8]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(headers.len() * 2);
    for h in headers {
        slices.push(IoSlice::new(h));
        if !payload.is_empty() {
            slices.push(IoSlice::new(payload));
        }
    }
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match socket.write_vectored(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads one simple reply and its `data` bytes (dropped unread from the
/// receive buffer); returns the request slot its cookie names.
fn take_reply(replies: &mut BufReader<Socket>, data: usize, depth: usize) -> anyhow::Result<usize> {
    let mut header = [0u8; 16];
    replies.read_exact(&mut header).context("reading a reply")?;
    let magic = u32::from_be_bytes(header[..4].try_into().expect("4 bytes"));
    let error = u32::from_be_bytes(header[4..8].try_into().expect("4 bytes"));
    let cookie = u64::from_be_bytes(header[8..].try_into().expect("8 bytes"));
    anyhow::ensure!(magic == SIMPLE_REPLY_MAGIC, "reply magic {magic:#x} is not a simple reply's");
    anyhow::ensure!((cookie as usize) < depth, "reply cookie {cookie} names no request in flight");
    anyhow::ensure!(error == 0, "the server answered request {cookie} with NBD error {error}");
    let mut left = data;
    while left > 0 {
        let got = replies.fill_buf().context("reading reply data")?.len();
        anyhow::ensure!(got > 0, "the server hung up in the middle of a reply");
        let take = got.min(left);
        replies.consume(take);
        left -= take;
    }
    Ok(cookie as usize)
}

fn report(args: &ServeBenchArgs, tallies: &[Tally], cpu: Duration) {
    let ops: u64 = tallies.iter().map(|t| t.ops).sum();
    let seconds = tallies.iter().map(|t| t.elapsed).max().unwrap_or_default().as_secs_f64().max(1e-9);
    let mut latency = latency_histogram();
    for t in tallies {
        latency.add(&t.latency_ns).expect("histograms of the same bounds add");
    }
    let us = |q: f64| latency.value_at_quantile(q) as f64 / 1e3;
    let ops_per_sec = ops as f64 / seconds;
    let mib_per_sec = ops_per_sec * args.bs as f64 / f64::from(1 << 20);
    let cpu_per_op_us = cpu.as_secs_f64() * 1e6 / ops.max(1) as f64;
    let rw = args.rw.to_possible_value().expect("no variant is skipped").get_name().to_string();
    if args.json.json {
        let out = serde_json::json!({
            "rw": rw, "bs": args.bs, "iodepth": args.iodepth, "jobs": args.jobs,
            "ops": ops, "seconds": seconds, "ops_per_sec": ops_per_sec, "mib_per_sec": mib_per_sec,
            "latency_us": { "p50": us(0.5), "p99": us(0.99), "p99_9": us(0.999), "max": latency.max() as f64 / 1e3 },
            "client_cpu_us_per_op": cpu_per_op_us,
        });
        println!("{out}");
    } else {
        println!(
            "{rw} bs={} iodepth={} jobs={}: {ops} ops in {seconds:.2}s, {ops_per_sec:.0} ops/s, {mib_per_sec:.1} MiB/s",
            hearth_core::format_bytes(args.bs),
            args.iodepth,
            args.jobs
        );
        println!(
            "latency p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; client CPU {cpu_per_op_us:.2} us per op",
            us(0.5),
            us(0.99),
            us(0.999),
            latency.max() as f64 / 1e3
        );
    }
}

//! `hearth prefetch replay`: drives a live server with a context-tagged
//! workload, the way its clients would — one NBD connection per concurrent
//! context, each context announced through the hint extension — and reports
//! the read latency the clients saw. Run against servers with and without
//! `--prefetch`, it checks in the server what `hearth prefetch sim` predicts.
//!
//! Contexts start at their trace times and issue their I/Os at their trace
//! times (both divided by `--speed`); a context that falls behind issues its
//! next I/O at once, so a slow server stretches the run instead of piling up
//! requests. Trace blocks are numbered densely in block order, so the
//! workload needs an export of `distinct blocks × block size` bytes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use hdrhistogram::Histogram;
use hearth_client::Client;
use hearth_core::{format_bytes, Op};
use hearth_trace::ctx::CtxEvent;

use crate::nbd_uri::Target;
use crate::output_args::Json;
use crate::prefetch::Source;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    source: Source,
    /// The server: nbd://HOST:PORT/EXPORT or nbd+unix:///EXPORT?socket=PATH.
    #[arg(long)]
    server: String,
    /// Trace time runs this many times faster than recorded (think times and gaps shrink alike).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Contexts replayed but not counted (the cache and the miner warm up): a number (1000) or a
    /// share of the workload (30%).
    #[arg(long, value_name = "N|P%", default_value = "30%", value_parser = crate::units::warmup)]
    warmup: hearth_sim::run::Warmup,
    /// Block size of the export; the workload's block numbers count in it.
    #[arg(long, value_name = "SIZE", default_value = "4KiB", value_parser = hearth_core::parse_bytes)]
    block_size: u64,
    /// Skip the workload's writes (leaves the export's data untouched).
    #[arg(long)]
    reads_only: bool,
    #[command(flatten)]
    json: Json,
}

/// One context of the trace, with its I/Os on dense block numbers.
struct Job {
    ctx: u32,
    class: u32,
    start_ns: u64,
    ios: Vec<(u64, Op, u64)>,
}

/// Splits the trace into contexts in begin order, renumbering blocks densely.
/// Returns the jobs, the distinct block count and the most contexts open at once.
fn jobs(events: &[CtxEvent]) -> (Vec<Job>, u64, usize) {
    let mut blocks: Vec<u64> =
        events.iter().filter_map(|e| if let CtxEvent::Io { block, .. } = e { Some(*block) } else { None }).collect();
    blocks.sort_unstable();
    blocks.dedup();
    let dense = |b: u64| blocks.binary_search(&b).expect("collected above") as u64;
    let mut jobs = Vec::new();
    let mut open: hearth_core::KeyMap<usize> = hearth_core::KeyMap::default();
    let mut most_open = 0;
    for e in events {
        match *e {
            CtxEvent::Begin { time_ns, ctx, class } => {
                open.insert(u64::from(ctx), jobs.len());
                jobs.push(Job { ctx, class, start_ns: time_ns, ios: Vec::new() });
                most_open = most_open.max(open.len());
            }
            CtxEvent::Io { time_ns, ctx, op, block } => {
                // .ctx readers and the generator check that I/O falls inside an open context.
                if let Some(&j) = open.get(&u64::from(ctx)) {
                    jobs[j].ios.push((time_ns, op, dense(block)));
                }
            }
            CtxEvent::End { ctx, .. } => {
                open.remove(&u64::from(ctx));
            }
        }
    }
    (jobs, blocks.len() as u64, most_open)
}

/// What one connection measured.
struct Tally {
    reads: Histogram<u64>,
    writes: u64,
    /// Sum of how late I/Os were issued against the (sped-up) trace schedule.
    late_ns: u128,
    ios: u64,
}

/// Trace time mapped to wall-clock time.
#[derive(Clone, Copy)]
struct Schedule {
    t0: Instant,
    first_ns: u64,
    speed: f64,
}

impl Schedule {
    fn due(&self, trace_ns: u64) -> Instant {
        self.t0 + Duration::from_nanos(((trace_ns - self.first_ns) as f64 / self.speed) as u64)
    }
    fn wait_until(&self, trace_ns: u64) -> Instant {
        let due = self.due(trace_ns);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        due
    }
}

/// One connection's work: takes the next context until none is left (or
/// another connection failed and pushed `next` past the end).
fn play(
    c: &mut Client,
    jobs: &[Job],
    next: &AtomicUsize,
    counted_from: usize,
    schedule: Schedule,
    args: &ReplayArgs,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let bs = args.block_size;
    let mut data = vec![0u8; bs as usize];
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(job) = jobs.get(i) else { return Ok(()) };
        let counted = i >= counted_from;
        schedule.wait_until(job.start_ns);
        // Context 0 means "the connection's own" on the wire.
        let ctx = u64::from(job.ctx) + 1;
        c.begin(ctx, u64::from(job.class))?;
        for &(t, op, block) in &job.ios {
            let due = schedule.wait_until(t);
            let issued = Instant::now();
            let offset = block * bs;
            match op {
                Op::Read => {
                    c.read(offset, bs as u32)?;
                    if counted {
                        let us = issued.elapsed().as_micros() as u64;
                        tally.reads.record(us.max(1)).expect("auto-resizing histogram");
                    }
                }
                Op::Other => continue,
                Op::Write if args.reads_only => continue,
                Op::Write => {
                    data.fill(block as u8);
                    c.write(offset, &data, false)?;
                    tally.writes += u64::from(counted);
                }
            }
            if counted {
                tally.late_ns += issued.saturating_duration_since(due).as_nanos();
                tally.ios += 1;
            }
        }
        c.end(ctx)?;
    }
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.speed > 0.0, "--speed must be positive");
    anyhow::ensure!(
        args.block_size.is_power_of_two() && args.block_size <= 1 << 20,
        "--block-size must be a power of two up to 1MiB"
    );
    let target = Target::parse(&args.server).context("--server")?;
    let (events, name) = args.source.events()?;
    let (jobs, distinct, connections) = jobs(&events);
    let connections = connections.max(1);
    let needed = distinct * args.block_size;
    let probe = target.connect().with_context(|| format!("connecting to {}", args.server))?;
    anyhow::ensure!(
        probe.size() >= needed,
        "the export is {} but the workload's {distinct} distinct blocks need {} (serve it with --size {needed})",
        format_bytes(probe.size()),
        format_bytes(needed)
    );
    if !probe.hints() {
        eprintln!("note: the server did not accept the hint extension; contexts are not sent");
    }
    drop(probe);

    let warm = match args.warmup {
        hearth_sim::run::Warmup::Share(f) => (jobs.len() as f64 * f) as usize,
        hearth_sim::run::Warmup::Accesses(n) => (n as usize).min(jobs.len()),
    };
    let next = AtomicUsize::new(0);
    let tallies = Mutex::new(Vec::new());
    let ready = Barrier::new(connections + 1);
    let start = Mutex::new(None::<Instant>);
    let first_ns = jobs.first().map_or(0, |j| j.start_ns);
    let failure = Mutex::new(None::<anyhow::Error>);
    std::thread::scope(|s| {
        for _ in 0..connections {
            s.spawn(|| {
                let client = target.connect();
                ready.wait(); // every connection is up before the clock starts
                ready.wait(); // the clock is set
                let t0 = start.lock().unwrap().expect("set before the second barrier");
                let schedule = Schedule { t0, first_ns, speed: args.speed };
                let mut tally = Tally { reads: Histogram::new(3).expect("3 digits"), writes: 0, late_ns: 0, ios: 0 };
                let result = client
                    .map_err(anyhow::Error::from)
                    .and_then(|mut c| play(&mut c, &jobs, &next, warm, schedule, &args, &mut tally));
                if let Err(e) = result {
                    failure.lock().unwrap().get_or_insert(e);
                    next.store(usize::MAX / 2, Ordering::Relaxed); // stop the others
                }
                tallies.lock().unwrap().push(tally);
            });
        }
        ready.wait();
        *start.lock().unwrap() = Some(Instant::now());
        ready.wait();
    });
    let elapsed = start.lock().unwrap().map_or(Duration::ZERO, |t| t.elapsed());
    if let Some(e) = failure.into_inner().unwrap() {
        return Err(e.context(format!("replaying against {}", args.server)));
    }
    let mut reads = Histogram::<u64>::new(3).expect("3 digits");
    let (mut writes, mut late_ns, mut ios) = (0, 0u128, 0u64);
    for t in tallies.into_inner().unwrap() {
        reads.add(&t.reads).expect("same precision");
        writes += t.writes;
        late_ns += t.late_ns;
        ios += t.ios;
    }
    let mean_late_us = late_ns as f64 / ios.max(1) as f64 / 1000.0;
    if args.json.json {
        let doc = serde_json::json!({
            "workload": name, "server": args.server, "connections": connections, "contexts": jobs.len(),
            "counted_contexts": jobs.len() - warm, "reads": reads.len(), "writes": writes,
            "seconds": elapsed.as_secs_f64(), "read_us": {
                "mean": reads.mean(), "p50": reads.value_at_quantile(0.5), "p95": reads.value_at_quantile(0.95),
                "p99": reads.value_at_quantile(0.99), "max": reads.max() },
            "mean_late_us": mean_late_us,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "{name} against {}: {connections} connections, {} contexts ({} counted after {:.0}% warm-up), {:.1} s",
            args.server,
            jobs.len(),
            jobs.len() - warm,
            100.0 * warm as f64 / jobs.len().max(1) as f64,
            elapsed.as_secs_f64()
        );
        println!(
            "reads {}  writes {}  read µs: mean {:.0}  p50 {}  p95 {}  p99 {}  max {}  (I/Os issued {:.0} µs late on average)",
            reads.len(),
            writes,
            reads.mean(),
            reads.value_at_quantile(0.5),
            reads.value_at_quantile(0.95),
            reads.value_at_quantile(0.99),
            reads.max(),
            mean_late_us
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_keep_begin_order_and_number_blocks_densely() {
        let io = |t, ctx, block| CtxEvent::Io { time_ns: t, ctx, op: Op::Read, block };
        let events = vec![
            CtxEvent::Begin { time_ns: 0, ctx: 5, class: 1 },
            io(1, 5, 1 << 40),
            CtxEvent::Begin { time_ns: 2, ctx: 6, class: 2 },
            io(3, 6, 7),
            io(4, 5, 7),
            CtxEvent::End { time_ns: 5, ctx: 5 },
            CtxEvent::Begin { time_ns: 6, ctx: 5, class: 3 },
            io(7, 5, 9),
            CtxEvent::End { time_ns: 8, ctx: 5 },
            CtxEvent::End { time_ns: 9, ctx: 6 },
        ];
        let (jobs, distinct, most_open) = jobs(&events);
        assert_eq!((distinct, most_open), (3, 2));
        let blocks: Vec<Vec<u64>> = jobs.iter().map(|j| j.ios.iter().map(|&(_, _, b)| b).collect()).collect();
        assert_eq!(blocks, vec![vec![2, 0], vec![0], vec![1]]);
        assert_eq!(jobs.iter().map(|j| j.class).collect::<Vec<_>>(), vec![1, 2, 3]);
    }
}

//! Streaming replay: read and decode a trace once, in chunks, and feed every
//! (policy, size) job from the same chunks, so memory is the policies'
//! metadata plus a bounded number of chunks whatever the trace's length.
//!
//! One thread (the caller's) decodes; each worker thread owns a share of the
//! jobs and receives every chunk through its own bounded channel. Decoding
//! once and broadcasting was chosen over one decoder per worker because
//! decoding (gzip/zstd, block splitting, synthetic generators) costs about
//! as much as an LRU step, and on two cores a second decode would halve the
//! simulation's share of the machine.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::{Access, Key, Policy, WARM_AHEAD, WARM_INDEX_AHEAD};
use hearth_trace::TraceError;

use crate::pace::Pace;
use crate::{Job, SimResult};

/// Accesses per chunk: large enough that channel traffic is noise (2.5 MB).
pub const CHUNK_ACCESSES: usize = 1 << 16;
/// Chunks queued per worker before the decoder waits.
const QUEUED_CHUNKS: usize = 2;
/// Accesses decoded at a time when one thread both decodes and replays:
/// small enough (160 KB) to stay in the core's cache between the two.
const LOCAL_CHUNK_ACCESSES: usize = 1 << 12;

/// Why a streaming run stopped.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Setting(#[from] crate::SettingError),
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Which accesses count: the first `warmup` accesses fill the cache but are
/// not counted (libCacheSim's warm-up), and with `interval` set the result
/// also keeps the miss ratio of every `interval` counted accesses.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counting {
    pub warmup: u64,
    pub interval: Option<u64>,
}

/// One policy replaying a stream, counting hits as it goes.
pub struct Replayer {
    policy: Box<dyn Policy>,
    evicted: Vec<Key>,
    counting: Counting,
    seen: u64,
    result: SimResult,
    /// (requests, hits) of the interval under way.
    window: (u64, u64),
}

impl Replayer {
    /// A replayer for `job`, its results labelled by the job's spec.
    pub fn new(job: &Job, counting: Counting) -> Replayer {
        let mut replayer = Replayer::with_policy(job.policy.build(job.cache_bytes), counting);
        replayer.result.policy = job.policy.label(&replayer.result.policy);
        replayer
    }

    /// A replayer for a policy built elsewhere (one not in the registry,
    /// such as a binding's plugin), counted exactly as [`Replayer::new`]'s.
    pub fn with_policy(policy: Box<dyn Policy>, counting: Counting) -> Replayer {
        let result = SimResult {
            policy: policy.name(),
            cache_bytes: policy.capacity(),
            requests: 0,
            hits: 0,
            bytes: 0,
            hit_bytes: 0,
            interval_miss_ratios: Vec::new(),
            train_seconds: None,
        };
        Replayer { policy, evicted: Vec::with_capacity(64), counting, seen: 0, result, window: (0, 0) }
    }

    /// Replays `accesses` in order.
    pub fn feed(&mut self, accesses: &[Access]) {
        for (i, a) in accesses.iter().enumerate() {
            if let Some(ahead) = accesses.get(i + WARM_INDEX_AHEAD) {
                self.policy.warm_index(ahead.key);
            }
            if let Some(ahead) = accesses.get(i + WARM_AHEAD) {
                self.policy.warm(ahead.key);
            }
            self.evicted.clear();
            let hit = self.policy.access(a, &mut self.evicted);
            self.seen += 1;
            if self.seen <= self.counting.warmup {
                continue;
            }
            let r = &mut self.result;
            r.count(a.size, hit);
            if let Some(every) = self.counting.interval {
                self.window.0 += 1;
                self.window.1 += u64::from(hit);
                if self.window.0 == every {
                    r.interval_miss_ratios.push(1.0 - self.window.1 as f64 / every as f64);
                    self.window = (0, 0);
                }
            }
        }
    }

    /// The counts so far (a last, partial interval included).
    pub fn finish(mut self) -> SimResult {
        if self.window.0 > 0 {
            self.result.interval_miss_ratios.push(1.0 - self.window.1 as f64 / self.window.0 as f64);
        }
        self.result.train_seconds = self.policy.training_time().map(|t| t.as_secs_f64());
        self.result
    }
}

/// Replays `accesses` once through every job, on up to `threads` worker
/// threads, and returns results in job order. With one thread, that thread
/// also decodes: a decoder beside it would be a second thread, and handing
/// every chunk from one core to the other costs more CPU than it overlaps.
/// `accesses` must carry `next_access` if a job is offline (OPT).
/// `progress` receives the number of accesses just replayed, summed over jobs.
/// Fails before reading anything if a policy spec is invalid, and at the
/// first trace error otherwise.
pub fn run_streaming(
    accesses: impl Iterator<Item = Result<Access, TraceError>>,
    jobs: &[Job],
    counting: Counting,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Vec<SimResult>, StreamError> {
    run_streaming_paced(accesses, jobs, counting, threads, 0, &|n, _| progress(n))
}

/// [`run_streaming`] over a trace of `total` accesses (0 if unknown), whose
/// `progress` also receives the time left as each worker's measured pace
/// gives it ([`Pace`]; `None` until every worker has measured its own).
pub fn run_streaming_paced(
    accesses: impl Iterator<Item = Result<Access, TraceError>>,
    jobs: &[Job],
    counting: Counting,
    threads: usize,
    total: u64,
    progress: &(dyn Fn(u64, Option<Duration>) + Sync),
) -> Result<Vec<SimResult>, StreamError> {
    let workers = threads.clamp(1, jobs.len().max(1));
    let pace = Pace::new(total, workers);
    // Worker w runs jobs w, w + workers, ...: neighbouring jobs are usually
    // the same policy at growing sizes, so this spreads the big ones.
    let mut shares: Vec<Vec<(usize, Replayer)>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, job) in jobs.iter().enumerate() {
        shares[i % workers].push((i, Replayer::new(job, counting)));
    }
    let in_job_order = |done: Vec<Vec<(usize, SimResult)>>| {
        let mut results: Vec<Option<SimResult>> = jobs.iter().map(|_| None).collect();
        for (i, r) in done.into_iter().flatten() {
            results[i] = Some(r);
        }
        results.into_iter().map(|r| r.expect("every job ran")).collect()
    };
    if threads <= 1 {
        let share = shares.pop().expect("one share per worker");
        let worker = Worker { index: 0, pace: &pace, progress };
        return Ok(in_job_order(vec![replay_here(accesses, share, &worker)?]));
    }
    std::thread::scope(|s| {
        let mut senders: Vec<SyncSender<Arc<Vec<Access>>>> = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        let pace = &pace;
        for (index, share) in shares.into_iter().enumerate() {
            let (tx, rx) = sync_channel(QUEUED_CHUNKS);
            senders.push(tx);
            handles.push(s.spawn(move || work(share, rx, &Worker { index, pace, progress })));
        }
        let decoded = decode_into(accesses, &senders);
        drop(senders);
        let done = handles.into_iter().map(|h| h.join().expect("a simulation worker panicked")).collect();
        decoded?;
        Ok(in_job_order(done))
    })
}

/// Reads `accesses` in chunks on this thread while `consume` works through
/// the chunks on another: one pass whose work (a one-pass curve) overlaps
/// the decoding. Fails at the first trace error, after `consume` has seen
/// every access before it.
pub fn run_pipelined(
    accesses: impl Iterator<Item = Result<Access, TraceError>>,
    mut consume: impl FnMut(&[Access]) + Send,
) -> Result<(), TraceError> {
    std::thread::scope(|s| {
        let (tx, rx) = sync_channel::<Arc<Vec<Access>>>(QUEUED_CHUNKS);
        let worker = s.spawn(move || rx.into_iter().for_each(|chunk| consume(&chunk)));
        let decoded = decode_into(accesses, std::slice::from_ref(&tx));
        drop(tx);
        worker.join().expect("the pass's worker panicked");
        decoded
    })
}

/// Reads `accesses` in chunks and sends each chunk to every worker.
/// Chunks come back for reuse once every worker has dropped them.
fn decode_into(
    mut accesses: impl Iterator<Item = Result<Access, TraceError>>,
    workers: &[SyncSender<Arc<Vec<Access>>>],
) -> Result<(), TraceError> {
    let mut in_flight: VecDeque<Arc<Vec<Access>>> = VecDeque::new();
    loop {
        let mut chunk = match in_flight.front_mut().and_then(Arc::get_mut) {
            Some(_) => {
                let mut reused = in_flight.pop_front().expect("front exists");
                Arc::get_mut(&mut reused).expect("sole owner").clear();
                reused
            }
            None => Arc::new(Vec::with_capacity(CHUNK_ACCESSES)),
        };
        let buf = Arc::get_mut(&mut chunk).expect("fresh or reclaimed chunk");
        for a in accesses.by_ref().take(CHUNK_ACCESSES) {
            buf.push(a?);
        }
        if buf.is_empty() {
            return Ok(());
        }
        let last = buf.len() < CHUNK_ACCESSES;
        for w in workers {
            // A worker only hangs up by panicking, which join reports.
            let _ = w.send(Arc::clone(&chunk));
        }
        in_flight.push_back(chunk);
        if last {
            return Ok(());
        }
    }
}

/// A worker's place in the run: its index, and where it reports.
struct Worker<'a> {
    index: usize,
    pace: &'a Pace,
    progress: &'a (dyn Fn(u64, Option<Duration>) + Sync),
}

impl Worker<'_> {
    /// `accesses` more replayed through every job of `jobs`, in `took`.
    fn report(&self, accesses: usize, jobs: usize, took: Duration) {
        self.pace.record(self.index, accesses as u64, took);
        (self.progress)((accesses * jobs) as u64, self.pace.remaining());
    }
}

/// Decodes `accesses` a small chunk at a time and replays each chunk
/// through `share`, all on this thread (so the pace includes the decoding).
fn replay_here(
    mut accesses: impl Iterator<Item = Result<Access, TraceError>>,
    mut share: Vec<(usize, Replayer)>,
    worker: &Worker,
) -> Result<Vec<(usize, SimResult)>, TraceError> {
    let mut chunk = Vec::with_capacity(LOCAL_CHUNK_ACCESSES);
    loop {
        let started = Instant::now();
        chunk.clear();
        for a in accesses.by_ref().take(LOCAL_CHUNK_ACCESSES) {
            chunk.push(a?);
        }
        if chunk.is_empty() {
            return Ok(finish_share(share));
        }
        feed_share(&mut share, &chunk);
        worker.report(chunk.len(), share.len(), started.elapsed());
    }
}

fn work(
    mut share: Vec<(usize, Replayer)>,
    chunks: Receiver<Arc<Vec<Access>>>,
    worker: &Worker,
) -> Vec<(usize, SimResult)> {
    for chunk in chunks {
        let started = Instant::now();
        feed_share(&mut share, &chunk);
        worker.report(chunk.len(), share.len(), started.elapsed());
    }
    finish_share(share)
}

/// Replays `chunk` through every job of a worker's share.
fn feed_share(share: &mut [(usize, Replayer)], chunk: &[Access]) {
    for (_, r) in share {
        r.feed(chunk);
    }
}

/// Each job's index and result.
fn finish_share(share: Vec<(usize, Replayer)>) -> Vec<(usize, SimResult)> {
    share.into_iter().map(|(i, r)| (i, r.finish())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;

    fn acc(keys: impl IntoIterator<Item = u64>) -> Vec<Access> {
        keys.into_iter()
            .enumerate()
            .map(|(i, key)| Access { key, size: 1, vtime: i as u64, next_access: 0, op: Op::Read, ctx: 0 })
            .collect()
    }

    fn jobs(policies: &[&str], sizes: &[u64]) -> Vec<Job> {
        sizes
            .iter()
            .flat_map(|&cache_bytes| policies.iter().map(move |p| Job { policy: p.parse().unwrap(), cache_bytes }))
            .collect()
    }

    #[test]
    fn streaming_equals_in_memory_across_chunk_boundaries() {
        // Three and a half chunks of a skewed loop, so state crosses chunks.
        let n = CHUNK_ACCESSES * 7 / 2;
        let keys = (0..n as u64).map(|i| (i * i) % 5003 + (i % 7) * 10_000);
        let trace = crate::Trace::from_accesses(acc(keys), hearth_trace::Mode::Object);
        let jobs = jobs(&["lru", "arc", "lirs", "opt", "2q"], &[100, 1000, 4000]);
        let want = crate::run_jobs(&trace, &jobs, 2, &|_| {});
        for threads in [1, 2, 5] {
            let got =
                run_streaming(trace.accesses.iter().copied().map(Ok), &jobs, Counting::default(), threads, &|_| {})
                    .unwrap();
            assert_eq!(got, want, "{threads} threads");
        }
    }

    #[test]
    fn warmup_is_replayed_but_not_counted_and_intervals_add_up() {
        let accesses = acc([1, 2, 1, 2, 3, 1, 2, 3]);
        let jobs = jobs(&["lru"], &[3]);
        let counting = Counting { warmup: 2, interval: Some(4) };
        let r = &run_streaming(accesses.into_iter().map(Ok), &jobs, counting, 1, &|_| {}).unwrap()[0];
        // Counted: 1 2 (hits) 3 (miss) 1 | 2 3 (hits).
        assert_eq!((r.requests, r.hits), (6, 5));
        assert_eq!(r.interval_miss_ratios, vec![0.25, 0.0]);
    }

    #[test]
    fn a_trace_error_stops_the_run() {
        for threads in [1, 2] {
            let missing = hearth_trace::open("/nonexistent/trace.txt".as_ref(), None).err().expect("no such file");
            let bad = vec![Ok(acc([1])[0]), Err(missing)];
            let err = run_streaming(bad.into_iter(), &jobs(&["lru"], &[4]), Counting::default(), threads, &|_| {})
                .unwrap_err();
            assert!(err.to_string().contains("/nonexistent/trace.txt"), "{threads} threads: {err}");
        }
    }
}

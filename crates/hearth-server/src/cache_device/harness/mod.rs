//! Crash states and injected faults, enumerated (CrashMonkey's bounded
//! black-box method): a seeded client workload runs against a cache device
//! whose file and backend are [`record`]ed; then
//!
//! * every prefix of the recorded writes, syncs and flushes is a crash
//!   point, and at each the durable part plus bounded subsets of the
//!   writes not yet synced (all, none, all but one of the last few, random
//!   halves) is a crash state, recovered and read back whole;
//! * the same workload runs again with the k-th write, sync or flush
//!   failing (EIO, then ENOSPC), for every k, checked as it runs and after
//!   a kill -9 and a power cut at its end.
//!
//! Invariants, per block: a write acknowledged before a completed FLUSH
//! began reads back (or a write started after it does); no read returns
//! data never written to the block; no read fails and no recovery is
//! refused (none of these faults damages data, so nothing excuses one).

pub mod record;

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use record::Fault;
use record::{crash_image, unsynced_writes, Log, Recorded, Target};

use super::layout::Layout;
use super::{CacheDevice, DeviceOptions, DeviceWriteMode};
use crate::backend::Backend;

pub const BS: u64 = 512;
pub const BLOCKS: u64 = 32;
/// Eight blocks and the spare: most writes evict.
pub const SLOTS: u64 = 9;
/// What a zeroed block reads as, among write ids.
const ZEROES: u64 = u64::MAX;

/// Block `block`'s contents for write `id` (0: the backend's initial data).
pub fn pattern(block: u64, id: u64) -> Vec<u8> {
    if id == ZEROES {
        return vec![0; BS as usize];
    }
    let mut data = vec![0u8; BS as usize];
    data[..8].copy_from_slice(&id.to_le_bytes());
    let mut x = block.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ id.wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1;
    for b in &mut data[8..] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    data
}

/// Which write `data` is, `None` if it is none of block `block`'s.
pub fn identify(block: u64, data: &[u8]) -> Option<u64> {
    if data.iter().all(|&b| b == 0) {
        return Some(ZEROES);
    }
    let id = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    (pattern(block, id) == data).then_some(id)
}

pub fn initial_backend() -> Vec<u8> {
    (0..BLOCKS).flat_map(|b| pattern(b, 0)).collect()
}

pub fn device_len() -> u64 {
    Layout::with_slots(SLOTS, BS).total_len()
}

pub fn options(mode: DeviceWriteMode) -> DeviceOptions<'static> {
    DeviceOptions {
        size: device_len(),
        block_size: BS as u32,
        identity: "harness",
        policy: "lru".parse().unwrap(),
        mode,
        discard_damaged: false,
        backend_file: None,
    }
}

/// Which unsynced writes (counted from 0) a crash state keeps.
type Keep = Box<dyn Fn(usize) -> bool>;

/// A client request and where in the log it began and ended.
#[derive(Clone, Copy, Debug)]
enum Request {
    /// Block, write id (or [`ZEROES`]).
    Write(u64, u64),
    Flush,
}

#[derive(Clone, Copy, Debug)]
struct Done {
    request: Request,
    start: usize,
    end: usize,
    ok: bool,
}

/// One run of the workload: what the client did and what was recorded.
pub struct Run {
    log: Arc<Mutex<Log>>,
    history: Vec<Done>,
    /// Problems seen while it ran.
    pub violations: Vec<String>,
    pub failed_requests: usize,
}

/// Runs `requests` seeded client requests on a fresh device in `mode`.
pub fn run(mode: DeviceWriteMode, seed: u64, requests: usize, fault: Option<Fault>) -> Run {
    let log = Log::new(fault);
    let formatted = Run::formatted(mode);
    let device_storage = Arc::new(Recorded::new(formatted, &log, Target::Device));
    let backend = Arc::new(Recorded::new(initial_backend(), &log, Target::Backend));
    let mut run = Run { log, history: Vec::new(), violations: Vec::new(), failed_requests: 0 };
    let device =
        CacheDevice::open_on(Box::new(backend), Box::new(device_storage), device_len(), "dev".as_ref(), &options(mode));
    let device = match device {
        Ok(d) => d,
        Err(e) => {
            run.violations.push(format!("open: {e}"));
            return run;
        }
    };
    // What each block may read as now: its last write, and any that failed after it.
    let mut live: Vec<Vec<u64>> = vec![vec![0]; BLOCKS as usize];
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut next_id = 1;
    for _ in 0..requests {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Skewed towards a few blocks, so both hits and evictions happen.
        let block = if x.is_multiple_of(3) { (x >> 8) % BLOCKS } else { (x >> 8) % 6 };
        let start = run.log.lock().unwrap().ops.len();
        let (request, result) = match (x >> 32) % 100 {
            0..=39 => {
                let id = next_id;
                next_id += 1;
                (Some(Request::Write(block, id)), device.write_at(&pattern(block, id), block * BS))
            }
            40..=44 => (Some(Request::Write(block, ZEROES)), device.write_zeroes(block * BS, BS, false)),
            45..=54 => (Some(Request::Flush), device.flush()),
            55..=59 => (None, device.clean(Duration::ZERO).map(|_| ())),
            _ => {
                let mut buf = vec![0u8; BS as usize];
                match device.read_at(&mut buf, block * BS) {
                    Ok(()) => match identify(block, &buf) {
                        Some(id) if live[block as usize].contains(&id) => {}
                        found => run.violations.push(format!(
                            "live read of block {block}: {found:?}, expected one of {:?}",
                            live[block as usize]
                        )),
                    },
                    Err(e) => run.violations.push(format!("live read of block {block} failed: {e}")),
                }
                continue;
            }
        };
        let end = run.log.lock().unwrap().ops.len();
        let ok = result.is_ok();
        run.failed_requests += usize::from(!ok);
        if let Some(request) = request {
            if let Request::Write(b, id) = request {
                if ok {
                    live[b as usize] = vec![id];
                } else {
                    live[b as usize].push(id);
                }
            }
            run.history.push(Done { request, start, end, ok });
        }
    }
    drop(device);
    run
}

impl Run {
    /// Write ids block `block` may read as after a crash at `crash` (a log
    /// length): the last write completed before a completed flush began
    /// (with `all_kept`, a kill -9: before the crash) and any started after it.
    fn allowed(&self, block: u64, crash: usize, all_kept: bool) -> Vec<u64> {
        let durable_before = self
            .history
            .iter()
            .filter(|d| matches!(d.request, Request::Flush) && d.ok && d.end <= crash)
            .map(|d| d.start)
            .max();
        let durable_before = if all_kept { Some(crash) } else { durable_before };
        let writes: Vec<&Done> =
            self.history.iter().filter(|d| matches!(d.request, Request::Write(b, _) if b == block)).collect();
        let last_durable = writes.iter().rposition(|d| d.ok && durable_before.is_some_and(|f| d.end <= f));
        let mut allowed = vec![last_durable.map_or(0, |i| id_of(writes[i]))];
        let later = last_durable.map_or(0, |i| i + 1);
        allowed.extend(writes[later..].iter().filter(|d| d.start < crash).map(|d| id_of(d)));
        allowed
    }

    /// Recovers the crash state made of `device` and `backend` images and
    /// reads every block; returns the violations.
    fn check_state(
        &self,
        mode: DeviceWriteMode,
        device: Vec<u8>,
        backend: Vec<u8>,
        crash: usize,
        all_kept: bool,
    ) -> Vec<String> {
        let quiet = Log::new(None);
        let storage = Recorded::new(device, &quiet, Target::Device);
        let backend = Arc::new(Recorded::new(backend, &quiet, Target::Backend));
        let d = match CacheDevice::open_on(
            Box::new(backend),
            Box::new(storage),
            device_len(),
            "crash".as_ref(),
            &options(mode),
        ) {
            Ok(d) => d,
            Err(e) => return vec![format!("crash at {crash}: recovery refused: {e}")],
        };
        let mut problems = Vec::new();
        let mut buf = vec![0u8; BS as usize];
        for block in 0..BLOCKS {
            let allowed = self.allowed(block, crash, all_kept);
            match d.read_at(&mut buf, block * BS) {
                Ok(()) => match identify(block, &buf) {
                    Some(id) if allowed.contains(&id) => {}
                    found => problems.push(format!(
                        "crash at {crash} (all kept: {all_kept}): block {block} reads {found:?}, allowed {allowed:?}"
                    )),
                },
                Err(e) => problems.push(format!("crash at {crash}: block {block} read failed: {e}")),
            }
        }
        problems
    }

    /// Checks the bounded crash states at every crash point; returns how
    /// many were checked and the violations.
    pub fn check_crash_states(&self, mode: DeviceWriteMode, initial_device: &[u8]) -> (usize, Vec<String>) {
        let ops = self.log.lock().unwrap().ops.clone();
        let initial_backend = initial_backend();
        let mut states = 0;
        let mut problems = Vec::new();
        for crash in 0..=ops.len() {
            let dev_unsynced = unsynced_writes(&ops, crash, Target::Device);
            let be_unsynced = unsynced_writes(&ops, crash, Target::Backend);
            let mut choices: Vec<(Keep, Keep)> = vec![
                (Box::new(|_| true), Box::new(|_| true)),
                (Box::new(|_| false), Box::new(|_| false)),
                (Box::new(|_| false), Box::new(|_| true)),
                (Box::new(|_| true), Box::new(|_| false)),
            ];
            for back in 1..=dev_unsynced.min(4) {
                let dropped = dev_unsynced - back;
                choices.push((Box::new(move |i| i != dropped), Box::new(|_| true)));
            }
            for back in 1..=be_unsynced.min(4) {
                let dropped = be_unsynced - back;
                choices.push((Box::new(|_| true), Box::new(move |i| i != dropped)));
            }
            for salt in 0..2u64 {
                let h = move |i: usize, t: u64| {
                    ((crash as u64 * 31 + i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (salt * 2 + t)) >> 61 & 1 == 1
                };
                choices.push((Box::new(move |i| h(i, 0)), Box::new(move |i| h(i, 1))));
            }
            for (i, (keep_device, keep_backend)) in choices.iter().enumerate() {
                let device = crash_image(initial_device, &ops, crash, Target::Device, keep_device.as_ref());
                let backend = crash_image(&initial_backend, &ops, crash, Target::Backend, keep_backend.as_ref());
                problems.extend(self.check_state(mode, device, backend, crash, i == 0));
                states += 1;
            }
        }
        (states, problems)
    }

    /// Writes, syncs and flushes tried, failed ones included.
    pub fn tried(&self) -> usize {
        self.log.lock().unwrap().tried()
    }

    pub fn faults_hit(&self) -> usize {
        self.log.lock().unwrap().faults_hit
    }

    /// After a faulted run: a kill -9 (everything written kept) and a power
    /// cut (only what was synced) at its end, each recovered and checked.
    pub fn check_end(&self, mode: DeviceWriteMode, initial_device: &[u8]) -> Vec<String> {
        let ops = self.log.lock().unwrap().ops.clone();
        let end = ops.len();
        let mut problems = Vec::new();
        for all_kept in [true, false] {
            let keep = move |_| all_kept;
            let device = crash_image(initial_device, &ops, end, Target::Device, &keep);
            let backend = crash_image(&initial_backend(), &ops, end, Target::Backend, &keep);
            problems.extend(self.check_state(mode, device, backend, end, all_kept));
        }
        problems
    }

    /// The device image as formatted, before the run (the log starts after it).
    pub fn formatted(mode: DeviceWriteMode) -> Vec<u8> {
        let scratch = Log::new(None);
        let storage = Arc::new(Recorded::new(vec![0; device_len() as usize], &scratch, Target::Device));
        let backend = Arc::new(Recorded::new(initial_backend(), &scratch, Target::Backend));
        drop(
            CacheDevice::open_on(
                Box::new(backend),
                Box::new(storage.clone()),
                device_len(),
                "f".as_ref(),
                &options(mode),
            )
            .unwrap(),
        );
        let bytes = storage.bytes.lock().unwrap().clone();
        bytes
    }
}

fn id_of(d: &Done) -> u64 {
    match d.request {
        Request::Write(_, id) => id,
        Request::Flush => unreachable!("only writes are asked for"),
    }
}

#[cfg(test)]
mod tests;

//! Cache warmup after Bonfire (Zhang et al., "Warming up Storage-Level Caches
//! with Bonfire", FAST'13), without I/O:
//!
//! * [`reaccess`]: the trace analysis that motivates the heuristics
//!   (hourly/daily re-accesses, reuse distance, spatial clustering);
//! * [`select`]: the warmup algorithms Last-K, First-K and Top-K;
//! * [`sim`]: restart a cache every period (day), warm it, and compare it with
//!   an always-warm cache; [`converge`]: the metrics (T_converge with ThV/ThN,
//!   server load reduction);
//! * [`log`] and [`plan`]: what a server logs while it runs (a circular log
//!   with torn-tail recovery) and the pre-load plan it builds from it on
//!   restart — newest unique blocks up to a budget, newest first, never stale;
//! * [`synth`]: a multi-day Zipf workload with a daily pattern.
//!
//! A server drives [`log::LogWriter`] with the blocks its cache loads and
//! performs the [`log::Write`]s it returns; on start it feeds the log's slots
//! to a [`log::Recovery`] and executes the [`plan::Plan`]:
//!
//! ```
//! use hearth_warmup::log::{Layout, LogWriter, Recovery, StagingFull};
//! use hearth_warmup::plan::{plan_preload, Source};
//!
//! // A 1 MiB logging volume (here a Vec) with room for block data.
//! let layout = Layout::for_volume(1 << 20, 4096, true, 0x5eed).unwrap();
//! let mut volume = vec![0u8; layout.volume_bytes() as usize];
//! let mut put = |offset: u64, bytes: &[u8]| volume[offset as usize..][..bytes.len()].copy_from_slice(bytes);
//! put(0, &layout.encode_header());
//!
//! // While serving: log each block the cache loads; flush when the staging buffer fills.
//! let mut log = LogWriter::create(layout, 256 << 10);
//! for lba in [7, 8, 7] {
//!     if log.log_block(lba, Some(&[lba as u8; 4096])) == Err(StagingFull) {
//!         for w in log.flush() { put(w.offset, &w.bytes) }
//!         log.log_block(lba, Some(&[lba as u8; 4096])).unwrap();
//!     }
//! }
//! for w in log.seal() { put(w.offset, &w.bytes) } // clean shutdown
//!
//! // On start: check every slot, then pre-load newest first.
//! let layout = Layout::decode_header(&volume).unwrap();
//! let mut recovery = Recovery::new(layout);
//! for i in 0..layout.slot_count {
//!     let at = layout.slot_offset(i) as usize;
//!     recovery.feed(i, &volume[at..at + layout.slot_size as usize]);
//! }
//! let plan = plan_preload(&recovery.finish(), 1000);
//! assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![7, 8]);
//! assert!(matches!(plan.items[0].source, Source::Log { .. }));
//! ```

pub mod converge;
mod error;
pub mod log;
pub mod plan;
pub mod reaccess;
pub mod select;
pub mod sim;
pub mod synth;

use std::cell::Cell;

pub use converge::{HitSeries, Thresholds};
pub use error::WarmupError;
pub use select::Method;
pub use sim::{Experiment, Outcome, TimedAccess};

use hearth_core::{Mode, Request};

/// Splits a block trace's requests into timed block accesses, sorted by time
/// (stable, so equal times keep trace order). The first error of `requests`
/// (a reader's) ends it.
pub fn timed_accesses<I, E>(requests: I, block_size: u32) -> Result<Vec<TimedAccess>, E>
where
    I: Iterator<Item = Result<Request, E>>,
{
    // `accesses` emits every block of a request before reading the next one,
    // so the last request read is the one each access came from.
    let time = Cell::new(0u64);
    let requests = requests.inspect(|r| {
        if let Ok(r) = r {
            time.set(r.time_ns);
        }
    });
    let mut out = Vec::new();
    for a in hearth_core::accesses(requests, Mode::Block { block_size }) {
        out.push(TimedAccess { time_ns: time.get(), block: a?.key });
    }
    if out.windows(2).any(|w| w[0].time_ns > w[1].time_ns) {
        out.sort_by_key(|a| a.time_ns);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;

    #[test]
    fn timed_accesses_carry_each_requests_time_and_sort() {
        let req = |t: u64, offset: u64, len: u32| {
            Ok::<_, String>(Request { time_ns: t, client: 0, op: Op::Read, offset, len, next_access: None })
        };
        let reqs = vec![req(50, 0, 8192), req(10, 4096 * 7, 4096)];
        let got = timed_accesses(reqs.into_iter(), 4096).unwrap();
        let want = [(10, 7), (50, 0), (50, 1)].map(|(time_ns, block)| TimedAccess { time_ns, block });
        assert_eq!(got, want);
    }
}

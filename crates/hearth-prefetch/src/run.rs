//! RUN: run-based prefetching over the interleaved stream. A run is a set
//! of accesses near each other: an access joins a run when it lies within
//! `jump` blocks of the run's highest block (small forward and backward
//! jumps are tolerated, so several streams and slightly out-of-order
//! requests still form runs). Once a run spans `trigger` blocks, every
//! access that advances it prefetches up to `depth` blocks past its highest
//! block. At most [`RUNS`] runs are tracked; the least recently extended is
//! replaced.

use hearth_core::Key;

use crate::{Demand, Prefetcher};

/// Runs tracked at once.
pub const RUNS: usize = 32;

#[derive(Clone, Copy, Debug)]
struct Run {
    start: u64,
    max: u64,
    /// First block not yet prefetched for this run.
    prefetched_to: u64,
    last_used: u64,
}

pub struct RunPrefetcher {
    trigger: u64,
    depth: u64,
    jump: u64,
    runs: Vec<Run>,
    clock: u64,
}

impl RunPrefetcher {
    /// `trigger` and `jump` in blocks.
    pub fn new(trigger: u64, depth: u64, jump: u64) -> Self {
        RunPrefetcher { trigger, depth, jump, runs: Vec::with_capacity(RUNS), clock: 0 }
    }
}

impl Prefetcher for RunPrefetcher {
    fn name(&self) -> String {
        "RUN".into()
    }
    fn access(&mut self, d: &Demand, _cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        let b = d.block;
        self.clock += 1;
        let jump = self.jump;
        let near = |r: &Run| b.abs_diff(r.max) <= jump;
        if let Some(r) = self.runs.iter_mut().find(|r| near(r)) {
            r.last_used = self.clock;
            r.start = r.start.min(b);
            r.max = r.max.max(b);
            if r.max - r.start + 1 >= self.trigger {
                let from = r.prefetched_to.max(r.max + 1);
                let to = r.max + 1 + self.depth;
                out.extend(from..to);
                r.prefetched_to = r.prefetched_to.max(to);
            }
            return;
        }
        let run = Run { start: b, max: b, prefetched_to: b + 1, last_used: self.clock };
        if self.runs.len() < RUNS {
            self.runs.push(run);
        } else if let Some(oldest) = self.runs.iter_mut().min_by_key(|r| r.last_used) {
            *oldest = run;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;
    use hearth_core::Op;

    fn step(p: &mut dyn Prefetcher, b: u64) -> Vec<Key> {
        let mut out = Vec::new();
        p.access(&Demand { block: b, ctx: 0, time_ns: 0, op: Op::Read, class: Class::Miss }, &|_| false, &mut out);
        out
    }

    #[test]
    fn interleaved_runs_with_jumps_trigger_after_the_threshold() {
        // 8-block trigger (32 KiB of 4 KiB blocks), depth 16, jumps of 4.
        let mut r = RunPrefetcher::new(8, 16, 4);
        let mut issued = Vec::new();
        // Two streams interleaved, one with a backward jump (3 after 4).
        for (a, b) in [(0, 1000), (2, 1001), (4, 1002), (3, 1003), (6, 1004)] {
            assert!(step(&mut r, a).is_empty());
            assert!(step(&mut r, b).is_empty());
        }
        // Block 7 makes the first run span 0..=7: 8 blocks.
        issued.extend(step(&mut r, 7));
        assert_eq!(issued, (8..24).collect::<Vec<_>>());
        // Advancing by one prefetches only the one new block at the far end.
        assert_eq!(step(&mut r, 8), vec![24]);
        // A far block starts a new run rather than joining.
        assert!(step(&mut r, 500).is_empty());
    }
}

//! How long a streaming replay has left, from each worker's measured pace.
//!
//! Each worker replays every chunk through all of its jobs, and the decoder
//! waits for the slowest worker's queue: the run ends when the slowest
//! worker does. A rate over all jobs together (a progress bar's) is set by
//! the fast policies early on, when a fast worker runs ahead through the
//! queued chunks (on a short trace, all of it), so it promises far too
//! little time when one policy (CLOCK-Pro, AdaptSize) is much slower than
//! the rest. Here each worker's time per access (the sum of its policies'
//! costs) is measured, and the estimate is the slowest worker's remaining
//! accesses at its own pace.

use std::sync::Mutex;
use std::time::Duration;

/// Remaining-time estimator for one streaming run.
pub struct Pace {
    /// Accesses every job will see (the trace's length; 0 when unknown).
    total: u64,
    workers: Vec<Mutex<Worker>>,
}

#[derive(Clone, Copy, Default)]
struct Worker {
    /// Accesses replayed through all of this worker's jobs.
    done: u64,
    /// Time spent replaying them.
    busy: Duration,
}

impl Pace {
    /// A run of `total` accesses on `workers` workers.
    pub fn new(total: u64, workers: usize) -> Pace {
        Pace { total, workers: (0..workers).map(|_| Mutex::new(Worker::default())).collect() }
    }

    /// Worker `w` replayed `accesses` more through all its jobs in `busy`.
    pub fn record(&self, w: usize, accesses: u64, busy: Duration) {
        let mut worker = self.workers[w].lock().unwrap_or_else(|e| e.into_inner());
        worker.done += accesses;
        worker.busy += busy;
    }

    /// The time left: the longest of the workers' remaining accesses at
    /// their measured pace. `None` until every worker has measured one, or
    /// when the trace's length is unknown.
    pub fn remaining(&self) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let mut longest = Duration::ZERO;
        for worker in &self.workers {
            let w = *worker.lock().unwrap_or_else(|e| e.into_inner());
            if w.done == 0 {
                return None;
            }
            let left = self.total.saturating_sub(w.done) as f64;
            longest = longest.max(w.busy.mul_f64(left / w.done as f64));
        }
        Some(longest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One worker runs a policy 100 times slower than the other's; the
    /// fast one has finished its whole share within the first second.
    #[test]
    fn the_slowest_worker_sets_the_estimate_not_the_overall_rate() {
        let pace = Pace::new(1_000_000, 2);
        assert_eq!(pace.remaining(), None, "no pace measured yet");
        pace.record(0, 1_000_000, Duration::from_millis(500)); // fast: all done in 0.5 s
        assert_eq!(pace.remaining(), None, "the slow worker has not measured its pace");
        pace.record(1, 10_000, Duration::from_secs(1)); // slow: 10k accesses a second
        let left = pace.remaining().unwrap();
        assert_eq!(left, Duration::from_secs(99), "990,000 accesses left at 10,000/s");
        // A bar's overall rate would say: 1,010,000 of 2,000,000 job-accesses
        // in about 1 s, so about 1 s left; 99 times too little.
        pace.record(1, 490_000, Duration::from_secs(49));
        assert_eq!(pace.remaining().unwrap(), Duration::from_secs(50));
        pace.record(1, 500_000, Duration::from_secs(50));
        assert_eq!(pace.remaining().unwrap(), Duration::ZERO);
    }

    #[test]
    fn a_worker_whose_pace_changes_is_estimated_at_its_mean_pace() {
        let pace = Pace::new(300, 1);
        pace.record(0, 100, Duration::from_secs(1));
        pace.record(0, 100, Duration::from_secs(3));
        assert_eq!(pace.remaining().unwrap(), Duration::from_secs(2), "100 left at 2 s per 100");
        let unknown = Pace::new(0, 1);
        unknown.record(0, 100, Duration::from_secs(1));
        assert_eq!(unknown.remaining(), None, "no length, no estimate");
    }
}

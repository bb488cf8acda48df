//! Sans-I/O estimators shared by the simulator and the server: what a cache
//! would do, measured from accesses handed in, never read from a file, a
//! socket or a clock.
//!
//! - [`mrc`]: one-pass LRU miss-ratio curves from stack distances, and
//!   SHARDS's sampled ones ([`mrc::Shards`]);
//! - [`sample`]: the key hash and thresholds spatial sampling decides on;
//! - [`device`]: the timing model of a storage device and its queue;
//! - [`parallel_map`]: items over threads, results in item order.
//!
//! `hearth-sim` drives them over traces and re-exports them where its API
//! always had them; the server, tiering and warmup crates use them without
//! the simulator or the trace readers.

pub mod device;
mod error;
pub mod mrc;
mod parallel;
pub mod sample;
mod stack_slots;

pub use error::SettingError;
pub use parallel::parallel_map;

use serde::Serialize;

/// Hit counts of one (policy, cache size) run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SimResult {
    pub policy: String,
    pub cache_bytes: u64,
    pub requests: u64,
    pub hits: u64,
    pub bytes: u64,
    pub hit_bytes: u64,
    /// Miss ratio of each successive interval, when asked for
    /// (`hearth_sim::stream::Counting::interval`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interval_miss_ratios: Vec<f64>,
}

impl SimResult {
    pub fn misses(&self) -> u64 {
        self.requests - self.hits
    }
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits, self.requests)
    }
    pub fn miss_ratio(&self) -> f64 {
        1.0 - self.hit_ratio()
    }
    pub fn byte_hit_ratio(&self) -> f64 {
        ratio(self.hit_bytes, self.bytes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

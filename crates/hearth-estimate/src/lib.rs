//! Sans-I/O estimators shared by the simulator and the server: what a cache
//! would do, measured from accesses handed in, never read from a file, a
//! socket or a clock.
//!
//! - [`mrc`]: one-pass LRU miss-ratio curves from stack distances, and
//!   SHARDS's sampled ones ([`mrc::Shards`]);
//! - [`for_each_reuse`]: every access's exact stack and temporal distance;
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
mod reuse;
pub mod sample;
mod stack_slots;

pub use error::SettingError;
pub use parallel::parallel_map;
pub use reuse::for_each_reuse;

use serde::Serialize;

/// Hit counts of one (policy, cache size) run. Serialized with its ratios
/// (`hit_ratio`, `miss_ratio`, `byte_hit_ratio`, `byte_miss_ratio`, as
/// fractions), the fields every command's JSON and CSV name them by.
#[derive(Clone, Debug, PartialEq)]
pub struct SimResult {
    pub policy: String,
    pub cache_bytes: u64,
    pub requests: u64,
    pub hits: u64,
    pub bytes: u64,
    pub hit_bytes: u64,
    /// Miss ratio of each successive interval, when asked for
    /// (`hearth_sim::stream::Counting::interval`).
    pub interval_miss_ratios: Vec<f64>,
    /// Seconds (wall clock) the policy spent training models, for a policy
    /// that learns while it runs (`hearth_core::Policy::training_time`).
    pub train_seconds: Option<f64>,
}

impl SimResult {
    /// Counts one request of `size` bytes, a hit or a miss.
    #[inline]
    pub fn count(&mut self, size: u32, hit: bool) {
        let size = u64::from(size);
        self.requests += 1;
        self.bytes += size;
        if hit {
            self.hits += 1;
            self.hit_bytes += size;
        }
    }
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
    pub fn byte_miss_ratio(&self) -> f64 {
        1.0 - self.byte_hit_ratio()
    }
}

impl Serialize for SimResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let intervals = !self.interval_miss_ratios.is_empty();
        let fields = 10 + usize::from(intervals) + usize::from(self.train_seconds.is_some());
        let mut r = s.serialize_struct("SimResult", fields)?;
        r.serialize_field("policy", &self.policy)?;
        r.serialize_field("cache_bytes", &self.cache_bytes)?;
        r.serialize_field("requests", &self.requests)?;
        r.serialize_field("hits", &self.hits)?;
        r.serialize_field("bytes", &self.bytes)?;
        r.serialize_field("hit_bytes", &self.hit_bytes)?;
        r.serialize_field("hit_ratio", &self.hit_ratio())?;
        r.serialize_field("miss_ratio", &self.miss_ratio())?;
        r.serialize_field("byte_hit_ratio", &self.byte_hit_ratio())?;
        r.serialize_field("byte_miss_ratio", &self.byte_miss_ratio())?;
        if intervals {
            // Miss ratio of each successive window (`hearth sim --window`).
            r.serialize_field("interval_miss_ratios", &self.interval_miss_ratios)?;
        }
        if let Some(seconds) = self.train_seconds {
            // Only for a policy that learns (`hearth sim --json`).
            r.serialize_field("train_seconds", &seconds)?;
        }
        r.end()
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

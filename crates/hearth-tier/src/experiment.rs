//! A train/test experiment: the access graph and partition orders come from
//! the training part of a trace once, then any number of configurations
//! replay the whole trace and count only the test part.

use rustc_hash::FxHashSet;

use crate::extent::{footprint_blocks, Extent};
use crate::graph::{partition, AccessGraph, Partitioner};
use crate::sim::{simulate, CdpConfig, FastUse, TierConfig, TierStats};
use crate::TierError;

/// What the fast device is used for in one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// No fast device.
    SlowOnly,
    /// The fast device as an LRU cache.
    LruCache,
    /// A partition chosen from the training part.
    Partition(Partitioner),
}

impl Scheme {
    pub fn name(self) -> &'static str {
        match self {
            Scheme::SlowOnly => "slow-only",
            Scheme::LruCache => "LRU cache",
            Scheme::Partition(Partitioner::Frequency) => "freq partition",
            Scheme::Partition(Partitioner::Connectivity) => "BORG partition",
        }
    }
}

impl std::str::FromStr for Scheme {
    type Err = TierError;
    fn from_str(s: &str) -> Result<Self, TierError> {
        match s.to_ascii_lowercase().as_str() {
            "slow" | "slow-only" | "none" => Ok(Scheme::SlowOnly),
            "lru" => Ok(Scheme::LruCache),
            other => other.parse().map(Scheme::Partition).map_err(|_| TierError::UnknownScheme { name: s.to_string() }),
        }
    }
}

pub struct Experiment {
    pub extents: Vec<Extent>,
    /// Index of the first test request.
    pub test_from: usize,
    pub footprint_blocks: u64,
    pub graph: AccessGraph,
    frequency_order: Vec<u64>,
    connectivity_order: Vec<u64>,
}

impl Experiment {
    /// Trains on the first `train_fraction` of `extents` (in `[0, 1]`),
    /// linking requests up to `window` apart in the access graph.
    pub fn new(extents: Vec<Extent>, train_fraction: f64, window: usize) -> Result<Experiment, TierError> {
        if !(0.0..=1.0).contains(&train_fraction) {
            return Err(TierError::TrainingShare { share: train_fraction });
        }
        if extents.is_empty() {
            return Err(TierError::EmptyTrace);
        }
        let test_from = ((extents.len() as f64 * train_fraction) as usize).min(extents.len());
        let training = &extents[..test_from];
        let graph = AccessGraph::build(training, window);
        let footprint_blocks = footprint_blocks(&extents);
        let frequency_order = partition(Partitioner::Frequency, training, &graph, footprint_blocks);
        let connectivity_order = partition(Partitioner::Connectivity, training, &graph, footprint_blocks);
        Ok(Experiment { extents, test_from, footprint_blocks, graph, frequency_order, connectivity_order })
    }

    /// The first `capacity_blocks` blocks `method` would place on the fast device.
    pub fn partition(&self, method: Partitioner, capacity_blocks: u64) -> &[u64] {
        let order = match method {
            Partitioner::Frequency => &self.frequency_order,
            Partitioner::Connectivity => &self.connectivity_order,
        };
        &order[..order.len().min(capacity_blocks as usize)]
    }

    /// Runs `base` (its fast use, prefetching and split replaced) with
    /// `scheme` on a fast device of `capacity_blocks`.
    pub fn run(
        &self,
        base: &TierConfig,
        scheme: Scheme,
        capacity_blocks: u64,
        cdp: Option<CdpConfig>,
    ) -> Result<TierStats, TierError> {
        let fast_use = match scheme {
            Scheme::SlowOnly => FastUse::Unused,
            Scheme::LruCache => FastUse::LruCache(capacity_blocks * u64::from(base.block_size)),
            Scheme::Partition(method) => {
                FastUse::Partition(self.partition(method, capacity_blocks).iter().copied().collect::<FxHashSet<_>>())
            }
        };
        let cfg = TierConfig { fast_use, cdp, measure_from: self.test_from, ..base.clone() };
        simulate(&cfg, &self.extents, Some(&self.graph))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{chains, ChainsConfig};
    use hearth_estimate::device::Device;

    /// On a workload whose popularity never changes but whose noise pollutes
    /// recency, a trained partition beats LRU caching at equal capacity, and
    /// both beat the slow device alone. Checks an expected ordering, not
    /// numbers taken from the code.
    #[test]
    fn long_range_history_beats_recency_on_the_chains_workload() {
        let cfg = ChainsConfig { chains: 500, ..ChainsConfig::default() };
        let requests = chains(&cfg, 20_000).unwrap();
        let extents = crate::extents(requests.into_iter().map(Ok::<_, std::convert::Infallible>), 4096).unwrap();
        let exp = Experiment::new(extents, 0.5, 4).unwrap();
        let base = TierConfig { os_cache_bytes: 1 << 20, prefetch_cache_bytes: 1 << 20, ..TierConfig::new(4096) };
        let capacity = exp.footprint_blocks / 10;
        let slow = exp.run(&base, Scheme::SlowOnly, capacity, None).unwrap();
        let lru = exp.run(&base, Scheme::LruCache, capacity, None).unwrap();
        let borg = exp.run(&base, Scheme::Partition(Partitioner::Connectivity), capacity, None).unwrap();
        let freq = exp.run(&base, Scheme::Partition(Partitioner::Frequency), capacity, None).unwrap();
        assert_eq!(slow.requests, 10_000);
        assert!(lru.mean_response_ms() < slow.mean_response_ms());
        assert!(freq.mean_response_ms() < lru.mean_response_ms(), "freq {freq:?} lru {lru:?}");
        assert!(borg.mean_response_ms() < lru.mean_response_ms(), "borg {borg:?} lru {lru:?}");
        assert!(freq.fast_percent() > lru.fast_percent());
        // A "fast" device as slow as the slow one helps only by adding a
        // second spindle, so far less than the SSD does.
        let flat = TierConfig { fast: Device::HDD, ..base.clone() };
        let same = exp.run(&flat, Scheme::Partition(Partitioner::Frequency), capacity, None).unwrap();
        assert!(same.mean_response_ms() > freq.mean_response_ms());
        // Prefetching along the chains cuts slow-device reads further.
        let cdp = exp.run(&base, Scheme::SlowOnly, capacity, Some(CdpConfig::default())).unwrap();
        assert!(cdp.blocks_slow < slow.blocks_slow);
        assert!(cdp.prefetch_accuracy_percent() > 20.0, "{cdp:?}");
    }
}

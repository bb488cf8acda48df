//! A synthetic trace with long-range reuse and non-sequential correlation:
//! a fixed set of "chains", each a list of extents scattered over the disk
//! that are always read in the same order (think of a file whose blocks are
//! fragmented, or a query that touches the same index pages). Chains are
//! picked by a Zipf law that does not change over time, so the first half
//! of the trace predicts the second; one-off reads of random extents (the
//! `noise` share) pollute recency-based caches but not a partition.

use hearth_core::Op;
use hearth_core::Request;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::TierError;

#[derive(Clone, Debug)]
pub struct ChainsConfig {
    pub chains: usize,
    pub chain_len: usize,
    pub extent_blocks: u32,
    pub zipf_alpha: f64,
    /// Share of requests that read a random, never repeated extent.
    pub noise: f64,
    /// Blocks on the simulated disk; extents are placed at random in it.
    pub disk_blocks: u64,
    pub block_size: u32,
    pub interarrival_ns: u64,
    pub seed: u64,
}

impl Default for ChainsConfig {
    fn default() -> Self {
        ChainsConfig {
            chains: 4000,
            chain_len: 6,
            extent_blocks: 4,
            zipf_alpha: 0.8,
            noise: 0.3,
            disk_blocks: 1 << 26,
            block_size: 4096,
            interarrival_ns: 8_000_000,
            seed: 42,
        }
    }
}

/// `requests` requests of the chains workload.
pub fn chains(cfg: &ChainsConfig, requests: usize) -> Result<Vec<Request>, TierError> {
    if cfg.chains == 0 || cfg.chain_len == 0 || cfg.extent_blocks == 0 || cfg.block_size == 0 {
        return Err(TierError::Chains {
            reason: "chains, chain length, extent size and block size must be positive".into(),
        });
    }
    if !(0.0..1.0).contains(&cfg.noise) {
        return Err(TierError::Chains { reason: format!("noise must be in [0, 1), got {}", cfg.noise) });
    }
    let slots = cfg.disk_blocks / u64::from(cfg.extent_blocks);
    if slots == 0 {
        return Err(TierError::Chains { reason: "the disk is smaller than one extent".into() });
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let extent_at = |slot: u64| slot * u64::from(cfg.extent_blocks);
    let chain_list: Vec<Vec<u64>> =
        (0..cfg.chains).map(|_| (0..cfg.chain_len).map(|_| extent_at(rng.random_range(0..slots))).collect()).collect();
    let popularity =
        Zipf::new(cfg.chains as f64, cfg.zipf_alpha).map_err(|e| TierError::Chains { reason: format!("zipf: {e}") })?;
    let bytes = cfg.extent_blocks * cfg.block_size;
    let mut out = Vec::with_capacity(requests);
    let mut walking: Option<(usize, usize)> = None;
    while out.len() < requests {
        let start = if rng.random_bool(cfg.noise) {
            extent_at(rng.random_range(0..slots))
        } else {
            let (chain, step) = walking.unwrap_or_else(|| (popularity.sample(&mut rng) as usize - 1, 0));
            walking = (step + 1 < cfg.chain_len).then_some((chain, step + 1));
            chain_list[chain][step]
        };
        out.push(Request {
            time_ns: out.len() as u64 * cfg.interarrival_ns,
            client: 0,
            op: Op::Read,
            offset: start * u64::from(cfg.block_size),
            len: bytes,
            next_access: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_repeat_in_order_and_noise_is_one_off() {
        let cfg = ChainsConfig { chains: 3, chain_len: 4, noise: 0.2, ..ChainsConfig::default() };
        let reqs = chains(&cfg, 5000).unwrap();
        assert_eq!(reqs.len(), 5000);
        let mut counts = std::collections::HashMap::new();
        for r in &reqs {
            *counts.entry(r.offset).or_insert(0u32) += 1;
        }
        // 3 chains x 4 extents are the only repeated offsets (noise over 2^24 slots rarely collides).
        let repeated = counts.values().filter(|&&c| c > 10).count();
        assert_eq!(repeated, 12);
        let noise = counts.values().filter(|&&c| c == 1).count();
        assert!((800..1200).contains(&noise), "noise {noise}");
        assert!(reqs.windows(2).all(|w| w[1].time_ns > w[0].time_ns));
        assert!(chains(&ChainsConfig { noise: 1.0, ..cfg }, 1).is_err());
    }
}

//! A synthetic multi-day block workload for warmup studies: Bonfire's Zipf
//! (alpha 0.4 over a 50 GB address space) plus a daily pattern, so that every
//! warmup heuristic has something to find.
//!
//! Parameters are fixed up front ([`DailyZipf::default`]), not fitted to any
//! result:
//!
//! * 50 GiB of 4 KiB blocks; 4 days; 50 requests/s on average, with a
//!   diurnal rate `mean * (1 + 0.5 cos(2 pi (hour - 14) / 24))` (busiest at
//!   14:00, quietest at 02:00) and exponential gaps between requests.
//! * Half the requests (the *stable* part) are Zipf(0.4) over the whole
//!   address space, rank r on block r - 1, the same every day: hot blocks
//!   sit together at low addresses.
//! * The other half (the *time-of-day* part) go, during hour h of every day,
//!   to a 256 MiB set owned by that hour, Zipf(0.4) within the set; the 24
//!   sets fill the top 6 GiB of the address space. What is read at 00:00 today
//!   was read at 00:00 yesterday, which is what First-K bets on.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::sim::TimedAccess;
use crate::WarmupError;

const HOUR_NS: f64 = 3.6e12;

#[derive(Clone, Debug, PartialEq)]
pub struct DailyZipf {
    pub days: u32,
    pub address_bytes: u64,
    pub block_size: u32,
    pub alpha: f64,
    /// Mean requests per second over a day.
    pub mean_rate: f64,
    /// Share of requests from the time-of-day part.
    pub daily_share: f64,
    /// Bytes each hour's set spans.
    pub hourly_set_bytes: u64,
    pub seed: u64,
}

impl Default for DailyZipf {
    fn default() -> Self {
        DailyZipf {
            days: 4,
            address_bytes: 50 << 30,
            block_size: 4096,
            alpha: 0.4,
            mean_rate: 50.0,
            daily_share: 0.5,
            hourly_set_bytes: 256 << 20,
            seed: 42,
        }
    }
}

impl DailyZipf {
    /// Generates the whole workload in time order.
    pub fn generate(&self) -> Result<Vec<TimedAccess>, WarmupError> {
        let bs = u64::from(self.block_size);
        let blocks = self.address_bytes / bs;
        let set_blocks = self.hourly_set_bytes / bs;
        if self.block_size == 0 || set_blocks == 0 || 24 * set_blocks > blocks {
            return Err(WarmupError::Workload {
                reason: format!(
                    "24 hourly sets of {} bytes must fit in {} bytes of {}-byte blocks",
                    self.hourly_set_bytes, self.address_bytes, self.block_size
                ),
            });
        }
        if !(self.mean_rate > 0.0 && (0.0..=1.0).contains(&self.daily_share)) {
            return Err(WarmupError::Workload {
                reason: "the rate must be positive and the daily share in [0, 1]".into(),
            });
        }
        let zipf = |e: rand_distr::ZipfError| WarmupError::Workload { reason: format!("zipf: {e}") };
        let stable = Zipf::new(blocks as f64, self.alpha).map_err(zipf)?;
        let hourly = Zipf::new(set_blocks as f64, self.alpha).map_err(zipf)?;
        let sets_base = blocks - 24 * set_blocks;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed);
        let end_ns = f64::from(self.days) * 24.0 * HOUR_NS;
        let mut out = Vec::with_capacity((self.mean_rate * end_ns / 1e9 * 1.01) as usize);
        let mut t = 0.0f64;
        loop {
            let hour_of_day = (t / HOUR_NS) % 24.0;
            let rate = self.mean_rate * (1.0 + 0.5 * (2.0 * std::f64::consts::PI * (hour_of_day - 14.0) / 24.0).cos());
            let u: f64 = rng.random_range(0.0..1.0);
            t += -(1.0 - u).ln() / rate * 1e9;
            if t >= end_ns {
                break;
            }
            let time_ns = t as u64;
            // Zipf samples are ranks 1..=n carried in an f64.
            let block = if rng.random_bool(self.daily_share) {
                let hour = (time_ns / HOUR_NS as u64) % 24;
                sets_base + hour * set_blocks + hourly.sample(&mut rng) as u64 - 1
            } else {
                stable.sample(&mut rng) as u64 - 1
            };
            out.push(TimedAccess { time_ns, block });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> DailyZipf {
        DailyZipf {
            days: 2,
            address_bytes: 64 << 20,
            hourly_set_bytes: 1 << 20,
            mean_rate: 0.5,
            ..DailyZipf::default()
        }
    }

    #[test]
    fn deterministic_ordered_in_range_and_diurnal() {
        let w = small();
        let a = w.generate().unwrap();
        assert_eq!(a, w.generate().unwrap());
        assert!(a.windows(2).all(|p| p[0].time_ns <= p[1].time_ns));
        let blocks = w.address_bytes / 4096;
        assert!(a.iter().all(|x| x.block < blocks));
        // About 0.5/s for two days.
        let expected = 0.5 * 2.0 * 86400.0;
        assert!((a.len() as f64 - expected).abs() < 0.05 * expected, "{}", a.len());
        // Busier around 14:00 than around 02:00.
        let in_hour = |h: u64| a.iter().filter(|x| (x.time_ns / 3_600_000_000_000) % 24 == h).count();
        assert!(in_hour(14) > 2 * in_hour(2), "{} vs {}", in_hour(14), in_hour(2));
    }

    #[test]
    fn time_of_day_requests_stay_in_their_hours_set() {
        let w = DailyZipf { daily_share: 1.0, ..small() };
        let set = w.hourly_set_bytes / 4096;
        let base = w.address_bytes / 4096 - 24 * set;
        for x in w.generate().unwrap() {
            let hour = (x.time_ns / 3_600_000_000_000) % 24;
            assert_eq!((x.block - base) / set, hour);
        }
    }
}

//! Spatial sampling (SHARDS, Waldspurger et al., FAST '15): keep every access
//! to a key whose hash falls below a threshold, so that a sampled key keeps
//! all its accesses and reuse patterns survive. A cache simulated on the
//! sample with its size scaled by the rate approximates the full cache.
//!
//! The hash is fixed here, and `hearth trace sample` and the simulator share
//! it, so that a sample written to disk and one drawn on the fly hold the
//! same keys. A threshold `t` keeps the keys with `key_hash(key) < t`, a
//! share `t / 2^64` of the key space; `u64::MAX` keeps every key.

use crate::SettingError;

/// The hash sampling decisions are made on: the SplitMix64 output for a
/// generator seeded with `key`, i.e. the SplitMix64 finalizer (Stafford's
/// Mix13) applied to `key + 0x9e3779b97f4a7c15`.
///
/// The added constant keeps key 0, common in traces, away from hash 0, which
/// every threshold would keep. Changing this function changes every sample.
pub fn key_hash(key: u64) -> u64 {
    let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The threshold that keeps a share `rate` of the key space: `rate * 2^64`,
/// at least 1 so that a positive rate keeps something. Rate 1 gives
/// `u64::MAX`, which keeps every key.
///
/// # Panics
/// If `rate` is not in (0, 1] ([`parse_rate`] checks user input).
pub fn threshold(rate: f64) -> u64 {
    assert!(rate > 0.0 && rate <= 1.0, "sampling rate {rate} is not in (0, 1]");
    // The cast saturates 2^64 (rate 1) to u64::MAX.
    ((rate * 2f64.powi(64)) as u64).max(1)
}

/// Whether the sample drawn with `threshold` holds `key`.
pub fn keeps(key: u64, threshold: u64) -> bool {
    key_hash(key) < threshold || threshold == u64::MAX
}

/// The share of the key space `threshold` keeps: scale cache sizes by it.
pub fn rate_of(threshold: u64) -> f64 {
    // u64::MAX rounds to 2^64 as an f64, so rate 1 comes back as 1.0.
    threshold as f64 / 2f64.powi(64)
}

/// Parses a sampling rate given as a fraction (`0.01`) or a percentage
/// (`1%`), which must be above 0 and at most 1 (100%).
pub fn parse_rate(s: &str) -> Result<f64, SettingError> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(percent) => (percent.trim_end(), 100.0),
        None => (t, 1.0),
    };
    let rate = number.parse::<f64>().map_err(|_| SettingError::NotASamplingRate { input: s.to_string() })? / scale;
    if rate > 0.0 && rate <= 1.0 {
        Ok(rate)
    } else {
        Err(SettingError::SamplingRate { input: s.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_splitmix64_and_never_changes() {
        // The first outputs of SplitMix64 seeded with 0 and with 1.
        assert_eq!(key_hash(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(key_hash(1), 0x910a_2dec_8902_5cc1);
    }

    #[test]
    fn thresholds_keep_their_share_of_keys_nested() {
        assert_eq!((threshold(1.0), rate_of(threshold(1.0))), (u64::MAX, 1.0));
        assert_eq!(threshold(0.5), 1 << 63);
        assert_eq!(threshold(1e-30), 1);
        let (tenth, twentieth) = (threshold(0.1), threshold(0.05));
        assert!((rate_of(tenth) - 0.1).abs() < 1e-12);
        let n = 200_000u64;
        let kept = (0..n).filter(|&k| keeps(k, tenth)).count() as f64 / n as f64;
        assert!((kept - 0.1).abs() < 0.005, "kept {kept}");
        assert!((0..n).all(|k| keeps(k, u64::MAX)));
        assert!((0..n).filter(|&k| keeps(k, twentieth)).all(|k| keeps(k, tenth)));
    }

    #[test]
    fn rates_parse_as_fractions_or_percentages_in_range() {
        for (text, rate) in [("1%", 0.01), ("0.01", 0.01), (" 100% ", 1.0), ("1", 1.0), ("12.5 %", 0.125)] {
            assert!((parse_rate(text).unwrap() - rate).abs() < 1e-12, "{text}");
        }
        for bad in ["0", "0%", "1.5", "150%", "-0.1", "NaN", "inf", "junk", "", "%"] {
            let err = parse_rate(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }
}

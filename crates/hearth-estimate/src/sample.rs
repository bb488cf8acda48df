//! Spatial sampling (SHARDS, Waldspurger et al., FAST '15): keep every access
//! to a key whose hash falls below a threshold, so that a sampled key keeps
//! all its accesses and reuse patterns survive. A cache simulated on the
//! sample with its size scaled by the rate approximates the full cache.
//!
//! The hash is fixed here, and `hearth trace sample` and the simulator share
//! it, so that a sample written to disk and one drawn on the fly hold the
//! same keys. A threshold `t` keeps the keys with `key_hash(key) < t`, a
//! share `t / 2^64` of the key space; `u64::MAX` keeps every key. Other
//! draws of a sample hash renamed keys ([`KeyRenaming`]).
//!
//! Nothing here reads a trace: `hearth_trace::sample` reads samples from
//! files, calling the hash and checks below for every record, so those are
//! `#[inline]` across the crate boundary.

use hearth_core::Access;

/// The hash sampling decisions are made on: the SplitMix64 output for a
/// generator seeded with `key`, i.e. the SplitMix64 finalizer (Stafford's
/// Mix13) applied to `key + 0x9e3779b97f4a7c15`.
///
/// The added constant keeps key 0, common in traces, away from hash 0, which
/// every threshold would keep. Changing this function changes every sample.
#[inline]
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
/// If `rate` is not in (0, 1] (`hearth_trace::sample::parse_rate` checks user input).
pub fn threshold(rate: f64) -> u64 {
    assert!(rate > 0.0 && rate <= 1.0, "sampling rate {rate} is not in (0, 1]");
    // The cast saturates 2^64 (rate 1) to u64::MAX.
    ((rate * 2f64.powi(64)) as u64).max(1)
}

/// A renaming of keys, `k -> a*k + b mod 2^64` with `a` odd: a bijection,
/// so a policy that never looks at a key's value (LRU, ARC, LIRS, 2Q, MQ
/// and stack distances) runs the same on renamed keys, while [`keeps`]
/// keeps other ones. Sampling renamed keys draws another sample of the
/// same trace: the spread of a sampled curve over draws is its sampling
/// error. Seed 0 is the identity, the sample `hearth trace sample` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRenaming {
    multiplier: u64,
    addend: u64,
}

impl KeyRenaming {
    pub const IDENTITY: KeyRenaming = KeyRenaming { multiplier: 1, addend: 0 };

    /// The renaming of draw `seed` (0: the identity).
    pub fn for_seed(seed: u64) -> KeyRenaming {
        if seed == 0 {
            return KeyRenaming::IDENTITY;
        }
        KeyRenaming { multiplier: key_hash(seed) | 1, addend: key_hash(!seed) }
    }

    #[inline]
    pub fn rename(self, key: u64) -> u64 {
        key.wrapping_mul(self.multiplier).wrapping_add(self.addend)
    }

    pub fn is_identity(self) -> bool {
        self == KeyRenaming::IDENTITY
    }

    /// The multiplier and addend, for code that renames many keys at once
    /// (`hearth_trace`'s vectorised sampled reader).
    pub fn parts(self) -> (u64, u64) {
        (self.multiplier, self.addend)
    }
}

/// Whether the sample drawn with `threshold` holds `key`.
#[inline]
pub fn keeps(key: u64, threshold: u64) -> bool {
    // Rate 1 first: a pass keeping every key hashes none.
    threshold == u64::MAX || key_hash(key) < threshold
}

/// Keys a sample keeps whatever their hash: the exact stratum of a
/// stratified sample (a few hot keys, tracked at rate 1). A bitmap of hash
/// bits turns nearly every other key away in one load, and an open-address
/// table on other hash bits finds a kept key in about one probe, so a pass
/// that hashes every record pays little for the check.
#[derive(Clone, Debug)]
pub struct AlwaysKept {
    /// [`ALWAYS_FILTER_BITS`] bits, set at each kept key's low hash bits
    /// (a fixed size, so a check needs no bounds check).
    filter: Box<FilterWords>,
    /// Each key's place in `keys`, by the key's hash's high bits, linearly
    /// probed, at most a quarter full (a power of two long).
    table: Vec<Option<u32>>,
    /// The keys, sorted.
    keys: Vec<u64>,
}

/// Bits of [`AlwaysKept`]'s filter: 8 KiB, in L1, and a false positive
/// rate of at most 1 in 512 for 128 keys.
const ALWAYS_FILTER_BITS: usize = 1 << 16;

/// [`AlwaysKept`]'s filter: bit `hash % ALWAYS_FILTER_BITS` is set for each
/// kept key's hash.
pub type FilterWords = [u64; ALWAYS_FILTER_BITS / 64];

/// Whether `filter` has the bit of `hash` set (the low 16 bits pick it).
#[inline]
pub fn holds_bit(filter: &FilterWords, hash: u64) -> bool {
    let bit = hash as usize % (64 * filter.len());
    filter[bit / 64] >> (bit % 64) & 1 == 1
}

impl Default for AlwaysKept {
    fn default() -> AlwaysKept {
        AlwaysKept { filter: Box::new([0; ALWAYS_FILTER_BITS / 64]), table: Vec::new(), keys: Vec::new() }
    }
}

impl AlwaysKept {
    pub fn new(keys: impl IntoIterator<Item = u64>) -> AlwaysKept {
        let mut keys: Vec<u64> = keys.into_iter().collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            return AlwaysKept::default();
        }
        let mut filter = Box::new([0u64; ALWAYS_FILTER_BITS / 64]);
        let mut table = vec![None; (4 * keys.len()).next_power_of_two()];
        for (&key, place) in keys.iter().zip(0..) {
            let hash = key_hash(key);
            let bit = hash as usize % ALWAYS_FILTER_BITS;
            filter[bit / 64] |= 1 << (bit % 64);
            let mut at = AlwaysKept::home(hash, table.len());
            while table[at].is_some() {
                at = (at + 1) % table.len();
            }
            table[at] = Some(place);
        }
        AlwaysKept { filter, table, keys }
    }

    /// A hash's first place in a table of `len` places.
    fn home(hash: u64, len: usize) -> usize {
        (hash >> 32) as usize & (len - 1)
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    pub fn contains(&self, key: u64) -> bool {
        self.position(key).is_some()
    }

    /// `key`'s place in [`keys`](Self::keys), if it is kept.
    #[inline]
    pub fn position(&self, key: u64) -> Option<usize> {
        self.place(key, key_hash(key))
    }

    /// Whether a key whose [`key_hash`] is `hash` may be kept (the filter:
    /// false positives, no false negatives).
    fn may_hold(&self, hash: u64) -> bool {
        holds_bit(&self.filter, hash)
    }

    /// The filter of the kept keys' hashes ([`holds_bit`]), for a reader
    /// that checks many hashes against it at once.
    pub fn filter(&self) -> &FilterWords {
        &self.filter
    }

    /// `key`'s place in `keys`, if kept; `hash` is its [`key_hash`] (for a
    /// caller that hashed it already).
    #[inline]
    pub fn place(&self, key: u64, hash: u64) -> Option<usize> {
        if !self.may_hold(hash) {
            return None;
        }
        let mut at = AlwaysKept::home(hash, self.table.len());
        while let Some(place) = self.table[at] {
            if self.keys[place as usize] == key {
                return Some(place as usize);
            }
            at = (at + 1) % self.table.len();
        }
        None
    }
}

/// Whether the sample drawn with `threshold`, or `always`, holds `key`:
/// `None` if neither does, else `key`'s place among `always`'s keys if it
/// is one of them (hashing `key` once for both).
#[inline]
pub fn kept_place(key: u64, threshold: u64, always: &AlwaysKept) -> Option<Option<u32>> {
    if always.is_empty() {
        return keeps(key, threshold).then_some(None);
    }
    let hash = key_hash(key);
    let place = always.place(key, hash).map(|place| place as u32);
    (threshold == u64::MAX || hash < threshold || place.is_some()).then_some(place)
}

/// The share of the key space `threshold` keeps: scale cache sizes by it.
pub fn rate_of(threshold: u64) -> f64 {
    // u64::MAX rounds to 2^64 as an f64, so rate 1 comes back as 1.0.
    threshold as f64 / 2f64.powi(64)
}

/// Accesses a sample kept, in order, and where the stream stood after them.
#[derive(Clone, Copy, Debug)]
pub struct KeptBatch<'a> {
    pub accesses: &'a [Access],
    /// Per access, its place among the keys kept whatever their hash
    /// ([`AlwaysKept::position`]), if it is one.
    pub places: &'a [Option<u32>],
    /// What was not kept so far.
    pub skipped: Skipped,
}

/// Requests a sample did not keep, and their bytes (each at least 1, as
/// object mode sizes them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    pub requests: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_0_renames_nothing_and_another_seed_is_a_bijection() {
        assert!(KeyRenaming::for_seed(0).is_identity());
        assert_eq!(KeyRenaming::for_seed(0).rename(12345), 12345);
        let r = KeyRenaming::for_seed(3);
        assert!(!r.is_identity());
        let renamed: std::collections::HashSet<u64> = (0..10_000).map(|k| r.rename(k)).collect();
        assert_eq!(renamed.len(), 10_000, "distinct keys stay distinct");
        let kept = |r: KeyRenaming| (0..10_000u64).filter(|&k| keeps(r.rename(k), threshold(0.1))).collect::<Vec<_>>();
        assert_ne!(kept(r), kept(KeyRenaming::IDENTITY), "another draw keeps other keys");
    }

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
}

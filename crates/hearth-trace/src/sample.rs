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

use std::path::Path;

use hearth_core::{Access, Op, NEVER};

use crate::candidates;
use crate::error::Place;
use crate::input::{open_input, Records};
use crate::readers::oracle;
use crate::{SettingError, TraceError};

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

/// A renaming of keys, `k -> a*k + b mod 2^64` with `a` odd: a bijection,
/// so a policy that never looks at a key's value (LRU, ARC, LIRS, 2Q, MQ
/// and stack distances) runs the same on renamed keys, while [`keeps`]
/// keeps other ones. Sampling renamed keys draws another sample of the
/// same trace: the spread of a sampled curve over draws is its sampling
/// error. Seed 0 is the identity, the sample `hearth trace sample` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRenaming {
    pub(crate) multiplier: u64,
    pub(crate) addend: u64,
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

    pub fn rename(self, key: u64) -> u64 {
        key.wrapping_mul(self.multiplier).wrapping_add(self.addend)
    }

    pub fn is_identity(self) -> bool {
        self == KeyRenaming::IDENTITY
    }
}

/// Whether the sample drawn with `threshold` holds `key`.
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
pub(crate) type FilterWords = [u64; ALWAYS_FILTER_BITS / 64];

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
    pub fn position(&self, key: u64) -> Option<usize> {
        self.place(key, key_hash(key))
    }

    /// Whether a key whose [`key_hash`] is `hash` may be kept (the filter:
    /// false positives, no false negatives).
    fn may_hold(&self, hash: u64) -> bool {
        candidates::holds_bit(&self.filter, hash)
    }

    /// `key`'s place in `keys`, if kept; `hash` is its [`key_hash`].
    #[inline]
    fn place(&self, key: u64, hash: u64) -> Option<usize> {
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

/// The accesses a sample keeps, read from an oracleGeneral file in object
/// mode: each record's key is hashed where it lies in the read buffer and
/// only kept records are decoded (and their next access checked), so a 1%
/// sample costs little more than reading the file. Keys are renamed (see
/// [`KeyRenaming`]) before they are hashed, and handed out renamed.
/// Accesses keep the vtime and next access they have in the whole trace;
/// the requests and bytes not kept are counted for the whole stream's
/// totals.
pub struct SampledOracle {
    records: Records,
    threshold: u64,
    /// Kept whatever their hash (see [`always_keeping`](Self::always_keeping)).
    always: AlwaysKept,
    renaming: KeyRenaming,
    /// 0-based index of the next record.
    index: u64,
    skipped: Skipped,
    /// Kept accesses of the last batch read, handed out from `handed`.
    kept: Vec<Access>,
    /// Each kept access's place among `always`'s keys, if it is one.
    places: Vec<Option<u32>>,
    /// Indices and hashes of the last batch's records that the threshold or
    /// `always` might keep (reused; see [`candidates::note`]).
    candidates: (Vec<u32>, Vec<u64>),
    handed: usize,
    failed: bool,
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

impl SampledOracle {
    /// Opens `path` (oracleGeneral, plain or compressed) keeping the keys
    /// whose renaming [`keeps`] keeps at `threshold`.
    pub fn open(path: &Path, threshold: u64, renaming: KeyRenaming) -> Result<SampledOracle, TraceError> {
        Ok(SampledOracle {
            records: Records::new(path, open_input(path)?),
            threshold,
            always: AlwaysKept::default(),
            renaming,
            index: 0,
            skipped: Skipped::default(),
            kept: Vec::new(),
            places: Vec::new(),
            candidates: (Vec::new(), Vec::new()),
            handed: 0,
            failed: false,
        })
    }

    /// Also keeps `always`'s keys (renamed keys, as handed out).
    pub fn always_keeping(self, always: AlwaysKept) -> SampledOracle {
        SampledOracle { always, ..self }
    }

    /// What was not kept among the records read so far.
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    /// Reads the next batch of records into `kept`; `false` at the end.
    fn read_batch(&mut self) -> Result<bool, TraceError> {
        self.kept.clear();
        self.places.clear();
        self.handed = 0;
        let batch = self.records.next_batch(oracle::RECORD_LEN)?;
        if batch.is_empty() {
            return Ok(false);
        }
        let records = batch.len() / oracle::RECORD_LEN;
        let (threshold, renaming) = (self.threshold, self.renaming);
        let (mut bad, mut skipped_bytes) = (None, 0);
        if threshold == u64::MAX {
            // Every record, none hashed unless some are always kept.
            let always = (!self.always.is_empty()).then_some(&self.always);
            for (i, record) in batch.chunks_exact(oracle::RECORD_LEN).enumerate() {
                let key = renaming.rename(oracle::key(record));
                if let Err(what) = keep(&mut self.kept, record, key, self.index + i as u64) {
                    bad = Some((records - i, what));
                    break;
                }
                self.places.push(always.and_then(|always| always.position(key)).map(|place| place as u32));
            }
        } else {
            // Two steps. First every record's key is hashed, and its index
            // and hash noted when the threshold or `always`'s filter might
            // keep it, while all sizes are summed ([`candidates::note`]).
            // Then only the noted records are checked against `always` and
            // decoded.
            let (mut indices, mut hashes) = std::mem::take(&mut self.candidates);
            indices.resize(records, 0);
            hashes.resize(records, 0);
            let always = &self.always;
            let filter = (!always.is_empty()).then_some(&*always.filter);
            let rule = candidates::Rule { renaming, threshold, filter };
            let noted = candidates::note(batch, rule, &mut indices, &mut hashes);
            skipped_bytes = noted.bytes;
            for (&i, &hash) in indices.iter().zip(&hashes).take(noted.count) {
                let i = i as usize;
                let record = &batch[i * oracle::RECORD_LEN..(i + 1) * oracle::RECORD_LEN];
                let key = renaming.rename(oracle::key(record));
                let place = always.place(key, hash);
                if hash >= threshold && place.is_none() {
                    continue; // a false positive of the filter
                }
                match keep(&mut self.kept, record, key, self.index + i as u64) {
                    Ok(size) => {
                        skipped_bytes -= u64::from(size);
                        self.places.push(place.map(|place| place as u32));
                    }
                    Err(what) => {
                        bad = Some((records - i, what));
                        break;
                    }
                }
            }
            self.candidates = (indices, hashes);
        }
        let skipped = Skipped { requests: (records - self.kept.len()) as u64, bytes: skipped_bytes };
        self.skipped.requests += skipped.requests;
        self.skipped.bytes += skipped.bytes;
        if let Some((from_end, what)) = bad {
            let at = self.records.offset - (from_end * oracle::RECORD_LEN) as u64;
            return Err(TraceError::new(&self.records.path, Place::Byte(at), what));
        }
        self.index += records as u64;
        Ok(true)
    }
}

/// Decodes a kept record, whose key is `key` (renamed), into `kept`: its
/// size, or what is wrong with it.
fn keep(kept: &mut Vec<Access>, record: &[u8], key: u64, vtime: u64) -> Result<u32, String> {
    let size = oracle::size(record).max(1);
    let next_access = oracle::next_access(record, vtime)?.unwrap_or(NEVER);
    kept.push(Access { key, size, vtime, next_access, op: Op::Read, ctx: 0 });
    Ok(size)
}

impl SampledOracle {
    /// The kept accesses not yet handed out, at least one, until the end
    /// (`None`) or an error, which ends the stream as in [`Iterator::next`]:
    /// each with its place among the always-kept keys
    /// ([`AlwaysKept::position`]) if it is one of them, and with what was
    /// not kept among the records read so far.
    pub fn next_kept(&mut self) -> Option<Result<KeptBatch<'_>, TraceError>> {
        if let Err(e) = self.fill()? {
            return Some(Err(e));
        }
        let from = std::mem::replace(&mut self.handed, self.kept.len());
        Some(Ok(KeptBatch { accesses: &self.kept[from..], places: &self.places[from..], skipped: self.skipped }))
    }

    /// Reads until an access is kept and not handed out; `None` at the end.
    fn fill(&mut self) -> Option<Result<(), TraceError>> {
        while self.handed == self.kept.len() {
            if self.failed {
                return None;
            }
            match self.read_batch() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    // The error ends the stream: nothing after it, as every reader.
                    self.failed = true;
                    self.kept.clear();
                    return Some(Err(e));
                }
            }
        }
        Some(Ok(()))
    }
}

impl Iterator for SampledOracle {
    type Item = Result<Access, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.fill()? {
            return Some(Err(e));
        }
        self.handed += 1;
        Some(Ok(self.kept[self.handed - 1]))
    }
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

    /// Every key's accesses, as the full reader and the split give them.
    fn full_pass(path: &Path) -> Vec<Access> {
        let reader = crate::open(path, Some(crate::Format::OracleGeneral)).unwrap();
        crate::accesses(reader, crate::Mode::Object).map(Result::unwrap).collect()
    }

    #[test]
    fn sampled_oracle_reads_what_filtering_the_full_pass_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.oracleGeneral.bin");
        // Enough records for several read batches, sizes 0 (read as 1) to 99.
        let mut accesses: Vec<Access> = (0..200_000u64)
            .map(|i| Access {
                key: (i * 7919) % 10_007,
                size: (i % 100) as u32,
                vtime: i,
                next_access: NEVER,
                op: Op::Read,
                ctx: 0,
            })
            .collect();
        crate::fill_next_access(&mut accesses);
        crate::write_oracle_general(&path, &accesses).unwrap();
        let full = full_pass(&path);
        for rate in [0.01, 0.3, 1.0] {
            let t = threshold(rate);
            let mut sampled = SampledOracle::open(&path, t, KeyRenaming::IDENTITY).unwrap();
            let got: Vec<Access> = sampled.by_ref().map(Result::unwrap).collect();
            let (kept, dropped): (Vec<Access>, Vec<Access>) = full.iter().partition(|a| keeps(a.key, t));
            assert_eq!(got, kept, "rate {rate}");
            let dropped_bytes = dropped.iter().map(|a| u64::from(a.size)).sum();
            assert_eq!(sampled.skipped(), Skipped { requests: dropped.len() as u64, bytes: dropped_bytes });
        }
        // Keys kept whatever their hash join the sample, and only they.
        let t = threshold(0.01);
        let hot = AlwaysKept::new((0..10_007).filter(|&k| !keeps(k, t)).step_by(97));
        assert!(hot.keys().len() > 100);
        let sampled = SampledOracle::open(&path, t, KeyRenaming::IDENTITY).unwrap().always_keeping(hot.clone());
        let got: Vec<Access> = sampled.map(Result::unwrap).collect();
        let kept: Vec<Access> = full.iter().copied().filter(|a| keeps(a.key, t) || hot.contains(a.key)).collect();
        assert!(kept.len() > full.len() / 100 * 2, "the stratum adds accesses");
        assert_eq!(got, kept);
        for k in 0..10_007 {
            let place = hot.keys().iter().position(|&h| h == k).map(|p| p as u32);
            let kept = keeps(k, t) || place.is_some();
            assert_eq!(kept_place(k, t, &hot), kept.then_some(place), "key {k}");
            assert_eq!(kept_place(k, u64::MAX, &hot), Some(place), "key {k} at rate 1");
            assert_eq!(kept_place(k, t, &AlwaysKept::default()), keeps(k, t).then_some(None), "key {k}");
        }
        assert!((0..10_007).all(|k| hot.position(k) == hot.keys().iter().position(|&h| h == k)));
    }

    #[test]
    fn sampled_oracle_reports_bad_records_where_the_full_reader_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.oracleGeneral.bin");
        let mut accesses: Vec<Access> = (0..1000u64)
            .map(|i| Access { key: i % 50, size: 4, vtime: i, next_access: NEVER, op: Op::Read, ctx: 0 })
            .collect();
        crate::fill_next_access(&mut accesses);
        // A record of a sampled key from 700 on names an earlier access as its
        // next: no trace does that.
        let kept_key = (0..50).find(|&k| keeps(k, threshold(0.2))).unwrap();
        let bad = 700 + kept_key as usize; // 700 is a multiple of the 50 keys
        accesses[bad].next_access = bad as u64 - 1;
        crate::write_oracle_general(&path, &accesses).unwrap();
        let full_error = crate::open(&path, None).unwrap().find_map(Result::err).unwrap().to_string();
        let mut sampled = SampledOracle::open(&path, threshold(0.2), KeyRenaming::IDENTITY).unwrap();
        let sampled_error = sampled.find_map(Result::err).unwrap().to_string();
        assert_eq!(sampled_error, full_error);
        assert!(sampled_error.contains(&format!("byte {}", bad * 24)), "{sampled_error}");
        assert!(sampled.next().is_none(), "nothing after the error");
        // A file cut inside a record.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..100]).unwrap();
        let cut = SampledOracle::open(&path, u64::MAX, KeyRenaming::IDENTITY)
            .unwrap()
            .find_map(Result::err)
            .unwrap()
            .to_string();
        assert!(cut.contains("truncated record"), "{cut}");
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

//! Spatial samples read from a file: an oracleGeneral trace read keeping
//! only the records a sample holds, decoding nothing else, and sampling
//! rates as written. Which keys a sample holds (the hash, thresholds,
//! renamings, always-kept keys) is `hearth_estimate::sample`'s, re-exported
//! here, so that `hearth trace sample` and the estimators hold the same
//! keys.

use std::path::Path;

use hearth_core::{Access, Op, NEVER};
pub use hearth_estimate::sample::{
    keeps, kept_place, key_hash, rate_of, threshold, AlwaysKept, KeptBatch, KeyRenaming, Skipped,
};

use crate::candidates;
use crate::error::Place;
use crate::input::{open_input, Records};
use crate::readers::oracle;
use crate::{SettingError, TraceError};

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
            let filter = (!always.is_empty()).then_some(always.filter());
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

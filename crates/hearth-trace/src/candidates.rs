//! Which records of an oracleGeneral read batch a sample might keep: every
//! record's key renamed and hashed where it lies, and the index and hash of
//! each record the threshold (or a filter of always-kept keys) might keep
//! noted without a branch, since which record is kept is a coin toss the
//! CPU cannot predict. A pass drawing a 1% sample spends most of its own
//! time here, so x86-64 machines with AVX-512 take eight records at once.

use hearth_estimate::sample::{holds_bit, key_hash, FilterWords, KeyRenaming};

use crate::readers::oracle;

/// Which records are candidates: those whose renamed key's [`key_hash`]
/// is below `threshold`, or whose hash `filter` (if any) may hold (see
/// `AlwaysKept::may_hold`).
#[derive(Clone, Copy)]
pub(crate) struct Rule<'a> {
    pub(crate) renaming: KeyRenaming,
    pub(crate) threshold: u64,
    pub(crate) filter: Option<&'a FilterWords>,
}

/// What [`note`] found in a batch.
pub(crate) struct Noted {
    /// Candidates noted: the first `count` of `indices` and `hashes`.
    pub(crate) count: usize,
    /// The bytes of every record in the batch, each at least 1.
    pub(crate) bytes: u64,
}

/// Notes into `indices` and `hashes` (each at least one place a record of
/// `batch`), first to last, the index and hash of each candidate of `rule`.
pub(crate) fn note(batch: &[u8], rule: Rule, indices: &mut [u32], hashes: &mut [u64]) -> Noted {
    let records = batch.len() / oracle::RECORD_LEN;
    assert!(indices.len() >= records && hashes.len() >= records, "a place for every record");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("popcnt")
    {
        // SAFETY: the features it is compiled for were just detected, and
        // the places were checked above.
        return unsafe {
            match rule.filter {
                Some(_) => x86::note::<true>(batch, rule, indices, hashes),
                None => x86::note::<false>(batch, rule, indices, hashes),
            }
        };
    }
    note_each(batch, 0, rule, indices, hashes)
}

/// [`note`] a record at a time; records are numbered from `first`.
pub(crate) fn note_each(batch: &[u8], first: u32, rule: Rule, indices: &mut [u32], hashes: &mut [u64]) -> Noted {
    let (mut count, mut bytes) = (0, 0);
    let may_hold = |hash: u64| rule.filter.is_some_and(|filter| holds_bit(filter, hash));
    for (record, i) in batch.chunks_exact(oracle::RECORD_LEN).zip(first..) {
        let hash = key_hash(rule.renaming.rename(oracle::key(record)));
        bytes += u64::from(oracle::size(record).max(1));
        (indices[count], hashes[count]) = (i, hash);
        count += usize::from((hash < rule.threshold) | may_hold(hash));
    }
    Noted { count, bytes }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{note_each, Noted, Rule};
    use crate::readers::oracle;

    /// [`super::note`] eight records (192 bytes, three vectors) at a time:
    /// keys and sizes picked out of the records by permutes, SplitMix64's
    /// finalizer on eight lanes, and the candidates' indices and hashes
    /// compress-stored.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F, DQ and VL and POPCNT, and `indices` and
    /// `hashes` a place for every record.
    #[target_feature(enable = "avx512f,avx512dq,avx512vl,popcnt")]
    pub(super) unsafe fn note<const FILTER: bool>(
        batch: &[u8],
        rule: Rule,
        indices: &mut [u32],
        hashes: &mut [u64],
    ) -> Noted {
        let filter = rule.filter.unwrap_or(&[0; _]);
        let records = batch.len() / oracle::RECORD_LEN;
        let whole = records / 8 * 8;
        let set = |value: u64| _mm512_set1_epi64(value as i64);
        // Eight records are 48 words of 32 bits, in three vectors a, b and
        // c; record k's key is words 6k+1 and 6k+2, its size word 6k+3.
        // Words 0..32 come from a and b, then the rest from c (16 + i picks
        // word i of the second operand).
        let keys_of_ab = _mm512_setr_epi32(1, 2, 7, 8, 13, 14, 19, 20, 25, 26, 31, 0, 0, 0, 0, 0);
        let keys_then_c = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 21, 22, 27, 28);
        let sizes_of_ab = _mm512_setr_epi32(3, 9, 15, 21, 27, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        let sizes_then_c = _mm512_setr_epi32(0, 1, 2, 3, 4, 17, 23, 29, 0, 0, 0, 0, 0, 0, 0, 0);
        let (multiplier, addend) = rule.renaming.parts();
        let (multiplier, addend) = (set(multiplier), set(addend));
        let (golden, mix1, mix2) = (set(0x9e37_79b9_7f4a_7c15), set(0xbf58_476d_1ce4_e5b9), set(0x94d0_49bb_1331_11eb));
        let (below, bit_mask, word_bits) = (set(rule.threshold), set(filter.len() as u64 * 64 - 1), set(63));
        let mut index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let (mut count, mut bytes) = (0usize, _mm512_setzero_si512());
        for first in (0..whole).step_by(8) {
            // SAFETY (all below): record `first + 7` ends within `batch`, and
            // a record's key (bytes 4..12) and size (12..16) lie within it;
            // at most `first + 8` places are written (`count <= first`).
            let at = unsafe { batch.as_ptr().add(first * oracle::RECORD_LEN) };
            let [a, b, c] = [0, 64, 128].map(|offset| unsafe { _mm512_loadu_si512(at.add(offset).cast()) });
            let keys = _mm512_permutex2var_epi32(_mm512_permutex2var_epi32(a, keys_of_ab, b), keys_then_c, c);
            let sizes = _mm512_permutex2var_epi32(_mm512_permutex2var_epi32(a, sizes_of_ab, b), sizes_then_c, c);
            let sizes = _mm512_castsi512_si256(sizes);
            bytes = _mm512_add_epi64(bytes, _mm512_cvtepu32_epi64(_mm256_max_epu32(sizes, _mm256_set1_epi32(1))));
            let renamed = _mm512_add_epi64(_mm512_mullo_epi64(keys, multiplier), addend);
            let mut z = _mm512_add_epi64(renamed, golden);
            z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64::<30>(z)), mix1);
            z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64::<27>(z)), mix2);
            let hash = _mm512_xor_si512(z, _mm512_srli_epi64::<31>(z));
            let mut kept = _mm512_cmplt_epu64_mask(hash, below);
            if FILTER {
                let bit = _mm512_and_si512(hash, bit_mask);
                let words = unsafe { _mm512_i64gather_epi64::<8>(_mm512_srli_epi64::<6>(bit), filter.as_ptr().cast()) };
                let shifted = _mm512_srlv_epi64(words, _mm512_and_si512(hash, word_bits));
                kept |= _mm512_test_epi64_mask(shifted, set(1));
            }
            unsafe {
                _mm512_mask_compressstoreu_epi64(hashes.as_mut_ptr().add(count).cast(), kept, hash);
                _mm256_mask_compressstoreu_epi32(indices.as_mut_ptr().add(count).cast(), kept, index);
            }
            count += kept.count_ones() as usize;
            index = _mm256_add_epi32(index, _mm256_set1_epi32(8));
        }
        let mut lanes = [0u64; 8];
        // SAFETY: eight u64s fit in `lanes`.
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), bytes) };
        let rest = &batch[whole * oracle::RECORD_LEN..];
        let tail = note_each(rest, whole as u32, rule, &mut indices[count..], &mut hashes[count..]);
        Noted { count: count + tail.count, bytes: lanes.iter().sum::<u64>() + tail.bytes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_of_noting_notes_the_same_records() {
        // Records with keys and sizes (0 among them) of every kind, a batch
        // length that is not a multiple of eight, thresholds from none to
        // all, with and without a filter.
        let records = 1_003;
        let mut batch = vec![0u8; records * oracle::RECORD_LEN];
        for (i, record) in batch.chunks_exact_mut(oracle::RECORD_LEN).enumerate() {
            let key = key_hash(i as u64 ^ 0x5555).rotate_left(i as u32 % 64);
            record[4..12].copy_from_slice(&key.to_le_bytes());
            record[12..16].copy_from_slice(&((i as u32 * 7919) % 5000).to_le_bytes());
        }
        let mut filter: FilterWords = [0; _];
        for word in (0..filter.len()).step_by(7) {
            filter[word] = key_hash(word as u64);
        }
        #[cfg(target_arch = "x86_64")]
        if !std::arch::is_x86_feature_detected!("avx512dq") {
            eprintln!("no AVX-512 here: only the one-record-at-a-time way is checked");
        }
        let noted = |f: &dyn Fn(&mut [u32], &mut [u64]) -> Noted| {
            let (mut indices, mut hashes) = (vec![0; records], vec![0; records]);
            let n = f(&mut indices, &mut hashes);
            (indices[..n.count].to_vec(), hashes[..n.count].to_vec(), n.bytes)
        };
        for renaming in [KeyRenaming::IDENTITY, KeyRenaming::for_seed(5)] {
            for threshold in [0, 1 << 50, 1 << 60, u64::MAX / 3, u64::MAX] {
                for filter in [None, Some(&filter)] {
                    let rule = Rule { renaming, threshold, filter };
                    let one_by_one = noted(&|i, h| note_each(&batch, 0, rule, i, h));
                    // The plain meaning, record by record.
                    let records = batch.chunks_exact(oracle::RECORD_LEN).zip(0u32..);
                    let (mut indices, mut hashes, mut bytes) = (Vec::new(), Vec::new(), 0u64);
                    for (record, i) in records {
                        let hash = key_hash(renaming.rename(oracle::key(record)));
                        bytes += u64::from(oracle::size(record).max(1));
                        if hash < threshold || filter.is_some_and(|f| holds_bit(f, hash)) {
                            indices.push(i);
                            hashes.push(hash);
                        }
                    }
                    assert_eq!(one_by_one, (indices, hashes, bytes), "threshold {threshold}");
                    assert_eq!(noted(&|i, h| note(&batch, rule, i, h)), one_by_one);
                }
            }
        }
    }
}

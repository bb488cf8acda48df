//! Next uses with a map of bounded size: the trace is split by a hash of the
//! key into partition files, each solved by a backward pass (or split again
//! by the hash's next bits), and the partitions' columns merged back in
//! position order. The module documentation of [`super`] has the design.

use std::collections::hash_map::Entry;
use std::path::Path;

use hearth_core::{key_map, KeyMap, NEVER};

use super::scratch::{Scratch, ScratchReader, ScratchWriter};
use crate::error::TraceError;
use crate::sample::key_hash;

/// A partition record: position `u64`, key `u64`, size `u32`, little-endian.
const RECORD: usize = 20;

/// One little-endian `u64` next use per access.
pub(super) const NEXT: usize = 8;

/// How much memory the computation may take.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    /// Distinct keys the map may hold, and the longest trace solved in
    /// memory without partition files.
    pub(super) max_keys: usize,
    /// A split makes `2^partition_bits` partitions (at most 256: the index
    /// keeps one byte per access).
    pub(super) partition_bits: u32,
    /// Records a backward pass reads at a time.
    pub(super) chunk_records: usize,
}

impl Budget {
    /// 3,670,016 keys fill a map of 2^22 buckets (hashbrown's 7/8 load),
    /// 25 bytes each: 100 MiB. See the module documentation for the rest.
    pub(super) const DEFAULT: Budget =
        Budget { max_keys: (1 << 22) / 8 * 7, partition_bits: 8, chunk_records: 1 << 20 };
}

/// The next-use column of a run of accesses, and what it saw.
pub(super) struct Solved {
    pub(super) column: Scratch,
    pub(super) distinct_keys: u64,
    /// Bytes of the distinct keys, each at its first access's size.
    pub(super) footprint_bytes: u64,
}

/// Meets an access going backward: returns its next use and makes it its
/// key's earliest access so far. `None` when the key is new and the map
/// already holds `max_keys` keys.
fn visit(map: &mut KeyMap<(u64, u32)>, max_keys: usize, pos: u64, key: u64, size: u32) -> Option<u64> {
    let full = map.len() >= max_keys;
    match map.entry(key) {
        Entry::Occupied(mut earliest) => Some(std::mem::replace(earliest.get_mut(), (pos, size)).0),
        Entry::Vacant(_) if full => None,
        Entry::Vacant(slot) => {
            slot.insert((pos, size));
            Some(NEVER)
        }
    }
}

/// Distinct keys and footprint once a backward pass is over: the map then
/// holds each key's first access.
fn totals(map: &KeyMap<(u64, u32)>) -> (u64, u64) {
    (map.len() as u64, map.values().map(|&(_, size)| u64::from(size)).sum())
}

/// Solves a whole (short) trace held in memory: `accesses[i]` is the (key,
/// size) of position `i`.
pub(super) fn in_memory(accesses: &[(u64, u32)], dir: &Path) -> Result<Solved, TraceError> {
    let mut map = key_map(accesses.len());
    let mut nexts = vec![0u64; accesses.len()];
    for (pos, &(key, size)) in accesses.iter().enumerate().rev() {
        nexts[pos] = visit(&mut map, usize::MAX, pos as u64, key, size).expect("no limit on keys");
    }
    let mut out = ScratchWriter::create(dir, "column")?;
    for next in nexts {
        out.write(&next.to_le_bytes())?;
    }
    let (distinct_keys, footprint_bytes) = totals(&map);
    Ok(Solved { column: out.finish()?, distinct_keys, footprint_bytes })
}

/// The partition of `key` at `level`: the level's own `bits` bits of a
/// bijective hash, from the low end (a sampled trace keeps the keys whose
/// hash is small, so its high bits are all alike). Keys that share every
/// level's bits share the whole hash, so are one key: a split at level
/// `64 / bits` is never needed.
fn partition(key: u64, level: u32, bits: u32) -> usize {
    ((key_hash(key) >> (level * bits)) & ((1 << bits) - 1)) as usize
}

/// Accesses in position order being split among partition files by one
/// level of the hash, with an index of the partition of each.
pub(super) struct Split {
    level: u32,
    bits: u32,
    parts: Vec<ScratchWriter>,
    index: ScratchWriter,
}

impl Split {
    pub(super) fn create(dir: &Path, level: u32, bits: u32) -> Result<Split, TraceError> {
        let parts = (0..1usize << bits)
            .map(|p| ScratchWriter::create(dir, &format!("level{level}-part{p}")))
            .collect::<Result<_, _>>()?;
        let index = ScratchWriter::create(dir, &format!("level{level}-index"))?;
        Ok(Split { level, bits, parts, index })
    }

    pub(super) fn push(&mut self, pos: u64, key: u64, size: u32) -> Result<(), TraceError> {
        let part = partition(key, self.level, self.bits);
        self.index.write(&[part as u8])?;
        let mut record = [0u8; RECORD];
        record[..8].copy_from_slice(&pos.to_le_bytes());
        record[8..16].copy_from_slice(&key.to_le_bytes());
        record[16..].copy_from_slice(&size.to_le_bytes());
        self.parts[part].write(&record)
    }

    /// Solves each partition, then merges their columns in position order:
    /// the index names the partition of each access in turn, and within a
    /// partition positions ascend, so each column is read straight through.
    pub(super) fn solve(self, solver: &mut Solver) -> Result<Solved, TraceError> {
        let index = self.index.finish()?;
        let (mut distinct_keys, mut footprint_bytes) = (0, 0);
        let mut columns = Vec::with_capacity(self.parts.len());
        for part in self.parts {
            let solved = solver.solve(part.finish()?, self.level)?;
            distinct_keys += solved.distinct_keys;
            footprint_bytes += solved.footprint_bytes;
            columns.push(solved.column);
        }
        let mut out = ScratchWriter::create(solver.dir, "column")?;
        let mut parts: Vec<ScratchReader<&Scratch, NEXT>> = columns.iter().map(ScratchReader::new).collect();
        let mut index = ScratchReader::<_, 1>::new(&index);
        while let Some([part]) = index.next_entry()? {
            out.write(&parts[usize::from(part)].expect_entry()?)?;
        }
        Ok(Solved { column: out.finish()?, distinct_keys, footprint_bytes })
    }
}

/// Solves partition files within a [`Budget`], reusing one map and one pair
/// of chunk buffers for all of them.
pub(super) struct Solver<'a> {
    dir: &'a Path,
    budget: Budget,
    /// Each key met so far in the current backward pass: the (position,
    /// size) of its earliest access.
    map: KeyMap<(u64, u32)>,
    records: Vec<u8>,
    nexts: Vec<u8>,
}

impl<'a> Solver<'a> {
    pub(super) fn new(dir: &'a Path, budget: Budget) -> Solver<'a> {
        Solver {
            dir,
            budget,
            // Reserved once, so the map never grows (a growing table briefly
            // holds its old and new buckets together).
            map: key_map(budget.max_keys),
            records: vec![0; budget.chunk_records * RECORD],
            nexts: vec![0; budget.chunk_records * NEXT],
        }
    }

    /// The column of one partition of a split at `level`: by a backward
    /// pass if its keys fit the map, else by splitting it again.
    fn solve(&mut self, run: Scratch, level: u32) -> Result<Solved, TraceError> {
        if let Some(solved) = self.backward(&run)? {
            return Ok(solved);
        }
        let mut split = Split::create(self.dir, level + 1, self.budget.partition_bits)?;
        let mut records = ScratchReader::<_, RECORD>::new(&run);
        while let Some(record) = records.next_entry()? {
            let (pos, key, size) = decode(&record);
            split.push(pos, key, size)?;
        }
        drop(run);
        split.solve(self)
    }

    /// The libCacheSim backward pass over `run`, from its end in chunks;
    /// `None` as soon as the run proves to have more keys than the map holds.
    fn backward(&mut self, run: &Scratch) -> Result<Option<Solved>, TraceError> {
        let records = run.len() / RECORD as u64;
        let (file, path) = Scratch::create(self.dir, "column")?;
        let column = Scratch::from_parts(file, path, records * NEXT as u64);
        self.map.clear();
        let mut end = records;
        while end > 0 {
            let start = end.saturating_sub(self.budget.chunk_records as u64);
            let n = (end - start) as usize;
            let bytes = &mut self.records[..n * RECORD];
            run.read_at(bytes, start * RECORD as u64)?;
            let nexts = &mut self.nexts[..n * NEXT];
            for (record, next) in bytes.chunks_exact(RECORD).zip(nexts.chunks_exact_mut(NEXT)).rev() {
                let (pos, key, size) = decode(record.try_into().expect("whole records"));
                let Some(next_use) = visit(&mut self.map, self.budget.max_keys, pos, key, size) else {
                    return Ok(None);
                };
                next.copy_from_slice(&next_use.to_le_bytes());
            }
            column.write_at(nexts, start * NEXT as u64)?;
            end = start;
        }
        let (distinct_keys, footprint_bytes) = totals(&self.map);
        Ok(Some(Solved { column, distinct_keys, footprint_bytes }))
    }
}

fn decode(record: &[u8; RECORD]) -> (u64, u64, u32) {
    let pos = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
    let key = u64::from_le_bytes(record[8..16].try_into().expect("8 bytes"));
    let size = u32::from_le_bytes(record[16..].try_into().expect("4 bytes"));
    (pos, key, size)
}

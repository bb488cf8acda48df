//! An LSM-tree key-value store (leveled, RocksDB-like): point lookups probe
//! the memtable, then each level's table covering the key through its bloom
//! filter block, index block and one data block; range scans merge every
//! level's index and data blocks over the range; puts append to the
//! write-ahead log; flushes write new level-0 tables, and compactions read
//! their input tables and write new ones, so a key's blocks move as the
//! tree changes. Its shape differs from the other models: a lookup's path
//! depends on where the key's newest version lives (memtable, one of the
//! level-0 tables, or a level), filter blocks are read for tables that do
//! not hold the key, and the block numbers of data change with compactions.
//!
//! Contexts are tagged with the operation, as a storage engine tags its own
//! I/O (RocksDB's `Env::IOActivity` tells gets, iterators, flushes and
//! compactions apart): `get`, `scan`, `put`, `read_modify_write`, `flush`,
//! `compaction`.
//!
//! Every parameter, fixed before any prefetcher ran on this workload:
//! - [`KEYS`] = 400,000 keys `0..KEYS`, [`KEYS_PER_BLOCK`] = 16 entries
//!   (256 B) to a 4 KiB data block.
//! - A table: a bloom-filter block, an index block, then its data blocks
//!   (keys in order); at most [`TABLE_KEYS`] = 4,096 keys. Each table has
//!   its own 2,048-block region, numbered by table id in creation order. A
//!   filter answers "maybe" for a key it does not hold with probability
//!   [`FALSE_POSITIVE`] = 1% (a fixed hash of table and key).
//! - Levels: level 0 holds whole flushed memtables (overlapping, newest
//!   first); levels 1-3 are sorted runs of tables split by key. At the
//!   start level 3 holds every key, level 2 a fixed scattered 30,000 and
//!   level 1 a fixed scattered 3,000 (earlier updates), level 0 nothing.
//!   Limits: level 1 [`L1_LIMIT`] = 8,192 keys, level 2 ten times that,
//!   level 3 none; level 0 is compacted when it holds [`L0_TRIGGER`] = 4
//!   tables.
//! - Keys are chosen by Zipf with exponent [`ZIPF`] = 0.99 over ranks, rank
//!   `r` being a fixed scattered key (YCSB's hot keys, spread over tables).
//! - Templates (weight, percent): `get` 55 (a point lookup: memtable, then
//!   level-0 tables newest first, then levels 1-3, until the key is found:
//!   per table, the filter block, and where it says maybe the index and the
//!   data block), `scan` 10 (the next [`SCAN_KEYS`] = 50 keys from a Zipf
//!   key: per level-0 table and per level table overlapping the range, its
//!   index block and the data blocks over the range), `put` 20 (the
//!   write-ahead log's current block written: [`WAL_RECORDS_PER_BLOCK`] = 16
//!   records to a block; the key enters the memtable), `read_modify_write`
//!   8 (a `get` then a `put` of the same key), `flush` 5, `compaction` 2.
//! - `flush`: if the memtable holds at least [`FLUSH_KEYS`] = 256 keys, it
//!   is written as a new level-0 table (filter, index, data blocks), then a
//!   manifest block; otherwise only the manifest's current block is read.
//! - `compaction`: if level 0 holds [`L0_TRIGGER`] tables, they and the
//!   level-1 tables overlapping their keys are read (index, then data
//!   blocks) and written as new level-1 tables; else if level 1 or 2 is
//!   over its limit, its next table in key order (a round-robin cursor, as
//!   RocksDB's `kRoundRobin`) is merged with the overlapping tables of the
//!   next level the same way; then a manifest block is written. With
//!   nothing due, the manifest's current block is read.
//! - Clients and timing are the shared ones of [`super::TIMING`]; a client's
//!   identity plays no part.

use std::collections::{BTreeSet, VecDeque};

use hearth_core::Op;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, Zipf};

use super::{region, scatter, Model};

pub const KEYS: u64 = 400_000;
pub const KEYS_PER_BLOCK: u64 = 16;
pub const TABLE_KEYS: usize = 4_096;
pub const FALSE_POSITIVE: u64 = 100;
pub const L1_LIMIT: usize = 8_192;
pub const L0_TRIGGER: usize = 4;
pub const ZIPF: f64 = 0.99;
pub const SCAN_KEYS: u64 = 50;
pub const WAL_RECORDS_PER_BLOCK: u64 = 16;
pub const FLUSH_KEYS: usize = 256;
const INITIAL_L2: u64 = 30_000;
const INITIAL_L1: u64 = 3_000;
/// Blocks of a table's region (filter, index, up to 2,046 data blocks).
const TABLE_REGION_BITS: u32 = 11;

/// Regions: tables, the write-ahead log, the manifest.
const TABLES: u32 = 0;
const WAL: u32 = 1;
const MANIFEST: u32 = 2;

const TEMPLATES: [(&str, f64); 6] =
    [("get", 55.0), ("scan", 10.0), ("put", 20.0), ("read_modify_write", 8.0), ("flush", 5.0), ("compaction", 2.0)];

/// A sorted string table: its id (which places its blocks) and its keys.
#[derive(Clone, Debug)]
struct Table {
    id: u64,
    keys: Vec<u64>,
}

impl Table {
    fn filter_block(&self) -> u64 {
        region(0, TABLES) + (self.id << TABLE_REGION_BITS)
    }
    fn index_block(&self) -> u64 {
        self.filter_block() + 1
    }
    /// The data block holding the `rank`-th key (or where it would be).
    fn data_block(&self, rank: usize) -> u64 {
        let last = (self.keys.len().max(1) - 1) as u64 / KEYS_PER_BLOCK;
        self.filter_block() + 2 + (rank as u64 / KEYS_PER_BLOCK).min(last)
    }
    fn first(&self) -> u64 {
        self.keys[0]
    }
    fn last(&self) -> u64 {
        self.keys[self.keys.len() - 1]
    }
    fn overlaps(&self, lo: u64, hi: u64) -> bool {
        self.first() <= hi && lo <= self.last()
    }
    /// Whether the filter answers "maybe" for `key`.
    fn maybe(&self, key: u64) -> bool {
        self.keys.binary_search(&key).is_ok()
            || scatter(key ^ (self.id << 32), u64::MAX >> 1, 60).is_multiple_of(FALSE_POSITIVE)
    }
}

pub(crate) struct Lsm {
    memtable: BTreeSet<u64>,
    /// Level-0 tables, newest first.
    l0: Vec<Table>,
    /// Levels 1..=3 (index 0 is level 1), each sorted by key.
    levels: [Vec<Table>; 3],
    /// Per level 1..=2: one past the last key of the table compacted last.
    cursor: [u64; 2],
    next_table: u64,
    wal_records: u64,
    manifest_edits: u64,
    popular: Zipf<f64>,
}

/// A level-0 table's worth or a sorted run's keys as tables of at most
/// [`TABLE_KEYS`] keys, with fresh ids.
fn tables_of(keys: &[u64], next_table: &mut u64) -> Vec<Table> {
    keys.chunks(TABLE_KEYS)
        .map(|chunk| {
            *next_table += 1;
            Table { id: *next_table - 1, keys: chunk.to_vec() }
        })
        .collect()
}

/// Pushes `op` on `block` unless it is the block just pushed with the same op.
fn push(out: &mut VecDeque<(Op, u64)>, op: Op, block: u64) {
    if out.back() != Some(&(op, block)) {
        out.push_back((op, block));
    }
}

impl Lsm {
    pub(crate) fn new() -> Lsm {
        let mut next_table = 0;
        let scattered = |n: u64, salt: u32| {
            let mut keys: Vec<u64> = (0..n).map(|i| scatter(i, KEYS, salt)).collect();
            keys.sort_unstable();
            keys
        };
        let all: Vec<u64> = (0..KEYS).collect();
        let l3 = tables_of(&all, &mut next_table);
        let l2 = tables_of(&scattered(INITIAL_L2, 61), &mut next_table);
        let l1 = tables_of(&scattered(INITIAL_L1, 62), &mut next_table);
        Lsm {
            memtable: BTreeSet::new(),
            l0: Vec::new(),
            levels: [l1, l2, l3],
            cursor: [0; 2],
            next_table,
            wal_records: 0,
            manifest_edits: 0,
            popular: Zipf::new(KEYS as f64, ZIPF).expect("KEYS >= 1 and a positive exponent"),
        }
    }

    fn pick_key(&self, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let rank = (self.popular.sample(rng) as u64).clamp(1, KEYS) - 1;
        scatter(rank, KEYS, 63)
    }

    fn limit(level: usize) -> usize {
        match level {
            1 => L1_LIMIT,
            2 => L1_LIMIT * 10,
            _ => usize::MAX,
        }
    }

    /// Probes `table` for `key`: filter, and where it says maybe, index and
    /// data block. Returns whether the key was found.
    fn probe(table: &Table, key: u64, out: &mut VecDeque<(Op, u64)>) -> bool {
        push(out, Op::Read, table.filter_block());
        if !table.maybe(key) {
            return false;
        }
        push(out, Op::Read, table.index_block());
        let (found, rank) = match table.keys.binary_search(&key) {
            Ok(r) => (true, r),
            Err(r) => (false, r),
        };
        push(out, Op::Read, table.data_block(rank));
        found
    }

    fn get(&self, key: u64, out: &mut VecDeque<(Op, u64)>) {
        if self.memtable.contains(&key) {
            return;
        }
        for table in &self.l0 {
            if Self::probe(table, key, out) {
                return;
            }
        }
        for level in &self.levels {
            let covering = level.iter().find(|t| t.first() <= key && key <= t.last());
            if covering.is_some_and(|t| Self::probe(t, key, out)) {
                return;
            }
        }
    }

    /// Reads the index and the data blocks over `lo..=hi` of every table
    /// overlapping it: what a merging iterator reads.
    fn scan(&self, lo: u64, hi: u64, out: &mut VecDeque<(Op, u64)>) {
        let levels = std::iter::once(&self.l0).chain(self.levels.iter());
        for table in levels.flatten().filter(|t| t.overlaps(lo, hi)) {
            push(out, Op::Read, table.index_block());
            let from = table.keys.partition_point(|&k| k < lo);
            let to = table.keys.partition_point(|&k| k <= hi).max(from + 1);
            for rank in from..to {
                push(out, Op::Read, table.data_block(rank));
            }
        }
    }

    fn put(&mut self, key: u64, out: &mut VecDeque<(Op, u64)>) {
        push(out, Op::Write, region(0, WAL) + self.wal_records / WAL_RECORDS_PER_BLOCK);
        self.wal_records += 1;
        self.memtable.insert(key);
    }

    /// Writes `table` whole: filter, index, data blocks.
    fn write_table(table: &Table, out: &mut VecDeque<(Op, u64)>) {
        push(out, Op::Write, table.filter_block());
        push(out, Op::Write, table.index_block());
        for rank in (0..table.keys.len()).step_by(KEYS_PER_BLOCK as usize) {
            push(out, Op::Write, table.data_block(rank));
        }
    }

    /// Reads `table` whole as a compaction input: index, then data blocks.
    fn read_table(table: &Table, out: &mut VecDeque<(Op, u64)>) {
        push(out, Op::Read, table.index_block());
        for rank in (0..table.keys.len()).step_by(KEYS_PER_BLOCK as usize) {
            push(out, Op::Read, table.data_block(rank));
        }
    }

    fn manifest(&mut self, write: bool, out: &mut VecDeque<(Op, u64)>) {
        if write {
            self.manifest_edits += 1;
        }
        let op = if write { Op::Write } else { Op::Read };
        push(out, op, region(0, MANIFEST) + self.manifest_edits / 16);
    }

    fn flush(&mut self, out: &mut VecDeque<(Op, u64)>) {
        if self.memtable.len() < FLUSH_KEYS {
            return self.manifest(false, out);
        }
        let keys: Vec<u64> = std::mem::take(&mut self.memtable).into_iter().collect();
        // A memtable is one level-0 table, however many keys it holds.
        self.next_table += 1;
        let table = Table { id: self.next_table - 1, keys };
        Self::write_table(&table, out);
        self.l0.insert(0, table);
        self.manifest(true, out);
    }

    /// Merges `inputs` with the tables of level `into` (1..=3) that overlap
    /// them: reads all, writes the merged run as new tables of that level.
    fn merge_into(&mut self, inputs: Vec<Table>, into: usize, out: &mut VecDeque<(Op, u64)>) {
        let lo = inputs.iter().map(Table::first).min().expect("a compaction has input");
        let hi = inputs.iter().map(Table::last).max().expect("a compaction has input");
        let level = std::mem::take(&mut self.levels[into - 1]);
        let (overlapping, kept): (Vec<Table>, Vec<Table>) = level.into_iter().partition(|t| t.overlaps(lo, hi));
        let mut keys = BTreeSet::new();
        for table in inputs.iter().chain(&overlapping) {
            Self::read_table(table, out);
            keys.extend(table.keys.iter().copied());
        }
        let merged: Vec<u64> = keys.into_iter().collect();
        let written = tables_of(&merged, &mut self.next_table);
        for table in &written {
            Self::write_table(table, out);
        }
        let mut level = kept;
        level.extend(written);
        level.sort_by_key(Table::first);
        self.levels[into - 1] = level;
    }

    fn compaction(&mut self, out: &mut VecDeque<(Op, u64)>) {
        if self.l0.len() >= L0_TRIGGER {
            let inputs = std::mem::take(&mut self.l0);
            self.merge_into(inputs, 1, out);
            return self.manifest(true, out);
        }
        for level in 1..=2 {
            let held: usize = self.levels[level - 1].iter().map(|t| t.keys.len()).sum();
            if held <= Self::limit(level) {
                continue;
            }
            let run = &mut self.levels[level - 1];
            let cursor = self.cursor[level - 1];
            let at = run.iter().position(|t| t.first() >= cursor).unwrap_or(0);
            let picked = run.remove(at);
            self.cursor[level - 1] = picked.last() + 1;
            self.merge_into(vec![picked], level + 1, out);
            return self.manifest(true, out);
        }
        self.manifest(false, out);
    }
}

impl Model for Lsm {
    fn templates(&self) -> Vec<(&'static str, f64)> {
        TEMPLATES.to_vec()
    }

    fn execute(&mut self, class: usize, _client: u32, rng: &mut Xoshiro256PlusPlus, out: &mut VecDeque<(Op, u64)>) {
        match TEMPLATES[class].0 {
            "get" => self.get(self.pick_key(rng), out),
            "scan" => {
                let lo = self.pick_key(rng);
                self.scan(lo, (lo + SCAN_KEYS - 1).min(KEYS - 1), out);
            }
            "put" => {
                let key = self.pick_key(rng);
                self.put(key, out);
            }
            "read_modify_write" => {
                let key = self.pick_key(rng);
                self.get(key, out);
                self.put(key, out);
            }
            "flush" => self.flush(out),
            "compaction" => self.compaction(out),
            other => unreachable!("template {other} has no body"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(out: &VecDeque<(Op, u64)>) -> Vec<u64> {
        out.iter().map(|&(_, b)| b).collect()
    }

    fn table_of(block: u64) -> u64 {
        (block - region(0, TABLES)) >> TABLE_REGION_BITS
    }

    /// A key held only by level 3 whose filters elsewhere say no: one filter
    /// block per level with a covering table, then level 3's index and data.
    #[test]
    fn a_point_lookup_probes_each_level_down_to_the_key() {
        let lsm = Lsm::new();
        let in_l1: std::collections::HashSet<u64> = lsm.levels[0].iter().flat_map(|t| t.keys.clone()).collect();
        let in_l2: std::collections::HashSet<u64> = lsm.levels[1].iter().flat_map(|t| t.keys.clone()).collect();
        let key = (1000..KEYS)
            .find(|k| {
                !in_l1.contains(k)
                    && !in_l2.contains(k)
                    && lsm.levels[..2]
                        .iter()
                        .all(|level| level.iter().any(|t| t.first() <= *k && *k <= t.last() && !t.maybe(*k)))
            })
            .unwrap();
        let mut out = VecDeque::new();
        lsm.get(key, &mut out);
        let b = blocks(&out);
        assert_eq!(b.len(), 2 + 3, "filters of levels 1 and 2, then filter, index, data of level 3: {b:?}");
        assert!(out.iter().all(|&(op, _)| op == Op::Read));
        let l3 = lsm.levels[2].iter().find(|t| t.first() <= key && key <= t.last()).unwrap();
        assert_eq!(&b[2..], &[l3.filter_block(), l3.index_block(), l3.data_block((key - l3.first()) as usize)]);
        let mut again = VecDeque::new();
        lsm.get(key, &mut again);
        assert_eq!(out, again, "the same key, the same path while the tree stands");
        // A key found in level 1 stops there: filter, index, data of that table.
        let key = lsm.levels[0][0].keys[10];
        let mut out = VecDeque::new();
        lsm.get(key, &mut out);
        let t = &lsm.levels[0][0];
        assert_eq!(blocks(&out), vec![t.filter_block(), t.index_block(), t.data_block(10)]);
    }

    #[test]
    fn filters_say_maybe_for_about_one_absent_key_in_a_hundred() {
        let lsm = Lsm::new();
        let t = &lsm.levels[1][0];
        let absent: Vec<u64> = (t.first()..t.last()).filter(|k| t.keys.binary_search(k).is_err()).collect();
        let maybe = absent.iter().filter(|&&k| t.maybe(k)).count() as f64 / absent.len() as f64;
        assert!((0.005..0.02).contains(&maybe), "false-positive rate {maybe}");
    }

    /// Puts fill the memtable (a get of such a key reads nothing), a flush
    /// writes them as a level-0 table the next get probes first, and a
    /// compaction of level 0 moves them into new level-1 tables.
    #[test]
    fn flushes_and_compactions_move_keys_down_to_new_blocks() {
        let mut lsm = Lsm::new();
        let mut out = VecDeque::new();
        for k in 0..FLUSH_KEYS as u64 * L0_TRIGGER as u64 {
            lsm.put(k * 97 % KEYS, &mut out);
            if lsm.memtable.len() == FLUSH_KEYS {
                out.clear();
                lsm.flush(&mut out);
                assert!(out.iter().all(|&(op, _)| op == Op::Write));
                assert_eq!(out.len(), 2 + FLUSH_KEYS / KEYS_PER_BLOCK as usize + 1, "filter, index, data, manifest");
            }
        }
        assert_eq!(lsm.l0.len(), L0_TRIGGER);
        let key = 97;
        let mut before = VecDeque::new();
        lsm.get(key, &mut before);
        let newest_with_key = lsm.l0.iter().find(|t| t.keys.contains(&key)).unwrap().id;
        assert_eq!(table_of(*blocks(&before).last().unwrap()), newest_with_key);
        out.clear();
        lsm.compaction(&mut out);
        assert!(lsm.l0.is_empty());
        let reads = out.iter().filter(|&&(op, _)| op == Op::Read).count();
        assert!(reads > L0_TRIGGER * FLUSH_KEYS / KEYS_PER_BLOCK as usize, "inputs read: {reads}");
        let mut after = VecDeque::new();
        lsm.get(key, &mut after);
        let home = table_of(*blocks(&after).last().unwrap());
        assert!(lsm.levels[0].iter().any(|t| t.id == home && t.keys.contains(&key)), "now in level 1");
        assert_ne!(blocks(&before), blocks(&after), "the key's blocks moved");
        assert!(lsm.levels[0].windows(2).all(|w| w[0].last() < w[1].first()), "level 1 stays a sorted run");
    }

    /// Level 1 over its limit is compacted one table at a time, round robin.
    #[test]
    fn an_over_full_level_compacts_its_next_table_into_the_next_level() {
        let mut lsm = Lsm::new();
        let extra: Vec<u64> = (0..L1_LIMIT as u64 * 2).map(|i| scatter(i, KEYS, 64)).collect();
        let mut run: Vec<u64> = lsm.levels[0].iter().flat_map(|t| t.keys.clone()).chain(extra).collect();
        run.sort_unstable();
        run.dedup();
        lsm.levels[0] = tables_of(&run, &mut lsm.next_table);
        let (tables, l2_keys) = (lsm.levels[0].len(), lsm.levels[1].iter().map(|t| t.keys.len()).sum::<usize>());
        let first = lsm.levels[0][0].clone();
        lsm.compaction(&mut VecDeque::new());
        assert_eq!(lsm.levels[0].len(), tables - 1);
        assert!(!lsm.levels[0].iter().any(|t| t.id == first.id), "the first table in key order went");
        let l2_after: usize = lsm.levels[1].iter().map(|t| t.keys.len()).sum();
        assert!(l2_after > l2_keys && l2_after <= l2_keys + first.keys.len());
        let next = lsm.levels[0][0].id;
        lsm.compaction(&mut VecDeque::new());
        assert!(!lsm.levels[0].iter().any(|t| t.id == next), "the cursor moved on to the next table");
    }

    #[test]
    fn a_scan_reads_index_and_data_of_every_overlapping_table() {
        let lsm = Lsm::new();
        let mut out = VecDeque::new();
        lsm.scan(5_000, 5_049, &mut out);
        let tables: std::collections::BTreeSet<u64> = blocks(&out).into_iter().map(table_of).collect();
        let expected = lsm.levels.iter().flatten().filter(|t| t.overlaps(5_000, 5_049)).count();
        assert_eq!(tables.len(), expected);
        assert!(expected >= 2, "level 3 and at least one of levels 1-2 overlap 50 keys");
    }
}

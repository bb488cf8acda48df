//! Mithril (Yang et al., SoCC 2017) as libCacheSim 0.3.5 runs it: blocks
//! that recur with similar timestamps are associated and prefetched
//! together.
//!
//! Each miss (every request with `rec-trigger=each_req`) is recorded with a
//! timestamp (the request count, kept to its low 15 bits). A block's first
//! `min-support` records wait in a recording table (a ring of 2% of the
//! cache's bytes at 14 bytes a row); then it moves to the mining table,
//! where it gathers up to `max-support` records (one more drops it: too
//! frequent). Once the mining table holds `mining-threshold` /
//! `min-support` blocks, they are sorted by first timestamp (stably) and
//! each pair whose first timestamps lie within `lookahead-range` and whose
//! record counts differ by at most `confidence` is associated when some
//! pair of their timestamps lies 1 apart (or, for the first such partner
//! of a block, unless more than `confidence` of them lie over
//! `lookahead-range` apart); then the table empties. An association a→b
//! goes into a's list of `pf-list-size` blocks (FIFO) in the prefetch table,
//! which grows by shards of 2,000 rows up to `max-metadata-size` x
//! `block-size` x the cache's bytes and then reuses its rows from the
//! start. A request for a prefetches its list. A prefetched block evicted
//! before any demand goes back to the insertion point `cycle-time` - 1
//! times where prefetched blocks share the cache (`hearth sim --prefetch`).
//!
//! Kept as libCacheSim has them, so that the prefetches agree: timestamps
//! compared after wrapping at 2^15; the 4th timestamp of a block read back
//! as the count of the word holding it (libCacheSim's accessor), and a
//! pair's last timestamps never compared; the recording table's rows
//! reused from the start once it wraps; block 0 meaning "empty". Not
//! carried over: `rec-trigger=evict|miss_evict` (the partition and the
//! server do not report evictions to prefetchers), the embedded sequential
//! prefetcher (`sequential-type`, 0 here), and libCacheSim's keying of its
//! tables by 32-bit ints (block numbers of 2^31 and more alias there; here
//! they stay apart).

use hearth_core::{Key, KeyMap};

use crate::{CacheShape, Demand, PrefetchError, Prefetcher};

/// Rows a prefetch-table shard holds.
const SHARD_ROWS: usize = 2000;
/// The recording table's share of the cache's bytes.
const RECORDING_SHARE: f64 = 0.02;

#[derive(Clone, Debug)]
pub struct Config {
    pub lookahead: i32,
    pub max_support: i32,
    pub min_support: i32,
    pub confidence: i32,
    pub pf_list_size: usize,
    /// Record every request, not only misses (`rec-trigger=each_req`).
    pub each_request: bool,
    pub block_size: u64,
    pub max_metadata: f64,
    pub cycle_time: u32,
    pub mining_threshold: i32,
}

impl Config {
    /// libCacheSim's defaults.
    pub fn libcachesim() -> Config {
        Config {
            lookahead: 20,
            max_support: 8,
            min_support: 2,
            confidence: 1,
            pf_list_size: 2,
            each_request: false,
            block_size: 1,
            max_metadata: 0.1,
            cycle_time: 2,
            mining_threshold: 5120,
        }
    }

    pub(crate) fn check(&self) -> Result<(), PrefetchError> {
        let rules: [(bool, &str); 9] = [
            ((1..=100).contains(&self.lookahead), "lookahead-range must lie in 1..=100"),
            (self.min_support >= 1, "min-support must be at least 1"),
            (self.max_support >= self.min_support, "max-support must be at least min-support"),
            ((1..=100).contains(&self.confidence), "confidence must lie in 1..=100"),
            ((1..=100).contains(&self.pf_list_size), "pf-list-size must lie in 1..=100"),
            (self.max_metadata > 0.0 && self.max_metadata < 1.0, "max-metadata-size must lie strictly between 0 and 1"),
            ((1..=100).contains(&self.cycle_time), "cycle-time must lie in 1..=100"),
            (self.block_size >= 1, "block-size must be at least 1"),
            (self.mining_threshold >= self.min_support, "mining-threshold must be at least min-support"),
        ];
        match rules.iter().find(|(ok, _)| !ok) {
            Some((_, reason)) => Err(PrefetchError::range("mithril", *reason)),
            None => Ok(()),
        }
    }
}

/// Records in a table word: the top 4 bits.
fn records_in(word: i64) -> i32 {
    (word >> 60) as i32
}

/// `word` with one more timestamp `ts` (15 bits) in its next slot.
fn add_record(word: i64, ts: u64) -> i64 {
    let n = records_in(word) + 1;
    let shift = 15 * (4 - n) as u32;
    let mask = 0x7fffu64 << shift;
    let set = ((word as u64) & !mask) | ((ts & 0x7fff) << shift);
    ((set & ((1 << 60) - 1)) | ((n as u64) << 60)) as i64
}

/// The `n`th timestamp of `row` as libCacheSim's accessor reads it.
fn nth_ts(row: &[i64], n: i32) -> i32 {
    let word = row[1 + (n / 5) as usize];
    ((word >> (15 * (4 - n % 4))) & 0x7fff) as i32
}

/// Records in `row`'s words, up to the first empty one.
fn records(row: &[i64]) -> i32 {
    row[1..].iter().map(|&w| records_in(w)).take_while(|&n| n != 0).sum()
}

/// Adds `ts` to the first word of `row` with room; returns the records
/// counted up to it (libCacheSim's test for a full row).
fn record_into(row: &mut [i64], ts: u64) -> i32 {
    let mut counted = 0;
    for word in row[1..].iter_mut() {
        counted += records_in(*word);
        if records_in(*word) < 4 {
            *word = add_record(*word, ts);
            break;
        }
    }
    counted
}

/// The tables, sized once the cache's bytes are known.
struct Tables {
    /// Block → row: > 0 in the recording table, < 0 the mining table's
    /// -(index + 1) (with min-support 1, > 0 is the mining index + 1).
    rows: KeyMap<i32>,
    recording: Vec<i64>,
    recording_row: usize,
    recording_rows: i64,
    recording_at: i64,
    mining: Vec<i64>,
    mining_row: usize,
    mining_size: i32,
    ready: i32,
    prefetch_rows: KeyMap<i32>,
    prefetch: Vec<i64>,
    prefetch_at: i32,
    prefetch_full: bool,
    metadata: i64,
    max_metadata: i64,
}

pub struct Mithril {
    cfg: Config,
    tables: Option<Tables>,
    ts: u64,
}

impl Mithril {
    pub fn new(cfg: Config) -> Result<Mithril, PrefetchError> {
        cfg.check()?;
        Ok(Mithril { cfg, tables: None, ts: 0 })
    }

    fn tables(&self, cache_bytes: u64) -> Result<Tables, PrefetchError> {
        let c = &self.cfg;
        let too_small = |what: &str| {
            PrefetchError::range("mithril", format!("a cache of {cache_bytes} bytes is too small for its {what}"))
        };
        let mining_size = c.mining_threshold / c.min_support;
        let max_metadata = ((c.block_size * cache_bytes) as f64 * c.max_metadata) as i64;
        let max_shards = max_metadata / (SHARD_ROWS * c.pf_list_size) as i64;
        if max_shards == 0 {
            return Err(too_small("prefetch table"));
        }
        let pf = c.pf_list_size as i64;
        let mut metadata = i64::from(c.max_support * 2 + 12) * i64::from(mining_size)
            + max_shards * 8
            + SHARD_ROWS as i64 * (pf * 8 + 12);
        let recording_row = (c.min_support as f64 / 4.0).ceil() as usize + 1;
        let mut recording_rows = 0;
        if c.max_support != 1 {
            let row_bytes = (c.min_support as f64 / 2.0).ceil() as i64 * 2 + 12;
            recording_rows = ((cache_bytes * c.block_size) as f64 * RECORDING_SHARE / row_bytes as f64) as i64;
            if c.min_support > 1 && recording_rows < 2 {
                return Err(too_small("recording table"));
            }
            metadata += ((c.min_support as f64 / 4.0 + 1.0).ceil() as i64 * 8 + 4) * recording_rows;
        }
        Ok(Tables {
            rows: KeyMap::default(),
            recording: vec![0; recording_rows.max(0) as usize * recording_row],
            recording_row,
            recording_rows,
            recording_at: 1,
            mining: Vec::new(),
            mining_row: (c.max_support as f64 / 4.0).ceil() as usize + 1,
            mining_size,
            ready: 0,
            prefetch_rows: KeyMap::default(),
            prefetch: vec![0; SHARD_ROWS * (c.pf_list_size + 1)],
            prefetch_at: 1,
            prefetch_full: false,
            metadata,
            max_metadata,
        })
    }
}

impl Tables {
    fn rec_row(&mut self, r: i64) -> &mut [i64] {
        let len = self.recording_row;
        &mut self.recording[r as usize * len..(r as usize + 1) * len]
    }

    fn mining_rows(&self) -> usize {
        self.mining.len() / self.mining_row
    }

    fn mine_row(&mut self, m: usize) -> &mut [i64] {
        let len = self.mining_row;
        &mut self.mining[m * len..(m + 1) * len]
    }

    /// Drops mining row `m` (too frequent), moving the last row into it
    /// under the same `index`.
    fn drop_mining_row(&mut self, m: usize, index: i32) {
        let len = self.mining_row;
        let block = self.mining[m * len];
        self.rows.remove(&(block as Key));
        let last = self.mining_rows() - 1;
        if m != last {
            self.mining.copy_within(last * len..(last + 1) * len, m * len);
            self.rows.insert(self.mining[m * len] as Key, index);
        }
        self.mining.truncate(last * len);
        self.ready -= 1;
    }

    fn record(&mut self, cfg: &Config, block: Key, ts: u64) {
        if cfg.min_support == 1 {
            self.record_min_support_one(cfg, block, ts);
        } else {
            let index = self.rows.get(&block).copied().unwrap_or(0);
            if index == 0 {
                self.start_recording(block, ts);
            } else if index < 0 {
                let m = (-index - 1) as usize;
                if record_into(self.mine_row(m), ts) == cfg.max_support {
                    self.drop_mining_row(m, index);
                }
            } else {
                self.record_again(cfg, block, index, ts);
            }
        }
        if self.ready >= self.mining_size || (cfg.min_support == 1 && self.ready > cfg.mining_threshold / 8) {
            self.mine(cfg);
            self.ready = 0;
        }
    }

    fn start_recording(&mut self, block: Key, ts: u64) {
        let at = self.recording_at;
        let row = self.rec_row(at);
        row[0] = block as i64;
        row[1] = add_record(row[1], ts);
        self.rows.insert(block, at as i32);
        self.recording_at += 1;
        if self.recording_at >= self.recording_rows {
            self.recording_at = 1;
        }
        // The ring wrapped onto an older block: forget it.
        let next = self.recording_at;
        let old = self.rec_row(next)[0];
        if old != 0 {
            self.rows.remove(&(old as Key));
            self.rec_row(next).fill(0);
        }
    }

    /// Another record of a block in the recording table; at `min-support`
    /// it moves to the mining table and the table's last row fills its hole.
    fn record_again(&mut self, cfg: &Config, block: Key, index: i32, ts: u64) {
        let r = i64::from(index);
        if record_into(self.rec_row(r), ts) != cfg.min_support - 1 {
            return;
        }
        let mut moved = vec![0i64; self.mining_row];
        moved[..self.recording_row].copy_from_slice(self.rec_row(r));
        self.mining.extend_from_slice(&moved);
        self.ready += 1;
        let last = self.recording_at - 1;
        let fills_hole = r != last && self.recording_at >= 2;
        if fills_hole {
            let len = self.recording_row;
            self.recording.copy_within(last as usize * len..(last as usize + 1) * len, r as usize * len);
        }
        if self.recording_at >= 2 {
            self.rec_row(last).fill(0);
        } else {
            self.rec_row(r).fill(0);
        }
        self.rows.insert(block, -(self.mining_rows() as i32));
        if fills_hole {
            let filler = self.rec_row(r)[0];
            self.rows.insert(filler as Key, index);
        }
        if self.recording_at >= 2 {
            self.recording_at -= 1;
        }
    }

    fn record_min_support_one(&mut self, cfg: &Config, block: Key, ts: u64) {
        match self.rows.get(&block).copied().unwrap_or(0) {
            0 => {
                let mut row = vec![0i64; self.mining_row];
                row[0] = block as i64;
                row[1] = add_record(0, ts);
                self.mining.extend_from_slice(&row);
                self.ready += 1;
                self.rows.insert(block, self.mining_rows() as i32);
            }
            index => {
                let m = (index - 1) as usize;
                if record_into(self.mine_row(m), ts) == cfg.max_support {
                    self.drop_mining_row(m, index);
                }
            }
        }
    }

    /// Associates the mining table's blocks pairwise, then empties it.
    fn mine(&mut self, cfg: &Config) {
        let len = self.mining_row;
        let n = self.mining_rows();
        for m in 0..n {
            self.rows.remove(&(self.mining[m * len] as Key));
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&m| nth_ts(&self.mining[m * len..(m + 1) * len], 1));
        let sorted: Vec<i64> =
            order.iter().flat_map(|&m| self.mining[m * len..(m + 1) * len].iter().copied()).collect();
        let row = |i: usize| &sorted[i * len..(i + 1) * len];
        for i in 0..n.saturating_sub(1) {
            let a = row(i);
            let a_records = records(a);
            let mut first = true;
            for j in i + 1..n {
                let b = row(j);
                if nth_ts(b, 1) - nth_ts(a, 1) > cfg.lookahead {
                    break;
                }
                let b_records = records(b);
                if (a_records - b_records).abs() > cfg.confidence {
                    continue;
                }
                let shorter = a_records.min(b_records);
                let mut associated = std::mem::take(&mut first);
                if shorter == 1 && (nth_ts(a, 1) - nth_ts(b, 1)).abs() == 1 {
                    associated = true;
                }
                let mut errors = 0;
                for k in 1..shorter {
                    let apart = (nth_ts(a, k) - nth_ts(b, k)).abs();
                    if apart > cfg.lookahead {
                        errors += 1;
                        if errors > cfg.confidence {
                            associated = false;
                            break;
                        }
                    }
                    if apart == 1 {
                        associated = true;
                    }
                }
                if associated {
                    self.associate(cfg, a[0], b[0]);
                }
            }
        }
        self.mining.clear();
    }

    /// Adds `to` to `from`'s list in the prefetch table.
    fn associate(&mut self, cfg: &Config, from: i64, to: i64) {
        let width = cfg.pf_list_size + 1;
        let index = self.prefetch_rows.get(&(from as Key)).copied().unwrap_or(0);
        if index != 0 {
            let list = &mut self.prefetch[index as usize * width..(index as usize + 1) * width];
            let mut i = 1;
            let mut known = false;
            while i <= cfg.pf_list_size && list[i] != 0 {
                known |= list[i] == to;
                i += 1;
            }
            if !known {
                if i == width {
                    list.copy_within(2..width, 1);
                    i = cfg.pf_list_size;
                }
                list[i] = to;
            }
            return;
        }
        self.prefetch_at += 1;
        let at = self.prefetch_at as usize;
        let list = &mut self.prefetch[at * width..(at + 1) * width];
        if self.prefetch_full {
            let old = list[0];
            self.prefetch_rows.remove(&(old as Key));
            list.fill(0);
        }
        list[1] = to;
        list[0] = from;
        self.prefetch_rows.insert(from as Key, self.prefetch_at);
        if (at + 1).is_multiple_of(SHARD_ROWS) {
            let shard_bytes = (SHARD_ROWS * (cfg.pf_list_size * 8 + 12)) as i64;
            if self.metadata + shard_bytes < self.max_metadata {
                self.prefetch.resize(self.prefetch.len() + SHARD_ROWS * width, 0);
                self.metadata += shard_bytes;
            } else {
                self.prefetch_full = true;
                self.prefetch_at = 1;
            }
        }
    }
}

impl Prefetcher for Mithril {
    fn name(&self) -> String {
        "Mithril".into()
    }

    fn shape_cache(&mut self, shape: &CacheShape) -> Result<(), PrefetchError> {
        self.tables = Some(self.tables(shape.total_bytes)?);
        Ok(())
    }

    fn access(&mut self, d: &Demand, _cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        let Some(t) = self.tables.as_mut() else { return };
        if self.cfg.each_request || d.class == crate::Class::Miss {
            t.record(&self.cfg, d.block, self.ts);
        }
        // Every listed block, cached or not: an earlier prefetch of the
        // list may evict a later one, which is then prefetched again.
        if let Some(&index) = t.prefetch_rows.get(&d.block) {
            let width = self.cfg.pf_list_size + 1;
            let list = &t.prefetch[index as usize * width + 1..(index as usize + 1) * width];
            out.extend(list.iter().take_while(|&&b| b != 0).map(|&b| b as Key));
        }
        self.ts += 1;
    }

    fn second_chances(&self) -> u32 {
        self.cfg.cycle_time - 1
    }

    fn rule_count(&self) -> usize {
        self.tables.as_ref().map_or(0, |t| t.prefetch_rows.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;
    use hearth_core::Op;

    #[test]
    fn timestamps_pack_four_to_a_word_and_the_fourth_reads_back_as_the_count() {
        let mut row = [7i64, 0, 0];
        for ts in [100, 101, 102, 103, 104 + 0x8000] {
            record_into(&mut row, ts);
        }
        assert_eq!(records(&row), 5);
        assert_eq!((nth_ts(&row, 1), nth_ts(&row, 2), nth_ts(&row, 3)), (100, 101, 102));
        assert_eq!(nth_ts(&row, 4), 4, "libCacheSim's accessor reads the count");
        assert_eq!(nth_ts(&row, 5), 104, "wrapped at 2^15");
    }

    fn shaped(cfg: Config, bytes: u64) -> Mithril {
        let mut m = Mithril::new(cfg).unwrap();
        m.shape_cache(&CacheShape {
            policy: "lru".parse().unwrap(),
            total_bytes: bytes,
            prefetch_fraction: 0.0,
            block_size: 1,
        })
        .unwrap();
        m
    }

    fn miss(m: &mut Mithril, block: Key) -> Vec<Key> {
        let mut out = Vec::new();
        m.access(&Demand { block, ctx: 0, time_ns: 0, op: Op::Read, class: Class::Miss }, &|_| false, &mut out);
        out
    }

    #[test]
    fn blocks_missed_together_twice_are_associated_after_mining() {
        // Mining once 2 blocks are mature (mining-threshold 4 / min-support 2).
        let cfg = Config { mining_threshold: 4, ..Config::libcachesim() };
        let mut m = shaped(cfg, 1 << 20);
        // 5 and 9 miss side by side twice: both reach min-support, and the
        // second makes the table mine.
        for b in [5, 9, 100, 101, 5, 9] {
            assert!(miss(&mut m, b).is_empty());
        }
        assert_eq!(miss(&mut m, 5), vec![9]);
        assert!(miss(&mut m, 9).is_empty(), "an association goes one way: the earlier block's");
        assert!(miss(&mut m, 100).is_empty(), "associated with nothing");
    }

    #[test]
    fn refuses_parameters_libcachesim_asserts_against() {
        let bad = |cfg: Config| Mithril::new(cfg).err().unwrap().to_string();
        assert!(bad(Config { min_support: 3, max_support: 2, ..Config::libcachesim() }).contains("max-support"));
        assert!(bad(Config { lookahead: 0, ..Config::libcachesim() }).contains("lookahead-range"));
        let mut m = Mithril::new(Config::libcachesim()).unwrap();
        let shape =
            CacheShape { policy: "lru".parse().unwrap(), total_bytes: 1000, prefetch_fraction: 0.0, block_size: 1 };
        assert!(m.shape_cache(&shape).unwrap_err().to_string().contains("too small"));
    }
}

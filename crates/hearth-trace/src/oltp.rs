//! A synthetic OLTP-like block workload: what a database server's buffer
//! pool asks of storage when transactions look rows up through B-tree
//! indexes, update some of them, and now and then scan a range.
//!
//! The parameters are fixed up front (see [`OltpConfig::default`]) and were
//! chosen to resemble TPC-C-style access, not to favour any cache policy:
//! rows are Zipf-popular (alpha 0.8) but hot rows are scattered over the
//! heap, index pages are shared by many rows (so they are hot), 30% of row
//! operations write, and 5% of transactions scan 16–64 consecutive pages.
//! Requests are issued by one client (the database), 4 KiB each.

use hearth_core::Op;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use crate::{Request, SettingError};

const PAGE: u64 = 4096;

#[derive(Clone, Debug)]
pub struct OltpConfig {
    /// Heap (table data) pages.
    pub data_pages: u64,
    pub rows_per_page: u64,
    /// Entries per B-tree page.
    pub index_fanout: u64,
    /// Zipf exponent of row popularity.
    pub row_alpha: f64,
    /// Row lookups per transaction.
    pub ops_per_txn: u32,
    /// Share of row operations that update the row.
    pub write_fraction: f64,
    /// Share of transactions that also scan a page range.
    pub scan_fraction: f64,
    pub seed: u64,
}

impl Default for OltpConfig {
    fn default() -> Self {
        OltpConfig {
            data_pages: 100_000,
            rows_per_page: 40,
            index_fanout: 200,
            row_alpha: 0.8,
            ops_per_txn: 8,
            write_fraction: 0.3,
            scan_fraction: 0.05,
            seed: 42,
        }
    }
}

/// Generates requests forever; take as many as wanted.
pub struct Oltp {
    cfg: OltpConfig,
    rng: Xoshiro256PlusPlus,
    rows: Zipf<f64>,
    /// Pages of the current transaction still to issue.
    pending: Vec<(u64, Op)>,
    /// First page of the index (index pages follow the heap).
    index_base: u64,
    leaf_pages: u64,
    time_ns: u64,
}

impl Oltp {
    pub fn new(cfg: OltpConfig) -> Result<Oltp, SettingError> {
        if cfg.data_pages == 0 || cfg.rows_per_page == 0 || cfg.index_fanout < 2 || cfg.ops_per_txn == 0 {
            return Err(SettingError::Oltp { config: format!("{cfg:?}") });
        }
        let rows = Zipf::new((cfg.data_pages * cfg.rows_per_page) as f64, cfg.row_alpha)
            .map_err(|e| SettingError::Distribution { distribution: "zipf", reason: e.to_string() })?;
        let leaf_pages = (cfg.data_pages * cfg.rows_per_page).div_ceil(cfg.index_fanout);
        Ok(Oltp {
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            rows,
            pending: Vec::new(),
            index_base: cfg.data_pages,
            leaf_pages,
            time_ns: 0,
            cfg,
        })
    }

    /// Pages a transaction touches, in order.
    fn plan_transaction(&mut self) {
        let total_rows = self.cfg.data_pages * self.cfg.rows_per_page;
        let inner_pages = self.leaf_pages.div_ceil(self.cfg.index_fanout);
        for _ in 0..self.cfg.ops_per_txn {
            let rank = self.rows.sample(&mut self.rng) as u64 - 1;
            // Scatter popular rows over the key space (a multiplicative
            // permutation) so hot rows do not share pages by construction.
            let row = rank.wrapping_mul(0x9E37_79B9_7F4A_7C15) % total_rows;
            let leaf = row / self.cfg.index_fanout;
            let inner = leaf / self.cfg.index_fanout;
            // Root, inner node, leaf, then the heap page.
            self.pending.push((self.index_base, Op::Read));
            self.pending.push((self.index_base + 1 + inner, Op::Read));
            self.pending.push((self.index_base + 1 + inner_pages + leaf, Op::Read));
            let page = row / self.cfg.rows_per_page;
            self.pending.push((page, Op::Read));
            if self.rng.random_bool(self.cfg.write_fraction) {
                self.pending.push((page, Op::Write));
            }
        }
        if self.rng.random_bool(self.cfg.scan_fraction) {
            let len = self.rng.random_range(16..=64);
            let start = self.rng.random_range(0..self.cfg.data_pages.saturating_sub(len).max(1));
            self.pending.extend((start..start + len).map(|p| (p, Op::Read)));
        }
        // Issue in order: pop from the back.
        self.pending.reverse();
    }
}

impl Iterator for Oltp {
    type Item = Request;
    fn next(&mut self) -> Option<Request> {
        if self.pending.is_empty() {
            self.plan_transaction();
        }
        let (page, op) = self.pending.pop()?;
        self.time_ns += 10_000;
        Some(Request { time_ns: self.time_ns, client: 0, op, offset: page * PAGE, len: PAGE as u32, next_access: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_skewed_and_index_heavy() {
        let a: Vec<_> = Oltp::new(OltpConfig::default()).unwrap().take(50_000).collect();
        let b: Vec<_> = Oltp::new(OltpConfig::default()).unwrap().take(50_000).collect();
        assert_eq!(a.iter().map(|r| r.offset).collect::<Vec<_>>(), b.iter().map(|r| r.offset).collect::<Vec<_>>());
        let root = OltpConfig::default().data_pages * PAGE;
        let roots = a.iter().filter(|r| r.offset == root).count();
        // Every row lookup starts at the root: about 8 of every ~36 requests.
        assert!(roots > 50_000 / 6 && roots < 50_000 / 3, "{roots}");
        let writes = a.iter().filter(|r| r.op == Op::Write).count();
        assert!(writes > 0 && writes < a.len() / 5);
        assert!(Oltp::new(OltpConfig { index_fanout: 1, ..OltpConfig::default() }).is_err());
    }
}

//! Histograms on log2 buckets: bucket 0 holds 0, bucket k>0 holds [2^(k-1), 2^k).

use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Log2Hist {
    counts: Vec<u64>,
}

impl Log2Hist {
    pub fn bucket_of(&self, v: u64) -> usize {
        (64 - v.leading_zeros()) as usize
    }

    pub fn add(&mut self, v: u64) {
        let b = self.bucket_of(v);
        if self.counts.len() <= b {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
    }

    pub fn count(&self, bucket: usize) -> u64 {
        self.counts.get(bucket).copied().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(label, count)` per bucket up to the last non-empty one.
    pub fn buckets(&self) -> Vec<(String, u64)> {
        self.counts.iter().enumerate().map(|(b, &c)| (Self::label(b), c)).collect()
    }

    /// The smallest value a bucket holds, as a short label ("0", "1", "2", "4", "1k", ...).
    pub fn label(bucket: usize) -> String {
        if bucket == 0 {
            return "0".into();
        }
        let lo = 1u64 << (bucket - 1);
        match lo {
            _ if lo >= 1 << 30 => format!("{}G", lo >> 30),
            _ if lo >= 1 << 20 => format!("{}M", lo >> 20),
            _ if lo >= 1 << 10 => format!("{}k", lo >> 10),
            _ => lo.to_string(),
        }
    }

    pub fn render_text(&self) -> String {
        let total = self.total().max(1);
        let mut s = String::new();
        for (label, c) in self.buckets() {
            if c > 0 {
                let pct = 100.0 * c as f64 / total as f64;
                let bar = "#".repeat((pct / 2.0).round() as usize);
                s.push_str(&format!("  >= {label:>6} {c:>10} {pct:5.1}% {bar}\n"));
            }
        }
        s
    }
}

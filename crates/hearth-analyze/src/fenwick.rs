//! A Fenwick (binary indexed) tree of signed counts: point update and prefix
//! sum in O(log n), which makes exact stack distances O(n log n).

pub struct Fenwick {
    tree: Vec<i64>,
}

impl Fenwick {
    pub fn new(n: usize) -> Self {
        Fenwick { tree: vec![0; n + 1] }
    }

    pub fn add(&mut self, pos: u64, delta: i64) {
        let mut i = pos as usize + 1;
        while i < self.tree.len() {
            self.tree[i] += delta;
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of positions `0..end`.
    pub fn prefix(&self, end: u64) -> u64 {
        let mut i = end as usize;
        let mut sum = 0;
        while i > 0 {
            sum += self.tree[i];
            i -= i & i.wrapping_neg();
        }
        sum as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_match_a_plain_array() {
        let mut f = Fenwick::new(10);
        let mut plain = [0i64; 10];
        for (pos, d) in [(0, 1), (3, 2), (9, 5), (3, -1), (7, 1)] {
            f.add(pos, d);
            plain[pos as usize] += d;
        }
        for end in 0..=10 {
            assert_eq!(f.prefix(end as u64) as i64, plain[..end].iter().sum::<i64>());
        }
    }
}

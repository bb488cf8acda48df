//! A Fenwick (binary indexed) tree of counts: point update and prefix sum
//! in O(log n), which makes exact stack distances O(n log n). Updates are
//! signed; every prefix a caller asks for must be a non-negative total.

pub struct Fenwick {
    /// 1-based: node `i` sums the `i & -i` values ending at position `i - 1`.
    tree: Vec<u64>,
}

impl Fenwick {
    /// `n` positions, all 0.
    pub fn new(n: usize) -> Self {
        Fenwick { tree: vec![0; n + 1] }
    }

    /// Positions holding `values`, in order, built in linear time.
    pub fn from_values(values: impl IntoIterator<Item = u64>) -> Self {
        let mut tree = vec![0];
        tree.extend(values);
        // Push each node's sum to its parent.
        for i in 1..tree.len() {
            let parent = i + (i & i.wrapping_neg());
            if parent < tree.len() {
                tree[parent] = tree[parent].wrapping_add(tree[i]);
            }
        }
        Fenwick { tree }
    }

    pub fn add(&mut self, pos: u64, delta: i64) {
        let mut i = pos as usize + 1;
        while i < self.tree.len() {
            self.tree[i] = self.tree[i].wrapping_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of positions `0..end`.
    pub fn prefix(&self, end: u64) -> u64 {
        let (mut i, mut sum) = (end as usize, 0u64);
        while i > 0 {
            sum = sum.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        sum
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

    #[test]
    fn a_tree_built_from_values_equals_one_added_to() {
        let values = [4u64, 0, 7, 1, 1, 9, 3, 0, 2, 5, 8];
        let built = Fenwick::from_values(values);
        let mut added = Fenwick::new(values.len());
        for (pos, &v) in values.iter().enumerate() {
            added.add(pos as u64, v as i64);
        }
        for end in 0..=values.len() as u64 {
            assert_eq!(built.prefix(end), added.prefix(end));
            assert_eq!(built.prefix(end), values[..end as usize].iter().sum::<u64>());
        }
    }
}

//! BORG-style correlations: an online directed graph over the interleaved
//! stream, with an edge `a -> b` whenever `b` is requested within `window`
//! requests after `a`. An edge's weight is its frequency, or (`by_time`)
//! its frequency divided by the mean time between `a` and `b`, which favours
//! tight correlations. Each block keeps at most [`EDGES`] out-edges; a new
//! edge replaces the least frequent one.
//!
//! On a miss or promote of `b`, the prefetcher follows a correlation
//! chain: the heaviest edge out of `b`, then the heaviest out of that block,
//! `depth` steps ahead, skipping blocks already cached or already chosen.
//! Edges seen only once are noise and are not followed.

use hearth_core::{Key, KeyMap};

use crate::{is_trigger, Demand, Prefetcher};

/// Out-edges kept per block.
pub const EDGES: usize = 8;

#[derive(Clone, Copy, Debug, Default)]
struct Edge {
    to: Key,
    count: u32,
    total_gap_ns: u64,
}

impl Edge {
    fn weight(&self, by_time: bool) -> f64 {
        if by_time {
            // count / mean gap = count^2 / total gap (1 ns floor).
            let count = f64::from(self.count);
            count * count / (self.total_gap_ns.max(1) as f64)
        } else {
            f64::from(self.count)
        }
    }
}

pub struct Borg {
    by_time: bool,
    depth: usize,
    /// The last `window` (block, time) requests, oldest first.
    recent: Vec<(Key, u64)>,
    window: usize,
    /// Slot of each block with out-edges; slot `i` owns
    /// `edges[i * EDGES ..][.. lens[i]]` (flat, so a new block costs no
    /// allocation of its own).
    slots: KeyMap<u32>,
    edges: Vec<Edge>,
    lens: Vec<u8>,
    edge_count: usize,
}

impl Borg {
    pub fn new(by_time: bool, depth: usize, window: usize) -> Self {
        Borg {
            by_time,
            depth,
            recent: Vec::with_capacity(window),
            window: window.max(1),
            slots: KeyMap::default(),
            edges: Vec::new(),
            lens: Vec::new(),
            edge_count: 0,
        }
    }

    fn out_edges(&self, from: Key) -> &[Edge] {
        match self.slots.get(&from) {
            Some(&i) => &self.edges[i as usize * EDGES..][..usize::from(self.lens[i as usize])],
            None => &[],
        }
    }

    fn record(&mut self, from: Key, to: Key, gap_ns: u64) {
        let next = self.lens.len() as u32;
        let i = *self.slots.entry(from).or_insert(next) as usize;
        if i == self.lens.len() {
            self.lens.push(0);
            self.edges.resize(self.edges.len() + EDGES, Edge::default());
        }
        let len = usize::from(self.lens[i]);
        let out = &mut self.edges[i * EDGES..][..EDGES];
        if let Some(e) = out[..len].iter_mut().find(|e| e.to == to) {
            e.count += 1;
            e.total_gap_ns += gap_ns;
            return;
        }
        let edge = Edge { to, count: 1, total_gap_ns: gap_ns };
        if len < EDGES {
            out[len] = edge;
            self.lens[i] += 1;
            self.edge_count += 1;
        } else if let Some(weakest) = out.iter_mut().min_by_key(|e| e.count) {
            *weakest = edge;
        }
    }

    fn heaviest(&self, from: Key, skip: &dyn Fn(Key) -> bool) -> Option<Key> {
        let by_time = self.by_time;
        self.out_edges(from)
            .iter()
            .filter(|e| e.count >= 2 && !skip(e.to))
            .max_by(|x, y| x.weight(by_time).total_cmp(&y.weight(by_time)).then(y.to.cmp(&x.to)))
            .map(|e| e.to)
    }
}

impl Prefetcher for Borg {
    fn name(&self) -> String {
        if self.by_time { "BORG(freq/time)" } else { "BORG" }.into()
    }
    fn access(&mut self, d: &Demand, cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        let b = d.block;
        let recent = std::mem::take(&mut self.recent);
        for &(a, t) in &recent {
            if a != b {
                self.record(a, b, d.time_ns.saturating_sub(t));
            }
        }
        self.recent = recent;
        if self.recent.len() == self.window {
            self.recent.remove(0);
        }
        self.recent.push((b, d.time_ns));
        if !is_trigger(d.class) {
            return;
        }
        let start = out.len();
        let mut at = b;
        for _ in 0..self.depth {
            let chosen = &out[start..];
            let skip = |k: Key| k == b || cached(k) || chosen.contains(&k);
            match self.heaviest(at, &skip) {
                Some(next) => {
                    out.push(next);
                    at = next;
                }
                None => break,
            }
        }
    }
    fn rule_count(&self) -> usize {
        self.edge_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;
    use hearth_core::Op;

    fn step(p: &mut Borg, b: u64, t: u64) -> Vec<Key> {
        let mut out = Vec::new();
        p.access(&Demand { block: b, ctx: 0, time_ns: t, op: Op::Read, class: Class::Miss }, &|_| false, &mut out);
        out
    }

    #[test]
    fn chains_follow_the_heaviest_edges() {
        let mut g = Borg::new(false, 3, 1);
        // 1 2 3 4 twice, 1 9 once.
        for (i, b) in [1, 2, 3, 4, 1, 2, 3, 4, 1, 9].into_iter().enumerate() {
            step(&mut g, b, i as u64);
        }
        assert_eq!(step(&mut g, 1, 20), vec![2, 3, 4]);
        assert_eq!(g.rule_count(), 6, "edges 1-2 2-3 3-4 4-1 1-9 9-1");
    }

    #[test]
    fn time_weighting_prefers_tight_successors() {
        let mut g = Borg::new(true, 1, 2);
        // After 1: block 2 follows 1 ms later, block 3 after 100 ms, both
        // twice; 2 is the tighter correlation.
        for round in 0..2u64 {
            let t = round * 1_000_000_000;
            step(&mut g, 1, t);
            step(&mut g, 2, t + 1_000_000);
            step(&mut g, 3, t + 100_000_000);
        }
        assert_eq!(step(&mut g, 1, 5_000_000_000), vec![2]);
        let mut by_freq = Borg::new(false, 1, 2);
        for b in [1, 3, 2, 1, 3, 2, 1, 3] {
            step(&mut by_freq, b, 0);
        }
        assert_eq!(step(&mut by_freq, 1, 0), vec![3], "3 follows 1 thrice, 2 twice");
    }
}

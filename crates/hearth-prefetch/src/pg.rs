//! PG: the probability graph (Griffioen and Appleton, 1994) as libCacheSim
//! 0.3.5 runs it. Each request adds an arc from the block requested
//! `lookahead-range` requests ago to each of the requests since, counted;
//! a block's out-count grows by one per arc it could have added. On a
//! request for block `a`, every successor `b` with count(a→b) / out-count(a)
//! above `prefetch-threshold` is prefetched. The graph stops growing (new
//! nodes and arcs; counts still grow) once it holds `max-metadata-size` x
//! `block-size` x the cache's bytes, at 32 bytes a node or arc.
//!
//! Successors are taken from a per-node binary max-heap by count, popped
//! while above the threshold, and the heap is kept exactly as libCacheSim's
//! is, quirks included, so that the prefetches agree with it: a count that
//! grows is only sifted down (never up), the first popped successor below
//! the threshold is not pushed back (it is never prefetched again, though
//! its count still grows, sifting whichever arc holds its old slot), and
//! the successors taken are pushed back least likely first. So a likely
//! successor can hide below an unlikely one; the paper takes them all.
//! Blocks are prefetched least likely first (the likeliest lands at the
//! MRU end). Block 0 stands for "no request yet", as there.

use hearth_core::{Key, KeyMap};

use crate::{CacheShape, Demand, PrefetchError, Prefetcher};

/// Metadata bytes libCacheSim counts for a node or an arc.
const ENTRY_BYTES: u64 = 8 + 8 * 3;

#[derive(Clone, Copy)]
struct Arc {
    to: Key,
    count: u64,
    /// Slot in the heap, as last set (stale once popped for good).
    slot: usize,
}

/// One block's successors, and libCacheSim's heap over them.
#[derive(Default)]
struct Node {
    arcs: Vec<Arc>,
    by_block: KeyMap<u32>,
    /// Arc indices; slot 0 unused; slots at or past `len` keep what they
    /// last held, as libCacheSim's array does.
    heap: Vec<u32>,
    len: usize,
    out_count: u64,
}

impl Node {
    fn count_at(&self, slot: usize) -> u64 {
        self.arcs[self.heap[slot] as usize].count
    }

    fn place(&mut self, slot: usize, arc: u32) {
        self.heap[slot] = arc;
        self.arcs[arc as usize].slot = slot;
    }

    fn bubble_up(&mut self, mut slot: usize) {
        let moving = self.heap[slot];
        let count = self.arcs[moving as usize].count;
        while slot > 1 && self.count_at(slot / 2) < count {
            self.place(slot, self.heap[slot / 2]);
            slot /= 2;
        }
        self.place(slot, moving);
    }

    fn larger_child(&self, slot: usize) -> Option<usize> {
        let left = 2 * slot;
        if left >= self.len {
            return None;
        }
        Some(if left + 1 < self.len && self.count_at(left) < self.count_at(left + 1) { left + 1 } else { left })
    }

    fn sift_down(&mut self, mut slot: usize) {
        let moving = self.heap[slot];
        let count = self.arcs[moving as usize].count;
        while let Some(child) = self.larger_child(slot).filter(|&c| count < self.count_at(c)) {
            self.place(slot, self.heap[child]);
            slot = child;
        }
        self.place(slot, moving);
    }

    fn push(&mut self, arc: u32) {
        let slot = self.len;
        self.len += 1;
        if slot == self.heap.len() {
            self.heap.push(arc);
        }
        self.place(slot, arc);
        self.bubble_up(slot);
    }

    fn pop(&mut self) -> Option<u32> {
        if self.len <= 1 {
            return None;
        }
        let top = self.heap[1];
        self.len -= 1;
        self.heap[1] = self.heap[self.len];
        self.sift_down(1);
        Some(top)
    }
}

pub struct Pg {
    lookahead: usize,
    block_size: u64,
    max_metadata_share: f64,
    threshold: f64,
    /// Bytes the graph may reach; none until the cache's size is known.
    max_metadata: u64,
    metadata: u64,
    full: bool,
    graph: KeyMap<Node>,
    /// The last `lookahead` requests, 0 where none yet; `next` is the oldest.
    recent: Vec<Key>,
    next: usize,
    taken: Vec<u32>,
}

impl Pg {
    pub fn new(lookahead: usize, block_size: u64, max_metadata: f64, threshold: f64) -> Result<Pg, PrefetchError> {
        let range = |ok: bool, reason: &str| if ok { Ok(()) } else { Err(PrefetchError::range("pg", reason)) };
        range((1..=100).contains(&lookahead), "lookahead-range must lie in 1..=100")?;
        range(block_size > 0, "block-size must be at least 1")?;
        range(max_metadata > 0.0 && max_metadata < 1.0, "max-metadata-size must lie strictly between 0 and 1")?;
        range(threshold > 0.0 && threshold < 1.0, "prefetch-threshold must lie strictly between 0 and 1")?;
        Ok(Pg {
            lookahead,
            block_size,
            max_metadata_share: max_metadata,
            threshold,
            max_metadata: u64::MAX,
            metadata: 0,
            full: false,
            graph: KeyMap::default(),
            recent: vec![0; lookahead],
            next: 0,
            taken: Vec::new(),
        })
    }

    /// Adds the arcs from the request `lookahead` ago to every one since.
    fn learn(&mut self, block: Key) {
        let from = std::mem::replace(&mut self.recent[self.next], block);
        self.next = (self.next + 1) % self.lookahead;
        if from == 0 {
            return;
        }
        if !self.graph.contains_key(&from) {
            if self.full {
                return;
            }
            self.graph.insert(from, Node { heap: vec![0], len: 1, ..Node::default() });
            self.metadata += ENTRY_BYTES;
        }
        let node = self.graph.get_mut(&from).expect("inserted above");
        for &to in &self.recent {
            node.out_count += 1;
            if to == 0 {
                break;
            }
            if let Some(&arc) = node.by_block.get(&to) {
                node.arcs[arc as usize].count += 1;
                node.sift_down(node.arcs[arc as usize].slot);
            } else if self.full {
                return;
            } else {
                let arc = node.arcs.len() as u32;
                node.arcs.push(Arc { to, count: 1, slot: 0 });
                node.by_block.insert(to, arc);
                node.push(arc);
                self.metadata += ENTRY_BYTES;
            }
        }
        if self.metadata >= self.max_metadata {
            self.full = true;
        }
    }
}

impl Prefetcher for Pg {
    fn name(&self) -> String {
        "PG".into()
    }

    fn shape_cache(&mut self, shape: &CacheShape) -> Result<(), PrefetchError> {
        self.max_metadata = (self.block_size as f64 * shape.total_bytes as f64 * self.max_metadata_share) as u64;
        Ok(())
    }

    fn access(&mut self, d: &Demand, _cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        self.learn(d.block);
        let Some(node) = self.graph.get_mut(&d.block) else { return };
        self.taken.clear();
        while let Some(arc) = node.pop() {
            if node.arcs[arc as usize].count as f64 / node.out_count as f64 > self.threshold {
                self.taken.push(arc);
            } else {
                break;
            }
        }
        // Every one, cached or not: an earlier prefetch of the list may
        // evict a later one, which is then prefetched again.
        for &arc in self.taken.iter().rev() {
            out.push(node.arcs[arc as usize].to);
            node.push(arc);
        }
    }

    fn rule_count(&self) -> usize {
        self.graph.values().map(|n| n.arcs.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;
    use hearth_core::Op;

    fn feed(p: &mut Pg, blocks: &[Key]) -> Vec<Key> {
        let mut out = Vec::new();
        for &block in blocks {
            out.clear();
            let d = Demand { block, ctx: 0, time_ns: 0, op: Op::Read, class: Class::Miss };
            p.access(&d, &|_| false, &mut out);
        }
        out
    }

    #[test]
    fn prefetches_successors_above_the_threshold_in_libcachesims_heap_order() {
        // Lookahead 2: a request adds arcs from the one two back to the last two.
        let mut p = Pg::new(2, 1, 0.5, 0.3).unwrap();
        // 1 is followed by 2 then 3 three times, once by 4 then 3.
        let got = feed(&mut p, &[1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 4, 3, 1]);
        // Four times 1 was two back, each adding two arcs.
        let node = &p.graph[&1];
        let count = |to: Key| node.arcs[node.by_block[&to] as usize].count;
        assert_eq!((count(2), count(3), count(4)), (3, 4, 1));
        assert_eq!(node.out_count, 8);
        // 3 (4/8) and 2 (3/8) pass 0.3, 4 (1/8) does not. The requests for 1
        // before popped and pushed back its arcs, leaving 2 on top and 3 a
        // leaf whose last increment only sifted down: 2 pops first, so 3 is
        // prefetched first and 2 lands at the MRU end.
        assert_eq!(got, vec![3, 2]);
    }

    #[test]
    fn a_count_that_grows_only_sinks_as_in_libcachesim() {
        let mut n = Node { heap: vec![0], len: 1, ..Node::default() };
        for (to, count) in [(10, 5), (11, 1), (12, 1)] {
            n.arcs.push(Arc { to, count, slot: 0 });
            n.push(n.arcs.len() as u32 - 1);
        }
        // 12 grows past 10 but is not sifted up: 10 still pops first.
        n.arcs[2].count = 9;
        n.sift_down(n.arcs[2].slot);
        assert_eq!(n.pop(), Some(0));
        assert_eq!(n.pop(), Some(2));
    }

    #[test]
    fn the_graph_stops_growing_at_its_metadata_budget() {
        let mut p = Pg::new(1, 1, 0.5, 0.1).unwrap();
        p.shape_cache(&CacheShape {
            policy: "lru".parse().unwrap(),
            total_bytes: 200,
            prefetch_fraction: 0.0,
            block_size: 1,
        })
        .unwrap();
        // 100 bytes: node 1 and arc 1->2 (64), then node 2 and arc 2->3 (128): full.
        feed(&mut p, &[1, 2, 3, 4, 5]);
        assert_eq!((p.graph.len(), p.rule_count()), (2, 2));
        assert!(p.full);
    }
}

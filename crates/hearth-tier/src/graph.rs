//! The access graph of a training trace, and the partition lists and
//! prefetch candidates drawn from it.
//!
//! Vertices are extents, named by their first block (the length is the
//! longest seen starting there). A directed edge `a -> b` counts how often
//! `b` started one of the `window` requests after a request starting at `a`:
//! requests issued close together are correlated, whatever their distance
//! on disk.

use hearth_core::{key_map, KeyMap};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::extent::Extent;
use crate::TierError;

/// Successors kept per vertex, strongest first; prefetching never looks
/// further down the list than a few entries.
const SUCCESSORS_KEPT: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Successor {
    pub start: u64,
    pub blocks: u32,
    pub weight: u32,
}

#[derive(Debug, Default)]
pub struct AccessGraph {
    successors: KeyMap<Vec<Successor>>,
    /// Per vertex: its extent length and the total weight of its edges, in and out.
    vertices: KeyMap<(u32, u64)>,
}

impl AccessGraph {
    pub fn build(extents: &[Extent], window: usize) -> AccessGraph {
        let mut lengths: KeyMap<u32> = key_map(extents.len() / 4);
        for e in extents {
            let len = lengths.entry(e.start).or_insert(0);
            *len = (*len).max(e.blocks);
        }
        let mut edges: FxHashMap<(u64, u64), u32> = FxHashMap::default();
        for (i, from) in extents.iter().enumerate() {
            for to in extents.iter().skip(i + 1).take(window) {
                if to.start != from.start {
                    *edges.entry((from.start, to.start)).or_insert(0) += 1;
                }
            }
        }
        let mut graph = AccessGraph { successors: key_map(lengths.len()), vertices: key_map(lengths.len()) };
        for (&start, &blocks) in &lengths {
            graph.vertices.insert(start, (blocks, 0));
        }
        for (&(from, to), &weight) in &edges {
            graph.vertices.get_mut(&from).expect("vertex").1 += u64::from(weight);
            graph.vertices.get_mut(&to).expect("vertex").1 += u64::from(weight);
            graph.successors.entry(from).or_default().push(Successor { start: to, blocks: lengths[&to], weight });
        }
        for list in graph.successors.values_mut() {
            list.sort_unstable_by_key(|s| (std::cmp::Reverse(s.weight), s.start));
            list.truncate(SUCCESSORS_KEPT);
        }
        graph
    }

    /// The strongest successors of the extent starting at `start`.
    pub fn successors(&self, start: u64) -> &[Successor] {
        self.successors.get(&start).map_or(&[], Vec::as_slice)
    }

    /// Vertices as `(start, blocks, weighted degree)`, most connected first.
    pub fn by_connectivity(&self) -> Vec<(u64, u32, u64)> {
        let mut v: Vec<_> = self.vertices.iter().map(|(&start, &(blocks, degree))| (start, blocks, degree)).collect();
        v.sort_unstable_by_key(|&(start, _, degree)| (std::cmp::Reverse(degree), start));
        v
    }
}

/// How to choose the blocks for the fast device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitioner {
    /// The most often accessed blocks.
    Frequency,
    /// BORG-style: the extents with the most connected vertices in the
    /// access graph, whole, until the capacity is filled (then by frequency).
    Connectivity,
}

impl std::str::FromStr for Partitioner {
    type Err = TierError;
    fn from_str(s: &str) -> Result<Self, TierError> {
        match s.to_ascii_lowercase().as_str() {
            "freq" | "frequency" => Ok(Partitioner::Frequency),
            "borg" | "connectivity" => Ok(Partitioner::Connectivity),
            _ => Err(TierError::UnknownPartitioner { name: s.to_string() }),
        }
    }
}

/// Blocks by descending access count in `extents` (ties: lower block first).
fn by_frequency(extents: &[Extent]) -> Vec<u64> {
    let mut counts: KeyMap<u64> = key_map(extents.len());
    for e in extents {
        for block in e.block_range() {
            *counts.entry(block).or_insert(0) += 1;
        }
    }
    let mut blocks: Vec<_> = counts.into_iter().collect();
    blocks.sort_unstable_by_key(|&(block, count)| (std::cmp::Reverse(count), block));
    blocks.into_iter().map(|(block, _)| block).collect()
}

/// At most `capacity_blocks` blocks for the fast device, chosen from the
/// training extents. `graph` must have been built from the same extents
/// (it is only read for [`Partitioner::Connectivity`]).
pub fn partition(method: Partitioner, training: &[Extent], graph: &AccessGraph, capacity_blocks: u64) -> Vec<u64> {
    let cap = capacity_blocks as usize;
    let mut chosen: Vec<u64> = Vec::with_capacity(cap.min(1 << 24));
    let mut seen = FxHashSet::default();
    if method == Partitioner::Connectivity {
        'vertices: for (start, blocks, _) in graph.by_connectivity() {
            for block in start..start + u64::from(blocks) {
                if chosen.len() == cap {
                    break 'vertices;
                }
                if seen.insert(block) {
                    chosen.push(block);
                }
            }
        }
    }
    for block in by_frequency(training) {
        if chosen.len() == cap {
            break;
        }
        if seen.insert(block) {
            chosen.push(block);
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(start: u64, blocks: u32) -> Extent {
        Extent { time_ns: 0, start, blocks, write: false }
    }

    #[test]
    fn edges_count_followers_within_the_window() {
        // 100 is followed by 200 twice and by 300 once within a window of 1.
        let trace = [ext(100, 2), ext(200, 1), ext(100, 2), ext(200, 1), ext(100, 2), ext(300, 4)];
        let g = AccessGraph::build(&trace, 1);
        assert_eq!(
            g.successors(100),
            &[Successor { start: 200, blocks: 1, weight: 2 }, Successor { start: 300, blocks: 4, weight: 1 }]
        );
        assert_eq!(g.successors(300), &[]);
        // 100: out 3 + in 2; 200: in 2 + out 2; 300: in 1.
        assert_eq!(g.by_connectivity(), vec![(100, 2, 5), (200, 1, 4), (300, 4, 1)]);
        // A window of 2 also links each request to the one after next.
        let g2 = AccessGraph::build(&trace, 2);
        assert_eq!(
            g2.successors(200).iter().map(|s| (s.start, s.weight)).collect::<Vec<_>>(),
            vec![(100, 2), (300, 1)]
        );
    }

    #[test]
    fn partitions_fill_the_capacity_in_their_order() {
        // Block 7 is hot but isolated; 10..12 and 20 alternate (connected).
        let trace = [ext(7, 1), ext(7, 1), ext(7, 1), ext(10, 2), ext(20, 1), ext(10, 2), ext(20, 1)];
        let g = AccessGraph::build(&trace, 1);
        assert_eq!(partition(Partitioner::Frequency, &trace, &g, 2), vec![7, 10]);
        // Connectivity: 10 (degree 4: 2 out, 2 in) leads, whole extent first.
        let borg = partition(Partitioner::Connectivity, &trace, &g, 3);
        assert_eq!(borg, vec![10, 11, 20]);
        // More room than the graph offers: the rest by frequency, no repeats.
        let all = partition(Partitioner::Connectivity, &trace, &g, 10);
        assert_eq!(all.len(), 4);
        assert!(all.contains(&7));
    }
}

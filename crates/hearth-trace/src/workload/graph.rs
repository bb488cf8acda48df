//! A property-graph store (a social graph in a Neo4j-like layout): fixed-size
//! node records, each node's adjacency list as a contiguous run of
//! relationship pages (CSR order), a property page per few nodes, and a
//! B-tree name index for finding a query's start node. Clients run
//! traversals as a graph service's clients do (TAO-style association
//! queries, remote Gremlin steps): one request per hop, so a query is a
//! sequence of contexts from one client, each tagged with its template and
//! step. Its shape differs from the other models: which blocks a step reads
//! depends on what the previous step found (the frontier), a hub's list
//! spans many pages, and two queries from the same start read the same
//! pages only while their frontiers agree.
//!
//! Contexts (class names are `template_step`): `profile`; `feed`;
//! `fof_start`, `fof_expand`, `fof_rank` (friends of friends);
//! `path_start`, `path_expand1`, `path_expand2`, `path_expand3` (shortest
//! path by bidirectional BFS); `add_friend`.
//!
//! Every parameter, fixed before any prefetcher ran on this workload:
//! - [`NODES`] = 200,000 people. Each node draws a degree `d` from a power
//!   law with exponent [`DEGREE_EXPONENT`] = 2.5 and minimum
//!   [`MIN_DEGREE`] = 4 (capped at [`MAX_DEGREE`] = 2,000) and makes
//!   `ceil(d / 2)` friendships: with probability [`LOCAL`] = 0.6 to a
//!   uniform member of its community ([`COMMUNITY`] = 500 members, scattered
//!   over node ids), else to a node picked by Zipf with exponent
//!   [`POPULAR`] = 0.8 over fixed scattered ranks (celebrities). Edges are
//!   undirected, without duplicates or self-loops. The graph is fixed (its
//!   own seed); the workload's seed varies only the queries.
//! - Layout: [`NODES_PER_BLOCK`] = 64 node records to a block (node id
//!   order); adjacency lists in node id order, each sorted by neighbour id,
//!   [`EDGES_PER_BLOCK`] = 256 entries (16 B) to a block; properties
//!   [`PROPS_PER_BLOCK`] = 8 nodes to a block; the name index a B-tree over
//!   a fixed scattered name order of the nodes.
//! - Start nodes are picked by Zipf with exponent [`START_ZIPF`] = 0.8 over
//!   fixed scattered ranks (other ranks than the celebrities').
//! - Templates (weight, percent): `profile` 25 (name lookup, node record,
//!   property block, first adjacency block, then the node records of the
//!   first [`PAGE`] = 10 friends); `feed` 20 (name lookup, node record, every
//!   adjacency block, then the property blocks of the first 20 friends);
//!   friends of friends 25: `fof_start` (name lookup, node record, every
//!   adjacency block), `fof_expand` (of the first [`FANOUT`] = 10 friends:
//!   node record and first adjacency block), `fof_rank` (the [`PAGE`] 2-hop
//!   nodes seen most often in those blocks, ties by first seen: node record
//!   and property block); shortest path 15: `path_start` (name lookups and
//!   node records of both ends; the target, with probability 0.5, the end of
//!   a 2-3 step random walk from the source, else a new pick), then up to 3
//!   `path_expand{1,2,3}` steps, each expanding the smaller frontier (the
//!   source's on a tie) by its first [`FRONTIER`] = 20 nodes: node record and
//!   every adjacency block of each; the new frontier is the unvisited
//!   neighbours; when the two sides meet, the meeting node's property block
//!   is read and the query ends; `add_friend` 15 (name lookups and node
//!   records of two start picks, then both nodes' last adjacency blocks and
//!   node records written; the edge is recorded in place and the graph does
//!   not change).
//! - A client runs the steps of its query as consecutive contexts; only a
//!   query's first step is drawn from the mix. Timing is the shared
//!   [`super::TIMING`] (a client thinks between the steps of a query too).

use std::collections::{HashMap, HashSet, VecDeque};

use hearth_core::Op;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use super::{btree_path, region, scatter, Model};

pub const NODES: u64 = 200_000;
pub const DEGREE_EXPONENT: f64 = 2.5;
pub const MIN_DEGREE: f64 = 4.0;
pub const MAX_DEGREE: f64 = 2_000.0;
pub const LOCAL: f64 = 0.6;
pub const COMMUNITY: u64 = 500;
pub const POPULAR: f64 = 0.8;
pub const NODES_PER_BLOCK: u64 = 64;
pub const EDGES_PER_BLOCK: u64 = 256;
pub const PROPS_PER_BLOCK: u64 = 8;
pub const START_ZIPF: f64 = 0.8;
pub const PAGE: usize = 10;
pub const FANOUT: usize = 10;
pub const FRONTIER: usize = 20;
/// Friends whose property blocks a `feed` reads.
const FEED: usize = 20;
const PATH_STEPS: usize = 3;
/// The graph's own seed: the same graph for every workload seed.
const GRAPH_SEED: u64 = 0x6EA94;

/// Regions of the store.
const NODE_STORE: u32 = 0;
const ADJACENCY: u32 = 1;
const PROPERTIES: u32 = 2;
const NAME_INDEX: u32 = 3;

const TEMPLATES: [(&str, f64); 10] = [
    ("profile", 25.0),
    ("feed", 20.0),
    ("fof_start", 25.0),
    ("fof_expand", 0.0),
    ("fof_rank", 0.0),
    ("path_start", 15.0),
    ("path_expand1", 0.0),
    ("path_expand2", 0.0),
    ("path_expand3", 0.0),
    ("add_friend", 15.0),
];

fn class(name: &str) -> usize {
    TEMPLATES.iter().position(|t| t.0 == name).expect("a template of this model")
}

/// A client's query between its steps.
#[derive(Clone, Debug)]
enum Query {
    /// Friends of friends, after `fof_start` (`friends`) or `fof_expand`
    /// (`seen`: 2-hop nodes in first-seen order with their counts).
    Fof { start: u32, friends: Vec<u32>, seen: Vec<(u32, u32)> },
    /// Bidirectional BFS: per side, the frontier and the visited set; the
    /// next expand step.
    Path { frontier: [Vec<u32>; 2], visited: [HashSet<u32>; 2], step: usize },
}

pub(crate) struct Graph {
    /// CSR: node `u`'s neighbours are `adjacency[offsets[u]..offsets[u + 1]]`.
    offsets: Vec<u64>,
    adjacency: Vec<u32>,
    starts: Zipf<f64>,
    /// Each client's unfinished query.
    queries: HashMap<u32, Query>,
}

fn push(out: &mut VecDeque<(Op, u64)>, op: Op, block: u64) {
    if out.back() != Some(&(op, block)) {
        out.push_back((op, block));
    }
}

impl Graph {
    pub(crate) fn new() -> Graph {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(GRAPH_SEED);
        let popular = Zipf::new(NODES as f64, POPULAR).expect("NODES >= 1 and a positive exponent");
        // Community c's members are the nodes at positions c * COMMUNITY.. of a scattered order.
        let mut by_position = vec![0u32; NODES as usize];
        for v in 0..NODES {
            by_position[scatter(v, NODES, 80) as usize] = v as u32;
        }
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for u in 0..NODES {
            let uniform: f64 = rng.random_range(f64::EPSILON..1.0);
            let degree = (MIN_DEGREE * uniform.powf(-1.0 / (DEGREE_EXPONENT - 1.0))).min(MAX_DEGREE);
            let community = scatter(u, NODES, 80) / COMMUNITY;
            for _ in 0..(degree / 2.0).ceil() as u64 {
                let v = if rng.random_bool(LOCAL) {
                    let member = (community * COMMUNITY + rng.random_range(0..COMMUNITY)).min(NODES - 1);
                    u64::from(by_position[member as usize])
                } else {
                    let rank = (popular.sample(&mut rng) as u64).clamp(1, NODES) - 1;
                    scatter(rank, NODES, 81)
                };
                if v != u {
                    edges.push((u as u32, v as u32));
                    edges.push((v as u32, u as u32));
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        let mut offsets = vec![0u64; NODES as usize + 1];
        for &(u, _) in &edges {
            offsets[u as usize + 1] += 1;
        }
        for u in 0..NODES as usize {
            offsets[u + 1] += offsets[u];
        }
        Graph {
            offsets,
            adjacency: edges.into_iter().map(|e| e.1).collect(),
            starts: Zipf::new(NODES as f64, START_ZIPF).expect("NODES >= 1 and a positive exponent"),
            queries: HashMap::new(),
        }
    }

    fn neighbours(&self, u: u32) -> &[u32] {
        &self.adjacency[self.offsets[u as usize] as usize..self.offsets[u as usize + 1] as usize]
    }

    fn pick(&self, rng: &mut Xoshiro256PlusPlus) -> u32 {
        let rank = (self.starts.sample(rng) as u64).clamp(1, NODES) - 1;
        scatter(rank, NODES, 82) as u32
    }

    fn node_block(u: u32) -> u64 {
        region(0, NODE_STORE) + u64::from(u) / NODES_PER_BLOCK
    }
    fn property_block(u: u32) -> u64 {
        region(0, PROPERTIES) + u64::from(u) / PROPS_PER_BLOCK
    }
    /// The adjacency blocks of `u`'s list, first to last (none for no friends).
    fn adjacency_blocks(&self, u: u32) -> std::ops::Range<u64> {
        let (first, end) = (self.offsets[u as usize], self.offsets[u as usize + 1]);
        let base = region(0, ADJACENCY);
        if first == end {
            return base..base;
        }
        base + first / EDGES_PER_BLOCK..base + (end - 1) / EDGES_PER_BLOCK + 1
    }

    /// The name-index lookup of `u`, then its node record.
    fn lookup(u: u32, out: &mut VecDeque<(Op, u64)>) {
        let name = scatter(u64::from(u), NODES, 83);
        btree_path(region(0, NAME_INDEX), name, name, Op::Read, out);
        push(out, Op::Read, Self::node_block(u));
    }

    /// Node record and every adjacency block of `u`.
    fn expand(&self, u: u32, out: &mut VecDeque<(Op, u64)>) {
        push(out, Op::Read, Self::node_block(u));
        for b in self.adjacency_blocks(u) {
            push(out, Op::Read, b);
        }
    }

    fn random_walk(&self, from: u32, steps: u32, rng: &mut Xoshiro256PlusPlus) -> u32 {
        let mut u = from;
        for _ in 0..steps {
            let n = self.neighbours(u);
            if n.is_empty() {
                break;
            }
            u = n[rng.random_range(0..n.len())];
        }
        u
    }

    fn fof_expand(&self, friends: &[u32], start: u32, out: &mut VecDeque<(Op, u64)>) -> Vec<(u32, u32)> {
        let known: HashSet<u32> = friends.iter().copied().chain([start]).collect();
        let mut seen: Vec<(u32, u32)> = Vec::new();
        let mut at: HashMap<u32, usize> = HashMap::new();
        for &f in friends.iter().take(FANOUT) {
            push(out, Op::Read, Self::node_block(f));
            let blocks = self.adjacency_blocks(f);
            if blocks.is_empty() {
                continue;
            }
            push(out, Op::Read, blocks.start);
            // The entries of the first block only: what this step read.
            let first_block_end =
                ((self.offsets[f as usize] / EDGES_PER_BLOCK + 1) * EDGES_PER_BLOCK).min(self.offsets[f as usize + 1]);
            let first = &self.adjacency[self.offsets[f as usize] as usize..first_block_end as usize];
            for &v in first.iter().filter(|v| !known.contains(v)) {
                let i = *at.entry(v).or_insert_with(|| {
                    seen.push((v, 0));
                    seen.len() - 1
                });
                seen[i].1 += 1;
            }
        }
        seen
    }

    /// One `path_expand` step; returns the query if it goes on.
    fn path_expand(
        &self,
        mut frontier: [Vec<u32>; 2],
        mut visited: [HashSet<u32>; 2],
        step: usize,
        out: &mut VecDeque<(Op, u64)>,
    ) -> Option<Query> {
        let side = usize::from(frontier[1].len() < frontier[0].len());
        let mut next = Vec::new();
        for &u in frontier[side].iter().take(FRONTIER) {
            self.expand(u, out);
            for &v in self.neighbours(u) {
                if visited[1 - side].contains(&v) {
                    push(out, Op::Read, Self::property_block(v));
                    return None;
                }
                if visited[side].insert(v) {
                    next.push(v);
                }
            }
        }
        frontier[side] = next;
        (step < PATH_STEPS && !frontier[side].is_empty()).then_some(Query::Path { frontier, visited, step: step + 1 })
    }
}

impl Model for Graph {
    fn templates(&self) -> Vec<(&'static str, f64)> {
        TEMPLATES.to_vec()
    }

    fn continuation(&mut self, client: u32) -> Option<usize> {
        match self.queries.get(&client)? {
            Query::Fof { seen, .. } if seen.is_empty() => Some(class("fof_expand")),
            Query::Fof { .. } => Some(class("fof_rank")),
            Query::Path { step, .. } => Some(class("path_start") + step),
        }
    }

    fn execute(&mut self, class: usize, client: u32, rng: &mut Xoshiro256PlusPlus, out: &mut VecDeque<(Op, u64)>) {
        let name = TEMPLATES[class].0;
        let query = self.queries.remove(&client);
        let next = match (name, query) {
            ("profile", _) => {
                let u = self.pick(rng);
                Self::lookup(u, out);
                push(out, Op::Read, Self::property_block(u));
                if let Some(b) = self.adjacency_blocks(u).next() {
                    push(out, Op::Read, b);
                }
                for &f in self.neighbours(u).iter().take(PAGE) {
                    push(out, Op::Read, Self::node_block(f));
                }
                None
            }
            ("feed", _) => {
                let u = self.pick(rng);
                Self::lookup(u, out);
                for b in self.adjacency_blocks(u) {
                    push(out, Op::Read, b);
                }
                for &f in self.neighbours(u).iter().take(FEED) {
                    push(out, Op::Read, Self::property_block(f));
                }
                None
            }
            ("fof_start", _) => {
                let start = self.pick(rng);
                Self::lookup(start, out);
                for b in self.adjacency_blocks(start) {
                    push(out, Op::Read, b);
                }
                let friends = self.neighbours(start).to_vec();
                (!friends.is_empty()).then_some(Query::Fof { start, friends, seen: Vec::new() })
            }
            ("fof_expand", Some(Query::Fof { start, friends, .. })) => {
                let seen = self.fof_expand(&friends, start, out);
                (!seen.is_empty()).then_some(Query::Fof { start, friends, seen })
            }
            ("fof_rank", Some(Query::Fof { mut seen, .. })) => {
                // Stable: ties keep first-seen order.
                seen.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
                for &(v, _) in seen.iter().take(PAGE) {
                    push(out, Op::Read, Self::node_block(v));
                    push(out, Op::Read, Self::property_block(v));
                }
                None
            }
            ("path_start", _) => {
                let source = self.pick(rng);
                let target = if rng.random_bool(0.5) {
                    let steps = rng.random_range(2..=3);
                    self.random_walk(source, steps, rng)
                } else {
                    self.pick(rng)
                };
                Self::lookup(source, out);
                Self::lookup(target, out);
                (source != target).then(|| Query::Path {
                    frontier: [vec![source], vec![target]],
                    visited: [HashSet::from([source]), HashSet::from([target])],
                    step: 1,
                })
            }
            (expand, Some(Query::Path { frontier, visited, step })) if expand.starts_with("path_expand") => {
                self.path_expand(frontier, visited, step, out)
            }
            ("add_friend", _) => {
                let (a, b) = (self.pick(rng), self.pick(rng));
                Self::lookup(a, out);
                Self::lookup(b, out);
                for u in [a, b] {
                    if let Some(last) = self.adjacency_blocks(u).last() {
                        push(out, Op::Write, last);
                    }
                    push(out, Op::Write, Self::node_block(u));
                }
                None
            }
            (other, query) => unreachable!("step {other} without its query ({query:?})"),
        };
        if let Some(q) = next {
            self.queries.insert(client, q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(graph: &mut Graph, client: u32, first: &str, rng: &mut Xoshiro256PlusPlus) -> Vec<(String, Vec<(Op, u64)>)> {
        let mut steps = Vec::new();
        let mut class = class(first);
        loop {
            let mut out = VecDeque::new();
            graph.execute(class, client, rng, &mut out);
            steps.push((TEMPLATES[class].0.to_string(), out.into()));
            match graph.continuation(client) {
                Some(next) => class = next,
                None => return steps,
            }
        }
    }

    /// The graph is undirected, without self-loops or duplicates, its
    /// degrees heavy-tailed (most nodes have few friends, hubs thousands),
    /// and the same for every workload.
    #[test]
    fn the_graph_is_symmetric_heavy_tailed_and_fixed() {
        let g = Graph::new();
        let mut degrees: Vec<usize> = (0..NODES as u32).map(|u| g.neighbours(u).len()).collect();
        for u in (0..NODES as u32).step_by(997) {
            let n = g.neighbours(u);
            assert!(n.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
            assert!(!n.contains(&u));
            assert!(n.iter().all(|&v| g.neighbours(v).binary_search(&u).is_ok()), "undirected");
        }
        degrees.sort_unstable();
        let (median, max) = (degrees[degrees.len() / 2], degrees[degrees.len() - 1]);
        assert!((4..=20).contains(&median), "median degree {median}");
        assert!(max > 50 * median, "hubs: max degree {max}");
        assert_eq!(Graph::new().adjacency, g.adjacency);
    }

    /// A hub's adjacency list spans consecutive blocks, a small node's one.
    #[test]
    fn adjacency_lists_are_contiguous_runs_of_blocks() {
        let g = Graph::new();
        let hub = (0..NODES as u32).max_by_key(|&u| g.neighbours(u).len()).unwrap();
        let blocks = g.adjacency_blocks(hub);
        let expected = (g.neighbours(hub).len() as u64).div_ceil(EDGES_PER_BLOCK);
        assert!(blocks.end - blocks.start >= expected, "{blocks:?} for {} edges", g.neighbours(hub).len());
        let small = (0..NODES as u32).find(|&u| g.neighbours(u).len() == 4).unwrap();
        assert!(g.adjacency_blocks(small).end - g.adjacency_blocks(small).start <= 2);
    }

    /// A friends-of-friends query runs as three consecutive contexts of one
    /// client, and each step reads what the previous one found: the expand
    /// step the records and first adjacency blocks of the start's first
    /// friends, the rank step records and properties of 2-hop nodes.
    #[test]
    fn friends_of_friends_runs_its_steps_in_order_on_what_was_found() {
        let mut g = Graph::new();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let step = |g: &mut Graph, class: usize, rng: &mut Xoshiro256PlusPlus| {
            let mut out = VecDeque::new();
            g.execute(class, 7, rng, &mut out);
            out.into_iter().map(|(_, b)| b).collect::<Vec<u64>>()
        };
        step(&mut g, class("fof_start"), &mut rng);
        let Some(Query::Fof { start, friends, .. }) = g.queries.get(&7).cloned() else { panic!("a query goes on") };
        assert_eq!(friends, g.neighbours(start));
        assert_eq!(g.continuation(7), Some(class("fof_expand")));
        assert_eq!(g.continuation(8), None, "another client has no query");
        let expand = step(&mut g, class("fof_expand"), &mut rng);
        let expected: Vec<u64> =
            friends.iter().take(FANOUT).flat_map(|&f| [Graph::node_block(f), g.adjacency_blocks(f).start]).collect();
        let mut deduped = expected.clone();
        deduped.dedup();
        assert_eq!(expand, deduped);
        assert_eq!(g.continuation(7), Some(class("fof_rank")));
        let rank = step(&mut g, class("fof_rank"), &mut rng);
        assert!(!rank.is_empty() && rank.len() <= 2 * PAGE);
        for pair in rank.chunks(2) {
            let v = (0..NODES as u32).find(|&v| Graph::property_block(v) == pair[1] && Graph::node_block(v) == pair[0]);
            let v = v.expect("a node with that record and property block");
            assert!(v != start, "not the start");
        }
        assert_eq!(g.continuation(7), None, "the query ended");
    }

    /// Shortest path: a start step, then expand steps until the sides meet
    /// (ending on a property block) or three expands ran; a target two
    /// hops away is usually met within them.
    #[test]
    fn shortest_path_expands_until_the_frontiers_meet() {
        let mut g = Graph::new();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut met = 0;
        for client in 0..200 {
            let steps = run(&mut g, client, "path_start", &mut rng);
            assert!(steps.len() <= 1 + PATH_STEPS);
            for (i, (name, _)) in steps.iter().enumerate().skip(1) {
                assert_eq!(name, &format!("path_expand{i}"));
            }
            let last = steps.last().unwrap().1.last().map(|&(_, b)| b);
            met += usize::from(steps.len() > 1 && last.is_some_and(|b| b >= region(0, PROPERTIES)));
        }
        assert!(met > 100, "the sides met in {met} of 200 queries");
    }

    #[test]
    fn add_friend_writes_both_lists_and_records() {
        let mut g = Graph::new();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let steps = run(&mut g, 0, "add_friend", &mut rng);
        assert_eq!(steps.len(), 1);
        let writes: Vec<u64> = steps[0].1.iter().filter(|&&(op, _)| op == Op::Write).map(|&(_, b)| b).collect();
        assert!(writes.len() >= 3 && writes.len() <= 4, "{writes:?}");
        assert!(writes.iter().any(|&b| (region(0, ADJACENCY)..region(0, PROPERTIES)).contains(&b)));
    }
}

//! The ceiling: how many misses a prefetcher could remove at most, given
//! what it can know. An offline oracle replays a context-tagged trace through
//! the cache `prefetch sim` uses, with no prefetching, and sorts every miss
//! counted after the warm-up into one class, so each prefetcher's cut can be
//! read against the most any predictor of its kind could get.
//!
//! The definitions were fixed before any workload was measured:
//!
//! - A context's *history* is its own reads so far, with its start as a
//!   pseudo-block before the first, so its first reads have predecessors too.
//!   Its *template* is the class its begin event names.
//! - A read miss of block `b` in a context of template `t`, whose `j`-th most
//!   recent history entry is `h_j`, is **in-context predictable** if, earlier
//!   in the trace, some context of template `t` read `b` exactly `j` reads
//!   after `h_j`, for some lookahead `j` in `1..=k`; or read `b` at the same
//!   position (its n-th read). A predictor keyed by template and block (or
//!   template and position) that looks up to `k` reads ahead could have had
//!   `b` fetched in time; rules keyed by longer prefixes predict a subset of
//!   these, so this bounds them as well.
//! - Otherwise it is **predictable from another context** if the same held
//!   for an earlier context of any template: what a miner that ignores
//!   templates could have learnt.
//! - Otherwise it was **seen elsewhere** (`b` was read before, never in such
//!   a position) or is a **first touch** (never read before).
//! - Write misses are a class of their own: prefetching reads cannot remove
//!   them.
//! - An in-context predictable miss is also **within degree** [`DEGREE`]
//!   (docs/dev/prefetch-degree-ceiling.md) if `b` ranks among the `D` blocks
//!   most often read exactly `j` reads after `h_j` in template `t` so far,
//!   for some `j` in `1..=k`, or among the `D` most often read at its
//!   position; ties at the `D`-th count are all in, so this bounds any
//!   tie-break (counted with ties out as well: any tie-break lies between).
//!   A predictor that fetches at most `D` blocks per rule key (template and
//!   one block, or template and position) ranked by support cannot cover
//!   more; rules keyed by longer prefixes are not bounded by it.
//!
//! Everything the trace shows, warm-up included, counts as knowledge; only
//! the misses after the warm-up are counted, as `prefetch sim` counts them.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash};

use hearth_core::{CtxEvent, KeyMap, Op};
use hearth_policy::PolicySpec;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use serde::Serialize;
use smallvec::SmallVec;

use crate::{Class, PrefetchCache, PrefetchError};

/// The split of one cache size's misses (after the warm-up).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ceiling {
    pub cache_bytes: u64,
    /// The largest lookahead `k` considered.
    pub lookahead: u32,
    /// Accesses and misses counted, as `prefetch sim` counts them (reads and writes).
    pub accesses: u64,
    pub misses: u64,
    pub write_misses: u64,
    pub in_context: u64,
    /// The most blocks a lookup may fetch per rule key, for the next field.
    pub degree: u32,
    /// The in-context predictable misses whose block ranked within
    /// `degree` at a key that predicts it (a subset of `in_context`).
    pub in_context_within_degree: u64,
    /// The same with ties against the block: fewer than `degree` other
    /// blocks seen at least as often (a part of the previous field).
    pub in_context_within_degree_ties_out: u64,
    pub other_context: u64,
    pub seen_elsewhere: u64,
    pub first_touch: u64,
}

impl Ceiling {
    /// The most an in-context predictor could cut, in percent of the misses:
    /// the figure to read a scheme's miss cut against.
    pub fn in_context_cut(&self) -> f64 {
        percent(self.in_context, self.misses)
    }

    /// The most a predictor fetching at most `degree` blocks per rule key
    /// could cut, in percent of the misses.
    pub fn within_degree_cut(&self) -> f64 {
        percent(self.in_context_within_degree, self.misses)
    }

    /// The same for a predictor that may learn from any context.
    pub fn any_context_cut(&self) -> f64 {
        percent(self.in_context + self.other_context, self.misses)
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The history entry standing for a context's start.
const START: u64 = u64::MAX;

/// The most blocks a lookup fetches: QuickMine's degree
/// (`quickmine::Config::paper`), which every variant keeps by default.
pub const DEGREE: usize = 5;

/// The [`DEGREE`] + 1 highest counts among the blocks seen after one rule
/// key, highest first, 0 where fewer blocks were seen.
type Top = [u32; DEGREE + 1];

/// Counts block `b`'s one more sighting after a key whose top counts are
/// `top`, its count having been `was`: one occurrence of `was` among the
/// top counts (there is one if `was` reaches the lowest) becomes `was + 1`.
fn count_in(top: &mut Top, was: u32) {
    if was >= top[DEGREE] {
        let at = top.iter().position(|&c| c == was).expect("the lowest top count is at most `was`");
        top[at] = was + 1;
    }
}

/// How a block seen `count` times after a key ranks there: within the
/// degree with ties in (fewer than [`DEGREE`] blocks seen more often), and
/// with ties out (fewer than [`DEGREE`] others seen at least as often).
#[derive(Clone, Copy, Default)]
struct Rank {
    ties_in: bool,
    ties_out: bool,
}

fn rank(top: Option<&Top>, count: u32) -> Rank {
    match top {
        Some(top) if count > 0 => Rank { ties_in: count >= top[DEGREE - 1], ties_out: count > top[DEGREE] },
        _ => Rank::default(),
    }
}

/// What the trace has shown so far, as hashed facts.
struct Knowledge {
    hasher: FxBuildHasher,
    /// (template, h, j, b): how often template read `b` `j` reads after `h`.
    in_template: FxHashMap<u64, u32>,
    /// (template, h, j): the top counts of its blocks in `in_template`.
    top_after: FxHashMap<u64, Top>,
    /// (h, j, b), any template.
    anywhere: FxHashSet<u64>,
    /// (template, position, b): how often template read `b` there.
    at_position: FxHashMap<u64, u32>,
    /// (template, position): the top counts of its blocks in `at_position`.
    top_at: FxHashMap<u64, Top>,
    read: FxHashSet<u64>,
}

impl Knowledge {
    fn key(&self, fact: impl Hash) -> u64 {
        self.hasher.hash_one(fact)
    }

    /// Whether `b` was read after rule key `rule` (fact `fact`, counted in
    /// `counts`, tops in `tops`), and how it ranks there.
    fn seen(counts: &FxHashMap<u64, u32>, tops: &FxHashMap<u64, Top>, rule: u64, fact: u64) -> (bool, Rank) {
        let count = counts.get(&fact).copied().unwrap_or(0);
        (count > 0, rank(tops.get(&rule), count))
    }

    /// Counts one more `fact` (a block read after rule key `rule`).
    fn learn(counts: &mut FxHashMap<u64, u32>, tops: &mut FxHashMap<u64, Top>, rule: u64, fact: u64) {
        let count = counts.entry(fact).or_insert(0);
        count_in(tops.entry(rule).or_insert([0; DEGREE + 1]), *count);
        *count += 1;
    }
}

struct OpenContext {
    template: u32,
    /// The last `k` history entries, most recent last.
    history: VecDeque<u64>,
    reads: u64,
}

/// What could have predicted a read, by the definitions above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predictable {
    InContext,
    OtherContext,
    SeenElsewhere,
    FirstTouch,
}

/// The oracle's knowledge as a trace goes by: fed every event in order, it
/// tells of each read what could have predicted it from what came before.
pub struct Oracle {
    k: usize,
    known: Knowledge,
    open: KeyMap<OpenContext>,
    /// How the last read classified ranked at its best key.
    within_degree: Rank,
}

impl Oracle {
    /// An oracle looking up to `lookahead` reads ahead.
    pub fn new(lookahead: u32) -> Result<Oracle, PrefetchError> {
        if lookahead == 0 {
            return Err(PrefetchError::range("ceiling", "the lookahead must be at least 1"));
        }
        Ok(Oracle {
            k: lookahead as usize,
            known: Knowledge {
                hasher: FxBuildHasher,
                in_template: FxHashMap::default(),
                top_after: FxHashMap::default(),
                anywhere: FxHashSet::default(),
                at_position: FxHashMap::default(),
                top_at: FxHashMap::default(),
                read: FxHashSet::default(),
            },
            open: KeyMap::default(),
            within_degree: Rank::default(),
        })
    }

    /// Whether the last read [`Oracle::event`] classified as in context was
    /// also within [`DEGREE`] (false for other classes).
    pub fn within_degree(&self) -> bool {
        self.within_degree.ties_in
    }

    /// The same with ties counted against the block.
    pub fn within_degree_ties_out(&self) -> bool {
        self.within_degree.ties_out
    }

    /// Learns from `e`; for a read with `classify`, first says what could
    /// have predicted it (`None` for other events and unclassified reads).
    pub fn event(&mut self, e: &CtxEvent, classify: bool) -> Option<Predictable> {
        let (k, known) = (self.k, &mut self.known);
        match *e {
            CtxEvent::Begin { ctx, class, .. } => {
                let history = VecDeque::from([START]);
                self.open.insert(u64::from(ctx), OpenContext { template: class, history, reads: 0 });
                None
            }
            CtxEvent::End { ctx, .. } => {
                self.open.remove(&u64::from(ctx));
                None
            }
            CtxEvent::Io { op: Op::Write, .. } => None,
            CtxEvent::Io { ctx, block, .. } => {
                // I/O outside a begin/end pair: a context of its own, template u32::MAX.
                let context = self.open.entry(u64::from(ctx)).or_insert_with(|| OpenContext {
                    template: u32::MAX,
                    history: VecDeque::from([START]),
                    reads: 0,
                });
                let t = context.template;
                // Each fact this read judges by and then teaches, hashed once: for
                // the j-th most recent entry h (j = 1..=k), its rule key (t, h, j),
                // the fact (t, h, j, b) and (h, j, b) for any template; then the
                // position's rule key and fact.
                let after: SmallVec<[(u64, u64, u64); 4]> = (1..=k)
                    .filter_map(|j| context.history.len().checked_sub(j).map(|at| (j, context.history[at])))
                    .map(|(j, h)| (known.key((t, h, j)), known.key((t, h, j, block)), known.key((h, j, block))))
                    .collect();
                let at = (known.key((t, context.reads)), known.key((t, context.reads, block)));
                let mut within_degree = Rank::default();
                let verdict = classify.then(|| {
                    let mut in_context = false;
                    let mut best = |(seen, r): (bool, Rank)| {
                        in_context |= seen;
                        within_degree.ties_in |= r.ties_in;
                        within_degree.ties_out |= r.ties_out;
                    };
                    for &(rule, fact, _) in &after {
                        best(Knowledge::seen(&known.in_template, &known.top_after, rule, fact));
                    }
                    best(Knowledge::seen(&known.at_position, &known.top_at, at.0, at.1));
                    let elsewhere = after.iter().any(|(_, _, anywhere)| known.anywhere.contains(anywhere));
                    match (in_context, elsewhere, known.read.contains(&block)) {
                        (true, _, _) => Predictable::InContext,
                        (false, true, _) => Predictable::OtherContext,
                        (false, false, true) => Predictable::SeenElsewhere,
                        (false, false, false) => Predictable::FirstTouch,
                    }
                });
                self.within_degree = within_degree;
                for (rule, fact, anywhere) in after {
                    Knowledge::learn(&mut known.in_template, &mut known.top_after, rule, fact);
                    known.anywhere.insert(anywhere);
                }
                Knowledge::learn(&mut known.at_position, &mut known.top_at, at.0, at.1);
                known.read.insert(block);
                context.history.push_back(block);
                if context.history.len() > k {
                    context.history.pop_front();
                }
                context.reads += 1;
                verdict
            }
        }
    }
}

/// Replays `events` through a cache of `cache_bytes` run by `main_policy`
/// (blocks of `block_size`), counting misses from event index `split` on.
pub fn ceiling(
    events: &[CtxEvent],
    split: usize,
    main_policy: &PolicySpec,
    cache_bytes: u64,
    block_size: u32,
    lookahead: u32,
) -> Result<Ceiling, PrefetchError> {
    let mut oracle = Oracle::new(lookahead)?;
    let mut cache = PrefetchCache::new(main_policy, cache_bytes, 0.0, block_size)?;
    let mut c = Ceiling { cache_bytes, lookahead, degree: DEGREE as u32, ..Ceiling::default() };
    for (i, e) in events.iter().enumerate() {
        if i == split {
            cache.reset_stats();
        }
        let counted = match *e {
            CtxEvent::Io { op, block, .. } => cache.demand(block, op) == Class::Miss && i >= split,
            _ => false,
        };
        if counted && matches!(e, CtxEvent::Io { op: Op::Write, .. }) {
            c.write_misses += 1;
        }
        match oracle.event(e, counted) {
            Some(Predictable::InContext) => {
                c.in_context += 1;
                c.in_context_within_degree += u64::from(oracle.within_degree());
                c.in_context_within_degree_ties_out += u64::from(oracle.within_degree_ties_out());
            }
            Some(Predictable::OtherContext) => c.other_context += 1,
            Some(Predictable::SeenElsewhere) => c.seen_elsewhere += 1,
            Some(Predictable::FirstTouch) => c.first_touch += 1,
            None => {}
        }
    }
    let stats = cache.stats();
    c.accesses = stats.accesses;
    c.misses = stats.misses;
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Contexts as (template, blocks read), run one after another.
    fn trace(contexts: &[(u32, &[u64])]) -> Vec<CtxEvent> {
        let mut events = Vec::new();
        for (ctx, &(class, blocks)) in contexts.iter().enumerate() {
            let ctx = ctx as u32;
            events.push(CtxEvent::Begin { time_ns: 0, ctx, class });
            for &block in blocks {
                events.push(CtxEvent::Io { time_ns: 0, ctx, op: Op::Read, block });
            }
            events.push(CtxEvent::End { time_ns: 0, ctx });
        }
        events
    }

    /// A one-block cache: every read of a block other than the last misses.
    fn split_of(contexts: &[(u32, &[u64])], lookahead: u32) -> Ceiling {
        ceiling(&trace(contexts), 0, &"lru".parse().unwrap(), 1, 1, lookahead).unwrap()
    }

    #[test]
    fn a_repeated_template_is_predictable_in_context() {
        let c = split_of(&[(7, &[1, 2, 3]), (7, &[1, 2, 3])], 1);
        assert_eq!((c.misses, c.first_touch, c.in_context), (6, 3, 3));
        assert!((c.in_context_cut() - 50.0).abs() < 1e-9);
    }

    #[test]
    fn another_template_learns_only_from_other_contexts() {
        // Template 8 starts with 1 then reads 2, as template 7 did: predictable
        // from another context, not from its own template.
        let c = split_of(&[(7, &[1, 2]), (8, &[1, 2])], 1);
        assert_eq!((c.first_touch, c.other_context, c.in_context), (2, 2, 0));
    }

    #[test]
    fn a_block_in_a_new_position_was_seen_elsewhere() {
        let c = split_of(&[(7, &[1, 2, 3]), (9, &[4, 3])], 1);
        assert_eq!((c.first_touch, c.seen_elsewhere), (4, 1));
    }

    #[test]
    fn lookahead_reaches_blocks_further_ahead() {
        // 3 came two reads after 1 in template 7; in "5 1 6 3" it follows 6,
        // so only a lookahead of 2 (or more) sees it coming after 1.
        let contexts: &[(u32, &[u64])] = &[(7, &[1, 2, 3]), (7, &[5, 1, 6, 3])];
        let near = split_of(contexts, 1);
        let far = split_of(contexts, 2);
        assert_eq!(far.in_context, near.in_context + 1);
        assert_eq!(near.seen_elsewhere, far.seen_elsewhere + 1);
    }

    #[test]
    fn the_split_adds_up_and_warm_up_misses_are_not_counted() {
        let contexts: &[(u32, &[u64])] = &[(7, &[1, 2, 3]), (7, &[1, 2, 4]), (8, &[2, 9])];
        let events = trace(contexts);
        let all = ceiling(&events, 0, &"lru".parse().unwrap(), 1, 1, 3).unwrap();
        let parts = all.in_context + all.other_context + all.seen_elsewhere + all.first_touch + all.write_misses;
        assert_eq!(parts, all.misses);
        let after = ceiling(&events, 5, &"lru".parse().unwrap(), 1, 1, 3).unwrap();
        assert!(after.misses < all.misses && after.first_touch < all.first_touch);
    }

    /// The oracle's verdict on every read of `contexts`, with whether it
    /// was within the degree.
    fn verdicts(contexts: &[(u32, &[u64])], lookahead: u32) -> Vec<(Predictable, bool)> {
        let mut oracle = Oracle::new(lookahead).unwrap();
        trace(contexts).iter().filter_map(|e| oracle.event(e, true).map(|p| (p, oracle.within_degree()))).collect()
    }

    /// Template 7 reads 1 then one of 10..=14, each twice, then 15 once.
    fn five_followers_twice_then_one_once() -> Vec<(u32, Vec<u64>)> {
        let twice = (0..2).flat_map(|_| 10..=14);
        twice.chain([15]).map(|b| (7, vec![1, b])).collect()
    }

    fn as_slices(contexts: &[(u32, Vec<u64>)]) -> Vec<(u32, &[u64])> {
        contexts.iter().map(|(t, b)| (*t, b.as_slice())).collect()
    }

    #[test]
    fn a_block_outranked_at_every_key_is_in_context_but_not_within_degree() {
        let mut contexts = five_followers_twice_then_one_once();
        contexts.extend([(7, vec![1, 15]), (7, vec![1, 10])]);
        let v = verdicts(&as_slices(&contexts), 1);
        // 15 follows 1 once; five blocks followed it twice: outranked, at
        // the position (1) too, where the same blocks were read.
        assert_eq!(v[v.len() - 3], (Predictable::InContext, false));
        // 10 is among the five most frequent after 1.
        assert_eq!(v[v.len() - 1], (Predictable::InContext, true));
        // Through the cache: a one-block LRU misses every read here.
        let c = split_of(&as_slices(&contexts), 1);
        assert_eq!((c.misses, c.in_context, c.in_context_within_degree, c.degree), (26, 19, 18, 5));
        // With ties out the last 10 is outside: 11..=15 were seen twice too.
        assert_eq!(c.in_context_within_degree_ties_out, 17);
        assert!(c.within_degree_cut() < c.in_context_cut());
    }

    #[test]
    fn blocks_tied_at_the_degree_th_count_are_all_within_degree() {
        // Seven blocks follow 1 once each; the seventh, read again, is tied
        // with the other six at one sighting: within the degree of 5.
        let mut contexts: Vec<(u32, Vec<u64>)> = (10..=16).map(|b| (7, vec![1, b])).collect();
        contexts.push((7, vec![1, 16]));
        let v = verdicts(&as_slices(&contexts), 1);
        assert_eq!(v[v.len() - 1], (Predictable::InContext, true));
        // With ties out, six others were seen as often: outside. The seven
        // reads of 1 after the first rank first either way.
        let c = split_of(&as_slices(&contexts), 1);
        assert_eq!((c.in_context, c.in_context_within_degree, c.in_context_within_degree_ties_out), (8, 8, 7));
        // One more sighting of 10 through 14 each puts 16 outside.
        let mut outranked: Vec<(u32, Vec<u64>)> = (10..=16).chain(10..=14).map(|b| (7, vec![1, b])).collect();
        outranked.push((7, vec![1, 16]));
        let v = verdicts(&as_slices(&outranked), 1);
        assert_eq!(v[v.len() - 1], (Predictable::InContext, false));
    }

    #[test]
    fn the_position_alone_can_rank_a_block_within_degree() {
        // 15 follows 1 once, outranked there, but it is the only block
        // template 7 ever read as its third read.
        let mut contexts = five_followers_twice_then_one_once();
        contexts.pop();
        contexts.push((7, vec![2, 1, 15]));
        contexts.push((7, vec![3, 1, 15]));
        let v = verdicts(&as_slices(&contexts), 1);
        assert_eq!(v[v.len() - 1], (Predictable::InContext, true));
        // Read fourth instead, where nothing was read before: in context by
        // the rule after 1, and outranked there.
        contexts.pop();
        contexts.push((7, vec![3, 4, 1, 15]));
        let v = verdicts(&as_slices(&contexts), 1);
        assert_eq!(v[v.len() - 1], (Predictable::InContext, false));
    }

    #[test]
    fn within_degree_is_a_part_of_in_context_on_a_noisy_trace() {
        // Three templates, each context four reads: a fixed first block,
        // then blocks drawn from 40 (an LCG), so most keys have many followers.
        let mut x: u64 = 7;
        let mut next = || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % 40
        };
        let contexts: Vec<(u32, Vec<u64>)> =
            (0..600u64).map(|i| ((i % 3) as u32, vec![100 + i % 3, next(), next(), next()])).collect();
        let c = ceiling(&trace(&as_slices(&contexts)), 0, &"lru".parse().unwrap(), 1, 1, 3).unwrap();
        assert!(c.in_context_within_degree > 0, "{c:?}");
        assert!(c.in_context_within_degree < c.in_context, "{c:?}");
        assert!(c.in_context_within_degree_ties_out < c.in_context_within_degree, "{c:?}");
    }

    #[test]
    fn the_degree_is_quickmines() {
        assert_eq!(DEGREE, crate::quickmine::Config::paper(5).degree);
    }
}

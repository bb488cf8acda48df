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
//!
//! Everything the trace shows, warm-up included, counts as knowledge; only
//! the misses after the warm-up are counted, as `prefetch sim` counts them.

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash};

use hearth_core::{CtxEvent, KeyMap, Op};
use hearth_policy::PolicySpec;
use rustc_hash::{FxBuildHasher, FxHashSet};
use serde::Serialize;

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

/// What the trace has shown so far, as hashed facts.
struct Knowledge {
    hasher: FxBuildHasher,
    /// (template, h, j, b): template read `b` `j` reads after `h`.
    in_template: FxHashSet<u64>,
    /// (h, j, b), any template.
    anywhere: FxHashSet<u64>,
    /// (template, position, b).
    at_position: FxHashSet<u64>,
    read: FxHashSet<u64>,
}

impl Knowledge {
    fn key(&self, fact: impl Hash) -> u64 {
        self.hasher.hash_one(fact)
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
                in_template: FxHashSet::default(),
                anywhere: FxHashSet::default(),
                at_position: FxHashSet::default(),
                read: FxHashSet::default(),
            },
            open: KeyMap::default(),
        })
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
                // The j-th most recent entry, j = 1..=k.
                let back = |j: usize| context.history.len().checked_sub(j).map(|at| context.history[at]);
                let verdict = classify.then(|| {
                    let in_context = (1..=k)
                        .any(|j| back(j).is_some_and(|h| known.in_template.contains(&known.key((t, h, j, block)))))
                        || known.at_position.contains(&known.key((t, context.reads, block)));
                    let elsewhere =
                        (1..=k).any(|j| back(j).is_some_and(|h| known.anywhere.contains(&known.key((h, j, block)))));
                    match (in_context, elsewhere, known.read.contains(&block)) {
                        (true, _, _) => Predictable::InContext,
                        (false, true, _) => Predictable::OtherContext,
                        (false, false, true) => Predictable::SeenElsewhere,
                        (false, false, false) => Predictable::FirstTouch,
                    }
                });
                for j in 1..=k {
                    if let Some(h) = back(j) {
                        let (a, b) = (known.key((t, h, j, block)), known.key((h, j, block)));
                        known.in_template.insert(a);
                        known.anywhere.insert(b);
                    }
                }
                let at = known.key((t, context.reads, block));
                known.at_position.insert(at);
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
    let mut c = Ceiling { cache_bytes, lookahead, ..Ceiling::default() };
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
            Some(Predictable::InContext) => c.in_context += 1,
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
}

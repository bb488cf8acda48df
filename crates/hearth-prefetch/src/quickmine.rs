//! QuickMine: context-aware block correlation mining, online.
//!
//! Each context (a transaction or query, tagged by the client) has its own
//! access sequence, so correlations are mined without the interleaving of
//! other clients. From a context's sequence `s`, every pair of consecutive
//! blocks `a = s[i], b = s[i+1]` is a prefix and each of the next `G`
//! blocks `s[i+2] .. s[i+1+G]` (the lookahead) a suffix: rules `a&b -> c`.
//! Mining runs as each prefix's window completes (and at context end for
//! the last, shorter windows), which yields exactly the rules of mining
//! each finished sequence, in memory bounded by `G + 2` blocks per context.
//! Rules are keyed by the context's class (template) as well, so templates
//! sharing blocks keep separate predictions.
//!
//! The rule cache holds at most `max_prefixes` prefixes (LRU: a prefix is
//! used when mined or looked up) and at most `max_suffixes` suffixes per
//! prefix (LFU by support count). A new suffix may only replace one that
//! has outlived a grace period of `grace` updates of its prefix, so fresh
//! suffixes get a chance to gather support before LFU judges them.
//!
//! On a miss (and, unless `on_promote` is off, a promote) of `b` in a
//! context whose previous block is `a`, the most supported suffixes of
//! `a&b` not in cache are prefetched, up to `degree`. Throttling tracks, per class, how many of its prefetches are
//! used: below [`FULL_ACCURACY`] the degree is halved, below
//! [`MIN_ACCURACY`] the class stops prefetching except in one context out
//! of [`PROBE_EVERY`], whose outcomes can re-enable it. Two classes are
//! symbiotic when one's demands promote a real share of the other's
//! prefetches (at least [`SYMBIOTIC_USES`], and at least [`MIN_ACCURACY`]
//! of all the issuer's prefetch outcomes); symbiotic classes form a set
//! whose benefit is tracked, and throttled, as one, so a class that pays
//! off through another keeps prefetching while the set as a whole pays off.

use std::collections::VecDeque;

use hearth_core::{Key, KeyMap, List, Slab};
use rustc_hash::FxHashMap;

use crate::{is_trigger, Class, Demand, PrefetchError, Prefetcher};

/// Outcomes per throttling decision.
pub const WINDOW: u32 = 64;
/// Used share at or above which a class prefetches at full degree.
pub const FULL_ACCURACY: f64 = 0.4;
/// Used share below which a class stops prefetching.
pub const MIN_ACCURACY: f64 = 0.15;
/// A stopped class still prefetches in one context of this many.
pub const PROBE_EVERY: u32 = 16;
/// Fewest promotes of one class's prefetches by another that can make them
/// symbiotic.
pub const SYMBIOTIC_USES: u32 = 8;
/// Class of I/O outside any begun context.
pub const NO_CLASS: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct Config {
    /// G: suffixes per prefix occurrence.
    pub lookahead: usize,
    pub max_prefixes: usize,
    pub max_suffixes: usize,
    pub grace: u32,
    pub degree: usize,
    pub throttle: bool,
    /// Off: one sequence for the whole interleaved stream (the
    /// context-oblivious variant, for comparison; being one endless
    /// context, its degree is set once and never throttled).
    pub context_aware: bool,
    /// Also look rules up on promotes, not only on misses (a promote is a
    /// miss an earlier prefetch avoided; looking up keeps the context's
    /// prefetching ahead of it).
    pub on_promote: bool,
}

/// A prefix: the context class and two consecutive blocks.
pub type PrefixKey = (u32, Key, Key);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Suffix {
    pub block: Key,
    pub count: u32,
    /// The prefix's update count when this suffix was added.
    born: u32,
}

#[derive(Clone, Copy)]
struct PrefixNode {
    key: PrefixKey,
    updates: u32,
    len: usize,
}

/// Bounded rule store: LRU over prefixes, LFU with grace over suffixes.
pub struct RuleCache {
    index: FxHashMap<PrefixKey, u32>,
    slab: Slab<PrefixNode>,
    lru: List,
    /// Slot `i` owns `suffixes[i * max_suffixes ..][.. max_suffixes]`.
    suffixes: Vec<Suffix>,
    max_prefixes: usize,
    max_suffixes: usize,
    grace: u32,
    rules: usize,
}

impl RuleCache {
    pub fn new(max_prefixes: usize, max_suffixes: usize, grace: u32) -> Self {
        RuleCache {
            index: FxHashMap::default(),
            slab: Slab::default(),
            lru: List::new(),
            suffixes: Vec::new(),
            max_prefixes: max_prefixes.max(1),
            max_suffixes: max_suffixes.max(1),
            grace,
            rules: 0,
        }
    }

    /// Prefixes held.
    pub fn prefixes(&self) -> usize {
        self.index.len()
    }
    /// Rules (prefix, suffix) held.
    pub fn rules(&self) -> usize {
        self.rules
    }

    fn slot(&mut self, key: PrefixKey) -> u32 {
        if let Some(&i) = self.index.get(&key) {
            self.slab.move_to_front(&mut self.lru, i);
            return i;
        }
        if self.index.len() == self.max_prefixes {
            let victim = self.slab.pop_back(&mut self.lru).expect("a full cache has prefixes");
            let node = self.slab.release(victim);
            self.index.remove(&node.key);
            self.rules -= node.len;
        }
        let i = self.slab.alloc(PrefixNode { key, updates: 0, len: 0 });
        self.slab.push_front(&mut self.lru, i);
        self.index.insert(key, i);
        let needed = (i as usize + 1) * self.max_suffixes;
        if self.suffixes.len() < needed {
            self.suffixes.resize(needed, Suffix::default());
        }
        i
    }

    /// Counts one occurrence of rule `key -> block`.
    pub fn add(&mut self, key: PrefixKey, block: Key) {
        let i = self.slot(key);
        let node = self.slab.get_mut(i);
        node.updates = node.updates.wrapping_add(1);
        let now = node.updates;
        let base = i as usize * self.max_suffixes;
        let list = &mut self.suffixes[base..base + node.len];
        if let Some(s) = list.iter_mut().find(|s| s.block == block) {
            s.count += 1;
            return;
        }
        let fresh = Suffix { block, count: 1, born: now };
        if node.len < self.max_suffixes {
            self.suffixes[base + node.len] = fresh;
            node.len += 1;
            self.rules += 1;
            return;
        }
        let grace = self.grace;
        let victim = list.iter_mut().filter(|s| now.wrapping_sub(s.born) >= grace).min_by_key(|s| s.count);
        if let Some(v) = victim {
            *v = fresh;
        }
    }

    /// The suffixes of `key` (unordered), marking the prefix used.
    pub fn lookup(&mut self, key: &PrefixKey) -> &[Suffix] {
        let Some(&i) = self.index.get(key) else { return &[] };
        self.slab.move_to_front(&mut self.lru, i);
        let base = i as usize * self.max_suffixes;
        &self.suffixes[base..base + self.slab.get(i).len]
    }

    /// Every prefix with its suffixes, for tests and reports.
    pub fn snapshot(&self) -> Vec<(PrefixKey, Vec<Suffix>)> {
        let mut all: Vec<_> = self
            .index
            .iter()
            .map(|(&k, &i)| {
                let base = i as usize * self.max_suffixes;
                (k, self.suffixes[base..base + self.slab.get(i).len].to_vec())
            })
            .collect();
        all.sort_by_key(|(k, _)| *k);
        all
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    #[default]
    Full,
    Half,
    Off,
}

/// Benefit of the prefetches of one class, or of one symbiotic set.
#[derive(Default)]
struct Benefit {
    used: u32,
    wasted: u32,
    level: Level,
    contexts: u32,
}

struct Context {
    class: u32,
    /// The last `G + 2` blocks; `mined_front` tells whether the window of
    /// the first prefix held was already mined.
    recent: VecDeque<Key>,
    mined_front: bool,
    degree: usize,
}

pub struct QuickMine {
    cfg: Config,
    rules: RuleCache,
    contexts: KeyMap<Context>,
    spare: Vec<VecDeque<Key>>,
    /// Benefit per symbiotic set, keyed by the set's representative class.
    benefit: FxHashMap<u32, Benefit>,
    /// Union-find parent of each class that joined a symbiotic set.
    parent: FxHashMap<u32, u32>,
    /// Promotes of `issuer`'s prefetches by `user`, for issuer != user.
    cross_uses: FxHashMap<(u32, u32), u32>,
    /// Prefetch outcomes (used or not) per issuing class.
    outcomes: FxHashMap<u32, u32>,
    /// Prefetched blocks awaiting an outcome, with the class that asked.
    outstanding: KeyMap<u32>,
    scratch: Vec<Suffix>,
}

impl QuickMine {
    pub fn new(cfg: Config) -> Result<Self, PrefetchError> {
        if cfg.lookahead == 0 {
            return Err(PrefetchError::range("quickmine", "the lookahead g must be at least 1"));
        }
        let rules = RuleCache::new(cfg.max_prefixes, cfg.max_suffixes, cfg.grace);
        Ok(QuickMine {
            rules,
            contexts: KeyMap::default(),
            spare: Vec::new(),
            benefit: FxHashMap::default(),
            parent: FxHashMap::default(),
            cross_uses: FxHashMap::default(),
            outcomes: FxHashMap::default(),
            outstanding: KeyMap::default(),
            scratch: Vec::with_capacity(cfg.max_suffixes),
            cfg,
        })
    }

    pub fn rule_cache(&self) -> &RuleCache {
        &self.rules
    }

    fn context_key(&self, ctx: u32) -> u64 {
        if self.cfg.context_aware {
            u64::from(ctx)
        } else {
            0
        }
    }

    /// The representative class of `class`'s symbiotic set.
    fn set_of(&self, mut class: u32) -> u32 {
        while let Some(&p) = self.parent.get(&class) {
            class = p;
        }
        class
    }

    /// Joins the sets of `a` and `b`, pooling their benefit counters; the
    /// merged set keeps the better level until its next window decides.
    fn join(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.set_of(a), self.set_of(b));
        if ra == rb {
            return;
        }
        self.parent.insert(rb, ra);
        if let Some(from) = self.benefit.remove(&rb) {
            let into = self.benefit.entry(ra).or_default();
            into.used += from.used;
            into.wasted += from.wasted;
            into.level = into.level.min(from.level);
        }
    }

    /// The set `class` belongs to (itself unless symbiotic).
    pub fn symbiotic_set(&self, class: u32) -> Vec<u32> {
        let root = self.set_of(class);
        let mut members: Vec<u32> = self.parent.keys().copied().filter(|&c| self.set_of(c) == root).collect();
        members.push(root);
        members.sort_unstable();
        members
    }

    fn open(&mut self, ctx: u32, class: u32) {
        let set = self.set_of(class);
        let degree = match self.benefit.get(&set).map_or(Level::Full, |b| b.level) {
            _ if !self.cfg.throttle => self.cfg.degree,
            Level::Full => self.cfg.degree,
            Level::Half => self.cfg.degree.div_ceil(2),
            Level::Off => {
                let b = self.benefit.get_mut(&set).expect("Off implies tracked");
                b.contexts = b.contexts.wrapping_add(1);
                if b.contexts.is_multiple_of(PROBE_EVERY) {
                    self.cfg.degree.div_ceil(2)
                } else {
                    0
                }
            }
        };
        let mut recent = self.spare.pop().unwrap_or_default();
        recent.clear();
        let key = self.context_key(ctx);
        if let Some(old) = self.contexts.insert(key, Context { class, recent, mined_front: false, degree }) {
            self.close(old);
        }
    }

    /// Mines the prefix at `recent[i]` with the suffixes after it.
    fn mine_at(rules: &mut RuleCache, class: u32, recent: &VecDeque<Key>, i: usize, lookahead: usize) {
        let (a, b) = (recent[i], recent[i + 1]);
        if a == b {
            return;
        }
        let end = (i + 2 + lookahead).min(recent.len());
        for j in i + 2..end {
            let c = recent[j];
            let repeated = (i + 2..j).any(|k| recent[k] == c);
            if c != a && c != b && !repeated {
                rules.add((class, a, b), c);
            }
        }
    }

    /// Mines the windows not mined yet (they end with the sequence) and
    /// recycles the buffer.
    fn close(&mut self, c: Context) {
        let first = usize::from(c.mined_front);
        for i in first..c.recent.len().saturating_sub(2) {
            Self::mine_at(&mut self.rules, c.class, &c.recent, i, self.cfg.lookahead);
        }
        self.spare.push(c.recent);
    }
}

impl Prefetcher for QuickMine {
    fn name(&self) -> String {
        let variants: Vec<&str> = [
            (!self.cfg.context_aware, "no context"),
            (!self.cfg.throttle, "no throttle"),
            (!self.cfg.on_promote, "miss only"),
        ]
        .into_iter()
        .filter_map(|(on, what)| on.then_some(what))
        .collect();
        if variants.is_empty() {
            "QuickMine".into()
        } else {
            format!("QuickMine({})", variants.join(", "))
        }
    }

    fn begin(&mut self, ctx: u32, class: u32) {
        if self.cfg.context_aware {
            self.open(ctx, class);
        }
    }

    fn end(&mut self, ctx: u32) {
        if self.cfg.context_aware {
            if let Some(c) = self.contexts.remove(&u64::from(ctx)) {
                self.close(c);
            }
        }
    }

    fn access(&mut self, d: &Demand, cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        let key = self.context_key(d.ctx);
        if !self.contexts.contains_key(&key) {
            // I/O outside any context (or the context-oblivious variant):
            // one implicit context per id.
            let class = if self.cfg.context_aware { NO_CLASS } else { 0 };
            self.open(d.ctx, class);
        }
        let g = self.cfg.lookahead;
        let c = self.contexts.get_mut(&key).expect("opened above");
        let prev = c.recent.back().copied();
        if c.recent.len() == g + 2 {
            c.recent.pop_front();
            c.mined_front = false;
        }
        c.recent.push_back(d.block);
        if c.recent.len() == g + 2 {
            Self::mine_at(&mut self.rules, c.class, &c.recent, 0, g);
            c.mined_front = true;
        }
        let (class, degree) = (c.class, c.degree);
        if d.class == Class::Promote {
            if let Some(&issuer) = self.outstanding.get(&d.block) {
                if issuer != class {
                    let uses = self.cross_uses.entry((issuer, class)).or_insert(0);
                    *uses += 1;
                    let issued = self.outcomes.get(&issuer).copied().unwrap_or(0).max(1);
                    if *uses >= SYMBIOTIC_USES && f64::from(*uses) >= MIN_ACCURACY * f64::from(issued) {
                        self.join(issuer, class);
                    }
                }
            }
        }
        let Some(a) = prev else { return };
        let trigger = if self.cfg.on_promote { is_trigger(d.class) } else { d.class == Class::Miss };
        if !trigger || degree == 0 {
            return;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(self.rules.lookup(&(class, a, d.block)));
        self.scratch.sort_by(|x, y| y.count.cmp(&x.count).then(x.block.cmp(&y.block)));
        let start = out.len();
        for s in &self.scratch {
            if out.len() - start == degree {
                break;
            }
            if !cached(s.block) && s.block != d.block {
                out.push(s.block);
                self.outstanding.insert(s.block, class);
            }
        }
    }

    fn outcome(&mut self, block: Key, used: bool) {
        let Some(class) = self.outstanding.remove(&block) else { return };
        *self.outcomes.entry(class).or_insert(0) += 1;
        let b = self.benefit.entry(self.set_of(class)).or_default();
        if used {
            b.used += 1;
        } else {
            b.wasted += 1;
        }
        if b.used + b.wasted >= WINDOW {
            let accuracy = f64::from(b.used) / f64::from(b.used + b.wasted);
            b.level = if accuracy >= FULL_ACCURACY {
                Level::Full
            } else if accuracy >= MIN_ACCURACY {
                Level::Half
            } else {
                Level::Off
            };
            b.used = 0;
            b.wasted = 0;
        }
    }

    fn rule_count(&self) -> usize {
        self.rules.rules()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;
    use proptest::prelude::*;

    fn config(g: usize) -> Config {
        Config {
            lookahead: g,
            max_prefixes: 1000,
            max_suffixes: 8,
            grace: 0,
            degree: 5,
            throttle: true,
            context_aware: true,
            on_promote: true,
        }
    }

    fn demand(ctx: u32, block: Key) -> Demand {
        Demand { block, ctx, time_ns: 0, op: Op::Read, class: Class::Miss }
    }

    fn run_contexts(q: &mut QuickMine, contexts: &[(u32, &[Key])], interleave: bool) {
        for &(ctx, _) in contexts {
            q.begin(ctx, 0);
        }
        let mut out = Vec::new();
        if interleave {
            let longest = contexts.iter().map(|c| c.1.len()).max().unwrap_or(0);
            for i in 0..longest {
                for &(ctx, seq) in contexts {
                    if let Some(&b) = seq.get(i) {
                        q.access(&demand(ctx, b), &|_| false, &mut out);
                    }
                }
            }
        } else {
            for &(ctx, seq) in contexts {
                for &b in seq {
                    q.access(&demand(ctx, b), &|_| false, &mut out);
                }
            }
        }
        for &(ctx, _) in contexts {
            q.end(ctx);
        }
    }

    fn rules_of(q: &QuickMine) -> Vec<(Key, Key, Vec<Key>)> {
        q.rule_cache()
            .snapshot()
            .into_iter()
            .map(|((_, a, b), s)| {
                let mut c: Vec<Key> = s.iter().map(|s| s.block).collect();
                c.sort();
                (a, b, c)
            })
            .collect()
    }

    /// The paper's example: T1 = 6,7,8 and T2 = 2,3,4,5,6,7 with G = 5,
    /// issued interleaved. Per context, T1 gives 6&7 -> 8 and T2 gives each
    /// consecutive pair the rest of T2 as suffixes.
    #[test]
    fn worked_example_rules_exactly() {
        let t1: &[Key] = &[6, 7, 8];
        let t2: &[Key] = &[2, 3, 4, 5, 6, 7];
        let mut q = QuickMine::new(config(5)).unwrap();
        run_contexts(&mut q, &[(1, t1), (2, t2)], true);
        let expected: Vec<(Key, Key, Vec<Key>)> =
            vec![(2, 3, vec![4, 5, 6, 7]), (3, 4, vec![5, 6, 7]), (4, 5, vec![6, 7]), (5, 6, vec![7]), (6, 7, vec![8])];
        assert_eq!(rules_of(&q), expected);
        assert_eq!(q.rule_count(), 11);
        // Every support is 1: each rule was seen once.
        assert!(q.rule_cache().snapshot().iter().all(|(_, s)| s.iter().all(|s| s.count == 1)));

        // Context-oblivious mining of the same interleaved stream
        // 6 2 7 3 8 4 5 6 7 finds rules that hold in neither context (the
        // stream never ends, so only the complete windows are mined).
        let mut oblivious = QuickMine::new(Config { context_aware: false, ..config(5) }).unwrap();
        run_contexts(&mut oblivious, &[(1, t1), (2, t2)], true);
        let expected: Vec<(Key, Key, Vec<Key>)> =
            vec![(2, 7, vec![3, 4, 5, 6, 8]), (6, 2, vec![3, 4, 5, 7, 8]), (7, 3, vec![4, 5, 6, 8])];
        assert_eq!(rules_of(&oblivious), expected);
    }

    #[test]
    fn a_smaller_lookahead_limits_the_suffixes() {
        let mut q = QuickMine::new(config(2)).unwrap();
        run_contexts(&mut q, &[(1, &[2, 3, 4, 5, 6, 7])], false);
        assert_eq!(rules_of(&q), vec![(2, 3, vec![4, 5]), (3, 4, vec![5, 6]), (4, 5, vec![6, 7]), (5, 6, vec![7])]);
    }

    #[test]
    fn misses_prefetch_the_most_supported_suffixes_not_cached() {
        let mut q = QuickMine::new(Config { degree: 2, ..config(3) }).unwrap();
        // 1 2 -> 3 three times, 1 2 -> 9 once, 1 2 -> 4 twice.
        for (i, tail) in [[3, 4], [3, 4], [3, 5], [9, 6]].iter().enumerate() {
            run_contexts(&mut q, &[(i as u32, &[1, 2, tail[0], tail[1]])], false);
        }
        let mut out = Vec::new();
        q.begin(50, 0);
        q.access(&demand(50, 1), &|_| false, &mut out);
        assert!(out.is_empty(), "one block is no prefix");
        q.access(&demand(50, 2), &|b| b == 3, &mut out);
        assert_eq!(out, vec![4, 5], "3 is cached; 4 (2) beats 5 and 6 (1), ties by block");
    }

    #[test]
    fn grace_period_protects_new_suffixes() {
        let key = (0, 1, 2);
        let mut no_grace = RuleCache::new(4, 2, 0);
        let mut grace = RuleCache::new(4, 2, 3);
        for c in [&mut no_grace, &mut grace] {
            c.add(key, 10);
            c.add(key, 10);
            c.add(key, 11); // full: {10: 2, 11: 1}
            c.add(key, 12); // without grace, 12 replaces 11 at once
        }
        let blocks = |c: &RuleCache| c.snapshot()[0].1.iter().map(|s| s.block).collect::<Vec<_>>();
        assert_eq!(blocks(&no_grace), vec![10, 12], "the newest suffix is the least frequent");
        // With grace 3, 11 (one update old) is protected; 10 is the only
        // suffix past its grace, so LFU among those picks it.
        assert_eq!(blocks(&grace), vec![12, 11]);
        grace.add(key, 13);
        assert_eq!(blocks(&grace), vec![12, 11], "all in grace: the newcomer is dropped");
        grace.add(key, 14);
        assert_eq!(blocks(&grace), vec![12, 14], "11 outlived its grace");
    }

    #[test]
    fn throttling_stops_a_class_whose_prefetches_are_wasted() {
        let mut q = QuickMine::new(config(2)).unwrap();
        // Class 0 always runs 1 2 3; its prefetches of 3 are never used.
        let mut issued = 0;
        for round in 0..400u32 {
            q.begin(round, 0);
            let mut out = Vec::new();
            for b in [1, 2, 3] {
                q.access(&demand(round, b), &|_| false, &mut out);
            }
            for &b in &out {
                q.outcome(b, false);
            }
            issued += out.len();
            q.end(round);
        }
        // The first WINDOW prefetches go out at full degree; afterwards only
        // one context in PROBE_EVERY still prefetches.
        let expected_max = WINDOW as usize + 400 / PROBE_EVERY as usize + 1;
        assert!(issued >= WINDOW as usize && issued <= expected_max, "issued {issued}");
        let mut unthrottled = QuickMine::new(Config { throttle: false, ..config(2) }).unwrap();
        let mut count = 0;
        for round in 0..400u32 {
            unthrottled.begin(round, 0);
            let mut out = Vec::new();
            for b in [1, 2, 3] {
                unthrottled.access(&demand(round, b), &|_| false, &mut out);
            }
            count += out.len();
            unthrottled.end(round);
        }
        assert_eq!(count, 399, "every context but the first prefetches 3");
    }

    /// Class 1 prefetches 3..=7 after 1 2, and a quarter of them get used:
    /// by class-2 contexts (promotes) if `by_class_two`, else by class 1
    /// itself. Class 2's own prefetches (22..=26 after 20 21) are always
    /// used. Returns class 1's prefetches in the last 100 of 400 rounds.
    fn class_one_prefetches(by_class_two: bool) -> usize {
        let mut q = QuickMine::new(config(5)).unwrap();
        let mut late = 0;
        for round in 0..400u32 {
            let (one, two) = (2 * round, 2 * round + 1);
            q.begin(one, 1);
            q.begin(two, 2);
            let mut out = Vec::new();
            let learn = round == 0;
            let seq_one: &[Key] = if learn { &[1, 2, 3, 4, 5, 6, 7] } else { &[1, 2] };
            for &b in seq_one {
                q.access(&demand(one, b), &|_| false, &mut out);
            }
            if round >= 300 {
                late += out.len();
            }
            for (i, &b) in out.iter().enumerate() {
                let used = (round as usize + i).is_multiple_of(4);
                if used && by_class_two {
                    let promote = Demand { class: Class::Promote, ..demand(two, b) };
                    q.access(&promote, &|_| false, &mut Vec::new());
                }
                q.outcome(b, used);
            }
            let mut own = Vec::new();
            let seq_two: &[Key] = if learn { &[20, 21, 22, 23, 24, 25, 26] } else { &[20, 21] };
            for &b in seq_two {
                q.access(&demand(two, b), &|_| false, &mut own);
            }
            for &b in &own {
                q.outcome(b, true);
            }
            q.end(one);
            q.end(two);
        }
        assert_eq!(q.symbiotic_set(1).len(), if by_class_two { 2 } else { 1 });
        late
    }

    #[test]
    fn symbiotic_classes_are_throttled_as_a_set() {
        // A quarter of class 1's prefetches are used: alone it is halved
        // to 3 prefetches per context.
        assert_eq!(class_one_prefetches(false), 300);
        // When its prefetches serve class 2, the two form a set that pays
        // off as a whole (25% and 100%), and class 1 prefetches at full
        // degree, 5 per context.
        assert_eq!(class_one_prefetches(true), 500);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn prefix_and_suffix_bounds_hold(
            max_prefixes in 1usize..20,
            max_suffixes in 1usize..6,
            grace in 0u32..5,
            g in 1usize..6,
            events in proptest::collection::vec((0u32..6, 0u64..30, 0u8..10), 0..400),
        ) {
            let cfg = Config { lookahead: g, max_prefixes, max_suffixes, grace, degree: 3, throttle: true, context_aware: true, on_promote: true };
            let mut q = QuickMine::new(cfg).unwrap();
            let mut out = Vec::new();
            for (ctx, block, action) in events {
                match action {
                    0 => q.begin(ctx, ctx % 3),
                    1 => q.end(ctx),
                    2 => q.outcome(block, block % 2 == 0),
                    _ => q.access(&demand(ctx, block), &|b| b % 5 == 0, &mut out),
                }
                let snap = q.rule_cache().snapshot();
                prop_assert!(snap.len() <= max_prefixes);
                prop_assert_eq!(snap.len(), q.rule_cache().prefixes());
                let mut total = 0;
                for (_, s) in &snap {
                    prop_assert!(!s.is_empty() && s.len() <= max_suffixes);
                    let mut blocks: Vec<Key> = s.iter().map(|s| s.block).collect();
                    blocks.sort();
                    blocks.dedup();
                    prop_assert_eq!(blocks.len(), s.len(), "no duplicate suffix");
                    total += s.len();
                }
                prop_assert_eq!(total, q.rule_count());
            }
            prop_assert!(out.iter().all(|b| b % 5 != 0), "never prefetches a cached block");
        }
    }
}

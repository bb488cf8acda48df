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
//! sharing blocks keep separate predictions. They live in the bounded
//! [`RuleCache`] of [`crate::rules`].
//!
//! On a miss (and, unless `on_promote` is off, a promote) of `b` in a
//! context whose previous block is `a`, the most supported suffixes of
//! `a&b` not in cache are prefetched, up to `degree`. Throttling tracks, per class, how many of its prefetches are
//! used: below [`FULL_ACCURACY`] the degree is halved, below
//! [`MIN_ACCURACY`] the class stops prefetching except in one context out
//! of [`PROBE_EVERY`], whose outcomes can re-enable it; classes that
//! promote each other's prefetches form a symbiotic set throttled as one,
//! so a class that pays off through another keeps prefetching while the
//! set as a whole pays off (`throttle.rs`).
//!
//! # Variants (issue 19)
//!
//! The same miner, rule table and throttling, with one or more of these
//! switched on (each off in the paper's QuickMine, which they leave as it
//! was):
//! - **Variable order** (`min_order..=max_order`, e.g. 1..=3): prefixes of
//!   every length in the range are mined; a lookup takes the suffixes of the
//!   longest prefix first, then fills the remaining degree from shorter
//!   ones (PPM's fallback from long to short contexts).
//! - **Position** (`by_position`): rules keyed by template and the
//!   position of a read in its context as well; looked up after the block
//!   rules, so a context whose blocks are new (a key never seen) still gets
//!   the blocks its template reads at the next positions.
//! - **Lookahead** (`ahead` = k > 1): after a lookup, the suffix that most
//!   often came *right after* the prefix is taken as the next read, and the
//!   lookup repeats from that guessed history, k steps in all, each step
//!   prefetching up to `degree` blocks: blocks further ahead than the
//!   mining window are fetched before their demand.
//! - **Timeliness** (`late_ns` > 0): a prefetched block demanded less than
//!   `late_ns` after its prefetch was issued (so it cannot have arrived: the
//!   device's service time) counts as wasted for the throttling of the
//!   template that issued it.

use std::collections::VecDeque;

use hearth_core::{Key, KeyMap};

use crate::account::Lookup;
pub use crate::rules::{PrefixKey, RuleCache, Suffix};
use crate::throttle::Throttle;
pub use crate::throttle::{FULL_ACCURACY, MIN_ACCURACY, PROBE_EVERY, SYMBIOTIC_USES, WINDOW};
use crate::{is_trigger, Class, Demand, PrefetchError, Prefetcher};

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
    /// Prefix lengths mined and looked up (the paper: 2..=2).
    pub min_order: usize,
    pub max_order: usize,
    /// Rules keyed by template and position as well.
    pub by_position: bool,
    /// Lookup steps along the guessed next reads (the paper: 1).
    pub ahead: usize,
    /// A prefetch demanded sooner than this after its issue counts as
    /// wasted (0: off, as in the paper).
    pub late_ns: u64,
    /// Look rules up on hits too, not only on misses and promotes (off in
    /// the paper; the miss account's "no lookup").
    pub on_hit: bool,
}

impl Config {
    /// The paper's QuickMine with lookahead `g` and its defaults otherwise.
    pub fn paper(g: usize) -> Config {
        Config {
            lookahead: g,
            max_prefixes: 16_384,
            max_suffixes: 8,
            grace: 4,
            degree: 5,
            throttle: true,
            context_aware: true,
            on_promote: true,
            min_order: 2,
            max_order: 2,
            by_position: false,
            ahead: 1,
            late_ns: 0,
            on_hit: false,
        }
    }

    /// Kinds of rule mined: one per prefix length, plus positions.
    pub fn rule_kinds(&self) -> usize {
        self.max_order + 1 - self.min_order + usize::from(self.by_position)
    }
}

struct Context {
    class: u32,
    /// The last `max_order + G` blocks.
    recent: VecDeque<Key>,
    /// How many of `recent`'s first blocks have had the prefixes ending at
    /// them mined.
    mined: usize,
    /// Blocks dropped from the front of `recent` (the position of its first).
    dropped: u64,
    degree: usize,
}

/// A prefetch awaiting its outcome.
#[derive(Clone, Copy)]
struct Outstanding {
    class: u32,
    issued_ns: u64,
    /// Demanded before it could have arrived.
    late: bool,
}

pub struct QuickMine {
    cfg: Config,
    rules: RuleCache,
    contexts: KeyMap<Context>,
    spare: Vec<VecDeque<Key>>,
    throttle: Throttle,
    /// Prefetched blocks awaiting an outcome, with the class that asked.
    outstanding: KeyMap<Outstanding>,
    /// Candidates of one lookup step, best first.
    scratch: Vec<Suffix>,
    /// The history a lookup step predicts from (real, then guessed reads).
    history: Vec<Key>,
    /// The rule keys the last lookup step used.
    keys: Vec<PrefixKey>,
    /// The last read's lookup, kept for the miss account once asked.
    explained: Option<Lookup>,
}

impl QuickMine {
    pub fn new(cfg: Config) -> Result<Self, PrefetchError> {
        if cfg.lookahead == 0 {
            return Err(PrefetchError::range("quickmine", "the lookahead g must be at least 1"));
        }
        if !(1..=3).contains(&cfg.min_order) || !(cfg.min_order..=3).contains(&cfg.max_order) {
            return Err(PrefetchError::range("quickmine", "prefix lengths must lie in 1..=3"));
        }
        if cfg.ahead == 0 {
            return Err(PrefetchError::range("quickmine", "ahead must be at least 1"));
        }
        let rules = RuleCache::new(cfg.max_prefixes, cfg.max_suffixes, cfg.grace);
        Ok(QuickMine {
            rules,
            contexts: KeyMap::default(),
            spare: Vec::new(),
            throttle: Throttle::default(),
            outstanding: KeyMap::default(),
            scratch: Vec::new(),
            history: Vec::new(),
            keys: Vec::new(),
            explained: None,
            cfg,
        })
    }

    pub fn rule_cache(&self) -> &RuleCache {
        &self.rules
    }

    pub(crate) fn rule_cache_mut(&mut self) -> &mut RuleCache {
        &mut self.rules
    }

    /// Context `ctx`'s template, the position of its last read, and its
    /// last `max_order` reads (oldest first), if it is open.
    pub(crate) fn context_view(&self, ctx: u32, history: &mut Vec<Key>) -> Option<(u32, u64)> {
        let c = self.contexts.get(&self.context_key(ctx))?;
        history.clear();
        history.extend(c.recent.range(c.recent.len().saturating_sub(self.cfg.max_order)..));
        Some((c.class, (c.dropped + c.recent.len() as u64).checked_sub(1)?))
    }

    /// The set `class` belongs to (itself unless symbiotic).
    pub fn symbiotic_set(&self, class: u32) -> Vec<u32> {
        self.throttle.symbiotic_set(class)
    }

    fn context_key(&self, ctx: u32) -> u64 {
        if self.cfg.context_aware {
            u64::from(ctx)
        } else {
            0
        }
    }

    fn open(&mut self, ctx: u32, class: u32) {
        let degree = if self.cfg.throttle { self.throttle.degree(class, self.cfg.degree) } else { self.cfg.degree };
        let mut recent = self.spare.pop().unwrap_or_default();
        recent.clear();
        let key = self.context_key(ctx);
        if let Some(old) = self.contexts.insert(key, Context { class, recent, mined: 0, dropped: 0, degree }) {
            self.close(old);
        }
    }

    /// Mines the prefixes ending at `recent[e]` (each length configured,
    /// and its position) with the `G` blocks after it as suffixes.
    fn mine_at(rules: &mut RuleCache, cfg: &Config, c: &Context, e: usize) {
        let recent = &c.recent;
        // The prefixes ending at `e`, as (key, blocks); one with a repeated
        // block is no prefix.
        let mut prefixes = [(PrefixKey::position(0, 0), [0; 3]); 3];
        let mut count = 0;
        for order in cfg.min_order..=cfg.max_order.min(e + 1) {
            let mut of = [0; 3];
            for (slot, k) in (e + 1 - order..=e).enumerate() {
                of[slot] = recent[k];
            }
            let prefix = &of[..order];
            if !prefix.iter().enumerate().any(|(i, b)| prefix[i + 1..].contains(b)) {
                prefixes[count] = (PrefixKey::blocks(c.class, prefix), of);
                count += 1;
            }
        }
        let end = (e + 1 + cfg.lookahead).min(recent.len());
        for j in e + 1..end {
            let block = recent[j];
            if (e + 1..j).any(|k| recent[k] == block) {
                continue;
            }
            let next = j == e + 1;
            for (key, of) in &prefixes[..count] {
                if !of[..usize::from(key.order)].contains(&block) {
                    rules.add(*key, block, next);
                }
            }
            if cfg.by_position && block != recent[e] {
                rules.add(PrefixKey::position(c.class, c.dropped + e as u64), block, next);
            }
        }
    }

    /// Mines the windows not mined yet (they end with the sequence) and
    /// recycles the buffer.
    fn close(&mut self, c: Context) {
        for e in c.mined..c.recent.len() {
            Self::mine_at(&mut self.rules, &self.cfg, &c, e);
        }
        self.spare.push(c.recent);
    }

    /// Appends to `scratch` the suffixes predicted from `history` (longest
    /// prefix first, then shorter, then the position `position`) not there
    /// already, each source's best supported first; the keys used are left
    /// in `keys`. `touch`: mark the prefixes used (a real lookup; the
    /// account's lookups leave the rule cache as it was).
    fn predict(&mut self, class: u32, position: u64, touch: bool) {
        let sources = (self.cfg.min_order..=self.cfg.max_order)
            .rev()
            .filter(|&m| m <= self.history.len())
            .map(|m| PrefixKey::blocks(class, &self.history[self.history.len() - m..]))
            .chain(self.cfg.by_position.then(|| PrefixKey::position(class, position)));
        self.keys.clear();
        self.keys.extend(sources);
        for i in 0..self.keys.len() {
            let key = self.keys[i];
            let mut found = if touch { self.rules.lookup(&key).to_vec() } else { self.rules.peek(&key).to_vec() };
            found.sort_by(|x, y| y.count.cmp(&x.count).then(x.block.cmp(&y.block)));
            for s in found {
                if !self.scratch.iter().any(|t| t.block == s.block) {
                    self.scratch.push(s);
                }
            }
        }
    }

    /// Starts the account's record of a lookup at a read.
    fn explain_start(&mut self, triggered: bool, degree: usize) {
        if let Some(l) = &mut self.explained {
            l.triggered = triggered;
            l.degree = degree;
            l.candidates.clear();
            l.keys.clear();
            l.clock = self.rules.clock();
        }
    }

    /// Adds the last step's keys and candidates to the account's record.
    fn explain_step(&mut self, cached: &dyn Fn(Key) -> bool) {
        if let Some(l) = &mut self.explained {
            l.keys.extend_from_slice(&self.keys);
            for s in &self.scratch {
                if !l.candidates.iter().any(|c| c.0 == s.block) {
                    l.candidates.push((s.block, cached(s.block)));
                }
            }
        }
    }
}

impl Prefetcher for QuickMine {
    fn name(&self) -> String {
        let c = &self.cfg;
        let orders = format!("orders {}-{}", c.min_order, c.max_order);
        let ahead = format!("ahead {}", c.ahead);
        let variants: Vec<&str> = [
            ((c.min_order, c.max_order) != (2, 2), orders.as_str()),
            (c.by_position, "position"),
            (c.ahead > 1, ahead.as_str()),
            (c.late_ns > 0, "timely"),
            (c.on_hit, "lookups on hits"),
            (!c.context_aware, "no context"),
            (!c.throttle, "no throttle"),
            (!c.on_promote, "miss only"),
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
        let (max_order, window) = (self.cfg.max_order, self.cfg.max_order + self.cfg.lookahead);
        let c = self.contexts.get_mut(&key).expect("opened above");
        if c.recent.len() == window {
            c.recent.pop_front();
            c.dropped += 1;
            c.mined = c.mined.saturating_sub(1);
        }
        c.recent.push_back(d.block);
        if c.recent.len() == window {
            for e in c.mined..max_order {
                Self::mine_at(&mut self.rules, &self.cfg, c, e);
            }
            c.mined = max_order;
        }
        let (class, degree) = (c.class, c.degree);
        let position = c.dropped + c.recent.len() as u64 - 1;
        self.history.clear();
        self.history.extend(c.recent.range(c.recent.len().saturating_sub(max_order)..));
        if d.class == Class::Promote {
            if let Some(o) = self.outstanding.get_mut(&d.block) {
                o.late = self.cfg.late_ns > 0 && d.time_ns < o.issued_ns.saturating_add(self.cfg.late_ns);
                self.throttle.promoted(o.class, class);
            }
        }
        let trigger = self.cfg.on_hit || if self.cfg.on_promote { is_trigger(d.class) } else { d.class == Class::Miss };
        self.explain_start(trigger, degree);
        // The paper's rules need two blocks; shorter prefixes and positions
        // can predict from the first.
        if self.history.len() < self.cfg.min_order && !self.cfg.by_position {
            return;
        }
        if !trigger || degree == 0 {
            if self.explained.is_some() {
                // What a lookup would have found, for the account only.
                self.scratch.clear();
                self.predict(class, position, false);
                self.explain_step(cached);
            }
            return;
        }
        for step in 0..self.cfg.ahead {
            self.scratch.clear();
            self.predict(class, position + step as u64, true);
            self.explain_step(cached);
            let start = out.len();
            for s in &self.scratch {
                if out.len() - start == degree {
                    break;
                }
                if !cached(s.block) && s.block != d.block && !out.contains(&s.block) {
                    out.push(s.block);
                    self.outstanding.insert(s.block, Outstanding { class, issued_ns: d.time_ns, late: false });
                }
            }
            // The guessed next read: the suffix most often right after.
            let guess = self.scratch.iter().filter(|s| s.next > 0).max_by_key(|s| s.next).map(|s| s.block);
            let Some(next) = guess else { break };
            self.history.push(next);
            let keep = self.history.len().saturating_sub(max_order);
            self.history.drain(..keep);
        }
    }

    fn outcome(&mut self, block: Key, used: bool) {
        let Some(Outstanding { class, late, .. }) = self.outstanding.remove(&block) else { return };
        self.throttle.outcome(class, used && !late);
    }

    fn rule_count(&self) -> usize {
        self.rules.rules()
    }

    fn explain(&mut self) -> bool {
        self.rules.keep_history();
        self.explained.get_or_insert_with(Lookup::default);
        true
    }

    fn last_lookup(&self) -> Option<&Lookup> {
        self.explained.as_ref()
    }

    fn first_mined(&self, key: &PrefixKey, block: Key) -> Option<u64> {
        self.rules.first_added(key, block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;
    use proptest::prelude::*;

    fn config(g: usize) -> Config {
        Config { max_prefixes: 1000, grace: 0, ..Config::paper(g) }
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
            .map(|(k, s)| {
                let mut c: Vec<Key> = s.iter().map(|s| s.block).collect();
                c.sort();
                (k.of[0], k.of[1], c)
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

    /// Runs `seqs` as contexts of template 0, one after another, and
    /// returns what a new context prefetches at each read of `probe`.
    fn prefetched_along(cfg: Config, seqs: &[&[Key]], probe: &[Key]) -> Vec<Vec<Key>> {
        let mut q = QuickMine::new(cfg).unwrap();
        let learned: Vec<(u32, &[Key])> = seqs.iter().enumerate().map(|(i, s)| (i as u32, *s)).collect();
        run_contexts(&mut q, &learned, false);
        let ctx = seqs.len() as u32;
        q.begin(ctx, 0);
        probe
            .iter()
            .map(|&b| {
                let mut out = Vec::new();
                q.access(&demand(ctx, b), &|_| false, &mut out);
                out
            })
            .collect()
    }

    fn variable_order(g: usize) -> Config {
        Config { min_order: 1, max_order: 3, ..config(g) }
    }

    /// 2 3 is followed by 4 three times (after 1) and by 5 once (after 9):
    /// the order-3 prefix 9 2 3 tells them apart, and a prefix never seen
    /// at length 2 (8 6) falls back to what 6 alone predicted.
    #[test]
    fn variable_order_prefers_long_prefixes_and_falls_back_to_short_ones() {
        let seqs: &[&[Key]] = &[&[1, 2, 3, 4], &[1, 2, 3, 4], &[1, 2, 3, 4], &[9, 2, 3, 5], &[6, 7]];
        let one = |cfg: Config| Config { degree: 1, ..cfg };
        let paper = prefetched_along(one(config(1)), seqs, &[9, 2, 3]);
        assert_eq!(paper[2], vec![4], "2 3 -> 4 is the best supported pair rule");
        let vo = prefetched_along(one(variable_order(1)), seqs, &[9, 2, 3]);
        assert_eq!(vo[2], vec![5], "9 2 3 -> 5");
        assert!(prefetched_along(config(1), seqs, &[8, 6])[1].is_empty(), "8 6 was never seen");
        assert_eq!(prefetched_along(variable_order(1), seqs, &[8, 6])[1], vec![7], "6 -> 7");
    }

    /// Contexts of a template read a fresh key (100+), then 50, another
    /// fresh key, then 60: block rules never see a fresh key twice, rules
    /// keyed by position know what the next positions read.
    #[test]
    fn position_rules_predict_around_keys_never_seen() {
        let seqs: Vec<Vec<Key>> = (0..4).map(|i| vec![100 + i, 50, 200 + i, 60]).collect();
        let seqs: Vec<&[Key]> = seqs.iter().map(|s| s.as_slice()).collect();
        let probe = [999, 50, 998, 60];
        let paper = prefetched_along(config(3), &seqs, &probe);
        assert!(paper.iter().all(|o| o.is_empty()), "no block rule applies: {paper:?}");
        let by_position = prefetched_along(Config { by_position: true, ..config(3) }, &seqs, &probe);
        // 50 and 60 follow position 0 every time, each fresh key once.
        assert_eq!(by_position[0][..2], [50, 60]);
        assert_eq!(by_position[2], vec![60], "position 2 is followed by 60");
    }

    /// With a window of one block, a lookup predicts only the next read;
    /// looking ahead along the guessed reads fetches the one after too.
    #[test]
    fn lookahead_chains_past_the_mining_window() {
        let seqs: &[&[Key]] = &[&[1, 2, 3, 4, 5, 6], &[1, 2, 3, 4, 5, 6]];
        let near = prefetched_along(config(1), seqs, &[1, 2]);
        assert_eq!(near[1], vec![3]);
        let far = prefetched_along(Config { ahead: 3, ..config(1) }, seqs, &[1, 2]);
        assert_eq!(far[1], vec![3, 4, 5]);
    }

    /// A hit triggers no lookup in the paper's QuickMine; with `on_hit` it
    /// does, and asks for what is not cached.
    #[test]
    fn lookups_on_hits_prefetch_after_a_hit() {
        let seqs: &[&[Key]] = &[&[1, 2, 3], &[1, 2, 3]];
        let after_hit = |cfg: Config| {
            let mut q = QuickMine::new(cfg).unwrap();
            let learned: Vec<(u32, &[Key])> = seqs.iter().enumerate().map(|(i, s)| (i as u32, *s)).collect();
            run_contexts(&mut q, &learned, false);
            q.begin(9, 0);
            let mut out = Vec::new();
            q.access(&demand(9, 1), &|_| false, &mut out);
            q.access(&Demand { class: Class::Hit, ..demand(9, 2) }, &|_| false, &mut out);
            out
        };
        assert!(after_hit(config(3)).is_empty());
        assert_eq!(after_hit(Config { on_hit: true, ..config(3) }), vec![3]);
    }

    /// A template whose prefetches are all used, but demanded `gap_ns` after
    /// their issue: how many it issues over 400 contexts with `late_ns`.
    fn issued_when_demanded_after(gap_ns: u64, late_ns: u64) -> usize {
        let mut q = QuickMine::new(Config { late_ns, ..config(2) }).unwrap();
        let mut issued = 0;
        for round in 0..400u32 {
            q.begin(round, 0);
            let mut out = Vec::new();
            let t = u64::from(round) * 1_000_000_000;
            q.access(&Demand { time_ns: t, ..demand(round, 1) }, &|_| false, &mut out);
            q.access(&Demand { time_ns: t + 1_000, ..demand(round, 2) }, &|_| false, &mut out);
            issued += out.len();
            let class = if out.contains(&3) { Class::Promote } else { Class::Miss };
            q.access(&Demand { time_ns: t + 1_000 + gap_ns, class, ..demand(round, 3) }, &|_| false, &mut Vec::new());
            for &b in &out {
                q.outcome(b, true);
            }
            q.end(round);
        }
        issued
    }

    #[test]
    fn timeliness_throttles_prefetches_that_arrive_after_their_demand() {
        // Without the timeliness check, or with demands well after the
        // prefetch, every context but the first prefetches 3.
        assert_eq!(issued_when_demanded_after(10_000, 0), 399);
        assert_eq!(issued_when_demanded_after(1_000_000, 100_000), 399);
        // Demanded 10 µs after issue, with a 100 µs device: all late, so
        // wasted, and the template is throttled as in the accuracy test.
        let late = issued_when_demanded_after(10_000, 100_000);
        assert!(late <= WINDOW as usize + 400 / PROBE_EVERY as usize + 1, "issued {late}");
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
            let cfg = Config { max_prefixes, max_suffixes, grace, degree: 3, ..Config::paper(g) };
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

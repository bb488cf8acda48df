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
//! - **Fallback** (`fallback`, issue 46's second round, `qm-fallback`):
//!   one-block and position rules are looked up only when the paper's
//!   two-block rule has no candidate, one-block first; a fallback suffix
//!   needs support [`FALLBACK_SUPPORT`], and each fallback kind has its own
//!   per-template throttle, which never sees the base rules' outcomes nor
//!   they its own (`docs/dev/prefetch-fallback-remedies.md`).
//! - **Hit lookups** ([`HitLookups`], `docs/dev/prefetch-hit-lookup-remedies.md`):
//!   hits look rules up too, either sharing the throttles (`qm-account`) or
//!   with their prefetches a kind of their own, throttled per template on
//!   their own, so a poor hit lookup silences only itself; gated
//!   (`qm-hits-gated`), all hit lookups together also pass a net-benefit
//!   gate ([`NetGate`], `qm-guarded`'s): their prefetches used in time
//!   against miss lookups' prefetches they pushed out of the partition that
//!   a demand then missed.
//! - **Top apart** (`top_apart`, `qm-hits-top`, round 9 of
//!   `docs/dev/prefetch-degree-ceiling.md`): each kind's per-template
//!   throttle is split in two, one judging only the first block each lookup
//!   asks for, one the others, so a lookup whose best candidate pays keeps
//!   asking for it when the rest do not.
//! - **Pooled one-block rules** (`pooled`, `qm-hits-pooled`, round 14 of
//!   `docs/dev/prefetch-graph-remedies.md`): every one-block rule is also
//!   counted under a template-free key ([`ANY_CLASS`]), looked up after
//!   the template's own one-block rule as a one-block fallback, so a block
//!   pair several templates read once each reaches the fallback support.

use std::collections::VecDeque;

use hearth_core::{Key, KeyMap};

use crate::account::{Lookup, LookupKind};
pub use crate::rules::{PrefixKey, RuleCache, Suffix};
use crate::throttle::{NetGate, Throttle};
pub use crate::throttle::{FULL_ACCURACY, MIN_ACCURACY, PROBE_EVERY, SYMBIOTIC_USES, WINDOW};
use crate::{is_trigger, Class, Demand, GateStats, PrefetchError, Prefetcher};

/// Fewest times a fallback suffix must have followed its key to be asked for.
pub const FALLBACK_SUPPORT: u32 = 2;

/// Which rules a lookup's candidates came from: the base (every kind but
/// the fallbacks), or fallback one-block or position rules.
const BASE: usize = 0;

/// The kind of the prefetches of hit lookups throttled on their own.
const HIT: usize = 3;

/// Which hits look rules up (a miss or promote always does, as the paper's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitLookups {
    /// None (the paper).
    Never,
    /// Every hit, its prefetches throttled with those of misses.
    Shared,
    /// Every hit, its prefetches a kind of their own with their own
    /// per-template throttle. `gated`: all of them issue only while a
    /// [`NetGate`] over their prefetches used in time against the miss
    /// lookups' prefetches they pushed out of the partition and a demand
    /// then missed is open.
    Throttled { gated: bool },
}

/// Class of I/O outside any begun context.
pub const NO_CLASS: u32 = u32::MAX;

/// The class of pooled one-block rules' keys: every template's at once.
pub const ANY_CLASS: u32 = u32::MAX - 1;

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
    /// Which hits look rules up too, not only misses and promotes (none in
    /// the paper; the miss account's "no lookup").
    pub hit_lookups: HitLookups,
    /// One-block and position rules only where the longest prefix has no
    /// candidate, with support and throttles of their own (needs orders
    /// 1..=2 and positions).
    pub fallback: bool,
    /// The first block a lookup asks for throttled apart from the rest,
    /// per kind and template.
    pub top_apart: bool,
    /// One-block rules also counted over all templates, looked up after
    /// the template's own (needs `fallback`).
    pub pooled: bool,
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
            hit_lookups: HitLookups::Never,
            fallback: false,
            top_apart: false,
            pooled: false,
        }
    }

    /// Kinds of rule mined: one per prefix length, plus positions, plus
    /// pooled one-block rules.
    pub fn rule_kinds(&self) -> usize {
        self.max_order + 1 - self.min_order + usize::from(self.by_position) + usize::from(self.pooled)
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
    /// The fallback kinds' degrees (one-block, position).
    fallback_degrees: [usize; 2],
    /// The degree of hit lookups throttled on their own.
    hit_degree: usize,
    /// With `top_apart`, whether each kind ([`BASE`], the fallbacks,
    /// [`HIT`]) asks for its first block.
    top: [bool; 4],
    /// Blocks this context's lookups asked for that are remembered in
    /// [`QuickMine::pushed_out`] (some may have been forgotten since).
    pushed_out: Vec<Key>,
}

/// A miss lookup's prefetch pushed out of the partition, unused, by a hit
/// lookup's prefetches: remembered while the context that asked for it is
/// open, so a miss on it can be charged to the hit lookups. The value is
/// the context key of the lookup that asked for it.
type PushedOut = u64;

/// A prefetch awaiting its outcome.
#[derive(Clone, Copy)]
struct Outstanding {
    class: u32,
    issued_ns: u64,
    /// Demanded before it could have arrived.
    late: bool,
    /// The rules it came from ([`BASE`], or 1 + the fallback kind), or
    /// [`HIT`] for a hit lookup throttled on its own.
    kind: usize,
    /// The context key of the lookup that asked for it.
    ctx: u64,
    /// Its lookup's first block, counted for the top throttle.
    top: bool,
}

pub struct QuickMine {
    cfg: Config,
    rules: RuleCache,
    contexts: KeyMap<Context>,
    spare: Vec<VecDeque<Key>>,
    throttle: Throttle,
    /// The fallback kinds' own throttles (one-block, position).
    fallback_throttles: [Throttle; 2],
    /// The throttle of [`HitLookups::Throttled`]'s prefetches.
    hit_throttle: Throttle,
    /// With `top_apart`, the throttles of each kind's first blocks.
    top_throttles: [Throttle; 4],
    /// The last read's lookup was a hit lookup that asked for blocks:
    /// prefetches that leave unused before the next read is looked at were
    /// pushed out by its blocks.
    pushing: bool,
    /// Miss lookups' prefetches pushed out by hit lookups' (gated only).
    pushed_out: KeyMap<PushedOut>,
    /// The hit lookups' net benefit (gated only).
    hit_gate: NetGate,
    /// The rules the last lookup step's candidates came from.
    kind: usize,
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
            fallback_throttles: Default::default(),
            hit_throttle: Throttle::default(),
            top_throttles: Default::default(),
            pushing: false,
            pushed_out: KeyMap::default(),
            hit_gate: NetGate::default(),
            kind: BASE,
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

    /// The throttle prefetches of `kind` count for, `top` if a lookup's
    /// first block under `top_apart`.
    fn throttle_of(&mut self, kind: usize, top: bool) -> &mut Throttle {
        if top {
            return &mut self.top_throttles[kind];
        }
        match kind {
            BASE => &mut self.throttle,
            HIT => &mut self.hit_throttle,
            k => &mut self.fallback_throttles[k - 1],
        }
    }

    fn gated(&self) -> bool {
        self.cfg.hit_lookups == HitLookups::Throttled { gated: true }
    }

    fn open(&mut self, ctx: u32, class: u32) {
        let full = self.cfg.degree;
        let degree = if self.cfg.throttle { self.throttle.degree(class, full) } else { full };
        let mut fallback_degrees = [0; 2];
        if self.cfg.fallback {
            for (d, t) in fallback_degrees.iter_mut().zip(&mut self.fallback_throttles) {
                *d = if self.cfg.throttle { t.degree(class, full) } else { full };
            }
        }
        let hit_degree = match self.cfg.hit_lookups {
            HitLookups::Throttled { .. } if self.cfg.throttle => self.hit_throttle.degree(class, full),
            HitLookups::Throttled { .. } => full,
            _ => 0,
        };
        let mut top = [false; 4];
        if self.cfg.top_apart {
            let hits = matches!(self.cfg.hit_lookups, HitLookups::Throttled { .. });
            let used = [true, self.cfg.fallback, self.cfg.fallback, hits];
            for (k, on) in top.iter_mut().enumerate().filter(|&(k, _)| used[k]) {
                *on = !self.cfg.throttle || self.top_throttles[k].degree(class, full) > 0;
            }
        }
        let mut recent = self.spare.pop().unwrap_or_default();
        recent.clear();
        let key = self.context_key(ctx);
        let c = Context {
            class,
            recent,
            mined: 0,
            dropped: 0,
            degree,
            fallback_degrees,
            hit_degree,
            top,
            pushed_out: Vec::new(),
        };
        if let Some(old) = self.contexts.insert(key, c) {
            self.close(key, old);
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
                    if cfg.pooled && key.order == 1 {
                        rules.add(PrefixKey { class: ANY_CLASS, ..*key }, block, next);
                    }
                }
            }
            if cfg.by_position && block != recent[e] {
                rules.add(PrefixKey::position(c.class, c.dropped + e as u64), block, next);
            }
        }
    }

    /// Mines the windows not mined yet (they end with the sequence),
    /// forgets the pushed-out blocks its lookups asked for, and recycles
    /// the buffer.
    fn close(&mut self, key: u64, c: Context) {
        for e in c.mined..c.recent.len() {
            Self::mine_at(&mut self.rules, &self.cfg, &c, e);
        }
        for block in c.pushed_out {
            if self.pushed_out.get(&block) == Some(&key) {
                self.pushed_out.remove(&block);
            }
        }
        self.spare.push(c.recent);
    }

    /// Remembers `block`, asked for by context `ctx` and just pushed out
    /// unused by the prefetches of a hit lookup.
    fn remember_pushed_out(&mut self, block: Key, ctx: u64) {
        let Some(c) = self.contexts.get_mut(&ctx) else { return };
        self.pushed_out.insert(block, ctx);
        c.pushed_out.push(block);
        // Keep the list within twice its live entries (amortised O(1)).
        if c.pushed_out.len() > 2 * self.pushed_out.len() + 16 {
            let live = &self.pushed_out;
            c.pushed_out.retain(|b| live.get(b) == Some(&ctx));
        }
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
            .chain(
                (self.cfg.pooled && !self.history.is_empty())
                    .then(|| PrefixKey::blocks(ANY_CLASS, &self.history[self.history.len() - 1..])),
            )
            .chain(self.cfg.by_position.then(|| PrefixKey::position(class, position)));
        self.keys.clear();
        self.keys.extend(sources);
        self.kind = BASE;
        for i in 0..self.keys.len() {
            let key = self.keys[i];
            // Fallback: the first key with a candidate decides; a key
            // shorter than the longest, or a position, is a fallback kind.
            let kind = if key.order == 0 { 2 } else { usize::from(usize::from(key.order) < self.cfg.max_order) };
            if self.cfg.fallback && !self.scratch.is_empty() {
                self.keys.truncate(i);
                break;
            }
            let mut found = if touch { self.rules.lookup(&key).to_vec() } else { self.rules.peek(&key).to_vec() };
            if let Some(l) = &mut self.explained {
                // A held prefix has at least one suffix.
                if found.is_empty() {
                    l.absent.push(key);
                }
                if self.cfg.fallback && kind != BASE {
                    let weak = found.iter().filter(|s| s.count < FALLBACK_SUPPORT);
                    l.below_support.extend(weak.map(|s| (key, s.block)));
                }
            }
            if self.cfg.fallback && kind != BASE {
                found.retain(|s| s.count >= FALLBACK_SUPPORT);
                self.kind = kind;
            }
            found.sort_by(|x, y| y.count.cmp(&x.count).then(x.block.cmp(&y.block)));
            for s in found {
                if !self.scratch.iter().any(|t| t.block == s.block) {
                    self.scratch.push(s);
                }
            }
        }
    }

    /// Starts the account's record of a lookup at a read.
    fn explain_start(&mut self, triggered: bool, degree: usize, class: u32) {
        if let Some(l) = &mut self.explained {
            l.triggered = triggered;
            l.degree = degree;
            l.class = class;
            l.candidates.clear();
            l.keys.clear();
            l.absent.clear();
            l.below_support.clear();
            l.clock = self.rules.clock();
        }
    }

    /// Adds the last step's keys and candidates to the account's record,
    /// and whose degree it ran with: a hit lookup's own (`own`), stopped by
    /// the gate (`blocked`), or the kind of rules that answered.
    fn explain_step(&mut self, cached: &dyn Fn(Key) -> bool, own: bool, blocked: bool) {
        if let Some(l) = &mut self.explained {
            l.kind = match self.kind {
                _ if blocked => LookupKind::HitGateClosed,
                _ if own => LookupKind::Hit,
                BASE => LookupKind::Base,
                1 => LookupKind::OneBlockFallback,
                _ => LookupKind::PositionFallback,
            };
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
            (c.hit_lookups == HitLookups::Shared, "lookups on hits"),
            (matches!(c.hit_lookups, HitLookups::Throttled { .. }), "lookups on hits, throttled apart"),
            (self.gated(), "gated"),
            (c.top_apart, "first block throttled apart"),
            (c.pooled, "one-block rules pooled over templates"),
            (c.fallback, "fallback"),
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
                self.close(u64::from(ctx), c);
            }
        }
    }

    fn access(&mut self, d: &Demand, cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        self.pushing = false;
        if d.class == Class::Miss && self.pushed_out.remove(&d.block).is_some() {
            // A hit lookup's prefetches pushed this block out, and it cost a miss.
            self.hit_gate.record(false);
        }
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
        let (class, degree, fallback_degrees, mut hit_degree, mut top) =
            (c.class, c.degree, c.fallback_degrees, c.hit_degree, c.top);
        let position = c.dropped + c.recent.len() as u64 - 1;
        self.history.clear();
        self.history.extend(c.recent.range(c.recent.len().saturating_sub(max_order)..));
        if d.class == Class::Promote {
            if let Some(o) = self.outstanding.get_mut(&d.block) {
                o.late = self.cfg.late_ns > 0 && d.time_ns < o.issued_ns.saturating_add(self.cfg.late_ns);
                let (issuer, kind, first) = (o.class, o.kind, o.top);
                self.throttle_of(kind, first).promoted(issuer, class);
            }
        }
        let hit_lookup = d.class == Class::Hit && self.cfg.hit_lookups != HitLookups::Never;
        let trigger = hit_lookup || if self.cfg.on_promote { is_trigger(d.class) } else { d.class == Class::Miss };
        // A hit lookup throttled apart prefetches at its own degree, whatever rules answer.
        let own = hit_lookup && matches!(self.cfg.hit_lookups, HitLookups::Throttled { .. });
        // The paper's rules need two blocks; shorter prefixes and positions
        // can predict from the first.
        let can_predict = self.history.len() >= self.cfg.min_order || self.cfg.by_position;
        // Gated, a hit lookup that would issue does so only while the hit
        // lookups save at least what they cost, or as one probe in 16.
        let would_issue = hit_degree > 0 || top[HIT];
        let blocked = own && would_issue && can_predict && self.gated() && !self.hit_gate.allows();
        if blocked {
            (hit_degree, top[HIT]) = (0, false);
        }
        // How far down its candidates a kind's lookup may ask: its degree,
        // or the first block alone if only that is on.
        let reach = |kind: usize, degree: usize| degree.max(usize::from(top[kind]));
        self.explain_start(trigger, if own { reach(HIT, hit_degree) } else { reach(BASE, degree) }, class);
        if !can_predict {
            return;
        }
        let any_degree = if own {
            reach(HIT, hit_degree)
        } else {
            reach(BASE, degree).max(reach(1, fallback_degrees[0])).max(reach(2, fallback_degrees[1]))
        };
        if !trigger || any_degree == 0 {
            if self.explained.is_some() {
                // What a lookup would have found, for the account only.
                self.scratch.clear();
                self.predict(class, position, false);
                self.explain_step(cached, own, blocked);
            }
            return;
        }
        let first = out.len();
        for step in 0..self.cfg.ahead {
            self.scratch.clear();
            self.predict(class, position + step as u64, true);
            let (kind, degree) = match self.kind {
                _ if own => (HIT, hit_degree.min(self.cfg.degree)),
                BASE => (BASE, degree),
                k => (k, fallback_degrees[k - 1].min(self.cfg.degree)),
            };
            // Without `top_apart` the first block is asked for with the rest.
            let first_on = if self.cfg.top_apart { top[kind] } else { degree > 0 };
            let last = degree.max(usize::from(first_on));
            if let Some(l) = self.explained.as_mut().filter(|_| self.cfg.fallback) {
                l.degree = last;
            }
            self.explain_step(cached, own, blocked);
            let mut rank = 0;
            for s in &self.scratch {
                if rank == last {
                    break;
                }
                if !cached(s.block) && s.block != d.block && !out.contains(&s.block) {
                    rank += 1;
                    if rank == 1 && !first_on {
                        continue;
                    }
                    out.push(s.block);
                    let first = rank == 1 && self.cfg.top_apart;
                    let o = Outstanding { class, issued_ns: d.time_ns, late: false, kind, ctx: key, top: first };
                    self.outstanding.insert(s.block, o);
                    // Asked for again: a miss on it is no longer the push-out's.
                    self.pushed_out.remove(&s.block);
                }
            }
            // The guessed next read: the suffix most often right after.
            let guess = self.scratch.iter().filter(|s| s.next > 0).max_by_key(|s| s.next).map(|s| s.block);
            let Some(next) = guess else { break };
            self.history.push(next);
            let keep = self.history.len().saturating_sub(max_order);
            self.history.drain(..keep);
        }
        if own && out.len() > first {
            self.pushing = true;
        }
    }

    fn outcome(&mut self, block: Key, used: bool) {
        let Some(Outstanding { class, late, kind, ctx, top, .. }) = self.outstanding.remove(&block) else { return };
        self.throttle_of(kind, top).outcome(class, used && !late);
        if kind == HIT && used && !late && self.gated() {
            self.hit_gate.record(true);
        }
        if self.pushing && !used && kind != HIT && self.gated() {
            self.remember_pushed_out(block, ctx);
        }
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

    fn gate_stats(&self) -> Option<GateStats> {
        self.gated().then(|| self.hit_gate.stats())
    }
}

#[cfg(test)]
mod tests;

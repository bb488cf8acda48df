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
//! - **Lift, charged by block, with a margin** (`lift_charged`,
//!   `qm-hits-lift-margin`, rounds 17 and 20 of
//!   `docs/dev/prefetch-lsm-remedies.md`): a context whose
//!   template's hit throttle is off makes its hit lookups at half degree
//!   anyway while one gate over the ranks the lift adds is open (saved at
//!   least [`LIFT_MARGIN`] x cost over its last window); its cost is
//!   any prefetch it aged out that any context then missed within one
//!   partition turnover, its saving the added prefetches used in time that
//!   no unlifted lookup claimed. Closed, it lifts nothing (no probes of its
//!   own): the hit throttles' own probes are its sample ([`lift`]).

use std::collections::VecDeque;

use hearth_core::{Key, KeyMap};

use crate::account::Lookup;
pub use crate::rules::{PrefixKey, RuleCache, Suffix};
use crate::throttle::{NetGate, Throttle};
pub use crate::throttle::{FULL_ACCURACY, MIN_ACCURACY, PROBE_EVERY, SYMBIOTIC_USES, WINDOW};
use crate::{is_trigger, Class, Demand, GateStats, PrefetchError, Prefetcher};
pub use config::{Config, HitLookups, ANY_CLASS, FALLBACK_SUPPORT, NO_CLASS};
use lift::Lift;
pub use lift::{LiftStats, LIFT_LATE_NS, LIFT_MARGIN};

/// Which rules a lookup's candidates came from: the base (every kind but
/// the fallbacks), or fallback one-block or position rules.
const BASE: usize = 0;

/// The kind of the prefetches of hit lookups throttled on their own.
const HIT: usize = 3;

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
    /// Lifted: the hit degree and first block the throttles gave it.
    lifted_from: Option<(usize, bool)>,
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
    /// Its issue number and demand number at issue (`lift_charged` only).
    seq: u64,
    issued_at: u64,
    /// A rank the lift added; not demanded before [`LIFT_LATE_NS`] had
    /// passed; claimed by an unlifted lookup while it waited.
    added: bool,
    added_in_time: bool,
    claimed: bool,
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
    /// The lift's gate, added prefetches and victims (`lift_charged` only).
    lift: Lift,
    /// Demands seen (the lift's clock).
    demands: u64,
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
            lift: Lift::new(),
            demands: 0,
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
        let mut hit_degree = match self.cfg.hit_lookups {
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
        // Off, the hit lookups are lifted to half degree while what the lift
        // adds saves at least what it costs. The ranks a non-probing throttle
        // would not ask for count as added, so the throttles' own probes
        // sample the lift for its gate, closed or open.
        let rest_off = self.hit_throttle.is_off(class);
        let top_off = self.cfg.top_apart && self.top_throttles[HIT].is_off(class);
        let mut lifted_from = None;
        if self.cfg.lift_charged && self.cfg.throttle && (rest_off || top_off) {
            lifted_from = Some((if rest_off { 0 } else { hit_degree }, top[HIT] && !top_off));
            if self.lift.allows() {
                hit_degree = hit_degree.max(full.div_ceil(2));
                top[HIT] = true;
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
            lifted_from,
            pushed_out: Vec::new(),
        };
        if let Some(old) = self.contexts.insert(key, c) {
            self.close(key, old);
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
            (
                c.lift_charged,
                "off hit lookups lifted, charged by block, sampled by the throttles' probes, with a margin",
            ),
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
        self.demands += 1;
        if d.class == Class::Miss && self.cfg.lift_charged {
            self.lift.missed(d.block, self.demands);
        }
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
        let (class, degree, fallback_degrees, mut hit_degree, mut top, lifted_from) =
            (c.class, c.degree, c.fallback_degrees, c.hit_degree, c.top, c.lifted_from);
        let position = c.dropped + c.recent.len() as u64 - 1;
        self.history.clear();
        self.history.extend(c.recent.range(c.recent.len().saturating_sub(max_order)..));
        if d.class == Class::Promote {
            if let Some(o) = self.outstanding.get_mut(&d.block) {
                o.late = self.cfg.late_ns > 0 && d.time_ns < o.issued_ns.saturating_add(self.cfg.late_ns);
                o.added_in_time = o.added && d.time_ns >= o.issued_ns.saturating_add(LIFT_LATE_NS);
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
            // Whether the unlifted throttles would have asked for `rank`.
            let unlifted = |rank: usize| match lifted_from.filter(|_| kind == HIT) {
                Some((degree, top)) => {
                    if rank == 1 {
                        top
                    } else {
                        rank <= degree
                    }
                }
                None => rank > 1 || first_on,
            };
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
                    let added = self.cfg.lift_charged && !unlifted(rank);
                    let seq =
                        if self.cfg.lift_charged { self.lift.issue(s.block, added, &self.outstanding) } else { 0 };
                    let o = Outstanding {
                        class,
                        issued_ns: d.time_ns,
                        late: false,
                        kind,
                        ctx: key,
                        top: first,
                        seq,
                        issued_at: self.demands,
                        added,
                        added_in_time: added,
                        claimed: false,
                    };
                    self.outstanding.insert(s.block, o);
                    // Asked for again: a miss on it is no longer the push-out's.
                    self.pushed_out.remove(&s.block);
                } else if self.cfg.lift_charged && s.block != d.block && unlifted(rank + 1) {
                    // An added prefetch still waiting where this lookup, unlifted,
                    // would have asked for it: the lift only pre-empted it.
                    if let Some(o) = self.outstanding.get_mut(&s.block).filter(|o| o.added) {
                        o.claimed = true;
                    }
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
        let Some(o) = self.outstanding.remove(&block) else { return };
        let Outstanding { class, late, kind, ctx, top, .. } = o;
        self.throttle_of(kind, top).outcome(class, used && !late);
        if kind == HIT && used && !late && self.gated() {
            self.hit_gate.record(true);
        }
        if self.pushing && !used && kind != HIT && self.gated() {
            self.remember_pushed_out(block, ctx);
        }
        if self.cfg.lift_charged {
            if used && o.added {
                self.lift.used(o.added_in_time, o.claimed);
            }
            if !used && !o.added {
                self.lift.victims.turnover(o.issued_at, self.demands);
                self.lift.dropped(block, o.seq, self.demands, &self.outstanding);
            }
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

    fn lift_stats(&self) -> Option<LiftStats> {
        self.cfg.lift_charged.then(|| self.lift.stats())
    }
}

mod config;
mod lift;
mod lookup;
mod mine;
#[cfg(test)]
mod tests;

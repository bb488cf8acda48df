//! The miss account: for every read miss the ceiling's oracle calls
//! predictable in context ([`crate::ceiling`]), why the prefetcher of one
//! run missed it; and for every wasted prefetch, why it was wasted.
//!
//! A driver feeds it the run as it goes (the simulator does, with
//! `hearth_sim::prefetch::Setup::explain`): context begins and ends, each
//! read with the cache's class and the oracle's verdict, what the
//! prefetcher's lookup at that read saw ([`Lookup`], from
//! [`crate::Prefetcher::last_lookup`]), the prefetches issued and their
//! outcomes. The definitions, fixed before any workload was measured:
//!
//! A counted read miss of block `b` in context `c`, predictable in context,
//! gets the first reason that holds:
//! 1. **pollution**: `b` was prefetched since its last demand and dropped
//!    from the prefetch partition unused before this read. Split
//!    ([`PollutionSplit`]) into the drops that took a prediction from `c`
//!    (`b` waited, or was asked for, at one of `c`'s last lookups that had
//!    it as a candidate, and was dropped after it: **pushed out** by a
//!    landing prefetch, or **dropped at a demand**) and those that did not
//!    (**predicted, not waiting**, **own, earlier** and **other context**,
//!    also counted by the reason 2-5 they would have had); see [`pollution`].
//! 2. `b` was a candidate of one of `c`'s lookups at its last
//!    [`WINDOW`] reads (the oracle's lookahead; the ranked list before the
//!    degree cut):
//!    - **outranked**: at a lookup that ran (a miss or promote triggered it)
//!      with a degree above 0, and `b` was not cached then: the blocks
//!      ranked above it filled the degree (or the partition had no room);
//!    - **cached then**: it was cached at that lookup (so not asked for) and
//!      evicted before this read;
//!    - **throttled**: the lookup ran with degree 0 (its template's
//!      prefetching was off);
//!    - **no lookup**: the reads were hits, which trigger no lookup.
//! 3. **evicted**: a rule from one of those lookups' keys to `b` had been
//!    mined before the lookup, but was not among its candidates. Split
//!    ([`EvictedSplit`]) by why, the first that holds at any of those
//!    lookups: **below support** (the rule was held, under the support its
//!    kind needs to be asked for), **suffix replaced** (its prefix was held,
//!    the suffix not: pushed out of a full list, or refused while the list
//!    was in its grace period), **prefix evicted** (the prefix was not held);
//!    and by the kind of that rule's key (the first such key, newest lookup
//!    first, each lookup's keys in the order it consulted them).
//! 4. **mispredicted**: the lookups had candidates, none of them `b`, and
//!    no rule from their keys to `b` had been mined (the scheme's rules,
//!    keyed more narrowly than the oracle's, predicted other blocks).
//! 5. **cold**: the lookups had no candidates at all (no rule for these
//!    keys, or too short a history to have keys).
//!
//! Reasons 2-5 need the prefetcher to report its lookups; for one that does
//! not, those misses are **unexplained**.
//!
//! **Too late** counts the promotes after the warm-up whose prefetch the
//! device had not started by the demand (the simulator's timing model then
//! reads the block on demand); they are promotes in the cache's counters,
//! misses to the client, so the account's total is the predictable misses
//! plus these. Without a device model it is 0.
//!
//! A wasted prefetch (issued after the warm-up, dropped from the partition
//! unused) is **dropped before use** if the context that asked for it read
//! it after the drop, else **mispredicted**: its context ended (or the
//! trace did) without reading it.
//!
//! Throttling, per template and kind of lookup (its benefit, its lookups
//! at degree 0 and a shadow of what they would have prefetched), is in
//! [`throttled`].

pub mod pollution;
mod throttled;

use std::collections::VecDeque;

use hearth_core::{Key, KeyMap};
use serde::Serialize;

pub use self::pollution::{Fate, OtherwiseReasons, PollutionSplit};
pub use self::throttled::ThrottleRow;
use crate::ceiling::Predictable;
use crate::rules::PrefixKey;
use crate::{Class, Prefetcher};

/// Reads back a lookup can have predicted a miss from: the ceiling's
/// default lookahead.
pub const WINDOW: usize = 3;

/// What a prefetcher's lookup at one read saw.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    /// Whether the read triggered a lookup; if not, the candidates are what
    /// one would have found (computed for the account only).
    pub triggered: bool,
    /// The degree the lookup ran with (0: throttled off).
    pub degree: usize,
    /// Every candidate, best first, and whether it was cached then.
    pub candidates: Vec<(Key, bool)>,
    /// The rule keys looked up.
    pub keys: Vec<PrefixKey>,
    /// The rule table's clock at the lookup ([`crate::rules::RuleCache::clock`]).
    pub clock: u64,
    /// Keys looked up whose prefix the rule table did not hold.
    pub absent: Vec<PrefixKey>,
    /// Rules held under the keys but left out of the candidates for too
    /// little support.
    pub below_support: Vec<(PrefixKey, Key)>,
    /// The context's template.
    pub class: u32,
    /// Whose degree the lookup ran with.
    pub kind: LookupKind,
}

/// Which throttle's degree a lookup ran with (QuickMine's kinds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupKind {
    /// A miss or promote lookup answered by the base rules.
    #[default]
    Base,
    /// A miss or promote lookup answered by one-block fallback rules.
    OneBlockFallback,
    /// A miss or promote lookup answered by position fallback rules.
    PositionFallback,
    /// A hit lookup throttled on its own.
    Hit,
    /// A hit lookup stopped by the net-benefit gate.
    HitGateClosed,
}

impl LookupKind {
    pub fn name(self) -> &'static str {
        match self {
            LookupKind::Base => "miss, base rules",
            LookupKind::OneBlockFallback => "miss, one-block fallback",
            LookupKind::PositionFallback => "miss, position fallback",
            LookupKind::Hit => "hit",
            LookupKind::HitGateClosed => "hit, gate closed",
        }
    }
}

/// Counts by the kind of a rule's key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ByRuleKind {
    pub position: u64,
    pub one_block: u64,
    pub two_block: u64,
    pub three_block: u64,
}

impl ByRuleKind {
    fn count(&mut self, key: &PrefixKey) {
        match key.order {
            0 => self.position += 1,
            1 => self.one_block += 1,
            2 => self.two_block += 1,
            _ => self.three_block += 1,
        }
    }
    /// `(name, count)` of every kind.
    pub fn rows(&self) -> [(&'static str, u64); 4] {
        [
            ("two-block", self.two_block),
            ("one-block", self.one_block),
            ("three-block", self.three_block),
            ("position", self.position),
        ]
    }
    pub fn total(&self) -> u64 {
        self.rows().iter().map(|r| r.1).sum()
    }
}

/// The **evicted** misses by why their rule was not a candidate, each by
/// rule kind (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EvictedSplit {
    pub below_support: ByRuleKind,
    pub suffix_replaced: ByRuleKind,
    pub prefix_evicted: ByRuleKind,
}

impl EvictedSplit {
    /// `(name, counts)` of every cause.
    pub fn rows(&self) -> [(&'static str, &ByRuleKind); 3] {
        [
            ("below support", &self.below_support),
            ("suffix replaced", &self.suffix_replaced),
            ("prefix evicted", &self.prefix_evicted),
        ]
    }
    pub fn total(&self) -> u64 {
        self.rows().iter().map(|r| r.1.total()).sum()
    }
    fn count(&mut self, cause: Evicted, key: &PrefixKey) {
        match cause {
            Evicted::BelowSupport => self.below_support.count(key),
            Evicted::SuffixReplaced => self.suffix_replaced.count(key),
            Evicted::PrefixEvicted => self.prefix_evicted.count(key),
        }
    }
}

/// Why the predictable misses were missed: the rows of the account.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MissReasons {
    pub cold: u64,
    pub evicted: u64,
    pub mispredicted: u64,
    pub outranked: u64,
    pub cached_then: u64,
    pub throttled: u64,
    pub no_lookup: u64,
    pub pollution: u64,
    pub too_late: u64,
    pub unexplained: u64,
}

impl MissReasons {
    /// `(name, count)` of every reason, in the table's order.
    pub fn rows(&self) -> [(&'static str, u64); 10] {
        [
            ("cold", self.cold),
            ("evicted", self.evicted),
            ("mispredicted", self.mispredicted),
            ("outranked", self.outranked),
            ("cached then", self.cached_then),
            ("throttled", self.throttled),
            ("no lookup", self.no_lookup),
            ("pollution", self.pollution),
            ("too late", self.too_late),
            ("unexplained", self.unexplained),
        ]
    }
    pub fn total(&self) -> u64 {
        self.rows().iter().map(|r| r.1).sum()
    }
}

/// Why wasted prefetches were wasted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WasteReasons {
    pub dropped_before_use: u64,
    pub mispredicted: u64,
}

/// The account of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Account {
    /// Read misses after the warm-up that the oracle calls predictable in context.
    pub predictable_misses: u64,
    pub misses: MissReasons,
    /// `misses.evicted`, split.
    pub evicted: EvictedSplit,
    /// `misses.pollution`, split.
    pub pollution: PollutionSplit,
    pub wasted: WasteReasons,
    /// Throttling by template and kind of lookup, rows with any count.
    pub throttle: Vec<ThrottleRow>,
}

/// Why a mined rule was not a candidate, closest to being one first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Evicted {
    BelowSupport,
    SuffixReplaced,
    PrefixEvicted,
}

/// A context's last [`WINDOW`] lookups, newest last, each with the
/// accountant's clock when it was made.
type Window = VecDeque<(u64, Lookup)>;

/// If a rule from a key of `window`'s lookups to `block` had been mined
/// before that lookup (the miss is **evicted**), the cause and key of the
/// first such rule, by cause then newest lookup then key order.
fn evicted_cause(window: &Window, block: Key, prefetcher: &dyn Prefetcher) -> Option<(Evicted, PrefixKey)> {
    let mut best: Option<(Evicted, PrefixKey)> = None;
    for (_, l) in window.iter().rev() {
        for k in &l.keys {
            if !prefetcher.first_mined(k, block).is_some_and(|at| at <= l.clock) {
                continue;
            }
            let cause = if l.below_support.contains(&(*k, block)) {
                Evicted::BelowSupport
            } else if l.absent.contains(k) {
                Evicted::PrefixEvicted
            } else {
                Evicted::SuffixReplaced
            };
            if best.is_none_or(|(b, _)| cause < b) {
                best = Some((cause, *k));
            }
        }
    }
    best
}

/// Reasons 2-5 of a predictable miss (module docs), from the lookups its
/// context reported.
enum Reason<'a> {
    Outranked,
    CachedThen,
    /// With the newest throttled lookup that had the block as a candidate.
    Throttled(&'a Lookup),
    NoLookup,
    Evicted(Evicted, PrefixKey),
    Mispredicted,
    Cold,
}

fn reason<'a>(window: &'a Window, block: Key, prefetcher: &dyn Prefetcher) -> Reason<'a> {
    let known: Vec<(&Lookup, bool)> =
        window.iter().filter_map(|(_, l)| l.candidates.iter().find(|c| c.0 == block).map(|c| (l, c.1))).collect();
    let ran = |l: &Lookup| l.triggered && l.degree > 0;
    if known.iter().any(|&(l, cached)| ran(l) && !cached) {
        Reason::Outranked
    } else if known.iter().any(|&(l, _)| ran(l)) {
        Reason::CachedThen
    } else if let Some(&(l, _)) = known.iter().rev().find(|&&(l, _)| l.triggered) {
        Reason::Throttled(l)
    } else if !known.is_empty() {
        Reason::NoLookup
    } else if let Some((cause, key)) = evicted_cause(window, block, prefetcher) {
        Reason::Evicted(cause, key)
    } else if window.iter().any(|(_, l)| !l.candidates.is_empty()) {
        Reason::Mispredicted
    } else {
        Reason::Cold
    }
}

/// A prefetched block awaiting an outcome.
struct Waiting {
    /// The asking context.
    ctx: u32,
    /// Issued after the warm-up.
    counted: bool,
    /// If counted, the template and kind of the lookup that asked.
    row: Option<(u32, LookupKind)>,
    /// The clock at the issue.
    issued_at: u64,
}

/// Builds an [`Account`] from a run's events.
#[derive(Default)]
pub struct Accountant {
    account: Account,
    /// The last [`WINDOW`] lookups of each open context.
    lookups: KeyMap<Window>,
    /// Prefetched blocks awaiting an outcome.
    waiting: KeyMap<Waiting>,
    /// Counts demands, lookups and landing drops: orders them.
    clock: u64,
    /// The clock at the current demand.
    demand_at: u64,
    /// Blocks dropped unused since their last demand.
    dropped: KeyMap<pollution::Dropped>,
    /// Wasted prefetches per asking context, not yet judged.
    wasted: KeyMap<Vec<Key>>,
    /// Whether the prefetcher reports its lookups.
    explained: bool,
    throttled: throttled::Throttled,
    /// Past the warm-up.
    counting: bool,
}

impl Accountant {
    /// Asks `prefetcher` to report its lookups (see [`Prefetcher::explain`]);
    /// `partition_blocks` sizes the throttling shadow.
    pub fn new(prefetcher: &mut dyn Prefetcher, partition_blocks: usize) -> Accountant {
        Accountant {
            explained: prefetcher.explain(),
            throttled: throttled::Throttled::new(partition_blocks),
            ..Accountant::default()
        }
    }

    /// The warm-up is over: the throttling rows count from here.
    pub fn start_counting(&mut self) {
        self.counting = true;
    }

    pub fn begin(&mut self, ctx: u32) {
        self.lookups.insert(u64::from(ctx), VecDeque::with_capacity(WINDOW));
    }

    /// A demand (read or write) reached the cache: blocks the cache drops
    /// at it ([`Fate::DroppedAtDemand`]) left before the read's lookup.
    pub fn demand(&mut self) {
        self.clock += 1;
        self.demand_at = self.clock;
    }

    pub fn end(&mut self, ctx: u32) {
        self.lookups.remove(&u64::from(ctx));
        if let Some(left) = self.wasted.remove(&u64::from(ctx)) {
            self.account.wasted.mispredicted += left.len() as u64;
        }
    }

    /// A read of `block` by `ctx`, classed `class` by the cache, with the
    /// oracle's verdict if it is a counted miss; `late` if it is a counted
    /// promote the device had not started. Call before the read's lookup.
    pub fn read(
        &mut self,
        ctx: u32,
        block: Key,
        class: Class,
        verdict: Option<Predictable>,
        late: bool,
        prefetcher: &dyn Prefetcher,
    ) {
        let dropped = self.dropped.remove(&block);
        self.throttled.read(block, class == Class::Miss);
        if let Some(pending) = self.wasted.get_mut(&u64::from(ctx)) {
            if let Some(at) = pending.iter().position(|&b| b == block) {
                pending.swap_remove(at);
                self.account.wasted.dropped_before_use += 1;
            }
        }
        if late {
            self.account.misses.too_late += 1;
        }
        if class != Class::Miss || verdict != Some(Predictable::InContext) {
            return;
        }
        self.account.predictable_misses += 1;
        let m = &mut self.account.misses;
        let empty = VecDeque::new();
        let window = self.lookups.get(&u64::from(ctx)).unwrap_or(&empty);
        if let Some(dropped) = dropped {
            m.pollution += 1;
            let candidate_at = |l: &Lookup| l.candidates.iter().any(|c| c.0 == block);
            let case = if window.iter().any(|&(at, ref l)| candidate_at(l) && dropped.waited_at(at)) {
                pollution::Case::Waiting
            } else if window.iter().any(|(_, l)| candidate_at(l)) {
                pollution::Case::NotWaiting
            } else {
                pollution::Case::Unpredicted
            };
            let otherwise = self.explained.then(|| reason(window, block, prefetcher));
            self.account.pollution.count(ctx, dropped, case, otherwise);
            return;
        }
        if !self.explained {
            m.unexplained += 1;
            return;
        }
        match reason(window, block, prefetcher) {
            Reason::Outranked => m.outranked += 1,
            Reason::CachedThen => m.cached_then += 1,
            Reason::Throttled(l) => {
                m.throttled += 1;
                self.throttled.missed(l);
            }
            Reason::NoLookup => m.no_lookup += 1,
            Reason::Evicted(cause, key) => {
                m.evicted += 1;
                self.account.evicted.count(cause, &key);
            }
            Reason::Mispredicted => m.mispredicted += 1,
            Reason::Cold => m.cold += 1,
        }
    }

    /// The lookup the prefetcher made at `ctx`'s read just accounted.
    pub fn lookup(&mut self, ctx: u32, prefetcher: &dyn Prefetcher) {
        let Some(l) = prefetcher.last_lookup() else { return };
        let waiting = &self.waiting;
        self.throttled.lookup(l, self.counting, |b| waiting.contains_key(&b));
        self.clock += 1;
        let window = self.lookups.entry(u64::from(ctx)).or_default();
        if window.len() == WINDOW {
            window.pop_front();
        }
        window.push_back((self.clock, l.clone()));
    }

    /// `ctx` had `block` prefetched (a backend read was issued).
    pub fn issued(&mut self, ctx: u32, block: Key, counted: bool) {
        let asked = self.lookups.get(&u64::from(ctx)).and_then(|w| w.back()).map(|(_, l)| (l.class, l.kind));
        let row = asked.filter(|_| counted);
        self.throttled.issued(block, row);
        self.waiting.insert(block, Waiting { ctx, counted, row, issued_at: self.clock });
    }

    /// A prefetched block left the partition, demanded or dropped unused
    /// ([`Fate`]).
    pub fn outcome(&mut self, block: Key, fate: Fate) {
        let asked = self.waiting.remove(&block);
        let used = fate == Fate::Used;
        self.throttled.outcome(block, used, asked.as_ref().and_then(|a| a.row));
        if used {
            return;
        }
        let pushed_out = fate == Fate::PushedOut;
        let dropped_at = if pushed_out {
            // Landings follow the read's lookup.
            self.clock += 1;
            self.clock
        } else {
            self.demand_at
        };
        let dropped = pollution::Dropped {
            asker: asked.as_ref().map(|a| a.ctx),
            issued_at: asked.as_ref().map_or(0, |a| a.issued_at),
            dropped_at,
            pushed_out,
        };
        self.dropped.insert(block, dropped);
        if let Some(Waiting { ctx, counted: true, .. }) = asked {
            match self.wasted.get_mut(&u64::from(ctx)) {
                Some(pending) => pending.push(block),
                // Its context has ended: nobody there will read it.
                None if !self.lookups.contains_key(&u64::from(ctx)) => self.account.wasted.mispredicted += 1,
                None => {
                    self.wasted.insert(u64::from(ctx), vec![block]);
                }
            }
        }
    }

    /// The account, judging the wasted prefetches of contexts still open.
    pub fn finish(mut self) -> Account {
        let left: usize = self.wasted.values().map(Vec::len).sum();
        self.account.wasted.mispredicted += left as u64;
        self.account.throttle = self.throttled.finish();
        self.account
    }
}

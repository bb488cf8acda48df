//! QuickMine's throttling, per class (template) and per symbiotic set of
//! classes: tracks how many of a class's prefetches are used; below
//! [`FULL_ACCURACY`] the degree is halved, below [`MIN_ACCURACY`] the class
//! stops prefetching except in one context out of [`PROBE_EVERY`], whose
//! outcomes can re-enable it. Two classes are symbiotic when one's demands
//! promote a real share of the other's prefetches (at least
//! [`SYMBIOTIC_USES`], and at least [`MIN_ACCURACY`] of all the issuer's
//! prefetch outcomes); a symbiotic set's benefit is tracked, and
//! throttled, as one.

use rustc_hash::FxHashMap;
use serde::Serialize;

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

/// Net benefit of a set of extra prefetches (`qm-guarded`'s spare tier,
/// `qm-hits-gated`'s hit lookups), all kinds and templates together:
/// misses they saved against misses they cost. Over each [`WINDOW`] of
/// such events the gate stays open if they saved at least as many misses
/// as they cost; closed, only one trigger in [`PROBE_EVERY`] issues them,
/// whose outcomes can open it again.
#[derive(Default)]
pub(crate) struct NetGate {
    saved: u32,
    cost: u32,
    closed: bool,
    closed_triggers: u32,
    /// Each cost weighs this many saved (0 counts as 1, the default).
    cost_weight: u32,
    stats: GateStats,
}

/// What a [`NetGate`] did, counted since it was made: how its triggers
/// fared and what it weighed, for reports (`prefetch sim --json`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GateStats {
    /// Triggers that came while the gate was open (all issued).
    pub open_lookups: u64,
    /// Triggers that came while it was closed and issued as its probe.
    pub probe_lookups: u64,
    /// Triggers that came while it was closed and issued nothing.
    pub blocked_lookups: u64,
    /// Events weighed: misses saved, misses cost.
    pub saved: u64,
    pub cost: u64,
    /// Windows of [`WINDOW`] events that ended with the gate open, closed.
    pub open_windows: u64,
    pub closed_windows: u64,
}

impl GateStats {
    /// The counts since `earlier`, a snapshot of the same gate.
    pub fn since(&self, earlier: &GateStats) -> GateStats {
        GateStats {
            open_lookups: self.open_lookups - earlier.open_lookups,
            probe_lookups: self.probe_lookups - earlier.probe_lookups,
            blocked_lookups: self.blocked_lookups - earlier.blocked_lookups,
            saved: self.saved - earlier.saved,
            cost: self.cost - earlier.cost,
            open_windows: self.open_windows - earlier.open_windows,
            closed_windows: self.closed_windows - earlier.closed_windows,
        }
    }
}

impl NetGate {
    /// A gate that stays open only while saved >= `weight` x cost.
    pub(crate) fn with_cost_weight(weight: u32) -> NetGate {
        NetGate { cost_weight: weight, ..NetGate::default() }
    }

    pub(crate) fn record(&mut self, saved: bool) {
        if saved {
            self.saved += 1;
            self.stats.saved += 1;
        } else {
            self.cost += 1;
            self.stats.cost += 1;
        }
        if self.saved + self.cost >= WINDOW {
            self.closed = self.saved < self.cost * self.cost_weight.max(1);
            if self.closed {
                self.stats.closed_windows += 1;
            } else {
                self.stats.open_windows += 1;
            }
            (self.saved, self.cost) = (0, 0);
        }
    }

    /// Whether this trigger may issue.
    pub(crate) fn allows(&mut self) -> bool {
        if !self.closed {
            self.stats.open_lookups += 1;
            return true;
        }
        self.closed_triggers = self.closed_triggers.wrapping_add(1);
        let probe = self.closed_triggers.is_multiple_of(PROBE_EVERY);
        if probe {
            self.stats.probe_lookups += 1;
        } else {
            self.stats.blocked_lookups += 1;
        }
        probe
    }

    pub(crate) fn stats(&self) -> GateStats {
        self.stats
    }

    /// Whether this trigger may issue, with no probe while closed.
    pub(crate) fn allows_unprobed(&mut self) -> bool {
        if self.closed {
            self.stats.blocked_lookups += 1;
        } else {
            self.stats.open_lookups += 1;
        }
        !self.closed
    }

    /// Whether the last full window closed it.
    pub(crate) fn closed(&self) -> bool {
        self.closed
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

/// Benefit counters and symbiotic sets of every class seen.
#[derive(Default)]
pub(crate) struct Throttle {
    /// Benefit per symbiotic set, keyed by the set's representative class.
    benefit: FxHashMap<u32, Benefit>,
    /// Union-find parent of each class that joined a symbiotic set.
    parent: FxHashMap<u32, u32>,
    /// Promotes of `issuer`'s prefetches by `user`, for issuer != user.
    cross_uses: FxHashMap<(u32, u32), u32>,
    /// Prefetch outcomes (used or not) per issuing class.
    outcomes: FxHashMap<u32, u32>,
}

impl Throttle {
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

    /// Whether `class`'s set is off (its contexts prefetch only as probes).
    pub(crate) fn is_off(&self, class: u32) -> bool {
        self.benefit.get(&self.set_of(class)).is_some_and(|b| b.level == Level::Off)
    }

    /// The degree a new context of `class` prefetches at (of `full`).
    pub(crate) fn degree(&mut self, class: u32, full: usize) -> usize {
        let set = self.set_of(class);
        match self.benefit.get(&set).map_or(Level::Full, |b| b.level) {
            Level::Full => full,
            Level::Half => full.div_ceil(2),
            Level::Off => {
                let b = self.benefit.get_mut(&set).expect("Off implies tracked");
                b.contexts = b.contexts.wrapping_add(1);
                if b.contexts.is_multiple_of(PROBE_EVERY) {
                    full.div_ceil(2)
                } else {
                    0
                }
            }
        }
    }

    /// A prefetch `issuer` asked for was promoted by a context of `user`.
    pub(crate) fn promoted(&mut self, issuer: u32, user: u32) {
        if issuer == user {
            return;
        }
        let uses = self.cross_uses.entry((issuer, user)).or_insert(0);
        *uses += 1;
        let issued = self.outcomes.get(&issuer).copied().unwrap_or(0).max(1);
        if *uses >= SYMBIOTIC_USES && f64::from(*uses) >= MIN_ACCURACY * f64::from(issued) {
            self.join(issuer, user);
        }
    }

    /// A prefetch of `class` was useful (used in time) or wasted.
    pub(crate) fn outcome(&mut self, class: u32, useful: bool) {
        *self.outcomes.entry(class).or_insert(0) += 1;
        let b = self.benefit.entry(self.set_of(class)).or_default();
        if useful {
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
}

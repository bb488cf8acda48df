//! The **pollution** misses (a prefetch of the block was dropped unused
//! since its last demand), split by whether the drop took a prediction
//! from the reading context (round 18, docs/dev/prefetch-graph-remedies.md).
//! Of a miss of `b` by context `c`, with the last prefetch of `b` dropped:
//!
//! - **pushed out**: `b` waited in the partition (or was asked for) at one
//!   of `c`'s last [`WINDOW`](super::WINDOW) lookups that had it as a
//!   candidate, and a prefetch landing after that lookup pushed it out:
//!   without the push-out the read would have found it;
//! - **dropped at a demand**: the same, but it left at a later demand:
//!   unused for one turnover of the main cache, or an adaptive partition
//!   shrank;
//! - **predicted, not waiting**: `b` was a candidate of those lookups, but
//!   none of them found it waiting or asked for it (it was dropped before,
//!   or prefetched after): reasons 2 (outranked, cached then, throttled,
//!   no lookup) say why the prefetcher did not fetch it;
//! - **own, earlier**: `b` was no candidate of those lookups, and `c` itself
//!   asked for it (earlier than those lookups, or as a spare candidate);
//! - **other context**: no candidate, and another context asked for it
//!   (and never read it while it waited). Without that wrong prefetch `b`
//!   would not have been cached either.
//!
//! Only the first two are losses to the partition; the last three are
//! also counted by the reason the account would have given them without
//! the drop ([`OtherwiseReasons`]).

use serde::Serialize;

use super::{EvictedSplit, Reason};

/// How a prefetched block left the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// A demand took it (a promote).
    Used,
    /// Unused, pushed out by a prefetch landing.
    PushedOut,
    /// Unused, dropped at a demand: aged out after one turnover of the main
    /// cache, or pushed out as an adaptive partition shrank.
    DroppedAtDemand,
}

/// A block dropped unused since its last demand: who asked for its last
/// prefetch (if known), when it was issued and dropped (the accountant's
/// clock), and whether a landing pushed it out.
#[derive(Clone, Copy)]
pub(super) struct Dropped {
    pub asker: Option<u32>,
    pub issued_at: u64,
    pub dropped_at: u64,
    pub pushed_out: bool,
}

impl Dropped {
    /// Whether the block waited (or was asked for) at the lookup made at `at`.
    pub fn waited_at(&self, at: u64) -> bool {
        self.issued_at <= at && at < self.dropped_at
    }
}

/// Which lookups of the reading context had the dropped block.
pub(super) enum Case {
    /// One had it as a candidate while it waited (or asked for it).
    Waiting,
    /// Some had it as a candidate, none while it waited.
    NotWaiting,
    /// None had it as a candidate.
    Unpredicted,
}

/// The reasons 2-5 the account would have given misses (or unexplained,
/// for a prefetcher that does not report its lookups).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OtherwiseReasons {
    pub outranked: u64,
    pub cached_then: u64,
    pub throttled: u64,
    pub no_lookup: u64,
    pub evicted: EvictedSplit,
    pub mispredicted: u64,
    pub cold: u64,
    pub unexplained: u64,
}

impl OtherwiseReasons {
    /// `(name, count)` of every reason, evicted as one.
    pub fn rows(&self) -> [(&'static str, u64); 8] {
        [
            ("outranked", self.outranked),
            ("cached then", self.cached_then),
            ("throttled", self.throttled),
            ("no lookup", self.no_lookup),
            ("evicted", self.evicted.total()),
            ("mispredicted", self.mispredicted),
            ("cold", self.cold),
            ("unexplained", self.unexplained),
        ]
    }
    pub fn total(&self) -> u64 {
        self.rows().iter().map(|r| r.1).sum()
    }
    fn count(&mut self, reason: Option<Reason>) {
        match reason {
            None => self.unexplained += 1,
            Some(Reason::Outranked) => self.outranked += 1,
            Some(Reason::CachedThen) => self.cached_then += 1,
            Some(Reason::Throttled(_)) => self.throttled += 1,
            Some(Reason::NoLookup) => self.no_lookup += 1,
            Some(Reason::Evicted(cause, key)) => self.evicted.count(cause, &key),
            Some(Reason::Mispredicted) => self.mispredicted += 1,
            Some(Reason::Cold) => self.cold += 1,
        }
    }
}

/// The **pollution** misses, split (module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PollutionSplit {
    pub pushed_out: u64,
    pub dropped_at_demand: u64,
    pub not_waiting: u64,
    pub own_earlier: u64,
    pub other_context: u64,
    /// `not_waiting`, `own_earlier` and `other_context` by the reason they
    /// would have had.
    pub otherwise: OtherwiseReasons,
}

impl PollutionSplit {
    /// `(name, count)` of every case, in the table's order.
    pub fn rows(&self) -> [(&'static str, u64); 5] {
        [
            ("pushed out", self.pushed_out),
            ("dropped at a demand", self.dropped_at_demand),
            ("predicted, not waiting", self.not_waiting),
            ("own, earlier", self.own_earlier),
            ("other context", self.other_context),
        ]
    }
    pub fn total(&self) -> u64 {
        self.rows().iter().map(|r| r.1).sum()
    }

    /// Counts a miss by `ctx` on a `dropped` block, in `case`, with the
    /// reason it would otherwise have had (`None`: unexplained).
    pub(super) fn count(&mut self, ctx: u32, dropped: Dropped, case: Case, otherwise: Option<Reason>) {
        match case {
            Case::Waiting if dropped.pushed_out => self.pushed_out += 1,
            Case::Waiting => self.dropped_at_demand += 1,
            Case::NotWaiting => self.not_waiting += 1,
            Case::Unpredicted if dropped.asker == Some(ctx) => self.own_earlier += 1,
            Case::Unpredicted => self.other_context += 1,
        }
        if !matches!(case, Case::Waiting) {
            self.otherwise.count(otherwise);
        }
    }
}

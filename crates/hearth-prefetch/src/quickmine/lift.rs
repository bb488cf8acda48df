//! Round 15's lift (`lift_added`, `qm-hits-lift-added`,
//! `docs/dev/prefetch-lsm-remedies.md`): a context whose template's hit
//! throttle is off makes its hit lookups at half degree anyway while one
//! [`NetGate`] over the prefetches the lift *adds* (ranks the unlifted
//! throttles would not have asked for) is open. Saved: an added prefetch
//! used, demanded at least [`LIFT_LATE_NS`] after its issue. Cost: any other
//! prefetch that left the partition unused while an added prefetch issued
//! after it was still waiting (the lift aged it out), then missed while its
//! asking context was open.

use std::collections::VecDeque;

use hearth_core::{Key, KeyMap};

use super::Outstanding;
use crate::throttle::NetGate;

/// An added prefetch demanded sooner than this after its issue cannot have
/// arrived (the device latency of the measurements, `qm-timely`'s default):
/// it saved nothing, for the lift gate.
pub const LIFT_LATE_NS: u64 = 100_000;

#[derive(Default)]
pub(super) struct Lift {
    pub(super) gate: NetGate,
    /// Issue number of the next prefetch (any kind).
    next: u64,
    /// Added prefetches (issue number, block) in issue order; entries no
    /// longer waiting are dropped lazily.
    added: VecDeque<(u64, Key)>,
}

impl Lift {
    /// Numbers a prefetch of `block` just issued, remembering it if added.
    pub(super) fn issue(&mut self, block: Key, added: bool, waiting: &KeyMap<Outstanding>) -> u64 {
        let seq = self.next;
        self.next += 1;
        if added {
            Self::drop_stale(&mut self.added, waiting, true);
            // Blocks issued but skipped by the driver stay waiting: keep the
            // list within twice the waiting prefetches (amortised O(1)).
            if self.added.len() > 2 * waiting.len() + 16 {
                self.added.retain(|&(s, b)| waiting.get(&b).is_some_and(|o| o.seq == s));
            }
            self.added.push_back((seq, block));
        }
        seq
    }

    /// Whether an added prefetch issued after prefetch number `seq` is still
    /// waiting for its outcome (ahead of it in the partition).
    pub(super) fn younger_added_waiting(&mut self, seq: u64, waiting: &KeyMap<Outstanding>) -> bool {
        Self::drop_stale(&mut self.added, waiting, false);
        self.added.back().is_some_and(|&(s, _)| s > seq)
    }

    /// Pops, from the front or the back, entries whose prefetch has had its
    /// outcome (or was asked for again since).
    fn drop_stale(added: &mut VecDeque<(u64, Key)>, waiting: &KeyMap<Outstanding>, front: bool) {
        let live = |&(s, b): &(u64, Key)| waiting.get(&b).is_some_and(|o| o.seq == s);
        while let Some(e) = if front { added.front() } else { added.back() } {
            if live(e) {
                break;
            }
            if front {
                added.pop_front();
            } else {
                added.pop_back();
            }
        }
    }
}

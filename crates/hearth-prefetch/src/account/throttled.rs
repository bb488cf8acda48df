//! The account's view of throttling: per template and kind of lookup, the
//! benefit the throttle judges (prefetches issued and used), how many
//! lookups ran with degree 0, and a **shadow** of what those lookups would
//! have prefetched: their first [`DEGREE`] candidates that were neither
//! cached nor in flight, kept in a FIFO as large as the prefetch partition
//! (real prefetches take their room there too, from issue to outcome) and
//! counted as used if any context reads them before they leave it, as
//! saving a miss if that read missed. The FIFO stands for the partition's
//! LRU; it does not model the partition's drop after one main-cache
//! turnover, nor the device (a shadow prefetch is never late), so it
//! overstates what the throttled lookups would have saved.

use std::collections::{BTreeMap, VecDeque};

use hearth_core::{Key, KeyMap};
use serde::Serialize;

use super::{Lookup, LookupKind};
use crate::ceiling::DEGREE;

/// One template's lookups of one kind, after the warm-up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ThrottleRow {
    pub template: u32,
    pub kind: LookupKind,
    /// Prefetches its lookups issued, and of them demanded before dropped
    /// (the outcomes its throttle counts).
    pub issued: u64,
    pub used: u64,
    /// Lookups that ran with degree 0.
    pub throttled_lookups: u64,
    /// Their shadow prefetches, those read while in the shadow, and those
    /// whose read was a miss.
    pub shadow_issued: u64,
    pub shadow_used: u64,
    pub shadow_saved: u64,
    /// The same for the first block each lookup asked for (real) or would
    /// have asked for (shadow): its best candidate not cached nor in flight.
    pub top_issued: u64,
    pub top_used: u64,
    pub shadow_top_issued: u64,
    pub shadow_top_used: u64,
    /// Predictable misses the account calls throttled, by the newest
    /// throttled lookup that had them as a candidate.
    pub throttled_misses: u64,
}

type RowKey = (u32, LookupKind);

/// An entry of the shadow FIFO: a real prefetch, or a shadow one with the
/// row it counts for (if issued after the warm-up).
#[derive(Clone, Copy)]
struct Entry {
    seq: u64,
    shadow: Option<Option<RowKey>>,
    /// A shadow lookup's first block.
    top: bool,
}

/// The rows and the shadow FIFO.
#[derive(Default)]
pub(super) struct Throttled {
    rows: BTreeMap<RowKey, ThrottleRow>,
    /// Blocks in the FIFO (real or shadow) by their latest entry.
    live: KeyMap<Entry>,
    order: VecDeque<(Key, u64)>,
    seq: u64,
    capacity: usize,
    /// No real prefetch issued yet since the last lookup.
    first_pending: bool,
    /// Real prefetches that were their lookup's first.
    top_real: KeyMap<()>,
}

impl Throttled {
    pub(super) fn new(partition_blocks: usize) -> Throttled {
        Throttled { capacity: partition_blocks.max(1), ..Throttled::default() }
    }

    fn row(&mut self, key: RowKey) -> &mut ThrottleRow {
        self.rows.entry(key).or_insert_with(|| ThrottleRow { template: key.0, kind: key.1, ..ThrottleRow::default() })
    }

    fn push(&mut self, block: Key, shadow: Option<Option<RowKey>>, top: bool) {
        self.seq += 1;
        self.live.insert(block, Entry { seq: self.seq, shadow, top });
        self.order.push_back((block, self.seq));
        while self.live.len() > self.capacity {
            let Some((b, seq)) = self.order.pop_front() else { break };
            if self.live.get(&b).is_some_and(|e| e.seq == seq) {
                self.live.remove(&b);
            }
        }
        if self.order.len() > 4 * self.capacity + 64 {
            let live = &self.live;
            self.order.retain(|(b, seq)| live.get(b).is_some_and(|e| e.seq == *seq));
        }
    }

    /// A lookup just made: counts it, and if it ran with degree 0 puts its
    /// would-be prefetches in the shadow.
    pub(super) fn lookup(&mut self, l: &Lookup, counted: bool, in_flight: impl Fn(Key) -> bool) {
        self.first_pending = true;
        if !l.triggered || l.degree > 0 {
            return;
        }
        let key = (l.class, l.kind);
        if counted {
            self.row(key).throttled_lookups += 1;
        }
        let wanted = l.candidates.iter().filter(|&&(b, cached)| !cached && !in_flight(b)).take(DEGREE);
        for (rank, &(b, _)) in wanted.collect::<Vec<_>>().iter().enumerate() {
            if self.live.get(b).is_some_and(|e| e.shadow.is_some()) {
                continue;
            }
            if counted {
                let r = self.row(key);
                r.shadow_issued += 1;
                r.shadow_top_issued += u64::from(rank == 0);
            }
            self.push(*b, Some(counted.then_some(key)), rank == 0);
        }
    }

    /// A real prefetch issued by a lookup of `key` (its context's last).
    pub(super) fn issued(&mut self, block: Key, key: Option<RowKey>) {
        let top = std::mem::take(&mut self.first_pending);
        if let Some(k) = key {
            let r = self.row(k);
            r.issued += 1;
            r.top_issued += u64::from(top);
        }
        if top {
            self.top_real.insert(block, ());
        }
        self.push(block, None, false);
    }

    /// A real prefetch's outcome.
    pub(super) fn outcome(&mut self, block: Key, used: bool, key: Option<RowKey>) {
        let top = self.top_real.remove(&block).is_some();
        if let (true, Some(k)) = (used, key) {
            let r = self.row(k);
            r.used += 1;
            r.top_used += u64::from(top);
        }
        if self.live.get(&block).is_some_and(|e| e.shadow.is_none()) {
            self.live.remove(&block);
        }
    }

    /// A read of `block`, a miss or not.
    pub(super) fn read(&mut self, block: Key, miss: bool) {
        if let Some(Entry { shadow: Some(row), top, .. }) = self.live.get(&block).copied() {
            self.live.remove(&block);
            if let Some(k) = row {
                let r = self.row(k);
                r.shadow_used += 1;
                r.shadow_saved += u64::from(miss);
                r.shadow_top_used += u64::from(top);
            }
        }
    }

    /// A predictable miss the account calls throttled, by lookup `l`.
    pub(super) fn missed(&mut self, l: &Lookup) {
        self.row((l.class, l.kind)).throttled_misses += 1;
    }

    pub(super) fn finish(self) -> Vec<ThrottleRow> {
        self.rows.into_values().collect()
    }
}

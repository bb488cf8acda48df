//! What a context-tagged trace looks like to a prefetcher at the storage
//! server: how sequential the interleaved stream is, how much other
//! contexts interleave with each one, and how long contexts are.

use hearth_core::{CtxEvent, KeyMap};
use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CtxMetrics {
    pub ios: u64,
    pub contexts: u64,
    /// Mean length of maximal runs `b, b+1, b+2, ...` in the interleaved
    /// stream the server sees.
    pub mean_sequential_run: f64,
    /// The same within each context's own sequence.
    pub mean_sequential_run_in_context: f64,
    /// Mean, over I/Os with a predecessor in their context, of the number
    /// of other contexts' I/Os between the two.
    pub mean_interference: f64,
    /// Mean I/Os per context, and the longest.
    pub mean_context_length: f64,
    pub max_context_length: u64,
    /// Mean number of contexts open at each I/O.
    pub mean_open_contexts: f64,
    /// Per context class: (class, contexts, mean I/Os per context).
    pub per_class: Vec<(u32, u64, f64)>,
}

/// Computes [`CtxMetrics`] in one pass.
pub fn analyze(events: &[CtxEvent]) -> CtxMetrics {
    // Per open context: (index of its last I/O, last block, I/Os so far, class).
    let mut open: KeyMap<(Option<u64>, Option<u64>, u64, u32)> = KeyMap::default();
    // Per class: (contexts, I/Os).
    let mut classes: KeyMap<(u64, u64)> = KeyMap::default();
    let mut m = CtxMetrics::default();
    let (mut runs, mut ctx_runs, mut interference, mut with_predecessor) = (0u64, 0u64, 0u64, 0u64);
    let (mut open_sum, mut total_len) = (0u64, 0u64);
    let mut prev_block: Option<u64> = None;
    for e in events {
        match *e {
            CtxEvent::Begin { ctx, class, .. } => {
                open.insert(u64::from(ctx), (None, None, 0, class));
            }
            CtxEvent::End { ctx, .. } => {
                if let Some((_, _, len, class)) = open.remove(&u64::from(ctx)) {
                    let c = classes.entry(u64::from(class)).or_insert((0, 0));
                    *c = (c.0 + 1, c.1 + len);
                    m.contexts += 1;
                    total_len += len;
                    m.max_context_length = m.max_context_length.max(len);
                }
            }
            CtxEvent::Io { ctx, block, .. } => {
                let index = m.ios;
                m.ios += 1;
                open_sum += open.len() as u64;
                if prev_block.is_none_or(|p| p.wrapping_add(1) != block) {
                    runs += 1;
                }
                prev_block = Some(block);
                let c = open.entry(u64::from(ctx)).or_insert((None, None, 0, u32::MAX));
                if let Some(last) = c.0 {
                    interference += index - last - 1;
                    with_predecessor += 1;
                }
                if c.1.is_none_or(|p| p.wrapping_add(1) != block) {
                    ctx_runs += 1;
                }
                *c = (Some(index), Some(block), c.2 + 1, c.3);
            }
        }
    }
    let mean = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    m.mean_sequential_run = mean(m.ios, runs);
    m.mean_sequential_run_in_context = mean(m.ios, ctx_runs);
    m.mean_interference = mean(interference, with_predecessor);
    m.mean_context_length = mean(total_len, m.contexts);
    m.mean_open_contexts = mean(open_sum, m.ios);
    m.per_class = classes.into_iter().map(|(class, (n, ios))| (class as u32, n, mean(ios, n))).collect();
    m.per_class.sort_by_key(|c| c.0);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;

    #[test]
    fn hand_counted_metrics() {
        use CtxEvent::*;
        let io = |ctx, block| Io { time_ns: 0, ctx, op: Op::Read, block };
        // Two sequential contexts interleaved: 10 20 11 21 12.
        let events = vec![
            Begin { time_ns: 0, ctx: 1, class: 0 },
            Begin { time_ns: 0, ctx: 2, class: 5 },
            io(1, 10),
            io(2, 20),
            io(1, 11),
            io(2, 21),
            io(1, 12),
            End { time_ns: 0, ctx: 1 },
            End { time_ns: 0, ctx: 2 },
        ];
        let m = analyze(&events);
        assert_eq!((m.ios, m.contexts, m.max_context_length), (5, 2, 3));
        // The server sees no two consecutive blocks: 5 runs of 1.
        assert_eq!(m.mean_sequential_run, 1.0);
        // Each context alone is one run: 5 I/Os / 2 runs.
        assert_eq!(m.mean_sequential_run_in_context, 2.5);
        // 3 I/Os have a predecessor in their context, each 1 I/O apart.
        assert_eq!(m.mean_interference, 1.0);
        assert_eq!(m.mean_context_length, 2.5);
        assert_eq!(m.mean_open_contexts, 2.0);
        assert_eq!(m.per_class, vec![(0, 1, 3.0), (5, 1, 2.0)]);
    }
}

//! The prefetch driver: what an export's prefetcher sees of its clients and
//! what it gets to read. A demand READ meets the prefetcher and the cache in
//! one round (the prefetcher's lock, then the cache's, each taken once per
//! request); the blocks it claims are queued as background reads. Contexts
//! come from the hint extension (`hints`), one per connection otherwise.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hearth_nbd::Request;

use super::background::{dropped, queue_background};
use super::server_clock_ns;
use crate::{BackgroundKind, Export, Origin};

/// Shows demand read `req`, in context `ctx`, to the export's prefetcher (if
/// it has one) and queues what it predicts as `origin`'s background reads.
pub(super) fn observe_read(export: &Export, ctx: u32, origin: &Arc<Origin>, req: &Request) {
    let Some(mut prefetcher) = export.prefetcher() else { return };
    let blocks = export.cache().block_range(req.offset, u64::from(req.length).max(1));
    let round = export.cache().meet_prefetcher(blocks, ctx, &server_clock_ns, &mut **prefetcher);
    drop(prefetcher);
    let stats = export.prefetch_stats();
    stats.wasted.fetch_add(round.wasted, Ordering::Relaxed);
    stats.promotes.fetch_add(round.promotes, Ordering::Relaxed);
    let base = round.base.into_iter().map(|b| (b, BackgroundKind::Prefetch));
    for (b, kind) in base.chain(round.spare.into_iter().map(|b| (b, BackgroundKind::SparePrefetch))) {
        if queue_background(export, origin, kind, b) {
            stats.issued.fetch_add(1, Ordering::Relaxed);
        } else {
            dropped(export, kind, b);
        }
    }
}

/// Context `ctx` of class `class` begins.
pub(super) fn begin(export: &Export, ctx: u32, class: u32) {
    if let Some(mut p) = export.prefetcher() {
        p.begin(ctx, class);
    }
}

/// Contexts `ctxs` end: the prefetcher forgets them.
pub(super) fn end(export: &Export, ctxs: impl IntoIterator<Item = u32>) {
    if let Some(mut p) = export.prefetcher() {
        for ctx in ctxs {
            p.end(ctx);
        }
    }
}

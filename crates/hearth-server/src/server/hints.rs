//! What one connection's hints tell the server about its client (the hint
//! extension, docs/nbd-extension.md): which block each client buffer holds,
//! so reused buffers reveal evictions, and which context each request
//! belongs to, for the prefetcher. Bounded per connection, and undone when
//! the connection closes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hearth_nbd::hints::Hint;
use hearth_nbd::Request;

use super::background::{dropped, queue_background};
use super::prefetch;
use crate::{BackgroundKind, Export, Origin};

/// Contexts one connection may have open (CONTEXT_BEGIN without END).
const MAX_OPEN_CONTEXTS: usize = 1024;

/// Why a hint was refused (EINVAL, with this message) or ignored.
#[derive(Debug, thiserror::Error)]
pub(super) enum HintError {
    #[error(transparent)]
    Decode(#[from] hearth_nbd::hints::DecodeError),
    #[error("more than {MAX_OPEN_CONTEXTS} contexts open on one connection")]
    TooManyContexts,
    #[error("buffer address {addr:#x} is beyond the {tracked} client buffers this server tracks (server.max_client_buffers)")]
    BufferBeyond { addr: u64, tracked: u64 },
    #[error("eviction hint {offset}+{length} is outside the export")]
    EvictionOutside { offset: u64, length: u64 },
    #[error("buffers from {addr:#x} run past the client buffers tracked (server.max_client_buffers)")]
    BuffersPastEnd { addr: u64 },
    #[error(transparent)]
    Untrackable(#[from] hearth_placement::UntrackableBuffer),
}
/// Context ids the server gives connections that name none: the top bit set,
/// apart from the small ids clients choose.
const CONNECTION_CTX_BASE: u32 = 1 << 31;

/// What one connection told us about its client (hint extension).
pub(super) struct ClientView {
    /// Which block each client buffer holds: reused buffers reveal evictions.
    cct: hearth_placement::Cct,
    /// Buffer address for the next READ or WRITE.
    next_buffer: Option<u64>,
    /// Context of the requests that follow (the connection's own by default).
    ctx: u32,
    own_ctx: u32,
    /// Contexts this connection began and has not ended: ended for it when
    /// it disconnects, so a client cannot leave prefetcher state behind.
    open_contexts: std::collections::HashSet<u32>,
    /// BUFFER hints may name buffers below this address.
    buffer_limit: u64,
    /// This connection's background reads.
    origin: Arc<Origin>,
    /// Blocks this connection may still name in EVICTED notices: one earned
    /// per block it reads or writes, capped at the client buffers tracked.
    /// A client cannot evict from its cache more than it moved through it,
    /// so a notice past its reads and writes cannot flush the cache other
    /// clients share, no more than a scan of the same size could.
    eviction_credit: u64,
    max_eviction_credit: u64,
}

impl ClientView {
    pub(super) fn new(export: &Export, max_client_buffers: u64) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(CONNECTION_CTX_BASE);
        let own_ctx = NEXT.fetch_add(1, Ordering::Relaxed) | CONNECTION_CTX_BASE;
        ClientView {
            cct: hearth_placement::Cct::new(export.cache().block_size()),
            next_buffer: None,
            ctx: own_ctx,
            own_ctx,
            open_contexts: Default::default(),
            buffer_limit: max_client_buffers.saturating_mul(export.cache().block_size()),
            origin: Default::default(),
            eviction_credit: 0,
            max_eviction_credit: max_client_buffers,
        }
    }

    /// The connection is gone: end every context it left open, its own too.
    pub(super) fn close(&mut self, export: &Export) {
        self.origin.closed.store(true, Ordering::Relaxed);
        prefetch::end(export, self.open_contexts.drain().chain([self.own_ctx]));
    }

    /// The client evicted `block`: let the cache place it and queue its reload.
    fn evicted(&self, export: &Export, block: u64) {
        if let Some(b) = export.cache().client_evicted(block) {
            if !queue_background(export, &self.origin, BackgroundKind::Reload, b) {
                dropped(export, BackgroundKind::Reload, b);
            }
        }
    }

    /// An EVICTED notice named `block`: acted on while the connection has
    /// credit from its own reads and writes, skipped (and counted) after.
    fn evicted_notice(&mut self, export: &Export, block: u64) {
        if self.eviction_credit == 0 {
            export.count_eviction_skipped();
            return;
        }
        self.eviction_credit -= 1;
        self.evicted(export, block);
    }

    /// A client-chosen context id, kept clear of the ids connections get.
    fn client_ctx(ctx: u64) -> u32 {
        (ctx as u32) & !CONNECTION_CTX_BASE
    }

    /// Shows a demand read to the export's prefetcher (see `prefetch`).
    pub(super) fn observe_read(&self, export: &Export, req: &Request) {
        prefetch::observe_read(export, self.ctx, &self.origin, req);
    }

    fn begin(&mut self, export: &Export, ctx: u64, class: u64) -> Result<(), HintError> {
        self.begin_implicitly(Self::client_ctx(ctx))?;
        prefetch::begin(export, self.ctx, class as u32);
        Ok(())
    }

    fn end(&mut self, export: &Export, ctx: u64) {
        let ctx = Self::client_ctx(ctx);
        self.open_contexts.remove(&ctx);
        prefetch::end(export, [ctx]);
        self.ctx = self.own_ctx;
    }

    /// Context `ctx` is used without BEGIN; the prefetcher opens it implicitly.
    fn switch_to(&mut self, ctx: u64) -> Result<(), HintError> {
        if ctx == 0 {
            self.ctx = self.own_ctx;
            return Ok(());
        }
        self.begin_implicitly(Self::client_ctx(ctx))
    }

    fn begin_implicitly(&mut self, ctx: u32) -> Result<(), HintError> {
        if !self.open_contexts.contains(&ctx) && self.open_contexts.len() >= MAX_OPEN_CONTEXTS {
            return Err(HintError::TooManyContexts);
        }
        self.open_contexts.insert(ctx);
        self.ctx = ctx;
        Ok(())
    }

    /// Applies a hint payload; an error is the request's EINVAL message.
    pub(super) fn apply(&mut self, export: &Export, payload: &[u8]) -> Result<(), HintError> {
        for hint in hearth_nbd::hints::decode(payload)? {
            match hint {
                Hint::Buffer { addr } => {
                    if addr >= self.buffer_limit {
                        return Err(HintError::BufferBeyond {
                            addr,
                            tracked: self.buffer_limit / export.cache().block_size(),
                        });
                    }
                    self.next_buffer = Some(addr);
                }
                Hint::Evicted { offset, length } => {
                    if !offset.checked_add(length).is_some_and(|e| e <= export.info().size && length > 0) {
                        return Err(HintError::EvictionOutside { offset, length });
                    }
                    for block in export.cache().block_range(offset, length) {
                        self.evicted_notice(export, block);
                    }
                }
                Hint::Context { ctx } => self.switch_to(ctx)?,
                Hint::ContextBegin { ctx, class } => self.begin(export, ctx, class)?,
                Hint::ContextEnd { ctx } => self.end(export, ctx),
            }
        }
        Ok(())
    }

    /// A READ or WRITE is about to move its blocks (each earns an eviction
    /// credit) and use the hinted buffer (if any); a hint that cannot be
    /// tracked is ignored, with a warning.
    pub(super) fn data_request(&mut self, export: &Export, req: &Request) {
        let moved = export.cache().block_range(req.offset, u64::from(req.length));
        self.eviction_credit = (self.eviction_credit + (moved.end - moved.start)).min(self.max_eviction_credit);
        if let Err(why) = self.track_buffer(export, req) {
            tracing::warn!(export = %export.name(), error = %why, "buffer hint ignored");
        }
    }

    fn track_buffer(&mut self, export: &Export, req: &Request) -> Result<(), HintError> {
        let Some(addr) = self.next_buffer.take() else { return Ok(()) };
        let bs = export.cache().block_size();
        for (i, block) in export.cache().block_range(req.offset, u64::from(req.length).max(1)).enumerate() {
            let slot_addr = addr
                .checked_add(i as u64 * bs)
                .filter(|&a| a < self.buffer_limit)
                .ok_or(HintError::BuffersPastEnd { addr })?;
            if let hearth_placement::Observed::Replaced(old) = self.cct.record(slot_addr, block)? {
                self.evicted(export, old);
            }
        }
        Ok(())
    }
}

//! What enters the cache besides demand fills: blocks placed when a client
//! evicts them (eviction-based placement, then reloaded), and prefetches,
//! which wait in the simulator's prefetch partition
//! ([`hearth_prefetch::Partition`]) until a demand promotes them, newer
//! prefetches push them out, or one turnover of the main cache ages them
//! out. The server keeps the claims (prefetches queued, not yet landed); the
//! partition decides what waits and what leaves.

use super::*;
use hearth_prefetch::{Demand as PrefetchDemand, Prefetcher};

/// What one demand read's meeting with a prefetcher left to do and count
/// ([`BlockCache::meet_prefetcher`]).
pub struct PrefetchRound {
    /// Prefetched blocks that left the partition unused since the last round.
    pub wasted: u64,
    /// Blocks of this read a prefetch brought in (or had in flight).
    pub promotes: u64,
    /// Claimed base prefetches, to queue in this order.
    pub base: Vec<u64>,
    /// Claimed spare prefetches, to queue after the base ones.
    pub spare: Vec<u64>,
}

impl BlockCache {
    /// A client evicted `block` from its own cache (learned from a reused
    /// buffer address or an eviction notice). Under eviction-based placement
    /// the block may be placed now; returns it if its data must be reloaded
    /// from the backend (at low priority, with [`BlockCache::reload`]).
    pub fn client_evicted(&self, block: u64) -> Option<u64> {
        if block * self.block_size >= self.size {
            return None;
        }
        let mut inner = self.lock();
        let now = Self::access(&mut inner, block, self.block_size, Op::Read);
        let action = inner.core.client_evicted(block, &now);
        self.drop_victims(&mut inner, Victims::Hold);
        self.lend_partition_room(&mut inner, 0, &now, Victims::Hold);
        match action {
            EvictionAction::Reload(b) if !inner.blocks.contains_key(&b) => Some(b),
            _ => None,
        }
    }

    /// How a demand read of `block` meets the cache, for prefetchers: a hit,
    /// a promote (the block was prefetched, landed or still in flight, and
    /// this is its first demand), or a miss.
    pub fn classify_demand(&self, block: u64) -> Class {
        self.classify_locked(&mut self.lock(), block)
    }

    /// [`Self::classify_demand`] under the lock the caller holds.
    fn classify_locked(&self, inner: &mut Inner, block: u64) -> Class {
        self.age_prefetches(inner);
        let class = self.classify_aged(inner, block);
        if class != Class::Hit {
            let mut left = Vec::new();
            inner.partition.adapt(block, class == Class::Miss, &mut left);
            Self::release_unused(inner, &left);
        }
        class
    }

    fn classify_aged(&self, inner: &mut Inner, block: u64) -> Class {
        if inner.unclaim(block) {
            if inner.partition.take(block) {
                // Landed: promote it from the partition into the main cache.
                let a = Self::access(inner, block, self.block_size, Op::Read);
                inner.core.place(&a);
                self.drop_victims(inner, Victims::Hold);
                if !inner.core.holds(block) {
                    if let Some(held) = inner.blocks.remove(&block) {
                        inner.free.push_held(held);
                    }
                } else if let (Some(held), true) = (inner.blocks.get(&block), self.content_log.get().is_some()) {
                    // It joined the cache from the backend: the warmup log records it now.
                    self.log_loaded(block, &self.held_bytes(held, block));
                }
            }
            Class::Promote
        } else if inner.blocks.contains_key(&block) {
            Class::Hit
        } else {
            Class::Miss
        }
    }

    /// Shows one demand read of `blocks` (in context `ctx`) to `prefetcher`
    /// and claims what it predicts, under one hold of the cache lock: the
    /// outcomes of prefetches that left unused, each block's class (a
    /// promote is an outcome too), what the prefetcher counts as cached, and
    /// the claims of its base predictions, then its spare ones. The caller
    /// queues the claimed reads (after the lock is released: a dropped one
    /// takes the lock again to release its claim).
    pub fn meet_prefetcher(
        &self,
        blocks: std::ops::Range<u64>,
        ctx: u32,
        clock_ns: &dyn Fn() -> u64,
        prefetcher: &mut dyn Prefetcher,
    ) -> PrefetchRound {
        let mut inner = self.lock();
        let wasted = Self::take_wasted_locked(&mut inner);
        for &block in &wasted {
            prefetcher.outcome(block, false);
        }
        let (mut predicted, mut spare, mut promotes) = (Vec::new(), Vec::new(), 0);
        for block in blocks {
            let class = self.classify_locked(&mut inner, block);
            if class == Class::Promote {
                promotes += 1;
                prefetcher.outcome(block, true);
            }
            prefetcher.demand_seen(block, Op::Read);
            let demand = PrefetchDemand { block, ctx, time_ns: clock_ns(), op: Op::Read, class };
            let held = &*inner;
            prefetcher.access_tiered(
                &demand,
                &|b| Self::outside_spare_locked(held, b),
                &|b| held.spare_claims.contains(&b),
                &mut predicted,
            );
            prefetcher.take_spare(&mut spare);
        }
        // Base prefetches claim their blocks first; spare ones after.
        predicted.retain(|&b| self.claim_for_base(&mut inner, b));
        spare.retain(|&b| self.claim_for_spare(&mut inner, b));
        PrefetchRound { wasted: wasted.len() as u64, promotes, base: predicted, spare }
    }

    /// Whether `block` is cached or a prefetch of it is pending.
    #[cfg(test)]
    pub(crate) fn cached_or_prefetching(&self, block: u64) -> bool {
        let inner = self.lock();
        inner.blocks.contains_key(&block) || inner.prefetched.contains(&block)
    }

    /// Whether `block` is cached or a base prefetch of it is pending: what
    /// a base prefetcher counts as cached (see
    /// `hearth_prefetch::Prefetcher::access_tiered`).
    pub fn cached_outside_spare(&self, block: u64) -> bool {
        Self::outside_spare_locked(&self.lock(), block)
    }

    fn outside_spare_locked(inner: &Inner, block: u64) -> bool {
        !inner.spare_claims.contains(&block) && (inner.blocks.contains_key(&block) || inner.prefetched.contains(&block))
    }

    /// Whether `block` is claimed only by a spare prefetch (queued or landed).
    pub fn spare_prefetching(&self, block: u64) -> bool {
        self.lock().spare_claims.contains(&block)
    }

    /// Claims `block` for a base prefetch; false if it is cached, already
    /// being prefetched, or beyond the export. A spare prefetch's claim is
    /// taken over (false too: its read is done or queued): landed, the block
    /// moves into the partition's base tier as a fresh base prefetch would
    /// land; still queued, it will land there.
    pub fn start_prefetch(&self, block: u64) -> bool {
        self.claim_for_base(&mut self.lock(), block)
    }

    /// [`Self::start_prefetch`] under the lock the caller holds.
    fn claim_for_base(&self, inner: &mut Inner, block: u64) -> bool {
        if block.checked_mul(self.block_size).is_none_or(|o| o >= self.size) {
            return false;
        }
        if inner.spare_claims.remove(&block) {
            if inner.partition.is_spare(block) {
                let mut left = Vec::new();
                let clock = inner.core.stats().placements;
                inner.partition.land(block, clock, &mut left);
                Self::release_unused(inner, &left);
            }
            return false;
        }
        !inner.blocks.contains_key(&block) && !inner.stranded.contains_key(&block) && inner.prefetched.insert(block)
    }

    /// Claims `block` for a spare prefetch, as [`Self::start_prefetch`]
    /// (to be read with [`Self::prefetch_spare`]), and marks the claim spare
    /// under the same lock, so no demand can release it in between.
    pub fn start_spare_prefetch(&self, block: u64) -> bool {
        self.claim_for_spare(&mut self.lock(), block)
    }

    fn claim_for_spare(&self, inner: &mut Inner, block: u64) -> bool {
        if !self.claim_for_base(inner, block) {
            return false;
        }
        inner.spare_claims.insert(block);
        true
    }

    /// Releases the claim of a prefetch that will not run (dropped before
    /// its read), so its first demand is a miss, not a promote.
    pub fn cancel_prefetch(&self, block: u64) {
        let mut inner = self.lock();
        if !inner.partition.contains(block) {
            inner.unclaim(block);
        }
    }

    /// Reads a claimed block from the backend into the prefetch partition,
    /// unless a write raced with the read or it was demanded meanwhile (the
    /// demand read caches it itself).
    pub fn prefetch(&self, block: u64) -> io::Result<()> {
        self.prefetch_into(block, false)
    }

    /// [`Self::prefetch`] into the partition's spare tier: lands only in
    /// room the base prefetches leave, else the claim is released (the
    /// block's first demand is then a plain miss). A block a base prefetch
    /// took over meanwhile lands in the base tier.
    pub fn prefetch_spare(&self, block: u64) -> io::Result<()> {
        {
            let inner = self.lock();
            if !inner.spare_claims.contains(&block) {
                drop(inner);
                return self.prefetch_into(block, false);
            }
            if !inner.partition.has_spare_room() {
                drop(inner);
                self.cancel_prefetch(block);
                return Ok(());
            }
        }
        self.prefetch_into(block, true)
    }

    fn prefetch_into(&self, block: u64, spare: bool) -> io::Result<()> {
        let glance = {
            let inner = self.lock();
            if inner.blocks.contains_key(&block) || !inner.prefetched.contains(&block) {
                return Ok(());
            }
            inner.stripes.glance(block)
        };
        let fetched = self.fetch(block, 1)?;
        let mut inner = self.lock();
        if !inner.stripes.unchanged_since(block, glance)
            || inner.blocks.contains_key(&block)
            || inner.stranded.contains_key(&block)
            || !inner.prefetched.contains(&block)
        {
            return Ok(());
        }
        let mut left = Vec::new();
        let clock = inner.core.stats().placements;
        // A base prefetch may have taken the claim over during the read.
        if !(spare && inner.spare_claims.contains(&block)) {
            inner.partition.land(block, clock, &mut left);
        } else if !inner.partition.land_spare(block, clock, &mut left) {
            inner.unclaim(block);
            return Ok(());
        }
        Self::release_unused(&mut inner, &left);
        let held = self.clean_held(&mut inner.free, &fetched);
        Self::store_held(&mut inner, block, held, false);
        let now = Self::access(&mut inner, block, self.block_size, Op::Read);
        self.lend_partition_room(&mut inner, 0, &now, Victims::WriteBack);
        Ok(())
    }

    /// Drops prefetched blocks older than one turnover of the main cache.
    /// The clock is the main cache's placements, the server's count of
    /// demand insertions.
    fn age_prefetches(&self, inner: &mut Inner) {
        let mut left = Vec::new();
        let (clock, horizon) = (inner.core.stats().placements, inner.core.len().max(1) as u64);
        inner.partition.age_out(clock, horizon, &mut left);
        Self::release_unused(inner, &left);
    }

    /// Frees prefetched blocks that left the partition before any demand.
    fn release_unused(inner: &mut Inner, left: &[Key]) {
        for &v in left {
            inner.unclaim(v);
            if !inner.core.holds(v) {
                if let Some(held) = inner.blocks.remove(&v) {
                    inner.free.push_held(held);
                }
            }
        }
    }

    /// Prefetched blocks that left unused since the last call.
    pub fn take_wasted(&self) -> Vec<Key> {
        Self::take_wasted_locked(&mut self.lock())
    }

    fn take_wasted_locked(inner: &mut Inner) -> Vec<Key> {
        let wasted = &mut inner.wasted;
        // Used outcomes reach the prefetcher as promotes (see `classify_demand`).
        inner.partition.drain_outcomes(|block, used| {
            if !used {
                wasted.push(block);
            }
        });
        std::mem::take(wasted)
    }

    /// Fetches a placed block's data from the backend, unless a write raced
    /// with the read or the block left the cache meanwhile.
    pub fn reload(&self, block: u64) -> io::Result<()> {
        let miss = {
            let mut inner = self.lock();
            if inner.blocks.contains_key(&block) || !inner.core.holds(block) {
                return Ok(());
            }
            if let Some(data) = inner.stranded.remove(&block) {
                // Placed again: the stranded copy is the data, still to be written back.
                self.store(&mut inner, block, &data[..self.block_len(block) as usize], true);
                inner.free.push(data);
                return Ok(());
            }
            Miss { block, glance: inner.stripes.glance(block), place: false }
        };
        let fetched = self.fetch(block, 1)?;
        self.fill(std::slice::from_ref(&miss), fetched);
        Ok(())
    }
}

//! The read path and the block store: demand reads (served from memory
//! when every block is cached, else one backend read per run of missing
//! blocks, filled only if no write raced), inserting and storing blocks,
//! dropping what the policy evicts, warmup preloads, BLOCK_STATUS.

use super::*;

impl BlockCache {
    /// Pre-loads `block` with `data`, its current contents (warmup), unless
    /// it is resident already or a write is in flight on its stripe. Counts
    /// neither a hit nor a miss. Returns whether the block is now resident.
    pub fn preload(&self, block: u64, data: &[u8]) -> bool {
        if block.checked_mul(self.block_size).is_none_or(|at| at >= self.size) {
            return false;
        }
        let mut inner = self.lock();
        if inner.blocks.contains_key(&block) {
            return true;
        }
        if inner.stripes.writing(block) {
            return false;
        }
        let n = (self.block_len(block) as usize).min(data.len());
        if inner.core.holds(block) {
            self.store(&mut inner, block, &data[..n], false);
            return true;
        }
        self.insert(&mut inner, block, &data[..n], false, Victims::WriteBack)
    }

    /// Marks resident `block` as just used, without counting a hit: after a
    /// pre-load, so the policy's recency follows the log's order, not the load's.
    pub fn touch(&self, block: u64) {
        let mut inner = self.lock();
        if inner.blocks.contains_key(&block) {
            let a = Self::access(&mut inner, block, self.block_size, Op::Read);
            inner.core.demand(&a);
        }
    }

    /// Reads `buf.len()` bytes at `offset` straight from the backend
    /// (counted as backend reads), for pre-loading.
    pub fn read_backend(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.backend_read(buf, offset)
    }

    /// Serves a read entirely from the cache by appending the slices of
    /// cached blocks that make up `len` bytes at `offset` to `out` (shared,
    /// not copied; the backend's own for blocks held in it, one slice per
    /// run of them), or does nothing and returns false if any block is missing.
    pub fn read_cached(&self, offset: u64, len: usize, out: &mut Vec<SharedSlice>) -> bool {
        let range = self.block_range(offset, len as u64);
        let start = out.len();
        let mut inner = self.lock();
        // One lookup per block: the slices are taken as the blocks are
        // found, and given back if one is missing (before the policy hears of any).
        let mut in_backend_from = None;
        for b in range.clone() {
            match inner.blocks.get(&b) {
                None => {
                    out.truncate(start);
                    return false;
                }
                Some(Held::InBackend) => {
                    in_backend_from.get_or_insert(b);
                }
                Some(Held::Bytes(buf)) => {
                    if let Some(first) = in_backend_from.take() {
                        self.share_run(first..b, offset, len, out);
                    }
                    let (in_block, _, n) = self.overlap(b, offset, len as u64);
                    out.push(SharedSlice::new(buf.clone(), in_block..in_block + n));
                }
            }
        }
        if let Some(first) = in_backend_from {
            self.share_run(first..range.end, offset, len, out);
        }
        for b in range.clone() {
            inner.core.warm_ahead(b, &range);
            let a = Self::access(&mut inner, b, self.block_size, Op::Read);
            inner.core.demand(&a);
        }
        self.stats.hits.fetch_add(range.end - range.start, Ordering::Relaxed);
        true
    }

    /// Appends the backend's slices of `blocks`' part of the read of `len`
    /// bytes at `offset` to `out`.
    fn share_run(&self, blocks: std::ops::Range<u64>, offset: u64, len: usize, out: &mut Vec<SharedSlice>) {
        let from = (blocks.start * self.block_size).max(offset);
        let to = (blocks.end * self.block_size).min(offset + len as u64);
        self.backend.share(from, (to - from) as usize, out);
    }

    /// A read that leaves the cache as it was (sequential cutoff): cached
    /// and stranded blocks are copied from memory, the others read from the
    /// backend and not inserted; the policy is not told.
    pub fn read_around(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        let mut uncached = Vec::new();
        {
            let inner = self.lock();
            for b in self.block_range(offset, len) {
                let (in_block, in_req, n) = self.overlap(b, offset, len);
                let piece = &mut buf[in_req..in_req + n];
                match inner.blocks.get(&b) {
                    Some(Held::Bytes(data)) => piece.copy_from_slice(&data[in_block..in_block + n]),
                    Some(Held::InBackend) => self.copy_shared(piece, b * self.block_size + in_block as u64),
                    None => match inner.stranded.get(&b) {
                        Some(data) => piece.copy_from_slice(&data[in_block..in_block + n]),
                        None => uncached.push(b),
                    },
                }
            }
        }
        self.stats.bypassed.fetch_add(uncached.len() as u64, Ordering::Relaxed);
        for run in uncached.chunk_by(|a, b| *b == a + 1) {
            let start = (run[0] * self.block_size).max(offset);
            let end = ((run[run.len() - 1] + 1) * self.block_size).min(offset + len);
            self.backend_read(&mut buf[(start - offset) as usize..(end - offset) as usize], start)?;
        }
        Ok(())
    }

    /// Reads through the cache: hits are copied, runs of missing blocks are
    /// fetched from the backend in one call each and inserted.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        let mut misses = Vec::new();
        {
            let mut inner = self.lock();
            let range = self.block_range(offset, len);
            for b in range.clone() {
                inner.core.warm_ahead(b, &range);
                let a = Self::access(&mut inner, b, self.block_size, Op::Read);
                let demand = inner.core.demand(&a);
                let held = inner.blocks.get(&b).filter(|_| demand == Demand::Hit);
                if let Some(held) = held {
                    let (in_block, in_req, n) = self.overlap(b, offset, len);
                    let piece = &mut buf[in_req..in_req + n];
                    match held {
                        Held::Bytes(data) => piece.copy_from_slice(&data[in_block..in_block + n]),
                        Held::InBackend => self.copy_shared(piece, b * self.block_size + in_block as u64),
                    }
                } else if let Some(data) = inner.stranded.get(&b) {
                    // Newer than the backend's copy, which a failed write-back left behind.
                    let (in_block, in_req, n) = self.overlap(b, offset, len);
                    buf[in_req..in_req + n].copy_from_slice(&data[in_block..in_block + n]);
                } else {
                    // A hit without data is a block placed by a reload still in flight.
                    misses.push(Miss {
                        block: b,
                        glance: inner.stripes.glance(b),
                        place: matches!(demand, Demand::Miss { place: true }),
                    });
                }
            }
        }
        let hits = self.block_range(offset, len).count() - misses.len();
        self.stats.hits.fetch_add(hits as u64, Ordering::Relaxed);
        self.stats.misses.fetch_add(misses.len() as u64, Ordering::Relaxed);

        let mut rest = &misses[..];
        while let Some(first) = rest.first() {
            let run = 1 + rest.windows(2).take_while(|w| w[1].block == w[0].block + 1).count();
            let (run_misses, tail) = rest.split_at(run);
            rest = tail;
            let fetched = self.fetch(first.block, run as u64)?;
            let bs = self.block_size as usize;
            for (i, m) in run_misses.iter().enumerate() {
                let (in_block, in_req, n) = self.overlap(m.block, offset, len);
                buf[in_req..in_req + n].copy_from_slice(&fetched[i * bs + in_block..i * bs + in_block + n]);
            }
            self.fill(run_misses, fetched);
        }
        Ok(())
    }

    /// Reads blocks `first..first + count` from the backend, in one call:
    /// their bytes (the last block's may be short).
    pub(super) fn fetch(&self, first: u64, count: u64) -> io::Result<Vec<u8>> {
        let start = first * self.block_size;
        let end = (start + count * self.block_size).min(self.size);
        self.stats.backend_reads.fetch_add(1, Ordering::Relaxed);
        self.stats.backend_read_bytes.fetch_add(end - start, Ordering::Relaxed);
        let mut bytes = vec![0u8; (end - start) as usize];
        self.backend.read_at(&mut bytes, start)?;
        Ok(bytes)
    }

    /// Inserts blocks a read fetched (`misses`, neighbours in order, as
    /// [`fetch`](Self::fetch) read them into `bytes`), unless a write may
    /// have raced with it.
    pub(super) fn fill(&self, misses: &[Miss], bytes: Vec<u8>) {
        debug_assert!(misses.windows(2).all(|w| w[1].block == w[0].block + 1), "fill takes neighbours");
        let bs = self.block_size as usize;
        let mut inner = self.lock();
        for (i, m) in misses.iter().enumerate() {
            if !inner.stripes.unchanged_since(m.block, m.glance) {
                self.stats.fills_skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if inner.blocks.contains_key(&m.block) {
                continue;
            }
            // Placed already (an eviction-based reload in flight), or placed now.
            let place = |inner: &mut Inner| m.place && self.place(inner, m.block, Victims::WriteBack);
            if !inner.core.holds(m.block) && !place(&mut inner) {
                continue;
            }
            let data = &bytes[i * bs..i * bs + self.block_len(m.block) as usize];
            self.log_loaded(m.block, data);
            let held = self.clean_held(&mut inner.free, data);
            Self::store_held(&mut inner, m.block, held, false);
        }
    }

    /// Inserts `data` as `block`, evicting (and writing back or holding
    /// dirty victims) as the policy decides. Returns whether the block is
    /// now resident.
    pub(super) fn insert(&self, inner: &mut Inner, block: u64, data: &[u8], dirty: bool, victims: Victims) -> bool {
        if !self.place(inner, block, victims) {
            return false;
        }
        self.store(inner, block, data, dirty);
        true
    }

    /// As [`insert`](Self::insert), with what to keep of the block at hand
    /// (no copy): gives it back if the policy declines the block.
    pub(super) fn insert_held(
        &self,
        inner: &mut Inner,
        block: u64,
        held: Held,
        dirty: bool,
        victims: Victims,
    ) -> Option<Held> {
        if !self.place(inner, block, victims) {
            return Some(held);
        }
        Self::store_held(inner, block, held, dirty);
        None
    }

    /// Offers `block` to the policy, dropping its victims; whether it is
    /// now held.
    fn place(&self, inner: &mut Inner, block: u64, victims: Victims) -> bool {
        if inner.core.capacity() < self.block_size {
            return false;
        }
        let a = Self::access(inner, block, self.block_size, Op::Write);
        // Checked first, so a cache with nothing prefetched probes the policy once.
        if inner.partition.bytes() > 0 && !inner.core.holds(block) {
            self.lend_partition_room(inner, self.block_size, &a, victims);
        }
        inner.core.place(&a);
        self.drop_victims(inner, victims);
        inner.core.holds(block)
    }

    /// Evicts from the main cache until the blocks waiting in the prefetch
    /// partition, and `extra` bytes more, fit beside it: the partition
    /// borrows its room from the cache while it holds blocks, as in the
    /// simulator, so the two together never hold more than the cache size.
    pub(super) fn lend_partition_room(&self, inner: &mut Inner, extra: u64, now: &Access, victims: Victims) {
        if inner.partition.bytes() == 0 {
            return;
        }
        inner.core.make_room(inner.partition.bytes() + extra, now);
        self.drop_victims(inner, victims);
    }

    /// Frees the data of the blocks the core just evicted, writing back
    /// dirty ones (or, with [`Victims::Hold`], holding them for a blocking
    /// thread); one whose write-back fails is stranded (kept in memory), and
    /// FLUSH reports it.
    pub(super) fn drop_victims(&self, inner: &mut Inner, victims: Victims) {
        let sizing = inner.partition.is_adaptive();
        for i in 0..inner.core.evicted_count() {
            let victim = inner.core.evicted(i);
            if sizing {
                inner.partition.main_evicted(victim);
            }
            if inner.unclaim(victim) {
                inner.wasted.push(victim);
            }
            let Some(held) = inner.blocks.remove(&victim) else {
                continue;
            };
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            if inner.dirty.remove(&victim).is_some() {
                let Held::Bytes(buf) = held else { unreachable!("a dirty block holds its bytes") };
                if victims == Victims::Hold {
                    inner.stranded.insert(victim, buf);
                    self.held.store(true, Ordering::Relaxed);
                    continue;
                }
                self.wait_until_not_in_flight(victim);
                if let Err(e) = self.backend_write_blocks(victim, std::slice::from_ref(&buf)) {
                    tracing::error!(block = victim, error = %e, "writing back an evicted dirty block failed; kept in memory, FLUSH fails until it is written");
                    inner.stranded.insert(victim, buf);
                    continue;
                }
                self.stats.writebacks.fetch_add(1, Ordering::Relaxed);
                inner.free.push(buf);
                continue;
            }
            inner.free.push_held(held);
        }
        if sizing {
            // The partition's record of victims for its spare tier, kept as
            // short as the simulator keeps it (what its borrowing costs).
            inner.partition.trim_ghosts_beside(inner.core.capacity(), inner.core.len());
        }
    }

    /// Stores the data of a block the core holds (a mark if it is clean
    /// and the backend keeps its bytes).
    pub(super) fn store(&self, inner: &mut Inner, block: u64, data: &[u8], dirty: bool) {
        let held = if dirty {
            Held::Bytes(inner.free.filled(data, self.block_size as usize))
        } else {
            self.clean_held(&mut inner.free, data)
        };
        Self::store_held(inner, block, held, dirty);
    }

    /// Stores `held` (a whole block buffer, or a mark) as a block the core holds.
    pub(super) fn store_held(inner: &mut Inner, block: u64, held: Held, dirty: bool) {
        debug_assert!(!(dirty && matches!(held, Held::InBackend)), "a dirty block holds its bytes");
        if let Some(old) = inner.blocks.insert(block, held) {
            inner.free.push_held(old);
        }
        if dirty {
            Self::mark_dirty(inner, block);
        }
    }

    pub(super) fn remove(&self, inner: &mut Inner, block: u64) {
        inner.core.remove(block);
        inner.partition.remove(block);
        if let Some(held) = inner.blocks.remove(&block) {
            inner.dirty.remove(&block);
            inner.free.push_held(held);
        }
    }

    /// The allocation map for NBD_CMD_BLOCK_STATUS. Write-back first writes
    /// the range's dirty blocks, and holds the lock while asking, so no
    /// cached data hides behind a reported hole.
    pub fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<Extent>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let _held = self.hold_mode();
        if let CacheMode::Back { .. } = self.mode() {
            let mut inner = self.lock();
            self.write_stranded(&mut inner, Some(self.block_range(offset, len)))?;
            self.write_dirty(&mut inner, self.block_range(offset, len))?;
            return self.backend.extents(offset, len, max);
        }
        self.backend.extents(offset, len, max)
    }
}

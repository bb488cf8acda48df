//! The write path: write-through (and write-around, pass-through) writes,
//! TRIM and WRITE_ZEROES, with per-stripe write tracking (what lets a racing
//! read know its data may be stale).

use smallvec::SmallVec;

use super::*;

impl BlockCache {
    /// A client write. Write-through puts the data on the backend before
    /// it returns, then updates the cache. A write of whole blocks to a
    /// backend that keeps block buffers ([`Backend::write_blocks`], RAM)
    /// is copied once, into fresh block buffers, which the backend keeps
    /// and the cache then holds too: one copy in RAM, not two.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let len = data.len() as u64;
        let _held = self.hold_mode();
        let mode = self.mode();
        if let CacheMode::Back { .. } = mode {
            return self.write_back(offset, data, fua);
        }
        if self.takes_block_buffers(mode, offset, len) {
            let bs = self.block_size as usize;
            // Filled without the lock: the buffers are this write's alone until handed over.
            let fresh = (self.kept_buffers(self.block_range(offset, len)).into_iter().zip(data.chunks(bs)))
                .map(|(kept, piece)| filled_block(kept, piece, bs))
                .collect();
            return self.write_through(offset, Payload::Blocks(fresh, len), fua, mode);
        }
        self.write_through(offset, Payload::Bytes(data), fua, mode)
    }

    /// Unshared block buffers for a write of `len` bytes at `offset`, for
    /// the caller to fill (the payload read straight off the socket into
    /// them: no copy between) and hand to [`write_filled`](Self::write_filled);
    /// `None` unless the write is of whole blocks, more than one, in
    /// write-through to a backend that keeps block buffers (then call
    /// [`write`](Self::write)). One block's payload is copied from the
    /// connection's read buffer more cheaply than this path's extra round
    /// on the cache lock (measured: 4 KiB random writes cost more CPU with it).
    pub fn write_buffers(&self, offset: u64, len: u64) -> Option<Vec<BlockBuf>> {
        let _held = self.hold_mode();
        let takes = len > self.block_size && self.takes_block_buffers(self.mode(), offset, len);
        let bs = self.block_size as usize;
        takes.then(|| {
            let kept = self.kept_buffers(self.block_range(offset, len));
            kept.into_iter().map(|k| k.unwrap_or_else(|| zeroed_block(bs))).collect()
        })
    }

    /// A client write of `len` bytes at `offset`, its payload in `blocks`
    /// from [`write_buffers`](Self::write_buffers), filled: the first `len`
    /// bytes in order, and every byte past them zero. As [`write`](Self::write).
    pub fn write_filled(&self, offset: u64, len: u64, blocks: Vec<BlockBuf>, fua: bool) -> io::Result<()> {
        let held = self.hold_mode();
        let mode = self.mode();
        if self.takes_block_buffers(mode, offset, len) {
            return self.write_through(offset, Payload::Blocks(BlockBuffers::from_vec(blocks), len), fua, mode);
        }
        // The mode changed since the buffers were handed out: write their bytes.
        drop(held);
        let data: Vec<u8> = blocks.iter().flat_map(|b| b.iter().copied()).take(len as usize).collect();
        self.write(offset, &data, fua)
    }

    /// Whether a write of `len` bytes at `offset` goes into fresh block
    /// buffers that the backend keeps and the cache then holds too.
    fn takes_block_buffers(&self, mode: CacheMode, offset: u64, len: u64) -> bool {
        self.share_blocks && mode == CacheMode::Through && self.whole_blocks(offset, len)
    }

    /// A kept (unshared) buffer from the free list for each block of
    /// `range` while there are any; new ones are made by the caller, after
    /// the lock is released. One block's is kept inline (no allocation).
    fn kept_buffers(&self, range: std::ops::Range<u64>) -> SmallVec<[Option<BlockBuf>; 1]> {
        let mut inner = self.lock();
        range.map(|_| inner.free.pop()).collect()
    }

    /// Write-through (or write-around, pass-through) of `payload` at
    /// `offset`: the backend first, then the cache.
    fn write_through(&self, offset: u64, payload: Payload<'_>, fua: bool, mode: CacheMode) -> io::Result<()> {
        let (data, fresh, len) = match payload {
            Payload::Bytes(data) => (data, BlockBuffers::new(), data.len() as u64),
            Payload::Blocks(fresh, len) => (&[][..], fresh, len),
        };
        let range = self.block_range(offset, len);
        self.lock().stripes.begin(range.clone());
        let share = !fresh.is_empty();
        let result =
            if share { self.backend_write_blocks(range.start, &fresh) } else { self.backend_write(data, offset) };
        let result = result.and_then(|()| if fua { self.backend_flush() } else { Ok(()) });
        let mut guard = self.lock();
        let inner = &mut *guard;
        let raced = inner.stripes.end(range.clone());
        // Bytes written through to a backend that keeps block buffers: the
        // cache holds the buffer the backend now keeps for each block (its
        // truth, this write included) instead of a second copy of it.
        let hold_theirs = !share && self.share_blocks && mode == CacheMode::Through && result.is_ok() && !raced;
        let theirs = if hold_theirs { self.backend.read_blocks(range.start, range.clone().count()) } else { Ok(None) };
        // Without the backend's buffers the bytes are written into the cache's.
        let mut fresh = theirs.ok().flatten().unwrap_or(fresh).into_iter();
        for b in range.clone() {
            let mut mine = fresh.next();
            let (in_block, in_req, n) = self.overlap(b, offset, len);
            // A shared write's bytes are in its block buffer (`mine`), not in `data`
            // (held from the backend, `mine` is the whole block as it now stands).
            let part = if mine.is_some() { &[][..] } else { &data[in_req..in_req + n] };
            let whole = in_block == 0 && n as u64 == self.block_len(b);
            if raced || result.is_err() || matches!(mode, CacheMode::Around | CacheMode::PassThrough) {
                self.remove(inner, b);
                self.log_changed(b, None);
            } else {
                inner.core.warm_ahead(b, &range);
                let a = Self::access(inner, b, self.block_size, Op::Write);
                let demand = inner.core.demand(&a);
                if let Some(cached) = inner.blocks.get_mut(&b) {
                    match mine.take() {
                        Some(buf) => inner.free.push(std::mem::replace(cached, buf)),
                        None => write_into(&mut inner.free, cached, in_block, part, self.block_len(b) as usize),
                    }
                } else if whole && (demand == Demand::Miss { place: true } || inner.core.holds(b)) {
                    // Write-allocate whole blocks (or fill a block placed
                    // while its reload is pending): the data is at hand.
                    let buf = mine.take().unwrap_or_else(|| inner.free.filled(part, self.block_size as usize));
                    if inner.core.holds(b) {
                        Self::store_buf(inner, b, buf, false);
                    } else {
                        mine = self.insert_buf(inner, b, buf, false, Victims::WriteBack);
                    }
                }
                let len = self.block_len(b) as usize;
                match inner.blocks.get(&b) {
                    Some(cached) => self.log_changed(b, Some(&cached[..len])),
                    None if whole => self.log_changed(b, Some(mine.as_deref().map_or(part, |buf| &buf[..n]))),
                    None => self.log_changed(b, None),
                }
            }
            // Not cached: kept by the backend alone, or reused.
            if let Some(buf) = mine {
                inner.free.push(buf);
            }
        }
        result
    }

    /// Whether `[offset, offset+len)` is made of whole blocks (the last
    /// one may end at the export's end).
    fn whole_blocks(&self, offset: u64, len: u64) -> bool {
        let end = offset + len;
        len > 0 && offset.is_multiple_of(self.block_size) && (end.is_multiple_of(self.block_size) || end == self.size)
    }

    /// Zeroes (`trim == false`) or discards a range. The cache drops every
    /// block it touches and the backend holds the truth afterwards, except
    /// that after a failure write-back keeps its dirty blocks.
    pub fn discard(&self, offset: u64, len: u64, trim: bool, may_punch: bool, fua: bool) -> io::Result<()> {
        let range = self.block_range(offset, len);
        let op = || {
            let r =
                if trim { self.backend.trim(offset, len) } else { self.backend.write_zeroes(offset, len, may_punch) };
            self.stats.backend_writes.fetch_add(1, Ordering::Relaxed);
            r.and_then(|()| if fua { self.backend_flush() } else { Ok(()) })
        };
        let _held = self.hold_mode();
        let mut inner = self.lock();
        inner.stripes.begin(range.clone());
        let result = if let CacheMode::Back { .. } = self.mode() {
            // Partially covered dirty (or stranded) blocks hold data outside the range.
            let r = self
                .write_stranded(&mut inner, Some(range.clone()))
                .and_then(|()| self.write_dirty(&mut inner, range.clone()))
                .and_then(|()| op());
            for b in range.clone() {
                // After a failure, dirty blocks are still the only copy of acknowledged data.
                if r.is_ok() || !inner.dirty.contains_key(&b) {
                    self.remove(&mut inner, b);
                }
                self.log_changed(b, None);
            }
            r
        } else {
            drop(inner);
            let r = op();
            inner = self.lock();
            for b in range.clone() {
                self.remove(&mut inner, b);
                self.log_changed(b, None);
            }
            r
        };
        inner.stripes.end(range);
        result
    }
}

/// A write's payload: its bytes, or block buffers holding its `len` bytes.
enum Payload<'a> {
    Bytes(&'a [u8]),
    Blocks(BlockBuffers, u64),
}

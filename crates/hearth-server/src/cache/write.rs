//! The write path: write-through (and write-around, pass-through) writes,
//! TRIM and WRITE_ZEROES, with per-stripe write tracking (what lets a racing
//! read know its data may be stale).

use super::*;

impl BlockCache {
    /// A client write. Write-through puts the data on the backend before
    /// it returns, then updates the cache. A write of whole blocks to a
    /// backend that keeps block buffers ([`Backend::write_blocks`], RAM)
    /// is copied once, into fresh block buffers, which the backend keeps
    /// and the cache then holds too: one copy in RAM, not two.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let len = data.len() as u64;
        let range = self.block_range(offset, len);
        let _held = self.hold_mode();
        let mode = self.mode();
        if let WriteMode::Back { .. } = mode {
            return self.write_back(offset, data, fua);
        }
        let share = self.share_blocks && mode == WriteMode::Through && self.whole_blocks(offset, len);
        let kept: Vec<Option<BlockBuf>> = {
            let mut inner = self.lock();
            inner.stripes.begin(range.clone());
            if share {
                range.clone().map(|_| inner.free.pop()).collect()
            } else {
                Vec::new()
            }
        };
        // Filled without the lock: the buffers are this write's alone until handed over.
        let fresh: Vec<BlockBuf> = (range.clone().zip(kept))
            .map(|(b, kept)| {
                let (_, in_req, n) = self.overlap(b, offset, len);
                filled_block(kept, &data[in_req..in_req + n], self.block_size as usize)
            })
            .collect();
        let result =
            if share { self.backend_write_blocks(range.start, &fresh) } else { self.backend_write(data, offset) };
        let result = result.and_then(|()| if fua { self.backend_flush() } else { Ok(()) });
        let mut guard = self.lock();
        let inner = &mut *guard;
        let raced = inner.stripes.end(range.clone());
        let mut fresh = fresh.into_iter();
        for b in range {
            let mut mine = fresh.next();
            let (in_block, in_req, n) = self.overlap(b, offset, len);
            let part = &data[in_req..in_req + n];
            let whole = in_block == 0 && n as u64 == self.block_len(b);
            if raced || result.is_err() || matches!(mode, WriteMode::Around | WriteMode::Pass) {
                self.remove(inner, b);
                self.log_changed(b, None);
            } else {
                let a = Self::access(inner, b, self.block_size, Op::Write);
                let demand = inner.core.demand(&a);
                if let Some(cached) = inner.blocks.get_mut(&b) {
                    match mine.take() {
                        Some(buf) => inner.free.push(std::mem::replace(cached, buf)),
                        None => write_into(&mut inner.free, cached, in_block, part, self.block_len(b) as usize),
                    }
                } else if whole && (demand == Demand::Miss { place: true } || inner.core.policy().contains(b)) {
                    // Write-allocate whole blocks (or fill a block placed
                    // while its reload is pending): the data is at hand.
                    let buf = mine.take().unwrap_or_else(|| inner.free.filled(part, self.block_size as usize));
                    if inner.core.policy().contains(b) {
                        Self::store_buf(inner, b, buf, false);
                    } else {
                        mine = self.insert_buf(inner, b, buf, false, Victims::WriteBack);
                    }
                }
                let len = self.block_len(b) as usize;
                match inner.blocks.get(&b) {
                    Some(cached) => self.log_changed(b, Some(&cached[..len])),
                    None if whole => self.log_changed(b, Some(part)),
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
        let result = if let WriteMode::Back { .. } = self.mode() {
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

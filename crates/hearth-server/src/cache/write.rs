//! The write path: write-through (and write-around, pass-through) writes,
//! TRIM and WRITE_ZEROES, with per-stripe write tracking (what lets a racing
//! read know its data may be stale).

use super::*;

impl BlockCache {
    /// A client write. Write-through puts the data on the backend before
    /// it returns, then updates the cache (over a backend that keeps its
    /// bytes in RAM, only what is resident: the bytes are the backend's).
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let _held = self.hold_mode();
        let mode = self.mode();
        if let CacheMode::Back { .. } = mode {
            return self.write_back(offset, data, fua);
        }
        self.write_through(offset, data, fua, mode)
    }

    /// Write-through (or write-around, pass-through) of `data` at
    /// `offset`: the backend first, then the cache.
    fn write_through(&self, offset: u64, data: &[u8], fua: bool, mode: CacheMode) -> io::Result<()> {
        let len = data.len() as u64;
        let range = self.block_range(offset, len);
        self.lock().stripes.begin(range.clone());
        let result = self.backend_write(data, offset).and_then(|()| if fua { self.backend_flush() } else { Ok(()) });
        let mut guard = self.lock();
        let inner = &mut *guard;
        let raced = inner.stripes.end(range.clone());
        for b in range.clone() {
            let (in_block, in_req, n) = self.overlap(b, offset, len);
            let part = &data[in_req..in_req + n];
            let whole = in_block == 0 && n as u64 == self.block_len(b);
            if raced || result.is_err() || matches!(mode, CacheMode::Around | CacheMode::PassThrough) {
                self.remove(inner, b);
                self.log_changed(b, None);
                continue;
            }
            inner.core.warm_ahead(b, &range);
            let a = Self::access(inner, b, self.block_size, Op::Write);
            let demand = inner.core.demand(&a);
            match inner.blocks.get_mut(&b) {
                Some(Held::Bytes(cached)) => {
                    write_into(&mut inner.free, cached, in_block, part, self.block_len(b) as usize)
                }
                // The backend holds the block's bytes, this write's included.
                Some(Held::InBackend) => {}
                None if whole && (demand == Demand::Miss { place: true } || inner.core.holds(b)) => {
                    // Write-allocate whole blocks (or fill a block placed
                    // while its reload is pending): the data is at hand.
                    let held = self.clean_held(&mut inner.free, part);
                    if inner.core.holds(b) {
                        Self::store_held(inner, b, held, false);
                    } else if let Some(declined) = self.insert_held(inner, b, held, false, Victims::WriteBack) {
                        inner.free.push_held(declined);
                    }
                }
                None => {}
            }
            if self.content_log.get().is_some() {
                match inner.blocks.get(&b) {
                    Some(held) => self.log_changed(b, Some(&self.held_bytes(held, b))),
                    None if whole => self.log_changed(b, Some(part)),
                    None => self.log_changed(b, None),
                }
            }
        }
        result
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

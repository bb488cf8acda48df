//! The write path: per-stripe write tracking (what lets a racing read know
//! its data may be stale), write-through writes, TRIM and WRITE_ZEROES.

use super::*;

impl BlockCache {
    /// Stripes touched by a block range, each once.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let len = data.len() as u64;
        let range = self.block_range(offset, len);
        let _held = self.hold_mode();
        let mode = self.mode();
        if let WriteMode::Back { .. } = mode {
            return self.write_back(offset, data, fua);
        }
        self.lock().stripes.begin(range.clone());
        let result = self.backend_write(data, offset).and_then(|()| if fua { self.backend_flush() } else { Ok(()) });
        let mut inner = self.lock();
        let raced = inner.stripes.end(range.clone());
        for b in range {
            let (in_block, in_req, n) = self.overlap(b, offset, len);
            let whole = in_block == 0 && n as u64 == self.block_len(b);
            if raced || result.is_err() || matches!(mode, WriteMode::Around | WriteMode::Pass) {
                self.remove(&mut inner, b);
                self.log_changed(b, None);
            } else {
                let a = Self::access(&mut inner, b, self.block_size, Op::Write);
                let demand = inner.core.demand(&a);
                if let Some(cached) = inner.blocks.get_mut(&b) {
                    writable(cached)[in_block..in_block + n].copy_from_slice(&data[in_req..in_req + n]);
                } else if whole && (demand == Demand::Miss { place: true } || inner.core.policy().contains(b)) {
                    // Write-allocate whole blocks (or fill a block placed
                    // while its reload is pending): the data is at hand.
                    if inner.core.policy().contains(b) {
                        self.store(&mut inner, b, &data[in_req..in_req + n], false);
                    } else {
                        self.insert(&mut inner, b, &data[in_req..in_req + n], false, Victims::WriteBack);
                    }
                }
                let len = self.block_len(b) as usize;
                match inner.blocks.get(&b) {
                    Some(cached) => self.log_changed(b, Some(&cached[..len])),
                    None if whole => self.log_changed(b, Some(&data[in_req..in_req + n])),
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

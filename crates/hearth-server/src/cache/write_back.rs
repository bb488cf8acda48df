//! Write-back: dirty and held blocks, FLUSH, the dirty limit, and writing
//! back without the lock (a run is copied under it, written, and marked
//! clean only if unchanged) while lock-holding paths wait for in-flight
//! copies of their blocks.

use super::*;

impl BlockCache {
    /// Whether evictions held dirty blocks since the last call.
    pub fn take_held(&self) -> bool {
        self.held.swap(false, Ordering::Relaxed)
    }

    /// Writes back the dirty blocks held in memory (call on a blocking
    /// thread, after [`client_evicted`](Self::client_evicted) or
    /// [`classify_demand`](Self::classify_demand) evicted some).
    pub fn write_back_held(&self) -> io::Result<()> {
        let mut inner = self.lock();
        if inner.stranded.is_empty() {
            return Ok(());
        }
        self.write_stranded(&mut inner, None)
    }

    pub(super) fn write_back(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let range = self.block_range(offset, data.len() as u64);
        let mut inner = self.lock();
        if inner.stranded.len() as u64 * self.block_size > self.dirty_limit() {
            // The backend keeps refusing write-backs: retry them before taking on more,
            // and refuse this write while it still fails.
            self.write_stranded(&mut inner, None)?;
        }
        inner.stripes.begin(range.clone());
        let result = self.write_blocks(&mut inner, offset, data, Victims::WriteBack).and_then(|()| {
            if fua {
                self.write_dirty(&mut inner, range.clone())?;
            }
            Ok(())
        });
        inner.stripes.end(range);
        let over_limit = inner.dirty.len() as u64 * self.block_size > self.dirty_limit();
        drop(inner);
        result?;
        if fua {
            self.backend_flush()?;
        }
        if over_limit {
            self.write_back_unlocked()?;
        }
        Ok(())
    }

    /// A write-back write done without any backend call, on the caller's
    /// thread (a connection's async reader): only when every block it
    /// touches is cached or written whole, nothing is held, and the dirty
    /// blocks stay under the dirty limit. Dirty victims are held for
    /// [`write_back_held`](Self::write_back_held), and until that has run
    /// writes take the blocking path, so at most one write's victims wait.
    /// Returns false, having changed nothing, when the write needs the
    /// backend (then call [`write`](Self::write) on a blocking thread).
    pub fn write_cached(&self, offset: u64, data: &[u8]) -> bool {
        // A mode switch in progress: take the blocking path, which waits for it.
        let Ok(_held) = self.switching.try_read() else { return false };
        if !matches!(self.mode(), CacheMode::Back { .. }) {
            return false;
        }
        let len = data.len() as u64;
        let range = self.block_range(offset, len);
        let mut inner = self.lock();
        let dirty_after = inner.dirty.len() as u64 + (range.end - range.start);
        if !inner.stranded.is_empty() || dirty_after * self.block_size > self.dirty_limit() {
            return false;
        }
        let in_memory = |b: u64| {
            let (_, _, n) = self.overlap(b, offset, len);
            n as u64 == self.block_len(b) || (inner.blocks.contains_key(&b) && inner.core.holds(b))
        };
        if !range.clone().all(in_memory) {
            return false;
        }
        inner.stripes.begin(range.clone());
        let written = self.write_blocks(&mut inner, offset, data, Victims::Hold);
        inner.stripes.end(range);
        debug_assert!(written.is_ok(), "a held write makes no backend call");
        written.is_ok()
    }

    /// The blocks of a write-back write, under the lock: cached blocks are
    /// updated, absent ones inserted dirty (read-modify-write if partial).
    /// A block the policy declines is written through, or with
    /// [`Victims::Hold`] held like a dirty victim.
    fn write_blocks(&self, inner: &mut Inner, offset: u64, data: &[u8], victims: Victims) -> io::Result<()> {
        let len = data.len() as u64;
        let range = self.block_range(offset, len);
        for b in range.clone() {
            inner.core.warm_ahead(b, &range);
            let (in_block, in_req, n) = self.overlap(b, offset, len);
            let part = &data[in_req..in_req + n];
            if !inner.core.holds(b) && inner.partition.contains(b) {
                // A landed prefetch is clean and may be dropped from its partition at
                // any time: the write goes to the main cache instead.
                inner.unclaim(b);
                self.remove(inner, b);
            }
            let a = Self::access(inner, b, self.block_size, Op::Write);
            inner.core.demand(&a);
            let block_len = self.block_len(b) as usize;
            if let Some(held) = inner.blocks.get_mut(&b) {
                let cached = self.own_bytes(&mut inner.free, held, b);
                write_into(&mut inner.free, cached, in_block, part, block_len);
                self.log_changed(b, Some(&cached[..block_len]));
                Self::mark_dirty(inner, b);
                continue;
            }
            let mut whole = inner.free.pop_or_new(self.block_size as usize);
            if let Some(held) = inner.stranded.remove(&b) {
                inner.free.push(std::mem::replace(&mut whole, held));
            } else if n < block_len {
                // Partial write of an absent block: read-modify-write.
                if let Err(e) = self.backend_read(&mut writable(&mut whole)[..block_len], b * self.block_size) {
                    inner.free.push(whole);
                    return Err(e);
                }
            }
            writable(&mut whole)[in_block..in_block + n].copy_from_slice(part);
            self.log_changed(b, Some(&whole[..block_len]));
            let Some(Held::Bytes(whole)) = self.insert_held(inner, b, Held::Bytes(whole), true, victims) else {
                continue;
            };
            if victims == Victims::Hold {
                // The policy declined the block: hold it until it can be written.
                inner.stranded.insert(b, whole);
                self.held.store(true, Ordering::Relaxed);
            } else {
                // The policy declined the block: write it straight through,
                // or hold it if that fails (it may carry held data).
                if let Err(e) = self.backend_write_blocks(b, std::slice::from_ref(&whole)) {
                    inner.stranded.insert(b, whole);
                    return Err(e);
                }
                inner.free.push(whole);
            }
        }
        Ok(())
    }

    /// Retries the write-back of stranded blocks (all, or those in `range`),
    /// under the lock: a rare path after backend write errors.
    pub(super) fn write_stranded(&self, inner: &mut Inner, range: Option<std::ops::Range<u64>>) -> io::Result<()> {
        let mut blocks: Vec<Key> = inner.stranded.keys().copied().collect();
        blocks.retain(|b| range.as_ref().is_none_or(|r| r.contains(b)));
        for b in blocks {
            // A block held at eviction may still have an older copy on its
            // way from a FLUSH: that copy must land first.
            self.wait_until_not_in_flight(b);
            self.backend_write_blocks(b, std::slice::from_ref(&inner.stranded[&b]))?;
            let buf = inner.stranded.remove(&b).expect("listed above");
            inner.free.push(buf);
            self.stats.writebacks.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(block = b, "a dirty block held outside the cache is written back");
        }
        Ok(())
    }

    /// Bytes that may be dirty (or stranded) before write-back kicks in.
    pub(super) fn dirty_limit(&self) -> u64 {
        self.dirty_limit.load(Ordering::Relaxed)
    }

    pub(super) fn mark_dirty(inner: &mut Inner, block: u64) {
        inner.dirty_since.get_or_insert_with(Instant::now);
        inner.write_seq += 1;
        inner.dirty.insert(block, inner.write_seq);
    }

    /// Dirty `block`'s bytes, shared.
    fn dirty_bytes(inner: &Inner, block: u64) -> BlockBuf {
        match &inner.blocks[&block] {
            Held::Bytes(buf) => buf.clone(),
            Held::InBackend => unreachable!("a dirty block holds its bytes"),
        }
    }

    /// Dirty `block` reached the backend: it is clean now, and over a
    /// backend that keeps its bytes in RAM the cache lets its copy go.
    fn cleaned(&self, inner: &mut Inner, block: u64) {
        inner.dirty.remove(&block);
        if self.bytes_in_backend {
            if let Some(held) = inner.blocks.get_mut(&block) {
                let bytes = std::mem::replace(held, Held::InBackend);
                inner.free.push_held(bytes);
            }
        }
    }

    /// The cache's own buffer for resident `block`, to change: one holding
    /// the backend's bytes is made first if the block is held there.
    fn own_bytes<'a>(&self, free: &mut FreeBlocks, held: &'a mut Held, block: u64) -> &'a mut BlockBuf {
        if let Held::InBackend = held {
            let mut buf = free.pop_or_new(self.block_size as usize);
            let len = self.block_len(block) as usize;
            self.copy_shared(&mut writable(&mut buf)[..len], block * self.block_size);
            *held = Held::Bytes(buf);
        }
        match held {
            Held::Bytes(buf) => buf,
            Held::InBackend => unreachable!("just given its bytes"),
        }
    }

    /// Returns once no unlocked write-back is writing `block`.
    pub(super) fn wait_until_not_in_flight(&self, block: u64) {
        let mut writing = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        while writing.contains(&block) {
            writing = self.in_flight_done.wait(writing).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Writes the dirty blocks in `range` to the backend, holding the lock
    /// (small ranges: FUA, zeroing, BLOCK_STATUS), merging neighbours into
    /// one backend write.
    pub(super) fn write_dirty(&self, inner: &mut Inner, range: std::ops::Range<u64>) -> io::Result<()> {
        let keys: Vec<Key> = range.filter(|b| inner.dirty.contains_key(b)).collect();
        for &b in &keys {
            self.wait_until_not_in_flight(b);
        }
        for run in keys.chunk_by(|a, b| b == &(a + 1)) {
            let bufs: Vec<BlockBuf> = run.iter().map(|&b| Self::dirty_bytes(inner, b)).collect();
            self.backend_write_blocks(run[0], &bufs)?;
            for &b in run {
                self.cleaned(inner, b);
            }
            self.stats.writebacks.fetch_add(run.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes every block dirty now to the backend without holding the lock
    /// across backend calls: a run of neighbours is copied under the lock,
    /// written, and marked clean unless a write changed it meanwhile.
    pub(super) fn write_back_unlocked(&self) -> io::Result<()> {
        self.write_back_some(usize::MAX)
    }

    /// As [`write_back_unlocked`](Self::write_back_unlocked), for at most
    /// `most` blocks (the lowest-numbered dirty ones).
    fn write_back_some(&self, most: usize) -> io::Result<()> {
        let _one = self.writing_back.lock().unwrap_or_else(|e| e.into_inner());
        let mut keys: Vec<Key> = self.lock().dirty.keys().copied().collect();
        keys.sort_unstable();
        keys.truncate(most);
        let mut next = 0;
        while next < keys.len() {
            let (first, copied, bufs) = {
                let inner = self.lock();
                while next < keys.len() && !inner.dirty.contains_key(&keys[next]) {
                    next += 1; // written or dropped since
                }
                let Some(&first) = keys.get(next) else { break };
                let mut copied = Vec::new();
                // Shared, not copied: a write meanwhile copies the block first.
                let mut bufs = Vec::new();
                while let Some(&b) = keys.get(next) {
                    let extends_run = b == first + copied.len() as u64 && copied.len() < WRITE_BACK_RUN;
                    let Some(&seq) = inner.dirty.get(&b).filter(|_| extends_run) else { break };
                    bufs.push(Self::dirty_bytes(&inner, b));
                    copied.push((b, seq));
                    next += 1;
                }
                // Registered before the lock is released: nobody can write these
                // blocks back under the lock until this copy has landed.
                self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).extend(copied.iter().map(|&(b, _)| b));
                (first, copied, bufs)
            };
            let written = self.backend_write_blocks(first, &bufs);
            drop(bufs);
            {
                let mut writing = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                for (b, _) in &copied {
                    writing.remove(b);
                }
            }
            self.in_flight_done.notify_all();
            written?;
            let mut inner = self.lock();
            for (b, seq) in copied {
                if inner.dirty.get(&b) == Some(&seq) {
                    self.cleaned(&mut inner, b);
                    self.stats.writebacks.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
    }

    /// Makes every acknowledged write durable.
    pub fn flush(&self) -> io::Result<()> {
        let _held = self.hold_mode();
        match self.mode() {
            CacheMode::Through | CacheMode::Around | CacheMode::PassThrough => self.backend_flush(),
            CacheMode::Back { .. } => {
                self.clean()?;
                self.backend_flush()
            }
        }
    }

    /// Writes every dirty (and stranded) block to the backend, without the
    /// backend cache flush that FLUSH adds: background cleaning, so that
    /// acknowledged data does not wait for a FLUSH or the dirty limit.
    pub fn clean(&self) -> io::Result<()> {
        let started = Instant::now();
        self.write_stranded(&mut self.lock(), None)?;
        self.write_back_unlocked()?;
        let mut inner = self.lock();
        // What is dirty now was written during this pass.
        inner.dirty_since = (!inner.dirty.is_empty() || !inner.stranded.is_empty()).then_some(started);
        Ok(())
    }

    /// Idle cleaning: writes at most `most` dirty blocks back (and every
    /// stranded one), so a quiet export drains its dirty data at a bounded
    /// rate before any of it reaches the maximum age.
    pub fn clean_some(&self, most: usize) -> io::Result<()> {
        self.write_stranded(&mut self.lock(), None)?;
        self.write_back_some(most)
    }

    /// A count that changes with every block a client dirties: equal on two
    /// looks means no write-back write came between them.
    pub fn dirtied(&self) -> u64 {
        self.lock().write_seq
    }

    /// How long the oldest dirty or stranded block has waited for the
    /// backend, at most; `None` if there is none.
    pub fn dirty_age(&self) -> Option<Duration> {
        let mut inner = self.lock();
        if inner.dirty.is_empty() && inner.stranded.is_empty() {
            inner.dirty_since = None;
        }
        inner.dirty_since.map(|t| t.elapsed())
    }
}

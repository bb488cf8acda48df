//! Write-through writes whose payload was read straight into block buffers
//! ([`BlockPayload`]): the backend writes from those buffers and the cache
//! keeps them as the written blocks' data, so a payload is copied once
//! after the socket (into the backend) instead of twice (into a payload
//! buffer, then into the backend and into the cache's blocks).

use super::*;

/// A block-aligned write payload held in buffers that become cache blocks.
pub struct BlockPayload {
    offset: u64,
    blocks: Vec<BlockBuf>,
}

impl BlockPayload {
    /// The buffers to read the payload into, in order.
    pub fn parts_mut(&mut self) -> Vec<&mut [u8]> {
        self.blocks.iter_mut().map(|b| Arc::get_mut(b).expect("payload blocks are never shared")).collect()
    }
}

impl BlockCache {
    /// Buffers to read a write of `len` bytes at `offset` into, for
    /// [`write_payload`](Self::write_payload): only for write-through
    /// writes of whole blocks (otherwise None: read the payload into one
    /// buffer and call [`write`](Self::write)). Reuses the buffers of
    /// dropped blocks, which an overwrite gives back one for one.
    pub fn payload_buffers(&self, offset: u64, len: u64) -> Option<BlockPayload> {
        let bs = self.block_size;
        if len == 0 || offset % bs != 0 || len % bs != 0 || !matches!(self.mode(), WriteMode::Through) {
            return None;
        }
        let n = (len / bs) as usize;
        let mut blocks = {
            let free = &mut self.lock().free.0;
            free.split_off(free.len() - n.min(free.len()))
        };
        blocks.resize_with(n, || Arc::from(vec![0u8; bs as usize]));
        Some(BlockPayload { offset, blocks })
    }

    /// [`write`](Self::write) of a payload read into
    /// [`payload_buffers`](Self::payload_buffers), with the same semantics:
    /// the backend has the data before this returns, a read racing the
    /// write drops the blocks, and cached (or newly placed) blocks take the
    /// payload's buffers instead of a copy of them.
    pub fn write_payload(&self, payload: BlockPayload, fua: bool) -> io::Result<()> {
        let BlockPayload { offset, blocks } = payload;
        let held = self.hold_mode();
        if !matches!(self.mode(), WriteMode::Through) {
            // The mode changed since the buffers were handed out.
            drop(held);
            return self.write(offset, &blocks.concat(), fua);
        }
        let range = self.block_range(offset, blocks.len() as u64 * self.block_size);
        self.lock().stripes.begin(range.clone());
        let parts: Vec<&[u8]> = blocks.iter().map(|b| &b[..]).collect();
        self.stats.backend_writes.fetch_add(1, Ordering::Relaxed);
        let result =
            self.backend.write_parts_at(&parts, offset).and_then(|()| if fua { self.backend_flush() } else { Ok(()) });
        drop(parts);
        let mut inner = self.lock();
        let raced = inner.stripes.end(range.clone());
        for (b, buf) in range.zip(blocks) {
            if raced || result.is_err() {
                self.remove(&mut inner, b);
                self.log_changed(b, None);
                inner.free.push(buf);
                continue;
            }
            let a = Self::access(&mut inner, b, self.block_size, Op::Write);
            let demand = inner.core.demand(&a);
            self.log_changed(b, Some(&buf));
            if let Some(cached) = inner.blocks.get_mut(&b) {
                // A reply still sending the old buffer keeps it; see `writable`.
                let old = std::mem::replace(cached, buf);
                inner.free.push(old);
            } else if (demand == Demand::Miss { place: true } || inner.core.policy().contains(b))
                && (inner.core.policy().contains(b) || self.place(&mut inner, b, Victims::WriteBack))
            {
                Self::store_buf(&mut inner, b, buf, false);
            } else {
                inner.free.push(buf);
            }
        }
        drop(held);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemoryBackend;

    const BS: u64 = 4096;

    fn setup(mode: WriteMode) -> (Arc<MemoryBackend>, BlockCache) {
        let backend = Arc::new(MemoryBackend::new(64 * BS));
        let policy = hearth_policy::build("lru", 32 * BS).unwrap();
        (backend.clone(), BlockCache::new(Box::new(backend), policy, BS as u32, mode))
    }

    fn payload(cache: &BlockCache, offset: u64, fill: &[u8]) -> BlockPayload {
        let mut p = cache.payload_buffers(offset, fill.len() as u64).expect("aligned write-through");
        let mut at = 0;
        for part in p.parts_mut() {
            part.copy_from_slice(&fill[at..at + part.len()]);
            at += part.len();
        }
        p
    }

    fn cached(cache: &BlockCache, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        cache.read_cached(offset, len, &mut out).then(|| out.iter().flat_map(|s| s.iter().copied()).collect())
    }

    #[test]
    fn the_backend_and_the_cache_get_the_payload_and_a_held_reply_keeps_the_old_data() {
        let (backend, cache) = setup(WriteMode::Through);
        let first: Vec<u8> = (0..4 * BS).map(|i| (i % 251) as u8).collect();
        cache.write_payload(payload(&cache, 8 * BS, &first), false).unwrap();
        assert_eq!(&backend.snapshot()[8 * BS as usize..12 * BS as usize], &first[..]);
        assert_eq!(cached(&cache, 8 * BS, first.len()).as_deref(), Some(&first[..]), "written blocks are cached");
        let mut held = Vec::new();
        assert!(cache.read_cached(8 * BS, first.len(), &mut held));
        let second = vec![7u8; 4 * BS as usize];
        cache.write_payload(payload(&cache, 8 * BS, &second), true).unwrap();
        assert_eq!(&backend.snapshot()[8 * BS as usize..12 * BS as usize], &second[..]);
        assert_eq!(backend.flushes(), 1, "FUA flushes");
        assert_eq!(cached(&cache, 8 * BS, second.len()).as_deref(), Some(&second[..]));
        let sent: Vec<u8> = held.iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(sent, first, "a reply still sending sees the data as it was read");
    }

    #[test]
    fn only_whole_blocks_in_write_through_and_a_mode_switch_meanwhile_writes_around() {
        let (backend, cache) = setup(WriteMode::Through);
        assert!(cache.payload_buffers(BS / 2, BS).is_none(), "unaligned offset");
        assert!(cache.payload_buffers(0, BS + 1).is_none(), "partial block");
        assert!(cache.payload_buffers(0, 0).is_none());
        let data = vec![9u8; 2 * BS as usize];
        let p = payload(&cache, 0, &data);
        cache.set_mode(WriteMode::Around).unwrap();
        assert!(cache.payload_buffers(0, BS).is_none(), "not write-through");
        cache.write_payload(p, false).unwrap();
        assert_eq!(&backend.snapshot()[..data.len()], &data[..]);
        assert_eq!(cached(&cache, 0, data.len()), None, "write-around leaves the blocks out");
    }
}

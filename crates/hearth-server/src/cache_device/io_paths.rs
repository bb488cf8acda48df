//! Reads, writes (through and back) and zeroing, block by block.

use std::io;
use std::sync::atomic::Ordering;

use hearth_core::Op;

use super::{poisoned_error, CacheDevice, SlotState, State};
use crate::stripes::Glance;

/// What one block of a read found.
enum Found {
    Hit {
        slot: u64,
        generation: u64,
        crc: u32,
        dirty: bool,
    },
    /// Not on the device, with its stripe at lookup.
    Miss(Glance),
}

impl CacheDevice {
    /// Reads whole blocks `first..first + buf.len() / bs` into `buf`.
    pub(super) fn read_blocks(&self, buf: &mut [u8], first: u64) -> io::Result<()> {
        let bs = self.layout.block_size as usize;
        let count = (buf.len() / bs) as u64;
        let found: Vec<Found> = {
            let mut st = self.lock();
            let mut found = Vec::with_capacity(count as usize);
            for block in first..first + count {
                let a = Self::access(&mut st, block, bs as u64, Op::Read);
                st.policy.lookup(&a);
                found.push(match st.slot_of.get(&block).map(|&s| (s, st.slots[s as usize])) {
                    Some((slot, SlotState::Valid { entry, .. })) => Found::Hit {
                        slot,
                        generation: st.generations[slot as usize],
                        crc: entry.crc,
                        dirty: entry.dirty,
                    },
                    Some((_, SlotState::Poisoned { .. })) => return Err(poisoned_error(block)),
                    // Being rewritten: the backend has the old or the new data.
                    Some((_, _)) => Found::Miss(Glance::NEVER_SAFE),
                    None => Found::Miss(st.stripes.glance(block)),
                });
            }
            found
        };
        // Runs of misses are one backend read each; hits are checked against their checksums.
        let mut damaged = Vec::new();
        let mut i = 0;
        while i < found.len() {
            let run = found[i..].iter().take_while(|f| matches!(f, Found::Miss(_))).count();
            if run == 0 {
                if let Found::Hit { slot, crc, .. } = found[i] {
                    if let Err(e) = self.read_checked(slot, crc, &mut buf[i * bs..(i + 1) * bs]) {
                        damaged.push((i, e));
                    }
                }
                i += 1;
                continue;
            }
            self.backend.read_at(&mut buf[i * bs..(i + run) * bs], (first + i as u64) * bs as u64)?;
            self.stats.misses.fetch_add(run as u64, Ordering::Relaxed);
            i += run;
        }
        let mut again = Vec::new();
        {
            let mut st = self.lock();
            for (i, f) in found.iter().enumerate() {
                let block = first + i as u64;
                match *f {
                    Found::Hit { slot, generation, dirty, .. } if st.generations[slot as usize] == generation => {
                        let Some(at) = damaged.iter().position(|&(d, _)| d == i) else {
                            self.stats.hits.fetch_add(1, Ordering::Relaxed);
                            continue;
                        };
                        let (_, e) = damaged.swap_remove(at);
                        if dirty {
                            // The only copy: fail, never fall back to the backend's older data.
                            self.poison(&mut st, block, &e);
                            return Err(poisoned_error(block));
                        }
                        self.stats.checksum_failures.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(device = %self.path.display(), block, error = %e, "clean cache device copy damaged; read from the backend");
                        self.drop_block(&mut st, block);
                        again.push(i);
                    }
                    Found::Hit { .. } => again.push(i),
                    Found::Miss(glance) => {
                        if st.stripes.unchanged_since(block, glance)
                            && !st.slot_of.contains_key(&block)
                            && self.admit(&mut st, block)
                            && !self.place(&mut st, block, &buf[i * bs..(i + 1) * bs], false)
                        {
                            // The device could not take it: the read is served all the same.
                            st.policy.remove(block);
                        }
                    }
                }
            }
        }
        // A slot that changed under a hit, or a damaged clean copy: read that block again.
        for i in again {
            self.read_blocks(&mut buf[i * bs..(i + 1) * bs], first + i as u64)?;
        }
        Ok(())
    }

    /// Write-through of `data` at `offset` (whole blocks or not): clears the
    /// entries of the blocks it touches, writes the backend, then rewrites
    /// the slots (or, with `admit_new`, stores whole new blocks) if no other
    /// write overlapped.
    pub(super) fn write_through(&self, data: &[u8], offset: u64, admit_new: bool) -> io::Result<()> {
        let bs = self.layout.block_size;
        let end = offset + data.len() as u64;
        let blocks = offset / bs..end.div_ceil(bs);
        let whole = |block: u64| block * bs >= offset && (block + 1) * bs <= end;
        let mut rewriting = Vec::new();
        let mut replaced_poison = Vec::new();
        {
            let mut st = self.lock();
            for block in blocks.clone() {
                let Some(&slot) = st.slot_of.get(&block) else { continue };
                match st.slots[slot as usize] {
                    // A damaged dirty block can only be replaced whole; its entry goes once the backend has the new data.
                    SlotState::Poisoned { .. } if whole(block) => replaced_poison.push(block),
                    SlotState::Poisoned { .. } => return Err(poisoned_error(block)),
                    _ => {}
                }
            }
            st.stripes.begin(blocks.clone());
            for block in blocks.clone() {
                let a = Self::access(&mut st, block, bs, Op::Write);
                st.policy.lookup(&a);
                let Some(&slot) = st.slot_of.get(&block) else { continue };
                let SlotState::Valid { entry, .. } = st.slots[slot as usize] else { continue };
                // A dirty copy (write-back) reaches the backend, flushed, before the new data lands on it.
                if entry.dirty && self.settle(&mut st, &[block]).is_err() {
                    st.stripes.end(blocks);
                    return Err(io::Error::other(format!("block {block}: writing its dirty copy back failed")));
                }
                self.retire_superseded(&mut st, block);
                // Settling a block the policy had left took it off the device (or a fence emptied it).
                if st.slot_of.get(&block) != Some(&slot) {
                    continue;
                }
                if let Err(e) = self.clear_for_rewrite(&mut st, slot, block) {
                    st.stripes.end(blocks);
                    return Err(e);
                }
                rewriting.push(block);
            }
        }
        let mut written = self.backend.write_at(data, offset);
        if written.is_ok() && !replaced_poison.is_empty() {
            // A damaged block's entry goes only once its replacement is durable.
            written = self.backend.flush();
        }
        let mut st = self.lock();
        let alone = !st.stripes.end(blocks.clone());
        if written.is_ok() {
            for block in replaced_poison {
                self.drop_block(&mut st, block);
            }
        }
        if written.is_err() || !alone {
            for block in rewriting {
                if matches!(st.slot_of.get(&block).map(|&s| st.slots[s as usize]), Some(SlotState::Rewriting { .. })) {
                    self.drop_block(&mut st, block);
                }
            }
            return written;
        }
        let mut block_data = vec![0u8; bs as usize];
        for block in blocks {
            let start = block * bs;
            match st.slot_of.get(&block).map(|&s| (s, st.slots[s as usize])) {
                Some((slot, SlotState::Rewriting { .. })) => {
                    // Merge into the old contents (equal to the backend's outside the write).
                    let old = self.read_slot(slot, &mut block_data);
                    let from = start.max(offset);
                    let to = (start + bs).min(end);
                    block_data[(from - start) as usize..(to - start) as usize]
                        .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
                    st.slot_of.remove(&block);
                    st.slots[slot as usize] = SlotState::Free;
                    Self::release(&mut st, slot);
                    // The backend has the data: a device that cannot take it only loses a cached copy.
                    if old.is_err() || !self.place(&mut st, block, &block_data, false) {
                        st.policy.remove(block);
                    }
                }
                None if whole(block) && admit_new && self.admit(&mut st, block) => {
                    let at = (start - offset) as usize;
                    if !self.place(&mut st, block, &data[at..at + bs as usize], false) {
                        st.policy.remove(block);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Clears `slot`'s entry so it is not served while `block` is rewritten.
    fn clear_for_rewrite(&self, st: &mut State, slot: u64, block: u64) -> io::Result<()> {
        if let SlotState::Valid { .. } = st.slots[slot as usize] {
            if let Err(e) = self.write_entry(slot, None) {
                // Its entry may or may not say what it said: only a fence makes that moot.
                self.device_write_failed(st, &e);
                st.fence_pending = true;
                self.fence(st);
                return Err(e);
            }
        }
        st.generations[slot as usize] += 1;
        st.dirtied.remove(&slot);
        st.slots[slot as usize] = SlotState::Rewriting { block };
        Ok(())
    }

    /// Write-back: whole blocks, and partial ones the device holds (merged),
    /// are written copy-on-write as dirty blocks; the rest, and any the
    /// device cannot take, write through.
    pub(super) fn write_back_blocks(&self, data: &[u8], offset: u64) -> io::Result<()> {
        let bs = self.layout.block_size;
        let end = offset + data.len() as u64;
        let mut through = Vec::new();
        {
            let mut st = self.lock();
            let mut block_data = vec![0u8; bs as usize];
            for block in offset / bs..end.div_ceil(bs) {
                let start = block * bs;
                let (from, to) = (start.max(offset), (start + bs).min(end));
                let piece = &data[(from - offset) as usize..(to - offset) as usize];
                let whole = piece.len() as u64 == bs;
                let held = st.slot_of.get(&block).map(|&s| (s, st.slots[s as usize]));
                let old_slot = match held {
                    Some((slot, SlotState::Valid { entry, .. })) => {
                        let a = Self::access(&mut st, block, bs, Op::Write);
                        st.policy.lookup(&a);
                        if !whole {
                            if let Err(e) = self.read_checked(slot, entry.crc, &mut block_data) {
                                if entry.dirty {
                                    self.poison(&mut st, block, &e);
                                    return Err(poisoned_error(block));
                                }
                                self.drop_block(&mut st, block);
                                through.push((from, piece));
                                continue;
                            }
                        }
                        Some(slot)
                    }
                    Some((_, SlotState::Poisoned { .. })) if !whole => return Err(poisoned_error(block)),
                    Some((slot, SlotState::Poisoned { .. })) => Some(slot),
                    None if whole && self.admit(&mut st, block) => None,
                    // Not held whole, or being rewritten by a write-through: follow it to the backend.
                    _ => {
                        through.push((from, piece));
                        continue;
                    }
                };
                if whole {
                    block_data.copy_from_slice(piece);
                } else {
                    block_data[(from - start) as usize..(to - start) as usize].copy_from_slice(piece);
                }
                st.stripes.changed(block);
                let was_poisoned = matches!(held, Some((_, SlotState::Poisoned { .. })));
                let old_generation = old_slot.map(|old| st.generations[old as usize]);
                if self.place(&mut st, block, &block_data, true) {
                    if was_poisoned {
                        // A whole write replaced the damaged copy: the policy keeps the block again.
                        let a = Self::access(&mut st, block, bs, Op::Write);
                        let mut victims = Vec::new();
                        st.policy.insert(&a, &mut victims);
                        self.evict(&mut st, &victims);
                    }
                    // Unless a fence inside `place` already freed it.
                    if let Some(old) = old_slot.filter(|&old| Some(st.generations[old as usize]) == old_generation) {
                        self.supersede(&mut st, old, block);
                    }
                } else {
                    // The device cannot take it: the write goes to the backend.
                    if old_slot.is_none() {
                        st.policy.remove(block);
                    }
                    through.push((from, piece));
                }
            }
        }
        for (at, piece) in through {
            self.write_through(piece, at, false)?;
        }
        Ok(())
    }

    /// Zeroes `[offset, offset+len)` on the backend: first writes back the
    /// dirty blocks it covers in part and drops every block it touches, with
    /// the range counted as a write in flight so no read refills it meanwhile.
    pub(super) fn zero_range(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        let bs = self.layout.block_size;
        let blocks = offset / bs..(offset + len).div_ceil(bs);
        // Dirty and damaged copies the zeroes replace whole leave once the backend has the zeroes.
        let mut drop_after = Vec::new();
        {
            let mut st = self.lock();
            let held: Vec<u64> = if blocks.end - blocks.start > st.slot_of.len() as u64 {
                st.slot_of.keys().copied().filter(|b| blocks.contains(b)).collect()
            } else {
                blocks.clone().filter(|b| st.slot_of.contains_key(b)).collect()
            };
            st.stripes.begin(blocks.clone());
            for block in held {
                let slot = st.slot_of[&block];
                let partly = block * bs < offset || (block + 1) * bs > offset + len;
                let failed = match st.slots[slot as usize] {
                    SlotState::Poisoned { .. } if partly => Some(poisoned_error(block)),
                    SlotState::Valid { entry, .. } if entry.dirty && partly => self
                        .settle(&mut st, &[block])
                        .err()
                        .map(|_| io::Error::other(format!("block {block}: writing its dirty copy back failed"))),
                    SlotState::Poisoned { .. }
                    | SlotState::Valid { entry: super::layout::Entry { dirty: true, .. }, .. } => {
                        // Out of the cleaner's and the policy's reach: a write-back now could land after the zeroes.
                        st.dirtied.remove(&slot);
                        st.policy.remove(block);
                        drop_after.push(block);
                        continue;
                    }
                    _ => None,
                };
                if let Some(e) = failed {
                    st.stripes.end(blocks);
                    return Err(e);
                }
                self.drop_block(&mut st, block);
            }
        }
        let mut zeroed = self.backend.write_zeroes(offset, len, may_punch);
        if zeroed.is_ok() && !drop_after.is_empty() {
            // The dirty copies are the last good data until the zeroes are durable.
            zeroed = self.backend.flush();
        }
        let mut st = self.lock();
        st.stripes.end(blocks);
        for block in drop_after {
            match (&zeroed, st.slot_of.get(&block).map(|&s| (s, st.slots[s as usize]))) {
                (Ok(()), _) => self.drop_block(&mut st, block),
                // The zeroes failed: the dirty copy is still the data, written back later like any evicted one.
                (Err(_), Some((slot, SlotState::Valid { .. }))) => {
                    st.dirtied.insert(slot, std::time::Instant::now());
                    st.stranded.insert(block);
                }
                (Err(_), _) => {}
            }
        }
        zeroed
    }
}

//! The slot table's changes, each in the order the module doc promises:
//! storing a block, freeing a slot, admitting a block (evicting its
//! victims), settling dirty blocks with the backend, and fencing.

use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hearth_core::Op;

use super::layout::{Entry, StateRecord, ENTRY_LEN};
use super::marker::Mark;
use super::{CacheDevice, SlotState, State, Superseded};

/// The first wait before stranded blocks are tried again, doubled up to [`LAST_RETRY`].
pub(super) const FIRST_RETRY: Duration = Duration::from_millis(100);
const LAST_RETRY: Duration = Duration::from_secs(10);

impl CacheDevice {
    pub(super) fn read_slot(&self, slot: u64, buf: &mut [u8]) -> io::Result<()> {
        self.storage.read_at(buf, self.layout.slot_offset(slot))
    }

    /// Reads `slot`'s data into `buf` and checks it against `crc`.
    pub(super) fn read_checked(&self, slot: u64, crc: u32, buf: &mut [u8]) -> io::Result<()> {
        self.read_slot(slot, buf)?;
        if crc32fast::hash(buf) != crc {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cache device slot {slot}: checksum mismatch"),
            ));
        }
        Ok(())
    }

    pub(super) fn write_entry(&self, slot: u64, entry: Option<Entry>) -> io::Result<()> {
        let bytes = entry.map_or([0u8; ENTRY_LEN], |e| e.encode());
        self.storage.write_at(&bytes, self.layout.entry_offset(slot))
    }

    /// Writes the next copy of the header's state record (not synced: the
    /// older copy stands until it is).
    pub(super) fn write_record(&self, st: &mut State, record: StateRecord) {
        let record = StateRecord { counter: st.record.counter + 1, ..record };
        match self.storage.write_at(&record.encode(), record.offset()) {
            Ok(()) => st.record = record,
            Err(e) => self.device_write_failed(st, &e),
        }
    }

    pub(super) fn device_write_failed(&self, st: &mut State, e: &io::Error) {
        self.stats.device_write_failures.fetch_add(1, Ordering::Relaxed);
        if !st.device_failing {
            st.device_failing = true;
            tracing::warn!(
                device = %self.path.display(), error = %e,
                "cache device writes failing: reads go to the backend and writes through to it until they work again"
            );
        }
    }

    fn device_write_worked(&self, st: &mut State) {
        if st.device_failing {
            st.device_failing = false;
            tracing::info!(device = %self.path.display(), "cache device writes work again");
        }
    }

    /// Frees `slot`, clearing its entry on the device first; a clear that
    /// fails fences the device.
    pub(super) fn free_slot(&self, st: &mut State, slot: u64) {
        let state = st.slots[slot as usize];
        if state == SlotState::Free {
            return; // a fence freed it meanwhile
        }
        if let SlotState::Valid { block, .. } | SlotState::Poisoned { block } = state {
            self.retire_superseded(st, block);
            if st.slots[slot as usize] == SlotState::Free {
                return; // the fence a failed retirement ran freed it
            }
            if let Err(e) = self.write_entry(slot, None) {
                self.device_write_failed(st, &e);
                st.fence_pending = true;
            }
        }
        st.generations[slot as usize] += 1;
        st.slots[slot as usize] = SlotState::Free;
        st.dirtied.remove(&slot);
        Self::release(st, slot);
        if st.fence_pending {
            self.fence(st);
        }
    }

    /// Makes a freed slot (entry cleared or not yet written) storable: at
    /// once if no sync may have made a dirty entry of it durable, else after
    /// the next sync (see `State::pending`).
    pub(super) fn release(st: &mut State, slot: u64) {
        debug_assert!(
            !st.free.contains(&slot) && !st.pending.iter().any(|&(s, _)| s == slot),
            "slot {slot} freed twice"
        );
        if st.written_seq[slot as usize] <= st.covered_seq && st.written_seq[slot as usize] > 0 {
            st.pending.push((slot, st.sync_starts));
        } else {
            st.free.push(slot);
        }
    }

    /// Marks the start of a device sync: returns its number, to hand to
    /// [`sync_done`](Self::sync_done).
    pub(super) fn start_sync(&self, st: &mut State) -> (u64, u64) {
        st.covered_seq = st.next_seq - 1;
        st.sync_starts += 1;
        (st.sync_starts, st.covered_seq)
    }

    /// After sync `number` (covering sequences up to `covered`) completed:
    /// records it and frees the slots that waited for it.
    pub(super) fn sync_done(&self, st: &mut State, (number, covered): (u64, u64), dirty: u64) {
        let record = StateRecord { synced_seq: covered.max(st.record.synced_seq), dirty, ..st.record };
        self.write_record(st, record);
        let (ready, waiting): (Vec<_>, Vec<_>) = st.pending.iter().partition(|&&(_, freed)| freed < number);
        st.free.extend(ready.into_iter().map(|(slot, _)| slot));
        st.pending = waiting;
        let (due, waiting): (Vec<Superseded>, Vec<Superseded>) = st.superseded.iter().partition(|s| s.tag < number);
        st.superseded = waiting;
        for Superseded { slot, .. } in due {
            // The new copy is durable: the old entry may go, and its slot after the next sync.
            if let Err(e) = self.write_entry(slot, None) {
                self.device_write_failed(st, &e);
                st.fence_pending = true;
                self.fence(st);
                return;
            }
            Self::release(st, slot);
        }
    }

    /// Syncs the device while holding the lock, when slots wait for it and
    /// none is free (twice for a superseded slot: one for its replacement,
    /// one for its cleared entry).
    fn sync_for_slots(&self, st: &mut State) {
        for _ in 0..2 {
            if !st.free.is_empty() || (st.pending.is_empty() && st.superseded.is_empty()) {
                return;
            }
            if let Err(e) = self.sync_locked(st, |_| ()) {
                self.device_write_failed(st, &e);
                return;
            }
        }
    }

    /// Syncs the device while holding the lock; once the sync completed,
    /// `synced(st)` runs, then [`sync_done`](Self::sync_done)'s bookkeeping.
    fn sync_locked(&self, st: &mut State, synced: impl FnOnce(&mut State)) -> io::Result<()> {
        let sync = self.start_sync(st);
        self.storage.sync()?;
        synced(st);
        let dirty = st.dirtied.len() as u64;
        self.sync_done(st, sync, dirty);
        Ok(())
    }

    /// Retires `slot`, whose block a copy-on-write just stored elsewhere
    /// (see `State::superseded`).
    pub(super) fn supersede(&self, st: &mut State, slot: u64, block: u64) {
        st.generations[slot as usize] += 1;
        st.slots[slot as usize] = SlotState::Free;
        st.dirtied.remove(&slot);
        st.superseded.push(Superseded { slot, tag: st.sync_starts, block });
    }

    /// Before `block`'s current entry is cleared (it leaves the device, or
    /// a write-through rewrites it, the backend holding its data durably):
    /// the entries of its older copies are cleared and synced first, or a
    /// crash could bring an older copy back.
    pub(super) fn retire_superseded(&self, st: &mut State, block: u64) {
        if !st.superseded.iter().any(|s| s.block == block) {
            return;
        }
        let (older, rest): (Vec<Superseded>, Vec<Superseded>) = st.superseded.iter().partition(|s| s.block == block);
        st.superseded = rest;
        let cleared = older.iter().try_for_each(|s| self.write_entry(s.slot, None));
        // Their cleared entries are durable once the sync returns: they are free before
        // sync_done, whose own fence (if it runs one) then rebuilds the free list whole.
        if let Err(e) = cleared.and_then(|()| self.sync_locked(st, |st| st.free.extend(older.iter().map(|s| s.slot)))) {
            self.device_write_failed(st, &e);
            st.superseded.extend(older);
            st.fence_pending = true;
            self.fence(st);
        }
    }

    /// Drops `block` from the device and the policy.
    pub(super) fn drop_block(&self, st: &mut State, block: u64) {
        st.policy.remove(block);
        st.stranded.remove(&block);
        if let Some(slot) = st.slot_of.remove(&block) {
            self.free_slot(st, slot);
        }
    }

    /// Writes `data` (a whole block) into a free slot and then its entry,
    /// and maps `block` to it. Returns false, with nothing mapped, when the
    /// device cannot take it (no free slot, a failed write, a pending fence).
    pub(super) fn place(&self, st: &mut State, block: u64, data: &[u8], dirty: bool) -> bool {
        if st.fence_pending && !self.fence(st) {
            return false;
        }
        if st.free.is_empty() {
            self.sync_for_slots(st);
        }
        if dirty && !st.marked_dirty {
            self.mark_dirty(st);
        }
        let Some(slot) = st.free.pop() else { return false };
        debug_assert_eq!(st.slots[slot as usize], SlotState::Free, "slot {slot} is free and in use");
        st.generations[slot as usize] += 1;
        if let Err(e) = self.storage.write_at(data, self.layout.slot_offset(slot)) {
            st.free.push(slot);
            self.device_write_failed(st, &e);
            return false;
        }
        let entry = Entry { block, seq: st.next_seq, crc: crc32fast::hash(data), dirty, epoch: st.record.epoch };
        st.next_seq += 1;
        st.written_seq[slot as usize] = if dirty { entry.seq } else { 0 };
        if let Err(e) = self.write_entry(slot, Some(entry)) {
            // The entry may have landed: only a fence makes sure it never counts.
            st.free.push(slot);
            self.device_write_failed(st, &e);
            st.fence_pending = true;
            self.fence(st);
            return false;
        }
        self.device_write_worked(st);
        st.slots[slot as usize] = SlotState::Valid { block, entry };
        if dirty {
            st.dirtied.insert(slot, Instant::now());
        }
        st.slot_of.insert(block, slot);
        true
    }

    /// Inserts `block` into the policy (not yet resident in it), evicting
    /// its victims. Returns whether the policy admitted the block.
    pub(super) fn admit(&self, st: &mut State, block: u64) -> bool {
        self.retry_stranded(st);
        let mut victims = Vec::new();
        if !st.policy.contains(block) {
            let a = Self::access(st, block, self.layout.block_size, Op::Read);
            st.policy.insert(&a, &mut victims);
        }
        self.evict(st, &victims);
        st.policy.contains(block)
    }

    /// Takes blocks the policy no longer holds off the device: clean ones
    /// at once, dirty ones once written back and flushed.
    pub(super) fn evict(&self, st: &mut State, blocks: &[u64]) {
        let mut dirty = Vec::new();
        for &block in blocks {
            let Some(&slot) = st.slot_of.get(&block) else { continue };
            match st.slots[slot as usize] {
                SlotState::Valid { entry, .. } if entry.dirty => dirty.push(block),
                SlotState::Valid { .. } => {
                    st.slot_of.remove(&block);
                    self.free_slot(st, slot);
                }
                // A write-through owns a rewriting slot; a poisoned block stays to fail its reads.
                SlotState::Rewriting { .. } | SlotState::Poisoned { .. } | SlotState::Free => {}
            }
        }
        if !dirty.is_empty() {
            // A failure is counted, logged and retried inside.
            let _ = self.settle(st, &dirty);
        }
    }

    /// Writes dirty `blocks` to the backend and flushes it; then those the
    /// policy holds are marked clean and the rest leave the device. Blocks
    /// whose write-back failed stay dirty (stranded if out of the policy);
    /// a block whose copy fails its checksum is poisoned. Returns how many
    /// were settled, or the first failure.
    pub(super) fn settle(&self, st: &mut State, blocks: &[u64]) -> io::Result<usize> {
        let mut data = vec![0u8; self.layout.block_size as usize];
        let mut written = Vec::with_capacity(blocks.len());
        let mut failure = None;
        for &block in blocks {
            let Some(&slot) = st.slot_of.get(&block) else { continue };
            let SlotState::Valid { entry, .. } = st.slots[slot as usize] else { continue };
            if !entry.dirty {
                continue;
            }
            if let Err(e) = self.read_checked(slot, entry.crc, &mut data) {
                self.poison(st, block, &e);
                continue;
            }
            if let Err(e) = self.backend.write_at(&data, block * self.layout.block_size) {
                failure = Some(e);
                break;
            }
            written.push((block, slot, entry));
        }
        if failure.is_none() && !written.is_empty() {
            failure = self.backend.flush().err();
        }
        if failure.is_some() {
            // Nothing written here is durable without a flush that succeeded: all stay dirty.
            written.clear();
        }
        for &(block, slot, entry) in &written {
            self.stats.cleaned.fetch_add(1, Ordering::Relaxed);
            if st.policy.contains(block) {
                let clean = super::layout::Entry { dirty: false, ..entry };
                match self.write_entry(slot, Some(clean)) {
                    Ok(()) => {
                        st.slots[slot as usize] = SlotState::Valid { block, entry: clean };
                        st.dirtied.remove(&slot);
                    }
                    // Still marked dirty on the device, and equal to the backend: harmless, tried again later.
                    Err(e) => self.device_write_failed(st, &e),
                }
            } else {
                st.stranded.remove(&block);
                st.slot_of.remove(&block);
                self.free_slot(st, slot);
            }
        }
        let Some(e) = failure else {
            if st.backend_failing && !written.is_empty() {
                st.backend_failing = false;
                tracing::info!(device = %self.path.display(), "cache device write-backs work again");
            }
            return Ok(written.len());
        };
        self.stats.write_back_failures.fetch_add(1, Ordering::Relaxed);
        if !st.backend_failing {
            st.backend_failing = true;
            tracing::warn!(device = %self.path.display(), error = %e, "cache device write-back failed; dirty blocks stay on the device and are retried");
        }
        let settled: rustc_hash::FxHashSet<u64> = written.iter().map(|&(b, _, _)| b).collect();
        for &block in blocks {
            if !settled.contains(&block) && !st.policy.contains(block) && st.slot_of.contains_key(&block) {
                self.strand(st, block);
            }
        }
        Err(e)
    }

    fn strand(&self, st: &mut State, block: u64) {
        let dirty = matches!(st.slot_of.get(&block).map(|&s| st.slots[s as usize]), Some(SlotState::Valid { entry, .. }) if entry.dirty);
        if dirty && st.stranded.insert(block) {
            tracing::warn!(device = %self.path.display(), block, "dirty block kept on the cache device: its write-back failed");
        }
    }

    /// Marks `block`'s dirty copy damaged: its reads fail from now on.
    pub(super) fn poison(&self, st: &mut State, block: u64, e: &io::Error) {
        let Some(&slot) = st.slot_of.get(&block) else { return };
        self.stats.checksum_failures.fetch_add(1, Ordering::Relaxed);
        st.generations[slot as usize] += 1;
        st.slots[slot as usize] = SlotState::Poisoned { block };
        st.dirtied.remove(&slot);
        st.policy.remove(block);
        st.stranded.remove(&block);
        tracing::error!(device = %self.path.display(), block, error = %e, "dirty block damaged on the cache device: its reads fail until it is written whole");
    }

    /// Tries stranded blocks again once their backoff has passed.
    fn retry_stranded(&self, st: &mut State) {
        if st.stranded.is_empty() || Instant::now() < st.retry_at {
            return;
        }
        let blocks: Vec<u64> = st.stranded.iter().copied().collect();
        match self.settle(st, &blocks) {
            Ok(_) => st.backoff = FIRST_RETRY,
            Err(_) => st.backoff = (st.backoff * 2).min(LAST_RETRY),
        }
        st.retry_at = Instant::now() + st.backoff;
    }

    /// Marks the backend file as missing writes this device holds, durably,
    /// before the first of them is acknowledged.
    fn mark_dirty(&self, st: &mut State) {
        let Some((mark, name)) = &self.mark else { return };
        match mark.write(&Mark::Dirty(name.clone())) {
            Ok(true) => st.marked_dirty = true,
            Ok(false) => {} // No extended attributes here: nothing to mark (logged at attach).
            Err(e) => {
                tracing::warn!(device = %self.path.display(), error = %e, "could not mark the backend as holding dirty data")
            }
        }
    }

    /// Marks the backend file as holding everything this device holds.
    pub(super) fn mark_clean(&self, st: &mut State) {
        let Some((mark, name)) = &self.mark else { return };
        if mark.write(&Mark::Clean(name.clone())).is_ok() {
            st.marked_dirty = false;
        }
    }

    /// Voids every entry after one could not be written: all dirty blocks
    /// go to the backend and are flushed, then a new epoch is recorded and
    /// synced. Returns whether it completed; if not, it is tried again
    /// before the device stores anything.
    pub(super) fn fence(&self, st: &mut State) -> bool {
        st.fence_pending = true;
        let dirty: Vec<u64> = st
            .slot_of
            .iter()
            .filter(|&(_, &s)| matches!(st.slots[s as usize], SlotState::Valid { entry, .. } if entry.dirty))
            .map(|(&b, _)| b)
            .collect();
        let mut data = vec![0u8; self.layout.block_size as usize];
        for &block in &dirty {
            let slot = st.slot_of[&block];
            let SlotState::Valid { entry, .. } = st.slots[slot as usize] else { continue };
            if let Err(e) = self.read_checked(slot, entry.crc, &mut data) {
                self.poison(st, block, &e);
                continue;
            }
            if self.backend.write_at(&data, block * self.layout.block_size).is_err() {
                self.stats.write_back_failures.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
        if !dirty.is_empty() && self.backend.flush().is_err() {
            self.stats.write_back_failures.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if let Err(e) = self.void_all(st) {
            self.device_write_failed(st, &e);
            return false;
        }
        self.stats.fences.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            device = %self.path.display(),
            written_back = dirty.len(),
            "cache device fenced: a slot table write failed, so every entry was voided after writing dirty blocks back"
        );
        true
    }

    /// Records (synced) a new epoch, which voids every entry, and empties
    /// the device in memory.
    pub(super) fn void_all(&self, st: &mut State) -> io::Result<()> {
        let record = StateRecord { counter: st.record.counter + 1, epoch: st.record.epoch + 1, dirty: 0, ..st.record };
        self.storage.write_at(&record.encode(), record.offset())?;
        self.storage.sync()?;
        st.record = record;
        // Poisoned blocks stay (in memory only: their entries are void now).
        let keep: Vec<(u64, u64)> = st
            .slot_of
            .iter()
            .filter(|&(_, &s)| matches!(st.slots[s as usize], SlotState::Poisoned { .. }))
            .map(|(&b, &s)| (b, s))
            .collect();
        for (&block, _) in st.slot_of.iter() {
            st.policy.remove(block);
        }
        st.slot_of.clear();
        st.dirtied.clear();
        st.stranded.clear();
        st.free.clear();
        st.pending.clear();
        st.superseded.clear();
        for slot in 0..self.layout.slots {
            st.generations[slot as usize] += 1;
            if !matches!(st.slots[slot as usize], SlotState::Poisoned { .. }) {
                st.slots[slot as usize] = SlotState::Free;
                st.free.push(slot);
            }
        }
        st.slot_of.extend(keep);
        st.fence_pending = false;
        Ok(())
    }
}

//! Opening a device that holds data: the slot table is read and verified
//! ([`layout::recover`]), damage that may hide dirty data is refused unless
//! the operator discards it, and what is kept is replayed into the policy.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::layout::{self, ENTRY_LEN, HEADER_LEN};
use super::marker::Mark;
use super::{CacheDevice, SlotState};
use crate::error::CacheDeviceError;

impl CacheDevice {
    /// Reads and verifies the slot table, clears what recovery drops, and
    /// replays the rest into the policy (oldest first).
    pub(super) fn recover(&self, discard_damaged: bool) -> Result<(), CacheDeviceError> {
        let io_err = |what: &'static str| move |source| CacheDeviceError::Io { path: self.path.clone(), what, source };
        let refuse = |problem: String| CacheDeviceError::Refused { path: self.path.clone(), problem };
        let mut table = vec![0u8; self.layout.slots as usize * ENTRY_LEN];
        self.storage.read_at(&mut table, HEADER_LEN).map_err(io_err("reading the slot table"))?;
        let mut data = vec![0u8; self.layout.block_size as usize];
        let blocks = self.backend.size() / self.layout.block_size;
        let mut st = self.lock();
        let record = st.record;
        let recovered = layout::recover(&table, blocks, &record, |slot| {
            self.read_slot(slot, &mut data).ok().map(|()| crc32fast::hash(&data))
        });
        let discard_hint = "start with --cache-device-discard-damaged (cache_device_discard_damaged = true) to drop it";
        if !recovered.unreadable.is_empty() && !discard_damaged {
            return Err(refuse(format!(
                "{} slot table entries are unreadable (torn or corrupt; first at slot {}) and may hold dirty \
                 blocks; {discard_hint}",
                recovered.unreadable.len(),
                recovered.unreadable[0]
            )));
        }
        let held = recovered.kept.len() + recovered.poisoned.len();
        if held == 0 && record.dirty > 0 && !discard_damaged {
            return Err(refuse(format!(
                "the slot table is empty but held {} dirty blocks at its last flush (zeroed or replaced?); \
                 {discard_hint}",
                record.dirty
            )));
        }
        let clear = recovered.clear.iter().chain(&recovered.unreadable);
        for &slot in clear.clone() {
            self.write_entry(slot, None).map_err(io_err("clearing"))?;
        }
        if clear.count() > 0 {
            // Durable before their slots take new data.
            self.storage.sync().map_err(io_err("clearing"))?;
        }
        let dropped = recovered.damaged_clean + recovered.torn + recovered.unreadable.len();
        if dropped > 0 {
            tracing::warn!(
                device = %self.path.display(),
                damaged_clean = recovered.damaged_clean,
                unflushed_torn = recovered.torn,
                unreadable_discarded = recovered.unreadable.len(),
                "cache device slots dropped at open"
            );
        }
        self.stats.dropped_at_open.store(dropped as u64, Ordering::Relaxed);
        let now = Instant::now();
        for &(slot, entry) in recovered.kept.iter().chain(&recovered.poisoned) {
            st.slots[slot as usize] = SlotState::Valid { block: entry.block, entry };
            st.slot_of.insert(entry.block, slot);
            if entry.dirty {
                // How long they waited before the restart is unknown: count from now.
                st.dirtied.insert(slot, now);
            }
            st.next_seq = st.next_seq.max(entry.seq + 1);
            st.written_seq[slot as usize] = if entry.dirty { entry.seq } else { 0 };
        }
        st.next_seq = st.next_seq.max(record.synced_seq + 1);
        // Whatever is on the device now may be durable.
        st.covered_seq = st.next_seq - 1;
        for &(slot, entry) in &recovered.poisoned {
            st.slots[slot as usize] = SlotState::Poisoned { block: entry.block };
            st.dirtied.remove(&slot);
            tracing::error!(
                device = %self.path.display(),
                block = entry.block,
                "dirty block damaged on the cache device: its reads fail until it is written whole"
            );
        }
        st.free = (0..self.layout.slots).rev().filter(|&s| st.slots[s as usize] == SlotState::Free).collect();
        for &(_, entry) in &recovered.kept {
            // Replaying may evict earlier blocks; one the policy will not admit leaves the device
            // (or, if dirty and its write-back fails, stays stranded).
            if st.slot_of.contains_key(&entry.block) && !self.admit(&mut st, entry.block) {
                self.evict(&mut st, &[entry.block]);
            }
        }
        tracing::info!(
            device = %self.path.display(),
            slots = self.layout.slots,
            resident = st.slot_of.len(),
            dirty = st.dirtied.len(),
            poisoned = recovered.poisoned.len(),
            "cache device opened"
        );
        Ok(())
    }

    /// Reads the backend file's mark ([`super::marker`]): a device the
    /// backend was served without since, or that another device replaced,
    /// drops what it holds; another device's dirty data refuses the start.
    /// Then marks the backend with this device.
    pub(super) fn attach(&self) -> Result<(), CacheDeviceError> {
        let Some((mark, me)) = &self.mark else { return Ok(()) };
        let io_err = |what: &'static str| move |source| CacheDeviceError::Io { path: self.path.clone(), what, source };
        let found = mark.read().map_err(io_err("reading the backend's mark"))?;
        let mut st = self.lock();
        match &found {
            Mark::Dirty(other) if other != me => {
                return Err(CacheDeviceError::Refused {
                    path: self.path.clone(),
                    problem: format!(
                        "the backend lacks writes that cache device {other} holds; start with that device"
                    ),
                })
            }
            Mark::None => {}
            Mark::Clean(holder) | Mark::Dirty(holder) if holder == me => {}
            Mark::Clean(_) | Mark::Discarded(_) => {
                let held = st.slot_of.len();
                self.void_all(&mut st).map_err(io_err("dropping out-of-date contents"))?;
                tracing::warn!(
                    device = %self.path.display(),
                    dropped = held,
                    mark = ?found,
                    "the backend was served without this cache device since it last held it: its contents are out of date and dropped"
                );
            }
            Mark::Dirty(_) => unreachable!("another device's dirty mark refused above"),
        }
        let dirty = !st.dirtied.is_empty();
        let now = if dirty { Mark::Dirty(me.clone()) } else { Mark::Clean(me.clone()) };
        if !mark.write(&now).map_err(io_err("marking the backend"))? {
            tracing::warn!(
                device = %self.path.display(),
                "the backend's file system keeps no extended attributes: a start without this device cannot be refused while it holds dirty data"
            );
        }
        st.marked_dirty = dirty;
        Ok(())
    }
}

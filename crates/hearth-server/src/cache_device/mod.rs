//! A persistent cache device: a second cache level on a local file or block
//! device, under the RAM cache, wrapping the export's backend.
//!
//! Reads the RAM cache misses are served from the device when it holds the
//! block, else from the backend and then stored on the device. Which blocks
//! stay is decided by the export's `hearth_core::Policy` spec, keyed by
//! block. The slot table on the device ([`layout`]) is read and verified at
//! start and replayed into the policy, so a restart keeps the cache.
//!
//! ## Crash safety
//!
//! Against process death (kill -9): what a `pwrite` handed the page cache
//! survives, so each `pwrite` is atomic at syscall granularity and they land
//! in program order. Against power loss, FLUSH (and FUA) sync the device
//! file and then flush the backend; entry and data checksums let recovery
//! drop whatever a power cut tore.
//!
//! * Write-through (default): to write block B, B's entry is first cleared
//!   (the slot stays assigned to B in memory but is not served), then the
//!   backend is written, then the new data goes into the slot and then its
//!   entry. At any crash point the device holds nothing for B or data equal
//!   to the backend's.
//! * Write-back onto the device: copy-on-write. The new data goes into a
//!   free slot, then its entry (dirty, next sequence, checksum), and only
//!   then is the old slot's entry cleared; recovery keeps a block's highest
//!   sequence and drops slots whose data fails its checksum, so a crash
//!   leaves either the old or the new write. One slot is kept spare (the
//!   policy's capacity is one slot less than the device's) and every device
//!   write happens under the state lock, so a free slot always exists.
//!   Dirty blocks are cleaned (backend written and flushed, then the entry
//!   rewritten clean) once older than the export's `dirty_max_age`, on
//!   [`CacheDevice::clean`] at shutdown, and when the policy evicts them.
//!
//! ## Concurrency
//!
//! One mutex holds the policy and slot map. Device writes (page-cache
//! writes for a file) happen under it; backend calls do not, except to write
//! back a dirty block the policy evicts and in cleaning (a batch of at most
//! [`CLEAN_BATCH`] blocks), which keeps a newer and an older copy of a block
//! from reaching the backend out of order. A hit reads the device without
//! the lock and is kept only if the slot's generation did not change
//! meanwhile; a miss fills the device only if no write to its stripe began
//! or was in flight since it looked (the RAM cache's rule).

pub mod layout;
#[cfg(test)]
mod tests;

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use hearth_core::{Access, Op, Policy};
use rustc_hash::FxHashMap;

use crate::backend::Backend;
use crate::error::CacheDeviceError;
use crate::stripes::{Glance, WriteStripes};
use layout::{Entry, Header, Layout, ENTRY_LEN, HEADER_LEN};

/// Write stripes (`crate::stripes`), as the RAM cache tracks them.
const STRIPES: usize = 4096;
/// Most dirty blocks one cleaning step writes while holding the lock.
pub const CLEAN_BATCH: usize = 32;

/// How writes treat the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceWriteMode {
    /// The backend is written before a write is acknowledged.
    Through,
    /// Writes land on the device as dirty blocks, cleaned to the backend later.
    Back,
}

/// Counters for `/metrics` and tests.
#[derive(Default, Debug)]
pub struct DeviceStats {
    /// Blocks served from the device.
    pub hits: AtomicU64,
    /// Blocks read from the backend because the device did not hold them.
    pub misses: AtomicU64,
    /// Dirty blocks written to the backend (cleaning and eviction).
    pub cleaned: AtomicU64,
    /// Slots dropped at open: torn or corrupt entries or data.
    pub dropped_at_open: AtomicU64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Free,
    /// Holds `block` as its entry on the device says.
    Valid {
        block: u64,
        entry: Entry,
    },
    /// Assigned to `block`, entry cleared: a write-through is rewriting it.
    Rewriting {
        block: u64,
    },
}

struct State {
    policy: Box<dyn Policy>,
    slot_of: FxHashMap<u64, u64>,
    slots: Vec<SlotState>,
    /// Bumped whenever a slot's contents stop being what a reader looked up.
    generations: Vec<u64>,
    /// When each dirty slot became dirty.
    dirtied: FxHashMap<u64, Instant>,
    free: Vec<u64>,
    next_seq: u64,
    vtime: u64,
    stripes: WriteStripes,
}

pub struct CacheDevice {
    backend: Box<dyn Backend>,
    file: File,
    path: PathBuf,
    layout: Layout,
    mode: DeviceWriteMode,
    state: Mutex<State>,
    pub stats: DeviceStats,
}

/// What one block of a read found.
enum Found {
    Hit {
        slot: u64,
        generation: u64,
    },
    /// Not on the device, with its stripe at lookup.
    Miss(Glance),
}

impl CacheDevice {
    /// Opens (formatting it if its header is all zeroes, e.g. a new sparse
    /// file) the device at `path` of `size` bytes in front of `backend`.
    /// `identity` names the export and its backend; a device formatted for
    /// another identity, export size or block size is refused.
    pub fn open(
        backend: Box<dyn Backend>,
        path: &Path,
        size: u64,
        block_size: u32,
        identity: &str,
        policy_spec: &str,
        mode: DeviceWriteMode,
    ) -> Result<CacheDevice, CacheDeviceError> {
        let io_err = |what: &'static str| move |source| CacheDeviceError::Io { path: path.into(), what, source };
        let refuse = |problem: String| CacheDeviceError::Refused { path: path.into(), problem };
        let bs = u64::from(block_size);
        if !backend.size().is_multiple_of(bs) {
            return Err(refuse(format!(
                "the export's size ({}) is not a multiple of its block size ({bs})",
                backend.size()
            )));
        }
        let layout =
            Layout::for_size(size, bs).ok_or_else(|| refuse(format!("{size} bytes hold fewer than two blocks")))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err("opening"))?;
        // Block devices report length 0 in metadata; seeking finds their size.
        let len = file.seek(SeekFrom::End(0)).map_err(io_err("sizing"))?;
        let wanted = Header { block_size, slots: layout.slots, export_size: backend.size(), identity: identity.into() };
        let mut header = vec![0u8; HEADER_LEN as usize];
        if len >= HEADER_LEN {
            file.read_exact_at(&mut header, 0).map_err(io_err("reading the header"))?;
        }
        match Header::decode(&header).map_err(refuse)? {
            None if len > 0 && len < size => {
                return Err(refuse(format!("{len} bytes, smaller than the configured {size} (truncated?)")))
            }
            None => {
                if len < size {
                    file.set_len(size).map_err(io_err("sizing"))?;
                }
                file.write_all_at(&wanted.encode(), 0).map_err(io_err("formatting"))?;
                file.sync_all().map_err(io_err("formatting"))?;
            }
            Some(found) => {
                if let Some(why) = found.mismatch(&wanted) {
                    return Err(refuse(why));
                }
                if len < layout.total_len() {
                    return Err(refuse(format!("{len} bytes, its header needs {} (truncated)", layout.total_len())));
                }
            }
        }
        let policy = hearth_policy::build(policy_spec, (layout.slots - 1) * bs)
            .map_err(|e| refuse(format!("policy {policy_spec:?}: {e}")))?;
        let state = State {
            policy,
            slot_of: FxHashMap::default(),
            slots: vec![SlotState::Free; layout.slots as usize],
            generations: vec![0; layout.slots as usize],
            dirtied: FxHashMap::default(),
            free: Vec::new(),
            next_seq: 1,
            vtime: 0,
            stripes: WriteStripes::new(STRIPES),
        };
        let device = CacheDevice {
            backend,
            file,
            path: path.into(),
            layout,
            mode,
            state: Mutex::new(state),
            stats: DeviceStats::default(),
        };
        device.recover().map_err(io_err("recovering the slot table"))?;
        Ok(device)
    }

    /// Reads and verifies the slot table, clears what recovery drops, and
    /// replays the rest into the policy (oldest first).
    fn recover(&self) -> io::Result<()> {
        let mut table = vec![0u8; self.layout.slots as usize * ENTRY_LEN];
        self.file.read_exact_at(&mut table, HEADER_LEN)?;
        let mut data = vec![0u8; self.layout.block_size as usize];
        let blocks = self.backend.size() / self.layout.block_size;
        let recovered = layout::recover(&table, blocks, |slot| {
            self.file.read_exact_at(&mut data, self.layout.slot_offset(slot))?;
            Ok(crc32fast::hash(&data))
        })?;
        let mut st = self.lock();
        for &slot in &recovered.clear {
            self.file.write_all_at(&[0u8; ENTRY_LEN], self.layout.entry_offset(slot))?;
        }
        if recovered.damaged > 0 {
            tracing::warn!(device = %self.path.display(), dropped = recovered.damaged, "cache device slots dropped: torn or corrupt");
        }
        self.stats.dropped_at_open.store(recovered.damaged as u64, Ordering::Relaxed);
        let now = Instant::now();
        for &(slot, entry) in &recovered.kept {
            st.slots[slot as usize] = SlotState::Valid { block: entry.block, entry };
            st.slot_of.insert(entry.block, slot);
            if entry.dirty {
                // How long they waited before the restart is unknown: count from now.
                st.dirtied.insert(slot, now);
            }
            st.next_seq = st.next_seq.max(entry.seq + 1);
        }
        st.free = (0..self.layout.slots).rev().filter(|&s| st.slots[s as usize] == SlotState::Free).collect();
        for &(slot, entry) in &recovered.kept {
            // Replaying may evict earlier blocks; one the policy will not admit leaves the device.
            if st.slot_of.contains_key(&entry.block) && !self.admit(&mut st, entry.block)? {
                if entry.dirty {
                    self.write_back(slot, entry.block)?;
                }
                self.drop_block(&mut st, entry.block)?;
            }
        }
        tracing::info!(
            device = %self.path.display(),
            slots = self.layout.slots,
            resident = st.slot_of.len(),
            dirty = st.dirtied.len(),
            "cache device opened"
        );
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn slots(&self) -> u64 {
        self.layout.slots
    }

    /// `(resident blocks, dirty blocks)`.
    pub fn occupancy(&self) -> (usize, usize) {
        let st = self.lock();
        (st.slot_of.len(), st.dirtied.len())
    }

    pub fn mode(&self) -> DeviceWriteMode {
        self.mode
    }

    fn access(st: &mut State, block: u64, size: u64, op: Op) -> Access {
        st.vtime += 1;
        Access { key: block, size: size as u32, vtime: st.vtime, next_access: hearth_core::NEVER, op, ctx: 0 }
    }

    fn write_entry(&self, slot: u64, entry: Option<Entry>) -> io::Result<()> {
        let bytes = entry.map_or([0u8; ENTRY_LEN], |e| e.encode());
        self.file.write_all_at(&bytes, self.layout.entry_offset(slot))
    }

    fn read_slot(&self, slot: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, self.layout.slot_offset(slot))
    }

    /// Frees `slot`, clearing its entry on the device first.
    fn free_slot(&self, st: &mut State, slot: u64) -> io::Result<()> {
        if let SlotState::Valid { .. } = st.slots[slot as usize] {
            self.write_entry(slot, None)?;
        }
        st.generations[slot as usize] += 1;
        st.slots[slot as usize] = SlotState::Free;
        st.dirtied.remove(&slot);
        st.free.push(slot);
        Ok(())
    }

    /// Writes `data` (a whole block) into a free slot and then its entry,
    /// and maps `block` to it.
    fn place(&self, st: &mut State, block: u64, data: &[u8], dirty: bool) -> io::Result<()> {
        // The policy holds one slot less than the device: one is always free.
        let slot = st.free.pop().ok_or_else(|| io::Error::other("cache device: no free slot"))?;
        st.generations[slot as usize] += 1;
        self.file.write_all_at(data, self.layout.slot_offset(slot))?;
        let entry = Entry { block, seq: st.next_seq, crc: crc32fast::hash(data), dirty };
        st.next_seq += 1;
        if let Err(e) = self.write_entry(slot, Some(entry)) {
            st.free.push(slot);
            return Err(e);
        }
        st.slots[slot as usize] = SlotState::Valid { block, entry };
        if dirty {
            st.dirtied.insert(slot, Instant::now());
        }
        st.slot_of.insert(block, slot);
        Ok(())
    }

    /// Inserts `block` into the policy (not yet resident in it), evicting
    /// its victims: a dirty victim is written to the backend first. Returns
    /// whether the policy admitted the block.
    fn admit(&self, st: &mut State, block: u64) -> io::Result<bool> {
        let mut victims = Vec::new();
        if !st.policy.contains(block) {
            let a = Self::access(st, block, self.layout.block_size, Op::Read);
            st.policy.insert(&a, &mut victims);
        }
        for victim in victims {
            if let Some(slot) = st.slot_of.remove(&victim) {
                if let SlotState::Valid { entry, .. } = st.slots[slot as usize] {
                    if entry.dirty {
                        self.write_back(slot, victim)?;
                    }
                }
                self.free_slot(st, slot)?;
            }
        }
        Ok(st.policy.contains(block))
    }

    /// Writes dirty `slot`'s data to the backend (the caller holds the lock).
    fn write_back(&self, slot: u64, block: u64) -> io::Result<()> {
        let mut data = vec![0u8; self.layout.block_size as usize];
        self.read_slot(slot, &mut data)?;
        self.backend.write_at(&data, block * self.layout.block_size)?;
        self.stats.cleaned.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Drops `block` from the device and the policy.
    fn drop_block(&self, st: &mut State, block: u64) -> io::Result<()> {
        st.policy.remove(block);
        match st.slot_of.remove(&block) {
            Some(slot) => self.free_slot(st, slot),
            None => Ok(()),
        }
    }

    /// Reads whole blocks `first..first + buf.len() / bs` into `buf`.
    fn read_blocks(&self, buf: &mut [u8], first: u64) -> io::Result<()> {
        let bs = self.layout.block_size as usize;
        let count = (buf.len() / bs) as u64;
        let found: Vec<Found> = {
            let mut st = self.lock();
            (first..first + count)
                .map(|block| {
                    let a = Self::access(&mut st, block, bs as u64, Op::Read);
                    st.policy.lookup(&a);
                    match st.slot_of.get(&block).map(|&s| (s, st.slots[s as usize])) {
                        Some((slot, SlotState::Valid { .. })) => {
                            Found::Hit { slot, generation: st.generations[slot as usize] }
                        }
                        // Being rewritten: the backend has the old or the new data.
                        Some((_, _)) => Found::Miss(Glance::NEVER_SAFE),
                        None => Found::Miss(st.stripes.glance(block)),
                    }
                })
                .collect()
        };
        // Runs of misses are one backend read each.
        let mut i = 0;
        while i < found.len() {
            let run = found[i..].iter().take_while(|f| matches!(f, Found::Miss(_))).count();
            if run == 0 {
                if let Found::Hit { slot, .. } = found[i] {
                    self.read_slot(slot, &mut buf[i * bs..(i + 1) * bs])?;
                }
                i += 1;
                continue;
            }
            self.backend.read_at(&mut buf[i * bs..(i + run) * bs], (first + i as u64) * bs as u64)?;
            self.stats.misses.fetch_add(run as u64, Ordering::Relaxed);
            i += run;
        }
        let mut stale = Vec::new();
        {
            let mut st = self.lock();
            for (i, f) in found.iter().enumerate() {
                let block = first + i as u64;
                match *f {
                    Found::Hit { slot, generation } if st.generations[slot as usize] == generation => {
                        self.stats.hits.fetch_add(1, Ordering::Relaxed);
                    }
                    Found::Hit { .. } => stale.push(i),
                    Found::Miss(glance) => {
                        if st.stripes.unchanged_since(block, glance)
                            && !st.slot_of.contains_key(&block)
                            && self.admit(&mut st, block)?
                        {
                            self.place(&mut st, block, &buf[i * bs..(i + 1) * bs], false)?;
                        }
                    }
                }
            }
        }
        // A slot that changed under a hit: read that block again.
        for i in stale {
            self.read_blocks(&mut buf[i * bs..(i + 1) * bs], first + i as u64)?;
        }
        Ok(())
    }

    /// Write-through of `data` at `offset` (whole blocks or not): clears the
    /// entries of the blocks it touches, writes the backend, then rewrites
    /// the slots (or, with `admit_new`, stores whole new blocks) if no other
    /// write overlapped.
    fn write_through(&self, data: &[u8], offset: u64, admit_new: bool) -> io::Result<()> {
        let bs = self.layout.block_size;
        let blocks = offset / bs..(offset + data.len() as u64).div_ceil(bs);
        let mut rewriting = Vec::new();
        {
            let mut st = self.lock();
            st.stripes.begin(blocks.clone());
            for block in blocks.clone() {
                let a = Self::access(&mut st, block, bs, Op::Write);
                st.policy.lookup(&a);
                let Some(&slot) = st.slot_of.get(&block) else { continue };
                if let SlotState::Valid { entry, .. } = st.slots[slot as usize] {
                    // A dirty copy (write-back) reaches the backend before the new data lands on it.
                    let cleared = if entry.dirty { self.write_back(slot, block) } else { Ok(()) }
                        .and_then(|()| self.write_entry(slot, None));
                    if let Err(e) = cleared {
                        st.stripes.end(blocks);
                        return Err(e);
                    }
                    st.generations[slot as usize] += 1;
                    st.dirtied.remove(&slot);
                    st.slots[slot as usize] = SlotState::Rewriting { block };
                    rewriting.push(block);
                }
            }
        }
        let written = self.backend.write_at(data, offset);
        let mut st = self.lock();
        let alone = !st.stripes.end(blocks.clone());
        if written.is_err() || !alone {
            for block in rewriting {
                if matches!(st.slot_of.get(&block).map(|&s| st.slots[s as usize]), Some(SlotState::Rewriting { .. })) {
                    self.drop_block(&mut st, block)?;
                }
            }
            return written;
        }
        let mut block_data = vec![0u8; bs as usize];
        for block in blocks {
            let start = block * bs;
            let whole = start >= offset && start + bs <= offset + data.len() as u64;
            match st.slot_of.get(&block).map(|&s| (s, st.slots[s as usize])) {
                Some((slot, SlotState::Rewriting { .. })) => {
                    // Merge into the old contents (equal to the backend's outside the write).
                    self.read_slot(slot, &mut block_data)?;
                    let from = start.max(offset);
                    let to = (start + bs).min(offset + data.len() as u64);
                    block_data[(from - start) as usize..(to - start) as usize]
                        .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
                    st.slot_of.remove(&block);
                    st.free.push(slot);
                    st.slots[slot as usize] = SlotState::Free;
                    if let Err(e) = self.place(&mut st, block, &block_data, false) {
                        st.policy.remove(block);
                        return Err(e);
                    }
                }
                None if whole && admit_new && self.admit(&mut st, block)? => {
                    let at = (start - offset) as usize;
                    self.place(&mut st, block, &data[at..at + bs as usize], false)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Write-back: whole blocks, and partial ones the device holds (merged),
    /// are written copy-on-write as dirty blocks; the rest write through.
    fn write_back_blocks(&self, data: &[u8], offset: u64) -> io::Result<()> {
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
                let old_slot = match st.slot_of.get(&block).map(|&s| (s, st.slots[s as usize])) {
                    Some((slot, SlotState::Valid { .. })) => {
                        let a = Self::access(&mut st, block, bs, Op::Write);
                        st.policy.lookup(&a);
                        Some(slot)
                    }
                    None if whole && self.admit(&mut st, block)? => None,
                    // Not held whole, or being rewritten by a write-through: follow it to the backend.
                    _ => {
                        through.push((from, piece));
                        continue;
                    }
                };
                match old_slot {
                    Some(slot) if !whole => {
                        self.read_slot(slot, &mut block_data)?;
                        block_data[(from - start) as usize..(to - start) as usize].copy_from_slice(piece);
                    }
                    _ => block_data.copy_from_slice(piece),
                }
                st.stripes.changed(block);
                self.place(&mut st, block, &block_data, true)?;
                if let Some(old) = old_slot {
                    self.free_slot(&mut st, old)?;
                }
            }
        }
        for (at, piece) in through {
            self.write_through(piece, at, false)?;
        }
        Ok(())
    }

    /// Writes dirty blocks dirtied at least `age` ago to the backend, flushes
    /// it, then marks their entries clean; [`CLEAN_BATCH`] blocks per lock
    /// hold. Returns how many were cleaned.
    pub fn clean(&self, age: Duration) -> io::Result<u64> {
        let mut cleaned = 0;
        loop {
            let mut st = self.lock();
            let batch: Vec<u64> = st
                .dirtied
                .iter()
                .filter(|(_, since)| since.elapsed() >= age)
                .map(|(&slot, _)| slot)
                .take(CLEAN_BATCH)
                .collect();
            if batch.is_empty() {
                return Ok(cleaned);
            }
            for &slot in &batch {
                if let SlotState::Valid { block, .. } = st.slots[slot as usize] {
                    self.write_back(slot, block)?;
                }
            }
            self.backend.flush()?;
            for slot in batch {
                if let SlotState::Valid { block, entry } = st.slots[slot as usize] {
                    let clean = Entry { dirty: false, ..entry };
                    self.write_entry(slot, Some(clean))?;
                    st.slots[slot as usize] = SlotState::Valid { block, entry: clean };
                }
                st.dirtied.remove(&slot);
                cleaned += 1;
            }
        }
    }

    /// How long the oldest dirty block has waited, `None` if none is dirty.
    pub fn dirty_age(&self) -> Option<Duration> {
        self.lock().dirtied.values().map(Instant::elapsed).max()
    }

    /// Cleans dirty blocks older than `max_age` every `max_age / 4` (10 ms
    /// to 1 s) until the device is dropped.
    pub fn spawn_cleaner(device: &Arc<CacheDevice>, max_age: Duration) -> io::Result<()> {
        let weak: Weak<CacheDevice> = Arc::downgrade(device);
        let tick = (max_age / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        std::thread::Builder::new().name("hearth-device-cleaner".into()).spawn(move || loop {
            std::thread::sleep(tick);
            let Some(device) = weak.upgrade() else { return };
            if let Err(e) = device.clean(max_age) {
                tracing::warn!(device = %device.path.display(), error = %e, "cache device cleaning failed; retrying");
            }
        })?;
        Ok(())
    }
}

impl Backend for CacheDevice {
    fn size(&self) -> u64 {
        self.backend.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let bs = self.layout.block_size;
        let first = offset / bs;
        let end = (offset + buf.len() as u64).div_ceil(bs);
        if offset.is_multiple_of(bs) && (buf.len() as u64).is_multiple_of(bs) {
            return self.read_blocks(buf, first);
        }
        let mut whole = vec![0u8; ((end - first) * bs) as usize];
        self.read_blocks(&mut whole, first)?;
        let skip = (offset - first * bs) as usize;
        buf.copy_from_slice(&whole[skip..skip + buf.len()]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        match self.mode {
            DeviceWriteMode::Through => self.write_through(buf, offset, true),
            DeviceWriteMode::Back => self.write_back_blocks(buf, offset),
        }
    }

    fn write_zeroes(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        self.zero_range(offset, len, may_punch)
    }

    fn trim(&self, offset: u64, len: u64) -> io::Result<()> {
        // A trimmed range's contents are undefined: the device copy may stay.
        self.backend.trim(offset, len)
    }

    /// Syncs the device file (its dirty blocks and entries), then flushes the backend.
    fn flush(&self) -> io::Result<()> {
        self.file.sync_data()?;
        self.backend.flush()
    }

    fn describe(&self) -> String {
        let mode = match self.mode {
            DeviceWriteMode::Through => "write-through",
            DeviceWriteMode::Back => "write-back",
        };
        format!(
            "{} under cache device {} ({} slots, {mode})",
            self.backend.describe(),
            self.path.display(),
            self.layout.slots
        )
    }

    fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<super::backend::Extent>> {
        // The backend's map is only true once dirty blocks reached it.
        if self.mode == DeviceWriteMode::Back {
            self.clean(Duration::ZERO)?;
        }
        self.backend.extents(offset, len, max)
    }
}

impl CacheDevice {
    /// Zeroes `[offset, offset+len)` on the backend: first writes back the
    /// dirty blocks it covers in part and drops every block it touches, with
    /// the range counted as a write in flight so no read refills it meanwhile.
    fn zero_range(&self, offset: u64, len: u64, may_punch: bool) -> io::Result<()> {
        let bs = self.layout.block_size;
        let blocks = offset / bs..(offset + len).div_ceil(bs);
        {
            let mut st = self.lock();
            st.stripes.begin(blocks.clone());
            let held: Vec<u64> = if blocks.end - blocks.start > st.slot_of.len() as u64 {
                st.slot_of.keys().copied().filter(|b| blocks.contains(b)).collect()
            } else {
                blocks.clone().filter(|b| st.slot_of.contains_key(b)).collect()
            };
            for block in held {
                let slot = st.slot_of[&block];
                let partly = block * bs < offset || (block + 1) * bs > offset + len;
                let dirty = matches!(st.slots[slot as usize], SlotState::Valid { entry, .. } if entry.dirty);
                let dropped = if dirty && partly { self.write_back(slot, block) } else { Ok(()) }
                    .and_then(|()| self.drop_block(&mut st, block));
                if let Err(e) = dropped {
                    st.stripes.end(blocks);
                    return Err(e);
                }
            }
        }
        let zeroed = self.backend.write_zeroes(offset, len, may_punch);
        self.lock().stripes.end(blocks);
        zeroed
    }
}

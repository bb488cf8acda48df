//! A persistent cache device: a second cache level on a local file or block
//! device, under the RAM cache, wrapping the export's backend.
//!
//! Reads the RAM cache misses are served from the device when it holds the
//! block, else from the backend and then stored on the device. Which blocks
//! stay is decided by the export's `hearth_core::Policy` spec, keyed by
//! block. The slot table on the device ([`layout`]) is read and verified at
//! start ([`recovery`]) and replayed into the policy, so a restart keeps
//! the cache.
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
//!   sequence, so a crash leaves either the old or the new write.
//!
//! ## The last good copy is never dropped
//!
//! A dirty block leaves the device (its slot freed or its entry cleared)
//! only after its backend write *and* a backend flush succeeded ([`slots`]).
//! A write-back that fails leaves the block *stranded*: out of the policy,
//! still dirty on the device and served from it, retried by the cleaner and
//! at admission with backoff. Every device read is checked against its
//! checksum, hits included: a bad clean copy is dropped and the block read
//! from the backend; a bad dirty copy *poisons* the block (reads fail with
//! EIO, never older data) until a whole-block write or zeroing replaces it.
//!
//! A device that cannot store data (ENOSPC, EIO) is passed by: reads go to
//! the backend, write-back writes go through to it, and the device is used
//! again as soon as its writes succeed. A slot table entry that cannot be
//! written would leave a stale entry behind: the device is *fenced*: every
//! dirty block is written back and flushed, then the epoch in the header's
//! state record is bumped, which voids every entry at once.
//!
//! ## Concurrency
//!
//! One mutex holds the policy and slot map. Device writes (page-cache
//! writes for a file) happen under it; backend calls do not, except to write
//! back dirty blocks the policy evicts and in cleaning (a batch of at most
//! [`CLEAN_BATCH`] blocks), which keeps a newer and an older copy of a block
//! from reaching the backend out of order. A hit reads the device without
//! the lock and is kept only if the slot's generation did not change
//! meanwhile; a miss fills the device only if no write to its stripe began
//! or was in flight since it looked (the RAM cache's rule).

mod clean;
#[cfg(test)]
mod harness;
mod io_paths;
pub mod layout;
pub mod marker;
mod recovery;
#[cfg(test)]
mod scenario_tests;
mod slots;
pub mod storage;
#[cfg(test)]
mod tests;

use std::fs::OpenOptions;
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hearth_core::{Access, Op, Policy};
use hearth_policy::PolicySpec;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::backend::Backend;
use crate::error::CacheDeviceError;
use crate::stripes::WriteStripes;
use layout::{Entry, Header, Layout, StateRecord, HEADER_LEN};
use marker::BackendMark;
pub use storage::DeviceStorage;

/// Write stripes (`crate::stripes`), as the RAM cache tracks them.
const STRIPES: usize = 4096;
/// Most dirty blocks one cleaning step writes while holding the lock.
pub const CLEAN_BATCH: usize = 32;

/// How writes treat the device (`cache_device_write_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceWriteMode {
    /// The backend is written before a write is acknowledged.
    #[default]
    Through,
    /// Writes land on the device as dirty blocks, cleaned to the backend
    /// after `dirty_max_age`.
    Back,
}

/// How a device is opened.
#[derive(Clone, Debug)]
pub struct DeviceOptions<'a> {
    /// Bytes of the device (its file is grown to this when new).
    pub size: u64,
    pub block_size: u32,
    /// Names the export and its backend; a device formatted for another
    /// identity, export size or block size is refused.
    pub identity: &'a str,
    /// The replacement policy.
    pub policy: PolicySpec,
    pub mode: DeviceWriteMode,
    /// Start even when the slot table is damaged, dropping what cannot be
    /// read (it may hold dirty blocks, which are lost).
    pub discard_damaged: bool,
    /// The backend file, to mark while this device holds its dirty data
    /// ([`marker`]); `None` for backends that are not files.
    pub backend_file: Option<&'a Path>,
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
    /// Slots dropped at open: damaged clean copies, writes a crash cut, and
    /// unreadable entries discarded on the operator's word.
    pub dropped_at_open: AtomicU64,
    /// Device reads whose data failed its checksum (or could not be read).
    pub checksum_failures: AtomicU64,
    /// Dirty blocks whose backend write or flush failed (each try).
    pub write_back_failures: AtomicU64,
    /// Device writes that failed (data or slot table).
    pub device_write_failures: AtomicU64,
    /// Times every entry was voided after a slot table write failed.
    pub fences: AtomicU64,
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
    /// `block`'s only copy of dirty data, damaged: its reads fail.
    Poisoned {
        block: u64,
    },
}

#[derive(Clone, Copy, Debug)]
struct Superseded {
    slot: u64,
    /// `State::sync_starts` when it was superseded.
    tag: u64,
    block: u64,
}

struct State {
    policy: Box<dyn Policy>,
    slot_of: FxHashMap<u64, u64>,
    slots: Vec<SlotState>,
    /// Bumped whenever a slot's contents stop being what a reader looked up.
    generations: Vec<u64>,
    /// When each dirty slot became dirty.
    dirtied: FxHashMap<u64, Instant>,
    /// Slots to store in. A slot whose dirty entry a sync may have made
    /// durable waits in `pending`, with the count of syncs started when it
    /// was freed, until a later sync makes its cleared entry durable too:
    /// new data over it sooner could, after a power cut, sit under the old
    /// durable entry and read as damage, which for a dirty entry fails the
    /// block. (A clean entry over other data is merely dropped at start.)
    free: Vec<u64>,
    pending: Vec<(u64, u64)>,
    /// Slots a copy-on-write replaced, with the syncs started then and their
    /// block: their entries stay valid until a later sync made the new copy
    /// durable (clearing sooner could leave, after a power cut, neither
    /// copy), or until the block itself leaves the device.
    superseded: Vec<Superseded>,
    /// The sequence of the last dirty entry written to each slot (0 when
    /// its last entry was written clean; a dirty one rewritten clean keeps
    /// it, as the clean rewrite may not be durable yet).
    written_seq: Vec<u64>,
    /// Syncs started, and the largest sequence one of them may have made durable.
    sync_starts: u64,
    covered_seq: u64,
    next_seq: u64,
    vtime: u64,
    stripes: WriteStripes,
    /// The header's state record as last written.
    record: StateRecord,
    /// Dirty blocks the policy evicted whose write-back failed (see the module doc).
    stranded: FxHashSet<u64>,
    /// When stranded blocks are tried again at admission, and the wait after that.
    retry_at: Instant,
    backoff: Duration,
    /// A slot table write failed and the fence that voids it has not completed.
    fence_pending: bool,
    /// Device writes are failing (logged once when it starts and once when it ends).
    device_failing: bool,
    /// The backend file's mark says this device holds dirty data.
    marked_dirty: bool,
    /// Write-backs are failing (likewise).
    backend_failing: bool,
}

pub struct CacheDevice {
    backend: Box<dyn Backend>,
    storage: Box<dyn DeviceStorage>,
    path: PathBuf,
    layout: Layout,
    mode: DeviceWriteMode,
    state: Mutex<State>,
    pub stats: DeviceStats,
    /// The backend file's mark, and how it names this device.
    mark: Option<(BackendMark, String)>,
}

impl CacheDevice {
    /// Opens (formatting it if its header is all zeroes, e.g. a new sparse
    /// file) the device file at `path` in front of `backend`.
    pub fn open(
        backend: Box<dyn Backend>,
        path: &Path,
        options: &DeviceOptions,
    ) -> Result<CacheDevice, CacheDeviceError> {
        let io_err = |what: &'static str| move |source| CacheDeviceError::Io { path: path.into(), what, source };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err("opening"))?;
        // Block devices report length 0 in metadata; seeking finds their size.
        let mut len = file.seek(SeekFrom::End(0)).map_err(io_err("sizing"))?;
        if len == 0 {
            // New: a sparse file of the configured size.
            file.set_len(options.size).map_err(io_err("sizing"))?;
            len = options.size;
        }
        Self::open_on(backend, Box::new(file), len, path, options)
    }

    /// Opens a device kept in `storage` of `len` bytes; `path` names it in
    /// logs and errors.
    pub fn open_on(
        backend: Box<dyn Backend>,
        storage: Box<dyn DeviceStorage>,
        len: u64,
        path: &Path,
        options: &DeviceOptions,
    ) -> Result<CacheDevice, CacheDeviceError> {
        let io_err = |what: &'static str| move |source| CacheDeviceError::Io { path: path.into(), what, source };
        let refuse = |problem: String| CacheDeviceError::Refused { path: path.into(), problem };
        let bs = u64::from(options.block_size);
        if !backend.size().is_multiple_of(bs) {
            return Err(refuse(format!(
                "the export's size ({}) is not a multiple of its block size ({bs})",
                backend.size()
            )));
        }
        let size = options.size;
        let layout =
            Layout::for_size(size, bs).ok_or_else(|| refuse(format!("{size} bytes hold fewer than two blocks")))?;
        let wanted = Header {
            block_size: options.block_size,
            slots: layout.slots,
            export_size: backend.size(),
            identity: options.identity.into(),
        };
        let mut header = vec![0u8; HEADER_LEN as usize];
        if len >= HEADER_LEN {
            storage.read_at(&mut header, 0).map_err(io_err("reading the header"))?;
        }
        match Header::decode(&header).map_err(refuse)? {
            None if len < size => {
                return Err(refuse(format!("{len} bytes, smaller than the configured {size} (truncated?)")))
            }
            None => {
                header = wanted.encode();
                storage.write_at(&header, 0).map_err(io_err("formatting"))?;
                storage.sync().map_err(io_err("formatting"))?;
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
        let record = StateRecord::newest(&header).ok_or_else(|| {
            refuse("both copies of the header's state record are damaged; give a new or zeroed file".into())
        })?;
        let policy = options.policy.build((layout.slots - spare_slots(layout.slots)) * bs);
        let state = State {
            policy,
            slot_of: FxHashMap::default(),
            slots: vec![SlotState::Free; layout.slots as usize],
            generations: vec![0; layout.slots as usize],
            dirtied: FxHashMap::default(),
            free: Vec::new(),
            pending: Vec::new(),
            superseded: Vec::new(),
            written_seq: vec![0; layout.slots as usize],
            sync_starts: 0,
            covered_seq: 0,
            next_seq: 1,
            vtime: 0,
            stripes: WriteStripes::new(STRIPES),
            record,
            stranded: FxHashSet::default(),
            retry_at: Instant::now(),
            backoff: slots::FIRST_RETRY,
            fence_pending: false,
            device_failing: false,
            backend_failing: false,
            marked_dirty: false,
        };
        let device = CacheDevice {
            backend,
            storage,
            path: path.into(),
            layout,
            mode: options.mode,
            state: Mutex::new(state),
            stats: DeviceStats::default(),
            mark: options.backend_file.map(|file| (BackendMark::on(file), marker::device_name(path))),
        };
        device.recover(options.discard_damaged)?;
        device.attach()?;
        Ok(device)
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

    /// `(stranded blocks, poisoned blocks)`: dirty blocks waiting for a
    /// write-back that failed, and blocks whose dirty copy is damaged.
    pub fn trouble(&self) -> (usize, usize) {
        let st = self.lock();
        (st.stranded.len(), st.slots.iter().filter(|s| matches!(s, SlotState::Poisoned { .. })).count())
    }

    pub fn mode(&self) -> DeviceWriteMode {
        self.mode
    }

    fn access(st: &mut State, block: u64, size: u64, op: Op) -> Access {
        st.vtime += 1;
        Access { key: block, size: size as u32, vtime: st.vtime, next_access: hearth_core::NEVER, op, ctx: 0 }
    }

    /// How long the oldest dirty block has waited, `None` if none is dirty.
    pub fn dirty_age(&self) -> Option<Duration> {
        self.lock().dirtied.values().map(Instant::elapsed).max()
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

    /// Syncs the device file (its dirty blocks and entries), then flushes
    /// the backend, then records what the sync covered.
    fn flush(&self) -> io::Result<()> {
        let (sync, dirty) = {
            let mut st = self.lock();
            (self.start_sync(&mut st), st.dirtied.len() as u64)
        };
        self.storage.sync()?;
        self.backend.flush()?;
        let mut st = self.lock();
        self.sync_done(&mut st, sync, dirty);
        Ok(())
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

/// Slots the policy may not fill: free ones to copy-on-write into while
/// freed ones wait for a sync (one sync per this many evictions at most).
fn spare_slots(slots: u64) -> u64 {
    (slots / 64).max(1)
}

/// An error for a block whose dirty copy on the device is damaged.
fn poisoned_error(block: u64) -> io::Error {
    io::Error::other(format!(
        "block {block}: its dirty copy on the cache device is damaged (checksum); \
         write the whole block to replace it"
    ))
}

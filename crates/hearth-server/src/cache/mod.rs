//! The block cache between the protocol and a backend.
//!
//! Data lives in memory keyed by block number; which blocks stay is decided
//! by any `hearth_core::Policy` (the same code the simulator runs). The
//! policy, the block map and the dirty set sit behind one mutex: correctness
//! first, and a hit costs one lock and no copy: a reply shares the cached
//! blocks' buffers, which a later write copies first if a reply still holds them.
//! Over a backend that keeps its bytes in RAM ([`Backend::shares_bytes`]) the
//! cache keeps no bytes of clean blocks, only that they are resident
//! ([`Held::InBackend`]): a hit shares the backend's own buffers, so the
//! export's bytes are in RAM once.
//!
//! Write-through (default): a write reaches the backend before it is
//! acknowledged, then updates the cache. Write-back: writes land in the
//! cache as dirty blocks and reach the backend on FLUSH, FUA, eviction, when
//! the dirty limit is exceeded, and at shutdown. FLUSH, the dirty limit and
//! shutdown write back without holding the mutex across backend calls (a
//! run of blocks is copied under it, written, and marked clean only if no
//! write changed it meanwhile), so reads of cached data go on; paths that
//! write a dirty block themselves under the mutex (eviction, FUA, zeroing,
//! BLOCK_STATUS) first wait until no such copy of it is on its way, so an
//! older copy never lands after a newer one. A dirty block whose write-back
//! fails at eviction is kept in memory ("stranded": the only copy of
//! acknowledged data), served to reads, merged into later writes, and
//! retried by every FLUSH, which fails until it lands. Calls made on a
//! connection's async reader (client evictions, prefetch promotes) never
//! touch the backend: a dirty block they evict is held the same way and
//! written by [`BlockCache::write_back_held`] on a blocking thread.
//!
//! Keeping cache and backend equal while requests run concurrently: a read
//! miss fetches from the backend without the lock and may only insert what it
//! read if no write touched those blocks meanwhile. Writes are tracked per
//! stripe of blocks (`block % STRIPES`, [`crate::stripes`], shared with the
//! cache device): a counter of writes begun and of writes in flight. A read fills a block only if its stripe had no write in
//! flight when the read looked it up and none began since. Two writes in
//! flight on one stripe may reach the backend in either order, so both then
//! invalidate the blocks they touched instead of updating them.
//!
//! ## A guide to the methods
//!
//! | file | public calls | lock | backend I/O |
//! |---|---|---|---|
//! | `read.rs` | `read_cached` (hot: every READ, on the async reader) | briefly | never |
//! | | `read` (a miss, blocking pool) | to decide, not across the read | read; write-back of dirty victims |
//! | | `preload`, `touch`, `read_backend`, `extents` (warmup, BLOCK_STATUS) | yes | `extents` writes dirty blocks first |
//! | `write.rs` | `write` (blocking pool), `discard` (TRIM, WRITE_ZEROES) | write-through: not across the write | write; write-back of dirty victims |
//! | `write_back.rs` | `write_cached` (write-back writes that stay in memory, on the async reader) | briefly | never: dirty victims are held |
//! | | `flush`, `write_back_held` | not across FLUSH's runs | writes dirty and held blocks |
//! | `residency.rs` | `client_evicted`, `classify_demand`, `cached_outside_spare`, `spare_prefetching`, `start_prefetch`, `cancel_prefetch`, `take_wasted` (async reader) | briefly | never: dirty victims are held |
//! | | `prefetch`, `reload` (background threads) | to decide and to fill | read |
//!
//! The policy and placement core is reached through `block_core.rs`, which
//! renames blocks so that the policy's index keeps a request's blocks on
//! shared cache lines.
//!
//! A backend that never waits ([`Backend::waits`], RAM) may be called on any
//! path, the async reader included.
//!
//! Still under the lock: eviction write-back on blocking-pool paths, FUA,
//! zeroing and BLOCK_STATUS of dirty blocks, and retried stranded blocks.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use hearth_core::{Access, Key, Op, Policy, RunMap, RunSet};
use hearth_placement::{Demand, EvictionAction, Placement, StorageCache};
use hearth_prefetch::{Class, Partition};

use crate::backend::{writable, Backend, Extent, SharedSlice};
use crate::stripes::{Glance, WriteStripes};
use block_core::BlockCore;

/// A block's data. Shared so that a read reply can send straight from it
/// ([`SharedSlice`]) after the lock is released: a write to a block a reply
/// still holds first gives the cache its own copy ([`writable`]), so the
/// reply sends the data as it was when read.
type BlockBuf = Arc<[u8]>;

/// Puts `part` at `at` in `buf`. A buffer a reply still holds is copied
/// first, or, when `part` fills the block's `block_len` bytes, replaced by
/// a fresh one.
fn write_into(free: &mut FreeBlocks, buf: &mut BlockBuf, at: usize, part: &[u8], block_len: usize) {
    if at == 0 && part.len() == block_len && Arc::get_mut(buf).is_none() {
        *buf = free.filled(part, buf.len());
        return;
    }
    writable(buf)[at..at + part.len()].copy_from_slice(part);
}

/// What the cache keeps of a resident block.
#[derive(Clone)]
enum Held {
    /// Its bytes, the cache's own (shared with replies still sending them).
    Bytes(BlockBuf),
    /// None: the backend keeps them in RAM and hands them out
    /// ([`Backend::share`]). Only clean blocks are held so; their bytes are
    /// the backend's.
    InBackend,
}

/// A new block buffer of `block_size` zero bytes.
fn zeroed_block(block_size: usize) -> BlockBuf {
    Arc::from(vec![0u8; block_size])
}

/// A block buffer of `block_size` bytes holding `data` then zeroes: `kept`
/// (an unshared buffer from [`FreeBlocks`]) refilled, or a new one.
fn filled_block(kept: Option<BlockBuf>, data: &[u8], block_size: usize) -> BlockBuf {
    match kept {
        Some(mut buf) => {
            let bytes = Arc::get_mut(&mut buf).expect("kept buffers are unshared");
            bytes[..data.len()].copy_from_slice(data);
            bytes[data.len()..].fill(0);
            buf
        }
        None if data.len() == block_size => Arc::from(data),
        None => {
            let mut bytes = vec![0u8; block_size];
            bytes[..data.len()].copy_from_slice(data);
            Arc::from(bytes)
        }
    }
}

/// Buffers of evicted blocks, reused for the next insert. Only buffers no
/// reply holds are kept (the others are freed by their last holder), so a
/// reused one never needs copying.
#[derive(Default)]
struct FreeBlocks(Vec<BlockBuf>);

impl FreeBlocks {
    fn push(&mut self, mut buf: BlockBuf) {
        if Arc::get_mut(&mut buf).is_some() {
            self.0.push(buf);
        }
    }

    /// Keeps the buffer of a block that left the cache, if it had one.
    fn push_held(&mut self, held: Held) {
        if let Held::Bytes(buf) = held {
            self.push(buf);
        }
    }

    fn pop_or_new(&mut self, block_size: usize) -> BlockBuf {
        self.0.pop().unwrap_or_else(|| zeroed_block(block_size))
    }

    fn filled(&mut self, data: &[u8], block_size: usize) -> BlockBuf {
        filled_block(self.0.pop(), data, block_size)
    }
}

/// What to do with dirty blocks an eviction pushes out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Victims {
    /// Write them to the backend now (the caller is on a blocking thread).
    WriteBack,
    /// Hold them in memory for [`BlockCache::write_back_held`]: the caller
    /// is a connection's async reader, which must not wait for the backend.
    Hold,
}

const STRIPES: usize = 16 * 1024;
/// Size of the prefetch partition, as a share of the cache (QuickMine's 4%).
pub(crate) const PREFETCH_SHARE_PERCENT: u64 = 4;
/// Most blocks an unlocked write-back copies and writes at once.
const WRITE_BACK_RUN: usize = 256;

/// How reads and writes use the cache: Open CAS's cache modes (the config's
/// `write_mode`, named for the three that differ only in their writes). An
/// export may switch between them while it serves ([`BlockCache::set_mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    Through,
    /// Write-around (bcache's writearound): writes go to the backend and drop
    /// the blocks they touch from the cache; only reads fill it, so data
    /// written once and not read soon does not push out what is read.
    Around,
    /// Write-back, flushing everything once more than this many bytes are dirty.
    Back {
        dirty_limit: u64,
    },
    /// Pass-through (Open CAS's PT, bcache's none): nothing enters the cache.
    /// Writes go to the backend and drop the blocks they touch, as in
    /// write-around; reads of blocks not cached go to the backend and are not
    /// inserted (cached ones, never older than the backend's, are served).
    PassThrough,
}

impl CacheMode {
    fn code(self) -> u8 {
        match self {
            CacheMode::Through => 0,
            CacheMode::Around => 1,
            CacheMode::Back { .. } => 2,
            CacheMode::PassThrough => 3,
        }
    }

    /// The name config files and the admin endpoint use.
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Through => "through",
            CacheMode::Around => "around",
            CacheMode::Back { .. } => "back",
            CacheMode::PassThrough => "pass",
        }
    }
}

/// Told about every change to the cache's contents, under the cache lock, so
/// it sees them in the order they took effect (the warmup monitor logs them;
/// see `crate::warmup`). Calls must be quick: they hold up the cache.
pub trait ContentLog: Send + Sync {
    /// `block` entered the cache with `data` (the block's bytes that exist)
    /// read from the backend.
    fn loaded(&self, block: u64, data: &[u8]);
    /// A client changed `block`: `data` is its new contents when known in
    /// full, `None` when not (partial write to an absent block, zeroing).
    fn changed(&self, block: u64, data: Option<&[u8]>);
}

/// Counters read by the metrics endpoint and by tests.
#[derive(Default, Debug)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Blocks read from the backend that could not be inserted because a
    /// write raced with the read.
    pub fills_skipped: AtomicU64,
    pub evictions: AtomicU64,
    /// Dirty blocks written to the backend (write-back only).
    pub writebacks: AtomicU64,
    pub backend_reads: AtomicU64,
    pub backend_read_bytes: AtomicU64,
    pub backend_writes: AtomicU64,
    pub backend_flushes: AtomicU64,
    /// Blocks read around the cache (sequential cutoff).
    pub bypassed: AtomicU64,
}

struct Inner {
    /// The policy and placement decisions: the same core the simulator drives.
    core: BlockCore,
    /// Keyed with runs of blocks together, as the core's index is: a
    /// multi-block request's lookups share cache lines.
    blocks: RunMap<Held>,
    free: FreeBlocks,
    /// Dirty blocks, each with the sequence number of its latest write.
    dirty: RunMap<u64>,
    /// When the oldest block still dirty was dirtied, or earlier (reset when
    /// everything is written back): what background cleaning goes by.
    dirty_since: Option<Instant>,
    /// Evicted dirty blocks whose write-back failed: neither cached nor dirty,
    /// but still the only copy of their data.
    stranded: RunMap<BlockBuf>,
    write_seq: u64,
    /// Blocks prefetched (queued or landed) and not yet demanded.
    prefetched: RunSet,
    /// Those of `prefetched` claimed only by a spare prefetch (the guarded
    /// QuickMine's extras): a base prefetch of one takes it over.
    spare_claims: RunSet,
    /// The prefetch partition, the simulator's own (`hearth_prefetch`):
    /// landed prefetches wait here (LRU, a small share of the cache, aged
    /// out after one turnover of the main cache) until a demand promotes
    /// them into the main cache, so wrong predictions push out at most that
    /// share of demand-fetched blocks. Its blocks borrow their room from the
    /// main cache while they wait.
    partition: Partition,
    /// Prefetched blocks that left before any demand, for the prefetcher's feedback.
    wasted: Vec<Key>,
    vtime: u64,
    stripes: WriteStripes,
}

impl Inner {
    /// Releases `block`'s prefetch claim, base or spare; true if it had one.
    fn unclaim(&mut self, block: Key) -> bool {
        self.spare_claims.remove(&block);
        self.prefetched.remove(&block)
    }
}

pub struct BlockCache {
    backend: Box<dyn Backend>,
    block_size: u64,
    /// The backend keeps its bytes in RAM and shares them
    /// ([`Backend::shares_bytes`]): clean blocks are held as
    /// [`Held::InBackend`], with no bytes in the cache.
    bytes_in_backend: bool,
    size: u64,
    /// Held (read) by every write, discard, FLUSH and BLOCK_STATUS for as
    /// long as it runs, so a switch (which takes it to write) never leaves
    /// dirty blocks to a mode that does not expect them.
    switching: RwLock<()>,
    /// The mode as [`CacheMode::code`], changed only under `switching`
    /// taken to write; reads look without waiting for a switch.
    mode_code: AtomicU8,
    /// The mode's dirty limit (`u64::MAX` unless write-back), changed with
    /// `mode_code`.
    dirty_limit: AtomicU64,
    inner: Mutex<Inner>,
    /// Blocks an unlocked write-back is writing right now, and the signal
    /// that some finished.
    in_flight: Mutex<RunSet>,
    in_flight_done: Condvar,
    /// Set when an eviction held dirty blocks for [`BlockCache::write_back_held`].
    held: std::sync::atomic::AtomicBool,
    /// One unlocked write-back at a time.
    writing_back: Mutex<()>,
    pub stats: CacheStats,
    content_log: OnceLock<Arc<dyn ContentLog>>,
}

fn dirty_limit_of(mode: CacheMode) -> u64 {
    match mode {
        CacheMode::Back { dirty_limit } => dirty_limit,
        CacheMode::Through | CacheMode::Around | CacheMode::PassThrough => u64::MAX,
    }
}

/// A block the read path found missing, with its stripe's state at lookup.
struct Miss {
    block: u64,
    /// Its stripe at lookup.
    glance: Glance,
    /// The placement wants the block cached once read.
    place: bool,
}

impl BlockCache {
    pub fn new(backend: Box<dyn Backend>, policy: Box<dyn Policy>, block_size: u32, mode: CacheMode) -> BlockCache {
        Self::with_placement(backend, policy, block_size, mode, Placement::Access)
    }

    /// A cache whose blocks enter by `placement`: `Access` (on reads and
    /// writes) or `Eviction` (when clients report evicting them, through
    /// buffer-address or eviction hints; see [`BlockCache::client_evicted`]).
    pub fn with_placement(
        backend: Box<dyn Backend>,
        policy: Box<dyn Policy>,
        block_size: u32,
        mode: CacheMode,
        placement: Placement,
    ) -> BlockCache {
        assert!(block_size > 0, "block size must be positive");
        if let CacheMode::Back { .. } = mode {
            assert!(policy.capacity() >= u64::from(block_size), "write-back needs room for at least one block");
        }
        let size = backend.size();
        BlockCache {
            bytes_in_backend: backend.shares_bytes(),
            backend,
            block_size: u64::from(block_size),
            size,
            switching: RwLock::new(()),
            mode_code: AtomicU8::new(mode.code()),
            dirty_limit: AtomicU64::new(dirty_limit_of(mode)),
            inner: Mutex::new(Inner {
                partition: Partition::new(
                    (policy.capacity() * PREFETCH_SHARE_PERCENT / 100).max(u64::from(block_size)),
                    block_size,
                ),
                core: BlockCore::new(StorageCache::new(policy, placement)),
                blocks: RunMap::default(),
                free: FreeBlocks::default(),
                dirty: RunMap::default(),
                dirty_since: None,
                stranded: RunMap::default(),
                write_seq: 0,
                prefetched: RunSet::default(),
                spare_claims: RunSet::default(),
                wasted: Vec::new(),
                vtime: 0,
                stripes: WriteStripes::new(STRIPES),
            }),
            in_flight: Mutex::new(RunSet::default()),
            in_flight_done: Condvar::new(),
            held: Default::default(),
            writing_back: Mutex::new(()),
            stats: CacheStats::default(),
            content_log: OnceLock::new(),
        }
    }

    /// The same cache with its prefetch partition sized as the traffic goes
    /// (SARC's rule, [`Partition::adaptive`], as `hearth prefetch sim
    /// --adaptive-partition`): from its fixed share, never below it, up to
    /// half of the cache. Call before serving.
    pub fn with_adaptive_partition(self) -> BlockCache {
        {
            let mut inner = self.lock();
            let fixed = inner.partition.limit();
            inner.partition = Partition::adaptive(inner.core.capacity(), fixed, self.block_size as u32);
        }
        self
    }

    /// Reports every later change of contents to `log`; set at most once.
    pub fn set_content_log(&self, log: Arc<dyn ContentLog>) {
        if self.content_log.set(log).is_err() {
            panic!("the cache's content log is already set");
        }
    }

    fn log_loaded(&self, block: u64, data: &[u8]) {
        if let Some(log) = self.content_log.get() {
            log.loaded(block, data);
        }
    }

    fn log_changed(&self, block: u64, data: Option<&[u8]>) {
        if let Some(log) = self.content_log.get() {
            log.changed(block, data);
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn block_size(&self) -> u64 {
        self.block_size
    }
    /// The mode now; never waits for a switch (which it may just miss).
    pub fn mode(&self) -> CacheMode {
        match self.mode_code.load(Ordering::Relaxed) {
            0 => CacheMode::Through,
            1 => CacheMode::Around,
            2 => CacheMode::Back { dirty_limit: self.dirty_limit() },
            _ => CacheMode::PassThrough,
        }
    }

    /// Keeps the mode from changing until the guard drops (a switch waits
    /// for it).
    fn hold_mode(&self) -> RwLockReadGuard<'_, ()> {
        self.switching.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Switches to `mode` while serving; returns the mode left. Leaving
    /// write-back first writes every dirty block back, with writes, FLUSHes
    /// and discards waiting meanwhile (reads go on); if that fails, the mode
    /// stays write-back and the error is returned.
    pub fn set_mode(&self, mode: CacheMode) -> io::Result<CacheMode> {
        if let CacheMode::Back { .. } = mode {
            if self.lock().core.capacity() < self.block_size {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "write-back needs a cache of at least one block",
                ));
            }
        }
        let _switch = self.switching.write().unwrap_or_else(|e| e.into_inner());
        let was = self.mode();
        if matches!(was, CacheMode::Back { .. }) && !matches!(mode, CacheMode::Back { .. }) {
            self.clean()?;
            let inner = self.lock();
            if !inner.dirty.is_empty() || !inner.stranded.is_empty() {
                return Err(io::Error::other("dirty blocks are left after writing back; the mode stays write-back"));
            }
        }
        self.dirty_limit.store(dirty_limit_of(mode), Ordering::Relaxed);
        self.mode_code.store(mode.code(), Ordering::Relaxed);
        Ok(was)
    }
    pub fn placement(&self) -> Placement {
        self.lock().core.placement()
    }
    /// The placement core's counters (client evictions, reloads, placements).
    pub fn placement_stats(&self) -> hearth_placement::Stats {
        self.lock().core.stats().clone()
    }
    pub fn describe_backend(&self) -> String {
        self.backend.describe()
    }
    /// Whether backend calls may wait (see [`Backend::waits`]): if not, any
    /// call may run on a connection's async task.
    pub fn backend_waits(&self) -> bool {
        self.backend.waits()
    }
    /// `(resident blocks, dirty blocks)`.
    pub fn occupancy(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.blocks.len(), inner.dirty.len())
    }

    /// Evicted dirty blocks held in memory: their write-back failed, or
    /// they were evicted on a path that must not wait for the backend.
    pub fn stranded(&self) -> usize {
        self.lock().stranded.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves maps consistent enough to keep
        // serving; poisoning would turn one bug into a dead export.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks covering `[offset, offset+len)`; empty when len is 0.
    pub fn block_range(&self, offset: u64, len: u64) -> std::ops::Range<u64> {
        if len == 0 {
            return 0..0;
        }
        offset / self.block_size..(offset + len - 1) / self.block_size + 1
    }

    /// Bytes of `block` that exist (the last block may be short).
    fn block_len(&self, block: u64) -> u64 {
        self.block_size.min(self.size - block * self.block_size)
    }

    /// The overlap of `block` with `[offset, offset+len)`, as
    /// (offset within the block, offset within the request, length).
    fn overlap(&self, block: u64, offset: u64, len: u64) -> (usize, usize, usize) {
        let start = block * self.block_size;
        let from = start.max(offset);
        let to = (start + self.block_size).min(offset + len);
        ((from - start) as usize, (from - offset) as usize, (to - from) as usize)
    }

    fn access(inner: &mut Inner, block: u64, size: u64, op: Op) -> Access {
        inner.vtime += 1;
        Access { key: block, size: size as u32, vtime: inner.vtime, next_access: hearth_core::NEVER, op, ctx: 0 }
    }

    fn backend_read(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.stats.backend_reads.fetch_add(1, Ordering::Relaxed);
        self.stats.backend_read_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        self.backend.read_at(buf, offset)
    }
    fn backend_write(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.stats.backend_writes.fetch_add(1, Ordering::Relaxed);
        self.backend.write_at(buf, offset)
    }
    /// Writes whole cache blocks, neighbours from `first` on: their bytes
    /// (those that exist), copied out into one write.
    fn backend_write_blocks(&self, first: u64, bufs: &[BlockBuf]) -> io::Result<()> {
        self.stats.backend_writes.fetch_add(1, Ordering::Relaxed);
        let offset = first * self.block_size;
        if let [one] = bufs {
            return self.backend.write_at(&one[..self.block_len(first) as usize], offset);
        }
        let mut joined = Vec::with_capacity(bufs.len() * self.block_size as usize);
        for (b, buf) in (first..).zip(bufs) {
            joined.extend_from_slice(&buf[..self.block_len(b) as usize]);
        }
        self.backend.write_at(&joined, offset)
    }
    /// The bytes of `[offset, offset+len)` the backend keeps in RAM, copied
    /// into `buf` (not counted as a backend read: they are resident blocks'
    /// bytes, which the cache does not copy for itself).
    fn copy_shared(&self, buf: &mut [u8], offset: u64) {
        let mut slices = Vec::new();
        self.backend.share(offset, buf.len(), &mut slices);
        let mut at = 0;
        for s in &slices {
            buf[at..at + s.len()].copy_from_slice(s);
            at += s.len();
        }
        assert_eq!(at, buf.len(), "a backend that shares its bytes shares all that are asked");
    }

    /// Resident `block`'s bytes (those that exist), wherever they are kept.
    fn held_bytes<'a>(&self, held: &'a Held, block: u64) -> std::borrow::Cow<'a, [u8]> {
        let len = self.block_len(block) as usize;
        match held {
            Held::Bytes(buf) => std::borrow::Cow::Borrowed(&buf[..len]),
            Held::InBackend => {
                let mut bytes = vec![0u8; len];
                self.copy_shared(&mut bytes, block * self.block_size);
                std::borrow::Cow::Owned(bytes)
            }
        }
    }

    /// What to keep of a block now resident and clean, whose bytes are
    /// `data`: a mark if the backend keeps them, else a buffer holding them.
    fn clean_held(&self, free: &mut FreeBlocks, data: &[u8]) -> Held {
        if self.bytes_in_backend {
            Held::InBackend
        } else {
            Held::Bytes(free.filled(data, self.block_size as usize))
        }
    }

    fn backend_flush(&self) -> io::Result<()> {
        self.stats.backend_flushes.fetch_add(1, Ordering::Relaxed);
        self.backend.flush()
    }
}

mod block_core;
mod read;
mod residency;
mod write;
mod write_back;

#[cfg(test)]
mod prefetch_tests;
#[cfg(test)]
mod shared_tests;
#[cfg(test)]
mod tests;

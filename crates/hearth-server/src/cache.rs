//! The block cache between the protocol and a backend.
//!
//! Data lives in memory keyed by block number; which blocks stay is decided
//! by any `hearth_core::Policy` (the same code the simulator runs). The
//! policy, the block map and the dirty set sit behind one mutex: correctness
//! first, and a hit costs one lock and one copy.
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
//! stripe of blocks (`block % STRIPES`): a counter of writes begun and of
//! writes in flight. A read fills a block only if its stripe had no write in
//! flight when the read looked it up and none began since. Two writes in
//! flight on one stripe may reach the backend in either order, so both then
//! invalidate the blocks they touched instead of updating them.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use hearth_core::{Access, Key, Op, Policy};
use hearth_placement::{Demand, EvictionAction, Placement, StorageCache};
use hearth_prefetch::Class;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::backend::{Backend, Extent};

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
const PREFETCH_SHARE_PERCENT: u64 = 4;
/// Most blocks an unlocked write-back copies and writes at once.
const WRITE_BACK_RUN: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    Through,
    /// Write-back, flushing everything once more than this many bytes are dirty.
    Back {
        dirty_limit: u64,
    },
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
}

#[derive(Clone, Copy, Default)]
struct Stripe {
    writes_begun: u64,
    writes_in_flight: u32,
    /// Set when a write began while another was in flight; cleared when the
    /// stripe drains.
    conflict: bool,
}

struct Inner {
    /// The policy and placement decisions: the same core the simulator drives.
    core: StorageCache,
    blocks: FxHashMap<Key, Box<[u8]>>,
    /// Buffers of evicted blocks, reused for the next insert.
    free: Vec<Box<[u8]>>,
    /// Dirty blocks, each with the sequence number of its latest write.
    dirty: FxHashMap<Key, u64>,
    /// Evicted dirty blocks whose write-back failed: neither cached nor dirty,
    /// but still the only copy of their data.
    stranded: FxHashMap<Key, Box<[u8]>>,
    write_seq: u64,
    /// Blocks prefetched (queued or landed) and not yet demanded.
    prefetched: FxHashSet<Key>,
    /// The prefetch partition: landed prefetches wait here (LRU, a small
    /// share of the cache) until a demand promotes them into the main cache,
    /// so wrong predictions never push out demand-fetched blocks.
    partition: Box<dyn Policy>,
    /// Prefetched blocks evicted before any demand, for the prefetcher's feedback.
    wasted: Vec<Key>,
    vtime: u64,
    stripes: Vec<Stripe>,
}

pub struct BlockCache {
    backend: Box<dyn Backend>,
    block_size: u64,
    size: u64,
    mode: WriteMode,
    inner: Mutex<Inner>,
    /// Blocks an unlocked write-back is writing right now, and the signal
    /// that some finished.
    in_flight: Mutex<FxHashSet<Key>>,
    in_flight_done: Condvar,
    /// Set when an eviction held dirty blocks for [`BlockCache::write_back_held`].
    held: std::sync::atomic::AtomicBool,
    /// One unlocked write-back at a time.
    writing_back: Mutex<()>,
    pub stats: CacheStats,
    content_log: OnceLock<Arc<dyn ContentLog>>,
}

/// A block the read path found missing, with its stripe's state at lookup.
struct Miss {
    block: u64,
    writes_begun: u64,
    quiet: bool,
    /// The placement wants the block cached once read.
    place: bool,
}

impl BlockCache {
    pub fn new(backend: Box<dyn Backend>, policy: Box<dyn Policy>, block_size: u32, mode: WriteMode) -> BlockCache {
        Self::with_placement(backend, policy, block_size, mode, Placement::Access)
    }

    /// A cache whose blocks enter by `placement`: `Access` (on reads and
    /// writes) or `Eviction` (when clients report evicting them, through
    /// buffer-address or eviction hints; see [`BlockCache::client_evicted`]).
    pub fn with_placement(
        backend: Box<dyn Backend>,
        policy: Box<dyn Policy>,
        block_size: u32,
        mode: WriteMode,
        placement: Placement,
    ) -> BlockCache {
        assert!(block_size > 0, "block size must be positive");
        if let WriteMode::Back { .. } = mode {
            assert!(policy.capacity() >= u64::from(block_size), "write-back needs room for at least one block");
        }
        let size = backend.size();
        BlockCache {
            backend,
            block_size: u64::from(block_size),
            size,
            mode,
            inner: Mutex::new(Inner {
                partition: Box::new(hearth_policy::Lru::new(
                    (policy.capacity() * PREFETCH_SHARE_PERCENT / 100).max(u64::from(block_size)),
                )),
                core: StorageCache::new(policy, placement),
                blocks: FxHashMap::default(),
                free: Vec::new(),
                dirty: FxHashMap::default(),
                stranded: FxHashMap::default(),
                write_seq: 0,
                prefetched: FxHashSet::default(),
                wasted: Vec::new(),
                vtime: 0,
                stripes: vec![Stripe::default(); STRIPES],
            }),
            in_flight: Mutex::new(FxHashSet::default()),
            in_flight_done: Condvar::new(),
            held: Default::default(),
            writing_back: Mutex::new(()),
            stats: CacheStats::default(),
            content_log: OnceLock::new(),
        }
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

    /// Pre-loads `block` with `data`, its current contents (warmup), unless
    /// it is resident already or a write is in flight on its stripe. Counts
    /// neither a hit nor a miss. Returns whether the block is now resident.
    pub fn preload(&self, block: u64, data: &[u8]) -> bool {
        if block.checked_mul(self.block_size).is_none_or(|at| at >= self.size) {
            return false;
        }
        let mut inner = self.lock();
        if inner.blocks.contains_key(&block) {
            return true;
        }
        if inner.stripes[block as usize % STRIPES].writes_in_flight > 0 {
            return false;
        }
        let n = (self.block_len(block) as usize).min(data.len());
        if inner.core.policy().contains(block) {
            self.store(&mut inner, block, &data[..n], false);
            return true;
        }
        self.insert(&mut inner, block, &data[..n], false)
    }

    /// Marks resident `block` as just used, without counting a hit: after a
    /// pre-load, so the policy's recency follows the log's order, not the load's.
    pub fn touch(&self, block: u64) {
        let mut inner = self.lock();
        if inner.blocks.contains_key(&block) {
            let a = Self::access(&mut inner, block, self.block_size, Op::Read);
            inner.core.demand(&a);
        }
    }

    /// Reads `buf.len()` bytes at `offset` straight from the backend
    /// (counted as backend reads), for pre-loading.
    pub fn read_backend(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.backend_read(buf, offset)
    }

    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn block_size(&self) -> u64 {
        self.block_size
    }
    pub fn mode(&self) -> WriteMode {
        self.mode
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

    /// Serves a read entirely from the cache by appending `len` bytes to
    /// `out`, or does nothing and returns false if any block is missing.
    /// (Appending lets the server build header and data in one buffer.)
    pub fn read_cached(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> bool {
        let range = self.block_range(offset, len as u64);
        let mut inner = self.lock();
        if !range.clone().all(|b| inner.blocks.contains_key(&b)) {
            return false;
        }
        for b in range.clone() {
            let a = Self::access(&mut inner, b, self.block_size, Op::Read);
            inner.core.demand(&a);
            let (in_block, _, n) = self.overlap(b, offset, len as u64);
            out.extend_from_slice(&inner.blocks[&b][in_block..in_block + n]);
        }
        self.stats.hits.fetch_add(range.end - range.start, Ordering::Relaxed);
        true
    }

    /// Reads through the cache: hits are copied, runs of missing blocks are
    /// fetched from the backend in one call each and inserted.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        let mut misses = Vec::new();
        {
            let mut inner = self.lock();
            for b in self.block_range(offset, len) {
                let a = Self::access(&mut inner, b, self.block_size, Op::Read);
                let demand = inner.core.demand(&a);
                if demand == Demand::Hit && inner.blocks.contains_key(&b) {
                    let (in_block, in_req, n) = self.overlap(b, offset, len);
                    buf[in_req..in_req + n].copy_from_slice(&inner.blocks[&b][in_block..in_block + n]);
                } else if let Some(data) = inner.stranded.get(&b) {
                    // Newer than the backend's copy, which a failed write-back left behind.
                    let (in_block, in_req, n) = self.overlap(b, offset, len);
                    buf[in_req..in_req + n].copy_from_slice(&data[in_block..in_block + n]);
                } else {
                    // A hit without data is a block placed by a reload still in flight.
                    let s = inner.stripes[b as usize % STRIPES];
                    misses.push(Miss {
                        block: b,
                        writes_begun: s.writes_begun,
                        quiet: s.writes_in_flight == 0,
                        place: matches!(demand, Demand::Miss { place: true }),
                    });
                }
            }
        }
        let hits = self.block_range(offset, len).count() - misses.len();
        self.stats.hits.fetch_add(hits as u64, Ordering::Relaxed);
        self.stats.misses.fetch_add(misses.len() as u64, Ordering::Relaxed);

        let mut rest = &misses[..];
        while let Some(first) = rest.first() {
            let run = 1 + rest.windows(2).take_while(|w| w[1].block == w[0].block + 1).count();
            let (run_misses, tail) = rest.split_at(run);
            rest = tail;
            let start = first.block * self.block_size;
            let end = (start + run as u64 * self.block_size).min(self.size);
            let mut fetched = vec![0u8; (end - start) as usize];
            self.backend_read(&mut fetched, start)?;
            for m in run_misses {
                let (in_block, in_req, n) = self.overlap(m.block, offset, len);
                let at = ((m.block - first.block) * self.block_size) as usize;
                buf[in_req..in_req + n].copy_from_slice(&fetched[at + in_block..at + in_block + n]);
            }
            self.fill(run_misses, first.block, &fetched);
        }
        Ok(())
    }

    /// Inserts blocks a read fetched, unless a write may have raced with it.
    fn fill(&self, misses: &[Miss], first_block: u64, fetched: &[u8]) {
        let mut inner = self.lock();
        for m in misses {
            let s = inner.stripes[m.block as usize % STRIPES];
            let safe = m.quiet && s.writes_in_flight == 0 && s.writes_begun == m.writes_begun;
            if !safe {
                self.stats.fills_skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if inner.blocks.contains_key(&m.block) {
                continue;
            }
            let at = ((m.block - first_block) * self.block_size) as usize;
            let data = &fetched[at..at + self.block_len(m.block) as usize];
            let resident = if inner.core.policy().contains(m.block) {
                // Placed already (an eviction-based reload in flight): store the data.
                self.store(&mut inner, m.block, data, false);
                true
            } else if m.place {
                self.insert(&mut inner, m.block, data, false)
            } else {
                false
            };
            if resident {
                self.log_loaded(m.block, data);
            }
        }
    }

    /// Inserts `data` as `block`, evicting (and writing back dirty victims)
    /// as the policy decides. Returns whether the block is now resident.
    fn insert(&self, inner: &mut Inner, block: u64, data: &[u8], dirty: bool) -> bool {
        if inner.core.policy().capacity() < self.block_size {
            return false;
        }
        let a = Self::access(inner, block, self.block_size, Op::Write);
        inner.core.place(&a);
        self.drop_victims(inner, Victims::WriteBack);
        if !inner.core.policy().contains(block) {
            return false;
        }
        self.store(inner, block, data, dirty);
        true
    }

    /// Frees the data of the blocks the core just evicted, writing back
    /// dirty ones (or, with [`Victims::Hold`], holding them for a blocking
    /// thread); one whose write-back fails is stranded (kept in memory), and
    /// FLUSH reports it.
    fn drop_victims(&self, inner: &mut Inner, victims: Victims) {
        for i in 0..inner.core.evicted().len() {
            let victim = inner.core.evicted()[i];
            if inner.prefetched.remove(&victim) {
                inner.wasted.push(victim);
            }
            let Some(buf) = inner.blocks.remove(&victim) else {
                continue;
            };
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            if inner.dirty.remove(&victim).is_some() {
                if victims == Victims::Hold {
                    inner.stranded.insert(victim, buf);
                    self.held.store(true, Ordering::Relaxed);
                    continue;
                }
                self.wait_until_not_in_flight(victim);
                let n = self.block_len(victim) as usize;
                if let Err(e) = self.backend_write(&buf[..n], victim * self.block_size) {
                    tracing::error!(block = victim, error = %e, "writing back an evicted dirty block failed; kept in memory, FLUSH fails until it is written");
                    inner.stranded.insert(victim, buf);
                    continue;
                }
                self.stats.writebacks.fetch_add(1, Ordering::Relaxed);
            }
            inner.free.push(buf);
        }
    }

    /// Stores the data of a block the core holds.
    fn store(&self, inner: &mut Inner, block: u64, data: &[u8], dirty: bool) {
        let bs = self.block_size as usize;
        let mut buf = inner.free.pop().unwrap_or_else(|| vec![0u8; bs].into_boxed_slice());
        buf[..data.len()].copy_from_slice(data);
        buf[data.len()..].fill(0);
        inner.blocks.insert(block, buf);
        if dirty {
            Self::mark_dirty(inner, block);
        }
    }

    /// A client evicted `block` from its own cache (learned from a reused
    /// buffer address or an eviction notice). Under eviction-based placement
    /// the block may be placed now; returns it if its data must be reloaded
    /// from the backend (at low priority, with [`BlockCache::reload`]).
    pub fn client_evicted(&self, block: u64) -> Option<u64> {
        if block * self.block_size >= self.size {
            return None;
        }
        let mut inner = self.lock();
        let now = Self::access(&mut inner, block, self.block_size, Op::Read);
        let action = inner.core.client_evicted(block, &now);
        self.drop_victims(&mut inner, Victims::Hold);
        match action {
            EvictionAction::Reload(b) if !inner.blocks.contains_key(&b) => Some(b),
            _ => None,
        }
    }

    /// How a demand read of `block` meets the cache, for prefetchers: a hit,
    /// a promote (the block was prefetched, landed or still in flight, and
    /// this is its first demand), or a miss.
    pub fn classify_demand(&self, block: u64) -> Class {
        let mut inner = self.lock();
        if inner.prefetched.remove(&block) {
            if inner.partition.remove(block) {
                // Landed: promote it from the partition into the main cache.
                let a = Self::access(&mut inner, block, self.block_size, Op::Read);
                inner.core.place(&a);
                self.drop_victims(&mut inner, Victims::Hold);
                if !inner.core.policy().contains(block) {
                    if let Some(buf) = inner.blocks.remove(&block) {
                        inner.free.push(buf);
                    }
                } else if let Some(data) = inner.blocks.get(&block) {
                    // It joined the cache from the backend: the warmup log records it now.
                    self.log_loaded(block, &data[..self.block_len(block) as usize]);
                }
            }
            Class::Promote
        } else if inner.blocks.contains_key(&block) {
            Class::Hit
        } else {
            Class::Miss
        }
    }

    /// Whether `block` is cached or a prefetch of it is pending.
    pub fn cached_or_prefetching(&self, block: u64) -> bool {
        let inner = self.lock();
        inner.blocks.contains_key(&block) || inner.prefetched.contains(&block)
    }

    /// Claims `block` for a prefetch; false if it is cached, already being
    /// prefetched, or beyond the export.
    pub fn start_prefetch(&self, block: u64) -> bool {
        if block.checked_mul(self.block_size).is_none_or(|o| o >= self.size) {
            return false;
        }
        let mut inner = self.lock();
        !inner.blocks.contains_key(&block) && !inner.stranded.contains_key(&block) && inner.prefetched.insert(block)
    }

    /// Releases the claim of a prefetch that will not run (dropped before
    /// its read), so its first demand is a miss, not a promote.
    pub fn cancel_prefetch(&self, block: u64) {
        let mut inner = self.lock();
        if !inner.partition.contains(block) {
            inner.prefetched.remove(&block);
        }
    }

    /// Reads a claimed block from the backend into the prefetch partition,
    /// unless a write raced with the read or it was demanded meanwhile (the
    /// demand read caches it itself).
    pub fn prefetch(&self, block: u64) -> io::Result<()> {
        let (writes_begun, quiet) = {
            let inner = self.lock();
            if inner.blocks.contains_key(&block) || !inner.prefetched.contains(&block) {
                return Ok(());
            }
            let s = inner.stripes[block as usize % STRIPES];
            (s.writes_begun, s.writes_in_flight == 0)
        };
        let mut data = vec![0u8; self.block_len(block) as usize];
        self.backend_read(&mut data, block * self.block_size)?;
        let mut inner = self.lock();
        let s = inner.stripes[block as usize % STRIPES];
        let safe = quiet && s.writes_in_flight == 0 && s.writes_begun == writes_begun;
        if !safe
            || inner.blocks.contains_key(&block)
            || inner.stranded.contains_key(&block)
            || !inner.prefetched.contains(&block)
        {
            return Ok(());
        }
        let a = Self::access(&mut inner, block, self.block_size, Op::Read);
        let mut victims = Vec::new();
        inner.partition.insert(&a, &mut victims);
        for v in victims {
            // Evicted from the partition before any demand: a wasted prefetch.
            if inner.prefetched.remove(&v) {
                inner.wasted.push(v);
            }
            if !inner.core.policy().contains(v) {
                if let Some(buf) = inner.blocks.remove(&v) {
                    inner.free.push(buf);
                }
            }
        }
        self.store(&mut inner, block, &data, false);
        Ok(())
    }

    /// Prefetched blocks evicted unused since the last call.
    pub fn take_wasted(&self) -> Vec<Key> {
        std::mem::take(&mut self.lock().wasted)
    }

    /// Fetches a placed block's data from the backend, unless a write raced
    /// with the read or the block left the cache meanwhile.
    pub fn reload(&self, block: u64) -> io::Result<()> {
        let miss = {
            let mut inner = self.lock();
            if inner.blocks.contains_key(&block) || !inner.core.policy().contains(block) {
                return Ok(());
            }
            if let Some(data) = inner.stranded.remove(&block) {
                // Placed again: the stranded copy is the data, still to be written back.
                self.store(&mut inner, block, &data[..self.block_len(block) as usize], true);
                inner.free.push(data);
                return Ok(());
            }
            let s = inner.stripes[block as usize % STRIPES];
            Miss { block, writes_begun: s.writes_begun, quiet: s.writes_in_flight == 0, place: false }
        };
        let mut data = vec![0u8; self.block_len(block) as usize];
        self.backend_read(&mut data, block * self.block_size)?;
        self.fill(std::slice::from_ref(&miss), block, &data);
        Ok(())
    }

    fn remove(&self, inner: &mut Inner, block: u64) {
        inner.core.remove(block);
        inner.partition.remove(block);
        if let Some(buf) = inner.blocks.remove(&block) {
            inner.dirty.remove(&block);
            inner.free.push(buf);
        }
    }

    /// Stripes touched by a block range, each once.
    fn stripes_of(&self, range: std::ops::Range<u64>) -> impl Iterator<Item = usize> {
        let n = (range.end - range.start).min(STRIPES as u64);
        (range.start..range.start + n).map(|b| b as usize % STRIPES)
    }

    fn begin_write(&self, inner: &mut Inner, range: std::ops::Range<u64>) {
        for s in self.stripes_of(range) {
            let st = &mut inner.stripes[s];
            st.conflict |= st.writes_in_flight > 0;
            st.writes_in_flight += 1;
            st.writes_begun += 1;
        }
    }

    /// Ends a write; returns whether it raced with another write.
    fn end_write(&self, inner: &mut Inner, range: std::ops::Range<u64>) -> bool {
        let mut raced = false;
        for s in self.stripes_of(range) {
            let st = &mut inner.stripes[s];
            raced |= st.conflict;
            st.writes_in_flight -= 1;
            if st.writes_in_flight == 0 {
                st.conflict = false;
            }
        }
        raced
    }

    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let len = data.len() as u64;
        let range = self.block_range(offset, len);
        if let WriteMode::Back { .. } = self.mode {
            return self.write_back(offset, data, fua);
        }
        self.begin_write(&mut self.lock(), range.clone());
        let result = self.backend_write(data, offset).and_then(|()| if fua { self.backend_flush() } else { Ok(()) });
        let mut inner = self.lock();
        let raced = self.end_write(&mut inner, range.clone());
        for b in range {
            let (in_block, in_req, n) = self.overlap(b, offset, len);
            let whole = in_block == 0 && n as u64 == self.block_len(b);
            if raced || result.is_err() {
                self.remove(&mut inner, b);
                self.log_changed(b, None);
            } else {
                let a = Self::access(&mut inner, b, self.block_size, Op::Write);
                let demand = inner.core.demand(&a);
                if let Some(cached) = inner.blocks.get_mut(&b) {
                    cached[in_block..in_block + n].copy_from_slice(&data[in_req..in_req + n]);
                } else if whole && (demand == Demand::Miss { place: true } || inner.core.policy().contains(b)) {
                    // Write-allocate whole blocks (or fill a block placed
                    // while its reload is pending): the data is at hand.
                    if inner.core.policy().contains(b) {
                        self.store(&mut inner, b, &data[in_req..in_req + n], false);
                    } else {
                        self.insert(&mut inner, b, &data[in_req..in_req + n], false);
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

    fn write_back(&self, offset: u64, data: &[u8], fua: bool) -> io::Result<()> {
        let len = data.len() as u64;
        let range = self.block_range(offset, len);
        let mut inner = self.lock();
        if inner.stranded.len() as u64 * self.block_size > self.dirty_limit() {
            // The backend keeps refusing write-backs: retry them before taking on more,
            // and refuse this write while it still fails.
            self.write_stranded(&mut inner, None)?;
        }
        self.begin_write(&mut inner, range.clone());
        let result = (|| -> io::Result<()> {
            for b in range.clone() {
                let (in_block, in_req, n) = self.overlap(b, offset, len);
                let part = &data[in_req..in_req + n];
                if !inner.core.policy().contains(b) && inner.partition.contains(b) {
                    // A landed prefetch is clean and may be dropped from its partition at
                    // any time: the write goes to the main cache instead.
                    inner.prefetched.remove(&b);
                    self.remove(&mut inner, b);
                }
                let a = Self::access(&mut inner, b, self.block_size, Op::Write);
                inner.core.demand(&a);
                let block_len = self.block_len(b) as usize;
                if let Some(cached) = inner.blocks.get_mut(&b) {
                    cached[in_block..in_block + n].copy_from_slice(part);
                    self.log_changed(b, Some(&cached[..block_len]));
                    Self::mark_dirty(&mut inner, b);
                    continue;
                }
                let mut whole = vec![0u8; block_len];
                if let Some(data) = inner.stranded.get(&b) {
                    whole.copy_from_slice(&data[..block_len]);
                } else if n < block_len {
                    // Partial write of an absent block: read-modify-write.
                    self.backend_read(&mut whole, b * self.block_size)?;
                }
                whole[in_block..in_block + n].copy_from_slice(part);
                self.log_changed(b, Some(&whole));
                if !self.insert(&mut inner, b, &whole, true) {
                    // The policy declined the block: write it straight through.
                    self.backend_write(&whole, b * self.block_size)?;
                }
                // Its data now lives in the cache or on the backend.
                if let Some(buf) = inner.stranded.remove(&b) {
                    inner.free.push(buf);
                }
            }
            if fua {
                self.write_dirty(&mut inner, range.clone())?;
            }
            Ok(())
        })();
        self.end_write(&mut inner, range);
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

    /// Retries the write-back of stranded blocks (all, or those in `range`),
    /// under the lock: a rare path after backend write errors.
    fn write_stranded(&self, inner: &mut Inner, range: Option<std::ops::Range<u64>>) -> io::Result<()> {
        let mut blocks: Vec<Key> = inner.stranded.keys().copied().collect();
        blocks.retain(|b| range.as_ref().is_none_or(|r| r.contains(b)));
        for b in blocks {
            // A block held at eviction may still have an older copy on its
            // way from a FLUSH: that copy must land first.
            self.wait_until_not_in_flight(b);
            let n = self.block_len(b) as usize;
            self.backend_write(&inner.stranded[&b][..n], b * self.block_size)?;
            let buf = inner.stranded.remove(&b).expect("listed above");
            inner.free.push(buf);
            self.stats.writebacks.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(block = b, "a dirty block held outside the cache is written back");
        }
        Ok(())
    }

    /// Bytes that may be dirty (or stranded) before write-back kicks in.
    fn dirty_limit(&self) -> u64 {
        match self.mode {
            WriteMode::Back { dirty_limit } => dirty_limit,
            WriteMode::Through => u64::MAX,
        }
    }

    fn mark_dirty(inner: &mut Inner, block: u64) {
        inner.write_seq += 1;
        inner.dirty.insert(block, inner.write_seq);
    }

    /// Returns once no unlocked write-back is writing `block`.
    fn wait_until_not_in_flight(&self, block: u64) {
        let mut writing = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        while writing.contains(&block) {
            writing = self.in_flight_done.wait(writing).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Writes the dirty blocks in `range` to the backend, holding the lock
    /// (small ranges: FUA, zeroing, BLOCK_STATUS), merging neighbours into
    /// one backend write.
    fn write_dirty(&self, inner: &mut Inner, range: std::ops::Range<u64>) -> io::Result<()> {
        let keys: Vec<Key> = range.filter(|b| inner.dirty.contains_key(b)).collect();
        for &b in &keys {
            self.wait_until_not_in_flight(b);
        }
        for run in keys.chunk_by(|a, b| b == &(a + 1)) {
            let mut buf = Vec::with_capacity(run.len() * self.block_size as usize);
            for b in run {
                buf.extend_from_slice(&inner.blocks[b][..self.block_len(*b) as usize]);
            }
            self.backend_write(&buf, run[0] * self.block_size)?;
            for b in run {
                inner.dirty.remove(b);
            }
            self.stats.writebacks.fetch_add(run.len() as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes every block dirty now to the backend without holding the lock
    /// across backend calls: a run of neighbours is copied under the lock,
    /// written, and marked clean unless a write changed it meanwhile.
    fn write_back_unlocked(&self) -> io::Result<()> {
        let _one = self.writing_back.lock().unwrap_or_else(|e| e.into_inner());
        let mut keys: Vec<Key> = self.lock().dirty.keys().copied().collect();
        keys.sort_unstable();
        let mut next = 0;
        while next < keys.len() {
            let (first, copied, buf) = {
                let inner = self.lock();
                while next < keys.len() && !inner.dirty.contains_key(&keys[next]) {
                    next += 1; // written or dropped since
                }
                let Some(&first) = keys.get(next) else { break };
                let mut copied = Vec::new();
                let mut buf = Vec::new();
                while let Some(&b) = keys.get(next) {
                    let extends_run = b == first + copied.len() as u64 && copied.len() < WRITE_BACK_RUN;
                    let Some(&seq) = inner.dirty.get(&b).filter(|_| extends_run) else { break };
                    buf.extend_from_slice(&inner.blocks[&b][..self.block_len(b) as usize]);
                    copied.push((b, seq));
                    next += 1;
                }
                // Registered before the lock is released: nobody can write these
                // blocks back under the lock until this copy has landed.
                self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).extend(copied.iter().map(|&(b, _)| b));
                (first, copied, buf)
            };
            let written = self.backend_write(&buf, first * self.block_size);
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
                    inner.dirty.remove(&b);
                    self.stats.writebacks.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(())
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
        let mut inner = self.lock();
        self.begin_write(&mut inner, range.clone());
        let result = if let WriteMode::Back { .. } = self.mode {
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
        self.end_write(&mut inner, range);
        result
    }

    /// The allocation map for NBD_CMD_BLOCK_STATUS. Write-back first writes
    /// the range's dirty blocks, and holds the lock while asking, so no
    /// cached data hides behind a reported hole.
    pub fn extents(&self, offset: u64, len: u64, max: usize) -> io::Result<Vec<Extent>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        if let WriteMode::Back { .. } = self.mode {
            let mut inner = self.lock();
            self.write_stranded(&mut inner, Some(self.block_range(offset, len)))?;
            self.write_dirty(&mut inner, self.block_range(offset, len))?;
            return self.backend.extents(offset, len, max);
        }
        self.backend.extents(offset, len, max)
    }

    /// Makes every acknowledged write durable.
    pub fn flush(&self) -> io::Result<()> {
        match self.mode {
            WriteMode::Through => self.backend_flush(),
            WriteMode::Back { .. } => {
                self.write_stranded(&mut self.lock(), None)?;
                self.write_back_unlocked()?;
                self.backend_flush()
            }
        }
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
    fn backend_flush(&self) -> io::Result<()> {
        self.stats.backend_flushes.fetch_add(1, Ordering::Relaxed);
        self.backend.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::MemoryBackend;
    use std::sync::Arc;

    const BS: u32 = 4096;

    /// A cache of `blocks` blocks over a memory backend of `size` bytes whose
    /// bytes are `i % 251`.
    fn setup(size: u64, blocks: u64, mode: WriteMode) -> (Arc<MemoryBackend>, BlockCache) {
        let backend = Arc::new(MemoryBackend::new(size));
        let pattern: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        backend.write_at(&pattern, 0).unwrap();
        let policy = hearth_policy::build("lru", blocks * u64::from(BS)).unwrap();
        let cache = BlockCache::new(Box::new(backend.clone()), policy, BS, mode);
        (backend, cache)
    }

    /// Completes each call after a pseudo-random 0..400 µs, so concurrent
    /// calls finish in an order different from the one they took effect in.
    struct Jitter(Arc<MemoryBackend>, AtomicU64);

    impl Jitter {
        fn pause(&self) {
            let n = self.1.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            std::thread::sleep(std::time::Duration::from_micros((n >> 40) % 400));
        }
    }

    impl Backend for Jitter {
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            let r = self.0.read_at(buf, offset);
            self.pause();
            r
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            let r = self.0.write_at(buf, offset);
            self.pause();
            r
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn describe(&self) -> String {
            "jitter".into()
        }
    }

    /// A memory backend with switches: the next write is held 300 ms before
    /// it lands, or every write fails.
    #[derive(Clone)]
    struct Faulty {
        memory: Arc<MemoryBackend>,
        hold_next: Arc<std::sync::atomic::AtomicBool>,
        fail_writes: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Backend for Faulty {
        fn size(&self) -> u64 {
            self.memory.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.memory.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            if self.fail_writes.load(Ordering::SeqCst) {
                return Err(io::Error::other("injected write error"));
            }
            if self.hold_next.swap(false, Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(300));
            }
            self.memory.write_at(buf, offset)
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
        fn describe(&self) -> String {
            "faulty".into()
        }
    }

    /// A zeroed `blocks`-block memory backend behind a [`Faulty`] switchboard.
    fn faulty(blocks: u64) -> (Arc<MemoryBackend>, Faulty, Box<dyn Backend>) {
        let memory = Arc::new(MemoryBackend::new(blocks * u64::from(BS)));
        let faults = Faulty { memory: memory.clone(), hold_next: Default::default(), fail_writes: Default::default() };
        (memory, faults.clone(), Box::new(faults))
    }

    /// A cache over a jittery backend, or over one with a fixed 200 µs
    /// latency (which widens the window between a read and its fill).
    fn setup_racy(size: u64, blocks: u64, mode: WriteMode, jitter: bool) -> (Arc<MemoryBackend>, BlockCache) {
        let backend = Arc::new(MemoryBackend::new(size));
        let policy = hearth_policy::build("lru", blocks * u64::from(BS)).unwrap();
        let racy: Box<dyn Backend> = if jitter {
            Box::new(Jitter(backend.clone(), AtomicU64::new(0)))
        } else {
            let latency = std::time::Duration::from_micros(200);
            Box::new(crate::backend::SlowBackend::new(Box::new(backend.clone()), latency, None))
        };
        (backend.clone(), BlockCache::new(racy, policy, BS, mode))
    }

    /// The bytes a cache-only read returns, or None if it had to miss.
    fn cached(cache: &BlockCache, offset: u64, len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        cache.read_cached(offset, len, &mut out).then_some(out)
    }

    fn expected(offset: u64, len: usize) -> Vec<u8> {
        (offset..offset + len as u64).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn cached_reads_never_reach_the_backend() {
        let (backend, cache) = setup(1 << 20, 64, WriteMode::Through);
        let mut buf = vec![0u8; 10_000];
        cache.read(5000, &mut buf).unwrap();
        assert_eq!(buf, expected(5000, 10_000));
        let after_first = backend.reads();
        assert_eq!(after_first, 1, "one run of missing blocks is one backend read");
        for _ in 0..5 {
            assert_eq!(cached(&cache, 5000, 10_000).as_ref(), Some(&buf));
            let mut again = vec![0u8; 100];
            cache.read(4096, &mut again).unwrap();
        }
        assert_eq!(backend.reads(), after_first);
        assert_eq!(cache.stats.misses.load(Ordering::Relaxed), 3);
        // A read overlapping one uncached block fetches just that block.
        let mut wider = vec![0u8; 4096 * 4];
        cache.read(0, &mut wider).unwrap();
        assert_eq!(wider, expected(0, 4096 * 4));
        assert_eq!(backend.reads(), after_first + 1);
        assert_eq!(backend.snapshot()[..100], expected(0, 100)[..]);
    }

    #[test]
    fn short_last_block_reads_correctly() {
        let size = 3 * 4096 + 100;
        let (_, cache) = setup(size, 8, WriteMode::Through);
        let mut buf = vec![0u8; 200];
        cache.read(size - 200, &mut buf).unwrap();
        assert_eq!(buf, expected(size - 200, 200));
        assert_eq!(cached(&cache, size - 50, 50), Some(expected(size - 50, 50)));
    }

    #[test]
    fn write_through_reaches_backend_and_updates_cache() {
        let (backend, cache) = setup(1 << 20, 64, WriteMode::Through);
        let mut buf = vec![0u8; 8192];
        cache.read(0, &mut buf).unwrap();
        // Partial write into a cached block, and a whole-block write to an absent one.
        cache.write(100, b"hello", false).unwrap();
        cache.write(40960, &[7u8; 4096], true).unwrap();
        let snap = backend.snapshot();
        assert_eq!(&snap[100..105], b"hello");
        assert_eq!(&snap[40960..45056], &[7u8; 4096][..]);
        assert!(backend.flushes() >= 1, "FUA flushes the backend");
        let reads = backend.reads();
        let buf = cached(&cache, 96, 12).expect("cached");
        assert_eq!(&buf[4..9], b"hello");
        assert_eq!(&buf[9..12], &expected(105, 3)[..]);
        assert_eq!(&buf[..4], &expected(96, 4)[..]);
        assert_eq!(cached(&cache, 40960, 4096), Some(vec![7u8; 4096]), "whole-block writes are cached");
        assert_eq!(backend.reads(), reads);
    }

    #[test]
    fn evictions_respect_capacity() {
        let (backend, cache) = setup(1 << 20, 4, WriteMode::Through);
        let mut buf = vec![0u8; 4096];
        for b in 0..10u64 {
            cache.read(b * 4096, &mut buf).unwrap();
            assert_eq!(buf, expected(b * 4096, 4096));
        }
        assert_eq!(cache.occupancy().0, 4);
        assert!(cached(&cache, 9 * 4096, 4096).is_some(), "LRU keeps the newest");
        assert!(cached(&cache, 0, 4096).is_none());
        assert_eq!(backend.reads(), 10);
    }

    #[test]
    fn write_back_holds_writes_until_flush_and_writes_back_on_eviction() {
        let (backend, cache) = setup(1 << 20, 8, WriteMode::Back { dirty_limit: 6 * 4096 });
        cache.write(4096, &[1u8; 4096], false).unwrap();
        cache.write(8192 + 10, b"xyz", false).unwrap(); // partial: read-modify-write
        let snap = backend.snapshot();
        assert_eq!(snap[4096..8192], expected(4096, 4096)[..], "not on the backend yet");
        let mut buf = vec![0u8; 20];
        cache.read(8192, &mut buf).unwrap();
        assert_eq!(&buf[10..13], b"xyz");
        assert_eq!(&buf[..10], &expected(8192, 10)[..]);
        assert_eq!(cache.occupancy().1, 2);
        cache.flush().unwrap();
        let snap = backend.snapshot();
        assert_eq!(snap[4096..8192], [1u8; 4096]);
        assert_eq!(&snap[8202..8205], b"xyz");
        assert_eq!(cache.occupancy().1, 0);

        // Dirty blocks pushed out by the policy are written first.
        cache.write(0, &[9u8; 4096], false).unwrap();
        let mut buf = vec![0u8; 4096];
        for b in 20..40u64 {
            cache.read(b * 4096, &mut buf).unwrap();
        }
        assert_eq!(backend.snapshot()[..4096], [9u8; 4096]);
    }

    #[test]
    fn write_back_dirty_limit_and_fua_write_through() {
        let (backend, cache) = setup(1 << 20, 16, WriteMode::Back { dirty_limit: 2 * 4096 });
        cache.write(0, &[3u8; 4096], true).unwrap();
        assert_eq!(backend.snapshot()[..4096], [3u8; 4096], "FUA reaches the backend");
        for b in 1..4u64 {
            cache.write(b * 4096, &[b as u8; 4096], false).unwrap();
        }
        assert!(cache.occupancy().1 <= 2, "exceeding the dirty limit flushes");
        assert_eq!(backend.snapshot()[4096..8192], [1u8; 4096]);
    }

    #[test]
    fn discard_zeroes_and_drops_cached_blocks() {
        for mode in [WriteMode::Through, WriteMode::Back { dirty_limit: 1 << 20 }] {
            let (_, cache) = setup(1 << 20, 64, mode);
            let mut buf = vec![0u8; 3 * 4096];
            cache.read(0, &mut buf).unwrap();
            cache.write(8192, &[5u8; 4096], false).unwrap();
            cache.discard(100, 10_000, false, true, false).unwrap();
            cache.read(0, &mut buf).unwrap();
            assert_eq!(buf[..100], expected(0, 100)[..], "{mode:?}");
            assert!(buf[100..10_100].iter().all(|&b| b == 0), "{mode:?}");
            assert_eq!(buf[10_100..12_288], [5u8; 2188][..], "{mode:?}");
        }
    }

    /// Concurrent overlapping reads and writes must leave the cache agreeing
    /// with the backend: every block read through the cache afterwards equals
    /// the backend's bytes.
    #[test]
    fn concurrent_reads_and_writes_keep_cache_and_backend_equal() {
        let modes = [WriteMode::Through, WriteMode::Back { dirty_limit: 16 * 4096 }];
        for (mode, jitter) in modes.into_iter().flat_map(|m| [(m, true), (m, false)]) {
            // The cache holds every block, so a stale one would survive to the check.
            let (backend, cache) = setup_racy(64 * 4096, 128, mode, jitter);
            let cache = Arc::new(cache);
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let cache = cache.clone();
                    std::thread::spawn(move || {
                        let mut x = t * 7919 + 1;
                        let mut buf = vec![0u8; 3 * 4096];
                        for i in 0..1000u64 {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                            let offset = (x >> 33) % (62 * 4096);
                            let len = 1 + ((x >> 20) % (2 * 4096)) as usize;
                            if i % 3 == 0 {
                                buf[..len].fill((t * 50 + i % 50) as u8);
                                cache.write(offset, &buf[..len], false).unwrap();
                            } else if i % 5 == 1 {
                                // Zeroing drops cached blocks, so later reads miss again.
                                cache.discard(offset, len as u64, false, true, false).unwrap();
                            } else {
                                cache.read(offset, &mut buf[..len]).unwrap();
                            }
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            cache.flush().unwrap();
            let truth = backend.snapshot();
            let mut buf = vec![0u8; 4096];
            for b in 0..64u64 {
                cache.read(b * 4096, &mut buf).unwrap();
                assert_eq!(buf[..], truth[(b * 4096) as usize..((b + 1) * 4096) as usize], "{mode:?} block {b}");
            }
        }
    }

    /// Write-back under pressure: writers (each owning its blocks, some
    /// writes FUA, some zeroing), a reader forcing evictions and a thread
    /// flushing in a loop, over a backend that pauses *before* each write so
    /// a write-back copy lands late. Every block must end with its owner's last
    /// write on the backend: an older copy landing after a newer one would
    /// show as a lost update.
    #[test]
    fn write_back_never_lands_an_older_copy_after_a_newer_one() {
        struct LateWrites(Arc<MemoryBackend>, AtomicU64);
        impl Backend for LateWrites {
            fn size(&self) -> u64 {
                self.0.size()
            }
            fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
                self.0.read_at(buf, offset)
            }
            fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
                let n = self.1.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                std::thread::sleep(std::time::Duration::from_micros((n >> 40) % 300));
                self.0.write_at(buf, offset)
            }
            fn flush(&self) -> io::Result<()> {
                Ok(())
            }
            fn describe(&self) -> String {
                "late writes".into()
            }
        }
        const BLOCKS: u64 = 48;
        let memory = Arc::new(MemoryBackend::new(BLOCKS * 4096));
        let policy = hearth_policy::build("lru", 12 * 4096).unwrap();
        let backend: Box<dyn Backend> = Box::new(LateWrites(memory.clone(), AtomicU64::new(0)));
        let cache = Arc::new(BlockCache::new(backend, policy, BS, WriteMode::Back { dirty_limit: 6 * 4096 }));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let background: Vec<_> = (0..2)
            .map(|role| {
                let (cache, stop) = (cache.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 4096];
                    let mut x = 99u64 + role;
                    while !stop.load(Ordering::Relaxed) {
                        if role == 0 {
                            cache.flush().unwrap();
                        } else {
                            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                            cache.read((x >> 33) % BLOCKS * 4096, &mut buf).unwrap();
                        }
                    }
                })
            })
            .collect();
        let writers: Vec<_> = (0..3u64)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    let mut last = std::collections::HashMap::new();
                    let mut x = t + 1;
                    for i in 0..300u64 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let block = ((x >> 33) % (BLOCKS / 3)) * 3 + t;
                        let value = (t * 80 + i % 80 + 1) as u8;
                        if i % 17 == 0 {
                            cache.discard(block * 4096, 4096, false, true, false).unwrap();
                            last.insert(block, 0u8);
                        } else {
                            cache.write(block * 4096, &[value; 4096], i % 7 == 0).unwrap();
                            last.insert(block, value);
                        }
                    }
                    last
                })
            })
            .collect();
        let mut expected = std::collections::HashMap::new();
        for w in writers {
            expected.extend(w.join().unwrap());
        }
        stop.store(true, Ordering::Relaxed);
        for t in background {
            t.join().unwrap();
        }
        cache.flush().unwrap();
        assert_eq!(cache.occupancy().1, 0, "nothing dirty after FLUSH");
        let truth = memory.snapshot();
        for (&block, &value) in &expected {
            let on_disk = &truth[(block * 4096) as usize..((block + 1) * 4096) as usize];
            assert!(on_disk.iter().all(|&b| b == value), "block {block}: expected {value}, backend has {}", on_disk[0]);
        }
        let mut buf = vec![0u8; 4096];
        for (&block, &value) in &expected {
            cache.read(block * 4096, &mut buf).unwrap();
            assert!(buf.iter().all(|&b| b == value), "block {block} read through the cache");
        }
    }

    /// The ordering rule, made deterministic: FLUSH copies block 0 (value 1)
    /// and its backend write is held at a gate; meanwhile block 0 is rewritten
    /// (2) and evicted. The eviction's write-back must wait for the held copy,
    /// so the backend ends with 2, not with the older 1 landing last.
    #[test]
    fn write_backs_under_the_lock_wait_for_an_unlocked_copy_of_the_same_block() {
        let (memory, faults, backend) = faulty(16);
        let hold_next = faults.hold_next.clone();
        let policy = hearth_policy::build("lru", 2 * 4096).unwrap();
        let cache = Arc::new(BlockCache::new(backend, policy, BS, WriteMode::Back { dirty_limit: 1 << 20 }));
        cache.write(0, &[1u8; 4096], false).unwrap();
        hold_next.store(true, Ordering::SeqCst); // the flush's write of block 0
        let flusher = {
            let cache = cache.clone();
            std::thread::spawn(move || cache.flush().unwrap())
        };
        while cache.in_flight.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        cache.write(0, &[2u8; 4096], false).unwrap();
        let mut buf = vec![0u8; 4096];
        for b in 1..4u64 {
            cache.read(b * 4096, &mut buf).unwrap(); // evicts block 0, dirty with 2
        }
        flusher.join().unwrap();
        cache.flush().unwrap();
        assert!(memory.snapshot()[..4096].iter().all(|&b| b == 2), "eviction: the older copy landed last");

        // The same with a FUA write of the block instead of an eviction: the
        // FUA write-back waits too, and the block must not be left clean with
        // the older copy on the backend.
        cache.write(5 * 4096, &[1u8; 4096], false).unwrap();
        hold_next.store(true, Ordering::SeqCst);
        let flusher = {
            let cache = cache.clone();
            std::thread::spawn(move || cache.flush().unwrap())
        };
        while cache.in_flight.lock().unwrap().is_empty() {
            std::thread::yield_now();
        }
        cache.write(5 * 4096, &[2u8; 4096], true).unwrap();
        flusher.join().unwrap();
        for b in 1..4u64 {
            cache.read(b * 4096, &mut buf).unwrap(); // evicts block 5
        }
        assert!(memory.snapshot()[5 * 4096..6 * 4096].iter().all(|&b| b == 2), "FUA: the older copy landed last");
    }

    /// A write-back that fails at eviction does not lose the acknowledged
    /// data: the block is stranded in memory, reads and partial writes use it,
    /// FLUSH fails until the backend takes it, and then it is on the backend.
    #[test]
    fn failed_eviction_write_backs_keep_the_data_until_a_flush_lands() {
        let (memory, faults, backend) = faulty(16);
        let failing = faults.fail_writes.clone();
        let policy = hearth_policy::build("lru", 2 * 4096).unwrap();
        let cache = BlockCache::new(backend, policy, BS, WriteMode::Back { dirty_limit: 1 << 20 });
        cache.write(0, &[1u8; 4096], false).unwrap();
        cache.write(4096, &[2u8; 4096], false).unwrap();
        failing.store(true, Ordering::SeqCst);
        // Block 2 evicts block 0, whose write-back fails: block 0 is stranded.
        cache.write(2 * 4096, &[3u8; 4096], false).unwrap();
        let mut buf = vec![0u8; 4096];
        cache.read(0, &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 1), "a stranded block reads back from memory");
        assert!(cache.flush().is_err(), "FLUSH cannot succeed while the backend refuses the data");
        assert_eq!(cache.stranded(), 1);
        // A partial write merges into the stranded copy, not the backend's zeros.
        cache.write(10, b"xy", false).unwrap();
        failing.store(false, Ordering::SeqCst);
        cache.flush().unwrap();
        let disk = memory.snapshot();
        assert_eq!(&disk[10..12], b"xy");
        assert!(disk[..10].iter().chain(&disk[12..4096]).all(|&b| b == 1), "block 0 landed whole");
        assert!(disk[4096..2 * 4096].iter().all(|&b| b == 2));
        assert!(disk[2 * 4096..3 * 4096].iter().all(|&b| b == 3));

        // With the backend refusing for good, stranded data is bounded by the
        // dirty limit: past it, writes fail instead of piling up in memory.
        let cache = BlockCache::new(
            Box::new(Faulty { memory: memory.clone(), ..faults }),
            hearth_policy::build("lru", 2 * 4096).unwrap(),
            BS,
            WriteMode::Back { dirty_limit: 2 * 4096 },
        );
        failing.store(true, Ordering::SeqCst);
        let refused = (0..12u64).position(|b| cache.write(b * 4096, &[9u8; 4096], false).is_err());
        assert!(refused.is_some(), "writes never refused");
        assert!(cache.stranded() <= 3, "{} blocks stranded", cache.stranded());
    }

    /// Every registered policy (but offline OPT) drives the cache correctly:
    /// random reads, writes and zeroing agree with a plain byte model, and
    /// the cache never holds more than its capacity.
    #[test]
    fn every_policy_keeps_reads_equal_to_a_model() {
        for name in hearth_policy::names().into_iter().filter(|&n| n != "opt") {
            for mode in [WriteMode::Through, WriteMode::Back { dirty_limit: 8 * 4096 }] {
                let size = 64 * 4096 + 1000;
                let policy = hearth_policy::build(name, 16 * u64::from(BS)).unwrap();
                let backend = Arc::new(MemoryBackend::new(size));
                let cache = BlockCache::new(Box::new(backend.clone()), policy, BS, mode);
                let mut model = vec![0u8; size as usize];
                let mut x = 0x2545_f491_4f6c_dd1du64;
                let mut buf = vec![0u8; 3 * 4096];
                for i in 0..2000u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let len = 1 + (x >> 40) as usize % (2 * 4096);
                    let offset = (x >> 8) % (size - len as u64);
                    let (at, end) = (offset as usize, offset as usize + len);
                    match i % 5 {
                        0 | 1 => {
                            buf[..len].fill(i as u8);
                            cache.write(offset, &buf[..len], i % 7 == 0).unwrap();
                            model[at..end].fill(i as u8);
                        }
                        2 => {
                            cache.discard(offset, len as u64, false, true, false).unwrap();
                            model[at..end].fill(0);
                        }
                        _ => {
                            cache.read(offset, &mut buf[..len]).unwrap();
                            assert_eq!(buf[..len], model[at..end], "{name} {mode:?} request {i}");
                        }
                    }
                    assert!(cache.occupancy().0 <= 16, "{name} holds more blocks than its capacity");
                }
                cache.flush().unwrap();
                assert!(backend.snapshot() == model, "{name} {mode:?}: backend differs from the model after flush");
            }
        }
    }

    #[test]
    fn write_back_dirty_data_never_hides_behind_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let file = crate::backend::FileBackend::sparse(&dir.path().join("wb.img"), 1 << 20, false).unwrap();
        let policy = hearth_policy::build("lru", 64 * 4096).unwrap();
        let cache = BlockCache::new(Box::new(file), policy, BS, WriteMode::Back { dirty_limit: 64 * 4096 });
        cache.write(8192, &[4u8; 4096], false).unwrap();
        let map = cache.extents(0, 1 << 20, 16).unwrap();
        assert_eq!(map[0], Extent { len: 8192, hole: true });
        assert_eq!(map[1], Extent { len: 4096, hole: false }, "the dirty block is reported as data");
        assert_eq!(cache.occupancy().1, 0);
    }

    #[test]
    fn eviction_based_placement_waits_for_the_client_then_reloads() {
        let backend = Arc::new(MemoryBackend::new(64 * u64::from(BS)));
        let pattern: Vec<u8> = (0..64 * BS as usize).map(|i| (i % 251) as u8).collect();
        backend.write_at(&pattern, 0).unwrap();
        let policy = hearth_policy::build("lru", 8 * u64::from(BS)).unwrap();
        let ev = Placement::Eviction { reload_threshold: 0 };
        let cache = BlockCache::with_placement(Box::new(backend.clone()), policy, BS, WriteMode::Through, ev);
        let bs = BS as usize;
        let mut buf = vec![0u8; bs];
        cache.read(3 * u64::from(BS), &mut buf).unwrap();
        assert_eq!(buf, pattern[3 * bs..4 * bs]);
        // Reads do not place under EV.
        assert_eq!(cache.occupancy().0, 0);
        // The client evicts it: placed, and its data must be reloaded once.
        assert_eq!(cache.client_evicted(3), Some(3));
        let reads = cache.stats.backend_reads.load(Ordering::Relaxed);
        cache.reload(3).unwrap();
        assert_eq!(cache.stats.backend_reads.load(Ordering::Relaxed), reads + 1);
        assert_eq!(cache.occupancy().0, 1);
        // Now a client read hits without the backend.
        let mut out = Vec::new();
        assert!(cache.read_cached(3 * u64::from(BS), bs, &mut out));
        assert_eq!(out, pattern[3 * bs..4 * bs]);
        // A second eviction notice needs no reload; one beyond the export is ignored.
        assert_eq!(cache.client_evicted(3), None);
        assert_eq!(cache.client_evicted(1 << 40), None);
        // A write while placed-but-unloaded must not let a stale reload in.
        assert_eq!(cache.client_evicted(5), Some(5));
        cache.write(5 * u64::from(BS), &vec![9u8; bs], false).unwrap();
        cache.reload(5).unwrap();
        let mut out = Vec::new();
        assert!(cache.read_cached(5 * u64::from(BS), bs, &mut out));
        assert_eq!(out, vec![9u8; bs]);
        let s = cache.placement_stats();
        assert_eq!((s.client_evictions, s.reloads), (3, 2));
    }

    /// Write-back onto a landed prefetch: the written block leaves the prefetch
    /// partition for the main cache, so when the partition later drops its
    /// blocks the dirty data is not dropped with them.
    #[test]
    fn write_back_onto_a_prefetched_block_keeps_the_data() {
        let (backend, cache) = setup(256 * u64::from(BS), 50, WriteMode::Back { dirty_limit: 1 << 20 });
        let bs = u64::from(BS);
        assert!(cache.start_prefetch(20));
        cache.prefetch(20).unwrap();
        cache.write(20 * bs + 100, b"dirty", false).unwrap();
        for b in 30..40 {
            // Fills the 2-block partition many times over.
            assert!(cache.start_prefetch(b));
            cache.prefetch(b).unwrap();
        }
        cache.flush().unwrap();
        let disk = backend.snapshot();
        assert_eq!(&disk[(20 * bs + 100) as usize..(20 * bs + 105) as usize], b"dirty");
        assert_eq!(disk[(20 * bs) as usize], (20 * bs % 251) as u8, "the rest of the block is the backend's");
    }

    #[test]
    fn prefetches_wait_in_their_partition_until_demanded() {
        // 50 blocks: the partition holds 4% = 2 blocks.
        let (_, cache) = setup(256 * u64::from(BS), 50, WriteMode::Through);
        let bs = u64::from(BS);
        for b in [10, 11, 12] {
            assert!(cache.start_prefetch(b));
            cache.prefetch(b).unwrap();
        }
        assert!(!cache.start_prefetch(11), "already prefetched");
        assert!(!cache.start_prefetch(1 << 40), "beyond the export");
        // The partition kept the newest two; 10 was evicted unused.
        assert_eq!(cache.take_wasted(), vec![10]);
        assert_eq!(cache.classify_demand(10), Class::Miss);
        assert_eq!(cache.classify_demand(11), Class::Promote);
        // Promoted into the main cache: now a plain hit, served from memory.
        assert_eq!(cache.classify_demand(11), Class::Hit);
        let mut out = Vec::new();
        assert!(cache.read_cached(11 * bs, BS as usize, &mut out));
        let expect: Vec<u8> = (11 * bs..12 * bs).map(|i| (i % 251) as u8).collect();
        assert_eq!(out, expect);
        // Main-cache hits are never reclassified as promotes.
        assert_eq!(cache.placement_stats().placements, 1);
    }

    #[test]
    fn a_dropped_prefetch_releases_its_claim() {
        let (_, cache) = setup(256 * u64::from(BS), 50, WriteMode::Through);
        // Claimed, then dropped before its read: the first demand is a miss.
        assert!(cache.start_prefetch(20));
        cache.cancel_prefetch(20);
        assert!(!cache.cached_or_prefetching(20));
        assert_eq!(cache.classify_demand(20), Class::Miss);
        assert!(cache.start_prefetch(20), "claimable again");
        // A prefetch that already landed is kept.
        assert!(cache.start_prefetch(21));
        cache.prefetch(21).unwrap();
        cache.cancel_prefetch(21);
        assert_eq!(cache.classify_demand(21), Class::Promote);
        assert_eq!(cache.placement_stats().reloads_skipped, 0, "no eviction reload was involved");
    }
}

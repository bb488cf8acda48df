//! A two-tier backend: a small fast file in front of a large slow one,
//! presented as one export of the slow one's size.
//!
//! Every block lives on the slow backend unless the block map says it was
//! migrated to a slot of the fast backend; then the fast copy is the only
//! valid one (reads and writes go there).
//!
//! The block map is a journal of `MAP block slot` / `UNMAP block slot`
//! records, each written and synced only *after* the data it refers to is
//! durable at its new place. A crash (kill -9, power loss) at any step of a
//! migration therefore leaves either the old mapping with valid data at the
//! old place, or the new mapping with valid data at the new place. A torn
//! record at the journal's end is the crash point and is dropped on open.
//!
//! Migration holds the map exclusively while it copies one block, so no
//! client write can land between the copy and the map update (correct
//! first; one block at a time keeps the pause short).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::backend::Backend;

const MAGIC: &[u8; 8] = b"HRTHTIER";
const HEADER_LEN: usize = 24;
const RECORD_LEN: usize = 24;
const KIND_MAP: u32 = 1;
const KIND_UNMAP: u32 = 2;

/// Steps of a migration after which a test can stop it, as a crash would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// The data is copied to its new place but not synced.
    AfterCopy,
    /// The data is synced at its new place; no journal record yet.
    AfterSync,
    /// Half of the journal record is written.
    TornRecord,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn record(kind: u32, block: u64, slot: u64) -> [u8; RECORD_LEN] {
    let mut r = [0u8; RECORD_LEN];
    r[0..4].copy_from_slice(&kind.to_le_bytes());
    r[8..16].copy_from_slice(&block.to_le_bytes());
    r[16..24].copy_from_slice(&slot.to_le_bytes());
    let crc = crc32fast::hash(&r[8..24]) ^ kind;
    r[4..8].copy_from_slice(&crc.to_le_bytes());
    r
}

struct BlockMap {
    /// Export block -> fast slot.
    slot_of: FxHashMap<u64, u64>,
    /// Fast slot -> export block.
    block_in: Vec<Option<u64>>,
    /// Free slots, the lowest last (so it is taken first).
    free: Vec<u64>,
}

impl BlockMap {
    fn rebuild_free_list(&mut self) {
        self.free = (0..self.block_in.len() as u64).rev().filter(|&s| self.block_in[s as usize].is_none()).collect();
    }
}

pub struct TierBackend {
    fast: Box<dyn Backend>,
    slow: Box<dyn Backend>,
    block_size: u64,
    map: RwLock<BlockMap>,
    journal: Mutex<File>,
    journal_path: PathBuf,
    /// Time of the last client request, in ns since `epoch` (idle detection).
    last_request_ns: AtomicU64,
    epoch: Instant,
    pub fast_bytes_read: AtomicU64,
    pub slow_bytes_read: AtomicU64,
}

impl TierBackend {
    /// Opens the tiers and replays (then compacts) the journal at
    /// `journal_path`, creating it if missing. The fast backend holds
    /// `fast.size() / block_size` slots.
    pub fn open(
        fast: Box<dyn Backend>,
        slow: Box<dyn Backend>,
        block_size: u64,
        journal_path: &Path,
    ) -> io::Result<TierBackend> {
        if block_size == 0 || !slow.size().is_multiple_of(block_size) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "tier: the slow backend's size ({}) must be a multiple of the block size ({block_size})",
                    slow.size()
                ),
            ));
        }
        let slots = fast.size() / block_size;
        let mut map = replay(journal_path, block_size, slots, slow.size() / block_size)?;
        map.rebuild_free_list();
        let journal = compact(journal_path, block_size, slots, &map)?;
        Ok(TierBackend {
            fast,
            slow,
            block_size,
            map: RwLock::new(map),
            journal: Mutex::new(journal),
            journal_path: journal_path.to_path_buf(),
            last_request_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            fast_bytes_read: AtomicU64::new(0),
            slow_bytes_read: AtomicU64::new(0),
        })
    }

    pub fn slots(&self) -> u64 {
        self.map.read().expect("map lock").block_in.len() as u64
    }

    /// Blocks currently on the fast tier.
    pub fn fast_blocks(&self) -> usize {
        self.map.read().expect("map lock").slot_of.len()
    }

    pub fn is_on_fast(&self, block: u64) -> bool {
        self.map.read().expect("map lock").slot_of.contains_key(&block)
    }

    fn touch(&self) {
        self.last_request_ns.store(self.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// How long no client request has arrived.
    pub fn idle_for(&self) -> Duration {
        let now = self.epoch.elapsed().as_nanos() as u64;
        Duration::from_nanos(now.saturating_sub(self.last_request_ns.load(Ordering::Relaxed)))
    }

    /// Splits `[offset, offset + len)` into pieces that each lie in one
    /// place: `(slot or None for slow, offset in the export, len)`. Runs
    /// of slow blocks stay one piece.
    fn for_each_piece(
        &self,
        map: &BlockMap,
        offset: u64,
        len: u64,
        mut f: impl FnMut(Option<u64>, u64, u64) -> io::Result<()>,
    ) -> io::Result<()> {
        let end = offset + len;
        let mut at = offset;
        let mut slow_from: Option<u64> = None;
        while at < end {
            let block = at / self.block_size;
            let piece_end = ((block + 1) * self.block_size).min(end);
            match map.slot_of.get(&block) {
                Some(&slot) => {
                    if let Some(from) = slow_from.take() {
                        f(None, from, at - from)?;
                    }
                    f(Some(slot), at, piece_end - at)?;
                }
                None => {
                    slow_from.get_or_insert(at);
                }
            }
            at = piece_end;
        }
        if let Some(from) = slow_from {
            f(None, from, end - from)?;
        }
        Ok(())
    }

    fn fast_offset(&self, slot: u64, export_offset: u64) -> u64 {
        slot * self.block_size + export_offset % self.block_size
    }

    /// Moves `block` to a free fast slot; returns false if none is free or
    /// it is there already.
    pub fn promote(&self, block: u64) -> io::Result<bool> {
        self.promote_until(block, None)
    }

    /// [`TierBackend::promote`], stopping at `crash` as a crash would.
    pub fn promote_until(&self, block: u64, crash: Option<CrashPoint>) -> io::Result<bool> {
        let mut map = self.map.write().expect("map lock");
        if map.slot_of.contains_key(&block) || block >= self.slow.size() / self.block_size {
            return Ok(false);
        }
        let Some(&slot) = map.free.last() else { return Ok(false) };
        let mut buf = vec![0u8; self.block_size as usize];
        self.slow.read_at(&mut buf, block * self.block_size)?;
        self.fast.write_at(&buf, slot * self.block_size)?;
        if crash == Some(CrashPoint::AfterCopy) {
            return Ok(false);
        }
        self.fast.flush()?;
        if !self.commit(KIND_MAP, block, slot, crash)? {
            return Ok(false);
        }
        map.free.pop();
        map.slot_of.insert(block, slot);
        map.block_in[slot as usize] = Some(block);
        Ok(true)
    }

    /// Moves `block` back to the slow tier, freeing its slot; returns false
    /// if it was not on the fast tier.
    pub fn demote(&self, block: u64) -> io::Result<bool> {
        self.demote_until(block, None)
    }

    /// [`TierBackend::demote`], stopping at `crash` as a crash would.
    pub fn demote_until(&self, block: u64, crash: Option<CrashPoint>) -> io::Result<bool> {
        let mut map = self.map.write().expect("map lock");
        let Some(&slot) = map.slot_of.get(&block) else {
            return Ok(false);
        };
        let mut buf = vec![0u8; self.block_size as usize];
        self.fast.read_at(&mut buf, slot * self.block_size)?;
        self.slow.write_at(&buf, block * self.block_size)?;
        if crash == Some(CrashPoint::AfterCopy) {
            return Ok(false);
        }
        self.slow.flush()?;
        if !self.commit(KIND_UNMAP, block, slot, crash)? {
            return Ok(false);
        }
        map.slot_of.remove(&block);
        map.block_in[slot as usize] = None;
        map.free.push(slot);
        Ok(true)
    }

    /// Appends and syncs one journal record; false if `crash` stopped it.
    fn commit(&self, kind: u32, block: u64, slot: u64, crash: Option<CrashPoint>) -> io::Result<bool> {
        let rec = record(kind, block, slot);
        let mut journal = self.journal.lock().expect("journal lock");
        match crash {
            Some(CrashPoint::AfterSync) => return Ok(false),
            Some(CrashPoint::TornRecord) => {
                journal.write_all(&rec[..RECORD_LEN / 2])?;
                return Ok(false);
            }
            _ => {}
        }
        journal.write_all(&rec)?;
        journal.sync_data()?;
        Ok(true)
    }
}

/// Reads the journal into a block map. A missing or empty journal is an
/// empty map; a short or corrupt *last* record is a write cut by a crash and
/// is ignored; corruption before the last record is an error.
fn replay(path: &Path, block_size: u64, slots: u64, blocks: u64) -> io::Result<BlockMap> {
    let mut map = BlockMap { slot_of: FxHashMap::default(), block_in: vec![None; slots as usize], free: Vec::new() };
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(map),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
    if bytes.is_empty() {
        return Ok(map);
    }
    let at = |offset: usize, what: &str| invalid(format!("tier journal {} at byte {offset}: {what}", path.display()));
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Err(at(0, "not a tier journal (bad magic)"));
    }
    let header_block = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let header_slots = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    if header_block != block_size || header_slots != slots {
        return Err(at(
            8,
            &format!(
                "written for block size {header_block} and {header_slots} fast slots, opened with {block_size} and {slots}"
            ),
        ));
    }
    let body = &bytes[HEADER_LEN..];
    let records = body.len() / RECORD_LEN;
    for i in 0..records {
        let offset = HEADER_LEN + i * RECORD_LEN;
        let r = &body[i * RECORD_LEN..(i + 1) * RECORD_LEN];
        let kind = u32::from_le_bytes(r[0..4].try_into().expect("4 bytes"));
        let block = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
        let slot = u64::from_le_bytes(r[16..24].try_into().expect("8 bytes"));
        if r != record(kind, block, slot) || !(kind == KIND_MAP || kind == KIND_UNMAP) {
            if i + 1 == records && body.len() % RECORD_LEN == 0 {
                break; // torn last record
            }
            return Err(at(offset, "corrupt record (checksum mismatch)"));
        }
        if slot >= slots || block >= blocks {
            return Err(at(offset, &format!("record names block {block} / slot {slot}, beyond the tiers")));
        }
        if kind == KIND_MAP {
            if let Some(old) = map.block_in[slot as usize].replace(block) {
                return Err(at(offset, &format!("slot {slot} mapped to block {block} while holding block {old}")));
            }
            map.slot_of.insert(block, slot);
        } else if map.slot_of.get(&block) == Some(&slot) {
            map.slot_of.remove(&block);
            map.block_in[slot as usize] = None;
        } else {
            return Err(at(offset, &format!("unmap of block {block} from slot {slot}, where it is not")));
        }
    }
    Ok(map)
}

/// Rewrites the journal as one MAP record per mapped block (to a temporary
/// file, synced, then renamed over the old one) and opens it for appending.
fn compact(path: &Path, block_size: u64, slots: u64, map: &BlockMap) -> io::Result<File> {
    let tmp = path.with_extension("compacting");
    let mut bytes = Vec::with_capacity(HEADER_LEN + map.slot_of.len() * RECORD_LEN);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&block_size.to_le_bytes());
    bytes.extend_from_slice(&slots.to_le_bytes());
    for (slot, block) in map.block_in.iter().enumerate() {
        if let Some(block) = block {
            bytes.extend_from_slice(&record(KIND_MAP, *block, slot as u64));
        }
    }
    let annotate = |e: io::Error| io::Error::new(e.kind(), format!("tier journal {}: {e}", path.display()));
    {
        let mut f = File::create(&tmp).map_err(annotate)?;
        f.write_all(&bytes).map_err(annotate)?;
        f.sync_all().map_err(annotate)?;
    }
    std::fs::rename(&tmp, path).map_err(annotate)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir).and_then(|d| d.sync_all()).map_err(annotate)?;
    }
    OpenOptions::new().append(true).open(path).map_err(annotate)
}

impl Backend for TierBackend {
    fn size(&self) -> u64 {
        self.slow.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.touch();
        let map = self.map.read().expect("map lock");
        self.for_each_piece(&map, offset, buf.len() as u64, |slot, at, len| {
            let part = &mut buf[(at - offset) as usize..(at - offset + len) as usize];
            match slot {
                Some(slot) => {
                    self.fast_bytes_read.fetch_add(len, Ordering::Relaxed);
                    self.fast.read_at(part, self.fast_offset(slot, at))
                }
                None => {
                    self.slow_bytes_read.fetch_add(len, Ordering::Relaxed);
                    self.slow.read_at(part, at)
                }
            }
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.touch();
        let map = self.map.read().expect("map lock");
        self.for_each_piece(&map, offset, buf.len() as u64, |slot, at, len| {
            let part = &buf[(at - offset) as usize..(at - offset + len) as usize];
            match slot {
                Some(slot) => self.fast.write_at(part, self.fast_offset(slot, at)),
                None => self.slow.write_at(part, at),
            }
        })
    }

    fn flush(&self) -> io::Result<()> {
        self.fast.flush()?;
        self.slow.flush()
    }

    fn describe(&self) -> String {
        format!(
            "tier (fast {} with {} slots, slow {}, journal {})",
            self.fast.describe(),
            self.slots(),
            self.slow.describe(),
            self.journal_path.display()
        )
    }
}

/// Background migration of a plan's blocks to the fast tier, in plan order,
/// only while clients are idle and at most `bytes_per_sec`. When the fast
/// tier is full, blocks not in the plan are demoted to make room. Dropping
/// the handle lets the migration run on; [`Migrator::stop`] ends it.
pub struct Migrator {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<u64>>>,
}

impl Migrator {
    pub fn spawn(tier: Arc<TierBackend>, plan: Vec<u64>, bytes_per_sec: u64, idle: Duration) -> Migrator {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let handle = std::thread::spawn(move || -> io::Result<u64> {
            let wanted: FxHashSet<u64> = plan.iter().copied().collect();
            let per_block = Duration::from_secs_f64(tier.block_size as f64 / bytes_per_sec.max(1) as f64);
            let mut moved = 0;
            for &block in plan.iter().take(tier.slots() as usize) {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                while tier.idle_for() < idle && !stopping.load(Ordering::Relaxed) {
                    std::thread::sleep(idle / 4);
                }
                let started = Instant::now();
                if !tier.promote(block)? && !tier.is_on_fast(block) {
                    // Full: demote one block the plan does not want.
                    let victim =
                        tier.map.read().expect("map lock").slot_of.keys().copied().find(|b| !wanted.contains(b));
                    match victim {
                        Some(v) => {
                            tier.demote(v)?;
                            tier.promote(block)?;
                        }
                        None => break,
                    }
                }
                moved += 1;
                std::thread::sleep(per_block.saturating_sub(started.elapsed()));
            }
            tracing::info!(blocks = moved, on_fast = tier.fast_blocks(), "tier migration finished");
            Ok(moved)
        });
        Migrator { stop, handle: Some(handle) }
    }

    /// Whether the migration has finished (or stopped on an error).
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops after the block in progress; returns the blocks handled.
    pub fn stop(mut self) -> io::Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().expect("joined once").join().unwrap_or_else(|_| Err(io::Error::other("migrator panicked")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::FileBackend;

    const BS: u64 = 4096;

    struct Files {
        _dir: tempfile::TempDir,
        fast: PathBuf,
        slow: PathBuf,
        journal: PathBuf,
    }

    fn files() -> Files {
        let dir = tempfile::tempdir().unwrap();
        Files {
            fast: dir.path().join("fast.img"),
            slow: dir.path().join("slow.img"),
            journal: dir.path().join("tier.journal"),
            _dir: dir,
        }
    }

    /// 4 fast slots over 64 slow blocks.
    fn open(f: &Files) -> TierBackend {
        let fast = Box::new(FileBackend::sparse(&f.fast, 4 * BS, false).unwrap());
        let slow = Box::new(FileBackend::sparse(&f.slow, 64 * BS, false).unwrap());
        TierBackend::open(fast, slow, BS, &f.journal).unwrap()
    }

    fn pattern(block: u64, version: u8) -> Vec<u8> {
        (0..BS).map(|i| (i as u8) ^ (block as u8).wrapping_mul(31) ^ version).collect()
    }

    fn read_block(t: &TierBackend, block: u64) -> Vec<u8> {
        let mut buf = vec![0; BS as usize];
        t.read_at(&mut buf, block * BS).unwrap();
        buf
    }

    /// Every block of the export holds `pattern(block, version(block))`.
    fn check_all(t: &TierBackend, version: impl Fn(u64) -> u8) {
        for b in 0..64 {
            assert_eq!(read_block(t, b), pattern(b, version(b)), "block {b}");
        }
    }

    fn fill(t: &TierBackend) {
        for b in 0..64 {
            t.write_at(&pattern(b, 0), b * BS).unwrap();
        }
    }

    #[test]
    fn reads_and_writes_follow_the_map_across_reopen() {
        let f = files();
        let t = open(&f);
        fill(&t);
        assert!(t.promote(5).unwrap() && t.promote(6).unwrap());
        // A write spanning a slow block, two fast ones and a slow one, unaligned.
        let span: Vec<u8> = (0..3 * BS).map(|i| (i % 251) as u8).collect();
        t.write_at(&span, 4 * BS + 100).unwrap();
        let mut back = vec![0; span.len()];
        t.read_at(&mut back, 4 * BS + 100).unwrap();
        assert_eq!(back, span);
        t.flush().unwrap();
        drop(t);
        let t = open(&f);
        assert_eq!(t.fast_blocks(), 2);
        t.read_at(&mut back, 4 * BS + 100).unwrap();
        assert_eq!(back, span);
        // The fast tier really served the migrated blocks.
        assert!(t.fast_bytes_read.load(Ordering::Relaxed) >= 2 * BS);
        assert!(t.demote(5).unwrap());
        drop(t);
        let t = open(&f);
        assert!(!t.is_on_fast(5) && t.is_on_fast(6));
        t.read_at(&mut back, 4 * BS + 100).unwrap();
        assert_eq!(back, span);
    }

    #[test]
    fn a_crash_at_any_step_of_a_promotion_loses_nothing() {
        for crash in [CrashPoint::AfterCopy, CrashPoint::AfterSync, CrashPoint::TornRecord] {
            let f = files();
            let t = open(&f);
            fill(&t);
            t.promote(1).unwrap();
            t.write_at(&pattern(1, 1), BS).unwrap();
            assert!(!t.promote_until(9, Some(crash)).unwrap());
            drop(t); // the process dies; what it wrote stays in the files
            let t = open(&f);
            assert!(!t.is_on_fast(9), "{crash:?}: the map must not point at an uncommitted copy");
            assert!(t.is_on_fast(1));
            check_all(&t, |b| u8::from(b == 1));
            // The slot is usable again, and the journal appends after the torn part.
            assert!(t.promote(9).unwrap());
            t.write_at(&pattern(9, 2), 9 * BS).unwrap();
            drop(t);
            let t = open(&f);
            assert!(t.is_on_fast(9));
            check_all(&t, |b| match b {
                1 => 1,
                9 => 2,
                _ => 0,
            });
        }
    }

    #[test]
    fn a_crash_at_any_step_of_a_demotion_loses_nothing() {
        for crash in [CrashPoint::AfterCopy, CrashPoint::AfterSync, CrashPoint::TornRecord] {
            let f = files();
            let t = open(&f);
            fill(&t);
            t.promote(3).unwrap();
            // Only the fast copy has version 1.
            t.write_at(&pattern(3, 1), 3 * BS).unwrap();
            assert!(!t.demote_until(3, Some(crash)).unwrap());
            drop(t);
            let t = open(&f);
            assert!(t.is_on_fast(3), "{crash:?}");
            check_all(&t, |b| u8::from(b == 3));
            assert!(t.demote(3).unwrap());
            drop(t);
            let t = open(&f);
            assert!(!t.is_on_fast(3));
            check_all(&t, |b| u8::from(b == 3));
        }
    }

    #[test]
    fn damaged_journals_are_refused_with_the_byte_offset() {
        let f = files();
        let t = open(&f);
        t.promote(1).unwrap();
        t.promote(2).unwrap();
        drop(t);
        let mut bytes = std::fs::read(&f.journal).unwrap();
        bytes[HEADER_LEN + 10] ^= 0xff; // inside the first of two records
        std::fs::write(&f.journal, &bytes).unwrap();
        let fast = Box::new(FileBackend::sparse(&f.fast, 4 * BS, false).unwrap());
        let slow = Box::new(FileBackend::sparse(&f.slow, 64 * BS, false).unwrap());
        let err = TierBackend::open(fast, slow, BS, &f.journal).err().unwrap().to_string();
        assert!(err.contains(&format!("at byte {HEADER_LEN}")) && err.contains("checksum"), "{err}");
        // A journal written for another fast size.
        let fast = Box::new(FileBackend::sparse(&f.fast.with_extension("2"), 8 * BS, false).unwrap());
        let slow = Box::new(FileBackend::sparse(&f.slow, 64 * BS, false).unwrap());
        let err = TierBackend::open(fast, slow, BS, &f.journal).err().unwrap().to_string();
        assert!(err.contains("4 fast slots") && err.contains("8"), "{err}");
    }

    #[test]
    fn migrator_moves_the_plan_and_makes_room_by_demoting_others() {
        let f = files();
        let t = Arc::new(open(&f));
        fill(&t);
        for b in [40, 41, 42, 43] {
            t.promote(b).unwrap();
        }
        let plan = vec![7, 8, 40, 9];
        let m = Migrator::spawn(t.clone(), plan, 100 * BS, Duration::from_millis(1));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !m.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(m.stop().unwrap(), 4);
        for b in [7, 8, 40, 9] {
            assert!(t.is_on_fast(b), "block {b}");
        }
        check_all(&t, |_| 0);
    }

    #[test]
    fn config_opens_a_tier_export_and_checks_the_plan() {
        let f = files();
        let d = f.fast.parent().unwrap().to_path_buf();
        let plan = d.join("plan.json");
        let toml = |plan_block_size: u32| {
            hearth_tier::plan::Plan::from_blocks(plan_block_size, "freq", 2, &[5, 6]).save(&plan).unwrap();
            format!(
                "[[export]]\nname = \"t\"\nbackend = \"memory\"\nsize = \"256KiB\"\ncache_size = 0\n\
                 [export.tier]\nfast_path = \"{}\"\nfast_size = \"16KiB\"\nplan = \"{}\"\nidle = \"0ms\"\n",
                f.fast.display(),
                plan.display()
            )
        };
        let settings = crate::Config::parse(&toml(4096)).unwrap().validate().unwrap();
        let (cache, ..) = settings.exports[0].open().unwrap();
        assert!(cache.describe_backend().contains("tier (fast"), "{}", cache.describe_backend());
        let settings = crate::Config::parse(&toml(512)).unwrap().validate().unwrap();
        let err = settings.exports[0].open().err().unwrap().to_string();
        assert!(err.contains("plan.json") && err.contains("block size 512"), "{err}");
        let err = crate::Config::parse(
            "[[export]]\nname = \"t\"\n[export.tier]\nfast_path = \"x\"\nfast_size = 1\nspeed = 2\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("speed"), "{err}");
    }
}

//! The cache device over a memory backend: persistence across reopen, both
//! write modes, refusal of foreign or damaged devices, and concurrent use.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::layout::{Entry, ENTRY_LEN, HEADER_LEN};
use super::*;
use crate::backend::MemoryBackend;

const BS: u64 = 4096;
const EXPORT_BLOCKS: u64 = 256;

struct Rig {
    _dir: tempfile::TempDir,
    path: PathBuf,
    backend: Arc<MemoryBackend>,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    Rig { path: dir.path().join("cache.dev"), _dir: dir, backend: Arc::new(MemoryBackend::new(EXPORT_BLOCKS * BS)) }
}

/// A device of `slots` slots (one of them the copy-on-write spare).
fn device_size(slots: u64) -> u64 {
    layout::Layout::with_slots(slots, BS).total_len()
}

fn options(slots: u64, mode: DeviceWriteMode, identity: &str) -> DeviceOptions<'_> {
    DeviceOptions {
        size: device_size(slots),
        block_size: BS as u32,
        identity,
        policy: "lru".parse().unwrap(),
        mode,
        discard_damaged: false,
        backend_file: None,
    }
}

fn open_with(r: &Rig, slots: u64, mode: DeviceWriteMode, identity: &str) -> Result<CacheDevice, CacheDeviceError> {
    CacheDevice::open(Box::new(r.backend.clone()), &r.path, &options(slots, mode, identity))
}

fn open(r: &Rig, slots: u64, mode: DeviceWriteMode) -> CacheDevice {
    open_with(r, slots, mode, "export t on file /x").unwrap()
}

fn pattern(block: u64, version: u8) -> Vec<u8> {
    (0..BS).map(|i| (i as u8).wrapping_mul(7) ^ (block as u8) ^ version.wrapping_mul(91)).collect()
}

fn read(d: &CacheDevice, block: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS as usize];
    d.read_at(&mut buf, block * BS).unwrap();
    buf
}

fn backend_block(r: &Rig, block: u64) -> Vec<u8> {
    r.backend.snapshot()[(block * BS) as usize..((block + 1) * BS) as usize].to_vec()
}

fn fill_backend(r: &Rig) {
    for b in 0..EXPORT_BLOCKS {
        r.backend.write_at(&pattern(b, 0), b * BS).unwrap();
    }
}

#[test]
fn a_reopened_device_serves_what_it_cached_without_backend_reads() {
    let r = rig();
    fill_backend(&r);
    let d = open(&r, 33, DeviceWriteMode::Through);
    for b in 0..32 {
        assert_eq!(read(&d, b), pattern(b, 0));
    }
    assert_eq!(d.stats.misses.load(Ordering::Relaxed), 32);
    drop(d);
    let d = open(&r, 33, DeviceWriteMode::Through);
    assert_eq!(d.occupancy(), (32, 0));
    let before = r.backend.reads();
    for b in 0..32 {
        assert_eq!(read(&d, b), pattern(b, 0), "block {b}");
    }
    assert_eq!(r.backend.reads(), before, "every block came from the device");
    assert_eq!(d.stats.hits.load(Ordering::Relaxed), 32);
}

#[test]
fn unaligned_reads_and_writes_merge_with_the_cached_blocks() {
    for mode in [DeviceWriteMode::Through, DeviceWriteMode::Back] {
        let r = rig();
        fill_backend(&r);
        let d = open(&r, 9, mode);
        read(&d, 3);
        read(&d, 4);
        let piece = vec![0xabu8; 5000];
        d.write_at(&piece, 3 * BS + 100).unwrap();
        let mut expect = [pattern(3, 0), pattern(4, 0)].concat();
        expect[100..5100].copy_from_slice(&piece);
        let mut back = vec![0u8; 2 * BS as usize];
        d.read_at(&mut back, 3 * BS).unwrap();
        assert_eq!(back, expect, "{mode:?}");
        let mut middle = vec![0u8; 300];
        d.read_at(&mut middle, 3 * BS + 4000).unwrap();
        assert_eq!(middle, expect[4000..4300], "{mode:?}");
        drop(d);
        let d = open(&r, 9, mode);
        d.read_at(&mut back, 3 * BS).unwrap();
        assert_eq!(back, expect, "{mode:?} after reopen");
    }
}

#[test]
fn write_through_keeps_device_and_backend_equal() {
    let r = rig();
    let d = open(&r, 9, DeviceWriteMode::Through);
    for b in 0..20 {
        d.write_at(&pattern(b, 1), b * BS).unwrap();
        assert_eq!(backend_block(&r, b), pattern(b, 1), "the backend has it before the write returns");
    }
    assert_eq!(d.occupancy(), (8, 0));
    d.write_at(&pattern(19, 2), 19 * BS).unwrap();
    assert_eq!(read(&d, 19), pattern(19, 2));
    assert_eq!(backend_block(&r, 19), pattern(19, 2));
}

#[test]
fn write_back_keeps_dirty_blocks_on_the_device_across_reopen_until_cleaned() {
    let r = rig();
    let d = open(&r, 9, DeviceWriteMode::Back);
    for b in 0..4 {
        d.write_at(&pattern(b, 1), b * BS).unwrap();
        d.write_at(&pattern(b, 2), b * BS).unwrap();
    }
    assert_eq!(d.occupancy(), (4, 4));
    assert_eq!(backend_block(&r, 2), vec![0u8; BS as usize], "not on the backend yet");
    d.flush().unwrap();
    drop(d);
    let d = open(&r, 9, DeviceWriteMode::Back);
    assert_eq!(d.occupancy(), (4, 4), "dirty blocks survive a restart");
    for b in 0..4 {
        assert_eq!(read(&d, b), pattern(b, 2));
    }
    assert!(d.dirty_age().is_some());
    assert_eq!(d.clean(Duration::ZERO).unwrap(), 4);
    assert_eq!(d.dirty_age(), None);
    for b in 0..4 {
        assert_eq!(backend_block(&r, b), pattern(b, 2));
    }
    drop(d);
    let d = open(&r, 9, DeviceWriteMode::Back);
    assert_eq!(d.occupancy(), (4, 0), "cleaned entries stay clean");
}

#[test]
fn write_back_evicting_a_dirty_block_writes_it_to_the_backend_first() {
    let r = rig();
    let d = open(&r, 5, DeviceWriteMode::Back);
    for b in 0..12 {
        d.write_at(&pattern(b, 3), b * BS).unwrap();
    }
    assert_eq!(d.occupancy().0, 4);
    for b in 0..12 {
        assert_eq!(read(&d, b), pattern(b, 3), "block {b}");
    }
    assert_eq!(backend_block(&r, 0), pattern(0, 3), "the first blocks were evicted, and written back");
}

#[test]
fn zeroing_drops_cached_blocks_and_keeps_the_dirty_rest_of_a_block() {
    let r = rig();
    let d = open(&r, 9, DeviceWriteMode::Back);
    d.write_at(&pattern(1, 1), BS).unwrap();
    d.write_at(&pattern(2, 1), 2 * BS).unwrap();
    d.write_zeroes(BS + 100, BS, false).unwrap();
    let mut expect = [pattern(1, 1), pattern(2, 1)].concat();
    expect[100..100 + BS as usize].fill(0);
    let mut back = vec![0u8; 2 * BS as usize];
    d.read_at(&mut back, BS).unwrap();
    assert_eq!(back, expect);
}

#[test]
fn cleaner_thread_writes_dirty_blocks_back_after_the_max_age() {
    let r = rig();
    let d = Arc::new(open(&r, 9, DeviceWriteMode::Back));
    CacheDevice::spawn_cleaner(&d, Duration::from_millis(50)).unwrap();
    d.write_at(&pattern(7, 4), 7 * BS).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while backend_block(&r, 7) != pattern(7, 4) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(backend_block(&r, 7), pattern(7, 4));
    assert_eq!(d.occupancy(), (1, 0));
}

fn refusal(r: &Rig, slots: u64, identity: &str) -> String {
    open_with(r, slots, DeviceWriteMode::Through, identity).err().expect("refused").to_string()
}

#[test]
fn foreign_truncated_and_mismatched_devices_are_refused_on_one_line() {
    let r = rig();
    drop(open(&r, 9, DeviceWriteMode::Through));
    let name = r.path.display().to_string();
    let err = refusal(&r, 9, "export other on file /y");
    assert!(err.starts_with(&format!("cache device {name}: formatted for")) && err.contains("other"), "{err}");
    let err = refusal(&r, 17, "export t on file /x");
    assert!(err.contains("9 slots") && err.contains("17"), "{err}");
    let small_blocks = DeviceOptions { block_size: 512, ..options(9, DeviceWriteMode::Through, "export t on file /x") };
    let err = CacheDevice::open(Box::new(r.backend.clone()), &r.path, &small_blocks).err().unwrap().to_string();
    assert!(err.contains("block size 4096") && err.contains("512"), "{err}");
    // Truncated: the header survives, the slots do not.
    let f = std::fs::OpenOptions::new().write(true).open(&r.path).unwrap();
    f.set_len(HEADER_LEN + 100).unwrap();
    let err = refusal(&r, 9, "export t on file /x");
    assert!(err.contains("truncated"), "{err}");
    // Not a cache device at all.
    std::fs::write(&r.path, vec![7u8; device_size(9) as usize]).unwrap();
    let err = refusal(&r, 9, "export t on file /x");
    assert!(err.contains("not a hearth cache device") && !err.contains('\n'), "{err}");
}

fn corrupt(path: &Path, at: u64) {
    let bytes = std::fs::read(path).unwrap();
    let mut b = bytes;
    b[at as usize] ^= 0xff;
    std::fs::write(path, b).unwrap();
}

#[test]
fn damaged_clean_slots_are_dropped_at_open_and_an_unreadable_entry_is_refused_unless_discarded() {
    let r = rig();
    fill_backend(&r);
    let d = open(&r, 9, DeviceWriteMode::Through);
    for b in 0..8 {
        read(&d, b);
    }
    let layout = d.layout;
    let slot_of_3 = d.lock().slot_of[&3];
    let slot_of_5 = d.lock().slot_of[&5];
    drop(d);
    corrupt(&r.path, layout.slot_offset(slot_of_3) + 17); // data of a clean copy: the backend has it
    let d = open(&r, 9, DeviceWriteMode::Through);
    assert_eq!(d.stats.dropped_at_open.load(Ordering::Relaxed), 1);
    assert_eq!(d.occupancy().0, 7);
    drop(d);
    corrupt(&r.path, layout.entry_offset(slot_of_5) + 2); // an entry: was it dirty? Nobody can tell
    let err = refusal(&r, 9, "export t on file /x");
    assert!(
        err.contains("1 slot table entries are unreadable") && err.contains("--cache-device-discard-damaged"),
        "{err}"
    );
    let discard =
        DeviceOptions { discard_damaged: true, ..options(9, DeviceWriteMode::Through, "export t on file /x") };
    let d = CacheDevice::open(Box::new(r.backend.clone()), &r.path, &discard).unwrap();
    assert_eq!(d.stats.dropped_at_open.load(Ordering::Relaxed), 1);
    assert_eq!(d.occupancy().0, 6);
    for b in 0..8 {
        assert_eq!(read(&d, b), pattern(b, 0), "block {b}");
    }
}

#[test]
fn a_copy_on_write_cut_before_the_old_entry_is_cleared_recovers_the_newer_write() {
    let r = rig();
    let d = open(&r, 9, DeviceWriteMode::Back);
    d.write_at(&pattern(4, 1), 4 * BS).unwrap();
    let old_slot = d.lock().slot_of[&4];
    let old_entry = std::fs::read(&r.path).unwrap()
        [d.layout.entry_offset(old_slot) as usize..d.layout.entry_offset(old_slot) as usize + ENTRY_LEN]
        .to_vec();
    d.write_at(&pattern(4, 2), 4 * BS).unwrap();
    let layout = d.layout;
    drop(d);
    // Put the old entry back, as if the process died before clearing it.
    let f = std::fs::OpenOptions::new().write(true).open(&r.path).unwrap();
    f.write_all_at(&old_entry, layout.entry_offset(old_slot)).unwrap();
    assert!(matches!(Entry::decode(&old_entry), layout::Decoded::Valid(e) if e.dirty));
    let d = open(&r, 9, DeviceWriteMode::Back);
    assert_eq!(d.occupancy(), (1, 1));
    assert_eq!(read(&d, 4), pattern(4, 2));
    assert_eq!(d.stats.dropped_at_open.load(Ordering::Relaxed), 0, "a superseded copy is not damage");
}

/// Threads on disjoint blocks write and read back through a small device
/// (constant eviction); each must always read its own latest write.
#[test]
fn concurrent_readers_and_writers_always_read_their_latest_write() {
    for mode in [DeviceWriteMode::Through, DeviceWriteMode::Back] {
        let r = rig();
        let d = Arc::new(open(&r, 17, mode));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let d = d.clone();
                std::thread::spawn(move || {
                    let mut version = vec![0u8; EXPORT_BLOCKS as usize];
                    let mut x = t + 1;
                    for _ in 0..3000 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let block = (x % (EXPORT_BLOCKS / 4)) * 4 + t;
                        if x % 3 == 0 {
                            version[block as usize] = version[block as usize].wrapping_add(1);
                            d.write_at(&pattern(block, version[block as usize]), block * BS).unwrap();
                        } else {
                            let expect = if version[block as usize] == 0 {
                                vec![0u8; BS as usize]
                            } else {
                                pattern(block, version[block as usize])
                            };
                            assert_eq!(read(&d, block), expect, "{mode:?} thread {t} block {block}");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(d.stats.hits.load(Ordering::Relaxed) > 0);
    }
}

/// Issue 41, scenario 1: a dirty block chosen for eviction whose write-back
/// fails (ENOSPC on the backend) used to leave the slot map at once, so its
/// reads returned the backend's older data. It now stays on the device,
/// served from it, and reaches the backend once writes work again.
#[test]
fn a_dirty_block_whose_write_back_fails_stays_on_the_device_and_is_served_from_it() {
    use crate::backend::testing::TestBackend;
    let r = rig();
    let backend = TestBackend::over(r.backend.clone());
    let switches = backend.switches.clone();
    let d = CacheDevice::open(Box::new(backend), &r.path, &options(5, DeviceWriteMode::Back, "export t on file /x"))
        .unwrap();
    for b in 0..4 {
        d.write_at(&pattern(b, 1), b * BS).unwrap();
    }
    d.flush().unwrap();
    switches.fail_writes.store(true, Ordering::SeqCst);
    // Reads of new blocks evict the dirty ones; their write-backs fail.
    for b in 10..14 {
        assert_eq!(read(&d, b), vec![0u8; BS as usize]);
    }
    assert!(d.stats.write_back_failures.load(Ordering::Relaxed) > 0);
    for b in 0..4 {
        assert_eq!(read(&d, b), pattern(b, 1), "block {b}: the flushed write, not the backend's older data");
    }
    assert!(d.trouble().0 > 0, "evicted dirty blocks are stranded, not dropped");
    drop(d);
    // A restart (the stranded blocks are still dirty entries) serves them too.
    let backend = TestBackend::over(r.backend.clone());
    backend.switches.fail_writes.store(true, Ordering::SeqCst);
    let switches = backend.switches.clone();
    let d = CacheDevice::open(Box::new(backend), &r.path, &options(5, DeviceWriteMode::Back, "export t on file /x"))
        .unwrap();
    for b in 0..4 {
        assert_eq!(read(&d, b), pattern(b, 1), "block {b} after a restart");
    }
    switches.fail_writes.store(false, Ordering::SeqCst);
    d.clean(Duration::ZERO).unwrap();
    for b in 0..4 {
        assert_eq!(backend_block(&r, b), pattern(b, 1), "block {b} reached the backend once it took writes");
    }
}

/// Issue 41, scenario 2: a data write the device refuses used to keep the
/// slot it took, until no slot was left. Every refused write now gives its
/// slot back, reads are served from the backend meanwhile, and the device
/// is used again once it takes writes.
#[test]
fn a_device_that_refuses_writes_is_passed_by_and_used_again_when_it_recovers() {
    use super::harness::{run, Fault};
    // Every single refused device or backend write, sync or flush, with
    // ENOSPC: no read ever fails or returns other data (checked inside).
    for at in 0..60 {
        let faulted = run(DeviceWriteMode::Through, 7, 60, Some(Fault { at, errno: libc::ENOSPC }));
        assert!(faulted.violations.is_empty(), "fault {at}: {:?}", faulted.violations);
    }
    let r = rig();
    fill_backend(&r);
    let d = open(&r, 9, DeviceWriteMode::Through);
    for b in 0..40 {
        assert_eq!(read(&d, b), pattern(b, 0));
    }
    assert_eq!(d.occupancy().0, 8, "no slot was lost on the way");
}

/// Issue 41, scenario 4: restarting without the cache device while it held
/// dirty data used to serve the backend's stale data with no word. The
/// backend file is marked while the device holds its dirty data: a start
/// without the device is refused, saying which device and how many blocks;
/// the operator's override marks the device's contents out of date, and the
/// device drops them (rather than serve them over newer data) when next
/// attached.
#[test]
fn a_backend_a_device_holds_dirty_data_for_is_refused_without_it_and_the_override_is_remembered() {
    use super::marker::{open_without_device, BackendMark, Mark};
    let r = rig();
    let disk = r._dir.path().join("disk.img");
    std::fs::write(&disk, b"stands for the backend").unwrap();
    let marked =
        DeviceOptions { backend_file: Some(&disk), ..options(9, DeviceWriteMode::Back, "export t on file /x") };
    let d = CacheDevice::open(Box::new(r.backend.clone()), &r.path, &marked).unwrap();
    let device = std::fs::canonicalize(&r.path).unwrap().display().to_string();
    assert_eq!(BackendMark::on(&disk).read().unwrap(), Mark::Clean(device.clone()));
    d.write_at(&pattern(1, 1), BS).unwrap();
    assert_eq!(BackendMark::on(&disk).read().unwrap(), Mark::Dirty(device.clone()), "marked before the write returned");
    d.flush().unwrap();
    drop(d); // a crash: nothing cleaned
    let err = open_without_device(&disk, false).unwrap_err();
    assert!(
        err.contains(&device)
            && err.contains("(1 dirty blocks at its last flush)")
            && err.contains("--ignore-dirty-cache-device"),
        "{err}"
    );
    open_without_device(&disk, true).unwrap();
    assert_eq!(BackendMark::on(&disk).read().unwrap(), Mark::Discarded(device.clone()));
    // Served without the device meanwhile: its copy of block 1 is out of date.
    r.backend.write_at(&pattern(1, 7), BS).unwrap();
    let d = CacheDevice::open(Box::new(r.backend.clone()), &r.path, &marked).unwrap();
    assert_eq!(d.occupancy(), (0, 0), "dropped at attach");
    assert_eq!(read(&d, 1), pattern(1, 7));
    assert_eq!(BackendMark::on(&disk).read().unwrap(), Mark::Clean(device.clone()));
    // A clean device is simply let go: the next attach drops what it holds, since the backend may have changed.
    d.clean(Duration::ZERO).unwrap();
    drop(d);
    open_without_device(&disk, false).unwrap();
    assert_eq!(BackendMark::on(&disk).read().unwrap(), Mark::Discarded(device));
}

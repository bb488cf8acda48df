//! Issue 41's scenarios 2, 3 and 5, each failing on the build before it
//! (0211b28): a full device file system, the order of a dirty eviction
//! against a power cut, and corruption where it matters.

use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::harness::record::{crash_image, Log, Recorded, Target};
use super::harness::{device_len, identify, initial_backend, options, pattern, Fault, Run, BS};
use super::*;

fn read_id(d: &CacheDevice, block: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; BS as usize];
    d.read_at(&mut buf, block * BS)?;
    Ok(identify(block, &buf))
}

/// Scenario 2: while the device's file system is full, reads of uncached
/// blocks used to fail although the backend was healthy, and once space
/// returned every slot a failed write had taken stayed lost ("no free
/// slot"). Now the device is passed by while it refuses, and used again
/// after.
#[test]
fn a_full_device_is_passed_by_and_used_again_once_it_has_room() {
    for mode in [DeviceWriteMode::Through, DeviceWriteMode::Back] {
        let log = Log::new(None);
        let storage = Arc::new(Recorded::new(Run::formatted(mode), &log, Target::Device));
        let backend = Arc::new(Recorded::new(initial_backend(), &log, Target::Backend));
        let d = CacheDevice::open_on(
            Box::new(backend),
            Box::new(storage.clone()),
            device_len(),
            "full".as_ref(),
            &options(mode),
        )
        .unwrap();
        storage.refusing.store(true, Ordering::SeqCst);
        for block in 0..20 {
            assert_eq!(read_id(&d, block).unwrap(), Some(0), "{mode:?}: block {block} from the backend");
        }
        d.write_at(&pattern(3, 5), 3 * BS).unwrap();
        assert_eq!(read_id(&d, 3).unwrap(), Some(5), "{mode:?}: written through to the backend");
        assert!(d.stats.device_write_failures.load(Ordering::Relaxed) > 0);
        storage.refusing.store(false, Ordering::SeqCst);
        for block in 0..6 {
            read_id(&d, block).unwrap();
        }
        let hits = d.stats.hits.load(Ordering::Relaxed);
        for block in 0..6 {
            assert_eq!(read_id(&d, block).unwrap(), Some(if block == 3 { 5 } else { 0 }));
        }
        assert_eq!(d.stats.hits.load(Ordering::Relaxed), hits + 6, "{mode:?}: cached again");
        d.write_at(&pattern(4, 6), 4 * BS).unwrap();
        assert_eq!(read_id(&d, 4).unwrap(), Some(6));
    }
}

/// Scenario 3: a dirty eviction used to write the backend and drop the
/// device copy without flushing the backend: a write-caching upstream that
/// lost power with it lost flushed blocks. Now the device copy goes only
/// after a backend flush.
#[test]
fn a_dirty_eviction_flushes_the_backend_before_the_device_copy_goes() {
    let mode = DeviceWriteMode::Back;
    let formatted = Run::formatted(mode);
    let log = Log::new(None);
    let storage = Arc::new(Recorded::new(formatted.clone(), &log, Target::Device));
    let backend = Arc::new(Recorded::new(initial_backend(), &log, Target::Backend));
    let d = CacheDevice::open_on(Box::new(backend), Box::new(storage), device_len(), "order".as_ref(), &options(mode))
        .unwrap();
    for block in 0..4 {
        d.write_at(&pattern(block, 100 + block), block * BS).unwrap();
    }
    d.flush().unwrap();
    for block in 10..30 {
        read_id(&d, block).unwrap(); // evicts the dirty blocks
    }
    assert!(d.stats.cleaned.load(Ordering::Relaxed) >= 4);
    drop(d);
    // Power lost on both: the device keeps what the page cache had (kill -9 order), the
    // upstream only what it was asked to flush.
    let ops = log.lock().unwrap().ops.clone();
    let device = crash_image(&formatted, &ops, ops.len(), Target::Device, &|_| true);
    let backend = crash_image(&initial_backend(), &ops, ops.len(), Target::Backend, &|_| false);
    let quiet = Log::new(None);
    let d = CacheDevice::open_on(
        Box::new(Arc::new(Recorded::new(backend, &quiet, Target::Backend))),
        Box::new(Recorded::new(device, &quiet, Target::Device)),
        device_len(),
        "after".as_ref(),
        &options(mode),
    )
    .unwrap();
    for block in 0..4 {
        assert_eq!(read_id(&d, block).unwrap(), Some(100 + block), "block {block}: flushed, then evicted");
    }
}

struct FileRig {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    backend: Arc<MemoryBackend>,
}

fn file_rig() -> FileRig {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(MemoryBackend::new(32 * BS));
    for block in 0..32 {
        backend.write_at(&pattern(block, 0), block * BS).unwrap();
    }
    FileRig { path: dir.path().join("dev"), _dir: dir, backend }
}

fn open_file(r: &FileRig, mode: DeviceWriteMode) -> Result<CacheDevice, CacheDeviceError> {
    CacheDevice::open(Box::new(r.backend.clone()), &r.path, &options(mode))
}

use crate::backend::MemoryBackend;

fn flip(path: &std::path::Path, at: u64) {
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut byte = [0u8];
    f.read_exact_at(&mut byte, at).unwrap();
    f.write_all_at(&[byte[0] ^ 0x20], at).unwrap();
}

/// Scenario 5a: a flushed dirty copy found damaged at start used to roll
/// back silently to the backend's older data. Its reads now fail until the
/// block is written whole.
#[test]
fn a_damaged_flushed_dirty_copy_fails_its_reads_instead_of_rolling_back() {
    let r = file_rig();
    let d = open_file(&r, DeviceWriteMode::Back).unwrap();
    d.write_at(&pattern(2, 9), 2 * BS).unwrap();
    d.flush().unwrap();
    let at = d.layout.slot_offset(d.lock().slot_of[&2]) + 40;
    drop(d);
    flip(&r.path, at);
    let d = open_file(&r, DeviceWriteMode::Back).unwrap();
    let err = read_id(&d, 2).unwrap_err().to_string();
    assert!(err.contains("block 2") && err.contains("damaged"), "{err}");
    assert_eq!(d.trouble().1, 1);
    assert_eq!(read_id(&d, 3).unwrap(), Some(0), "other blocks are served");
    d.write_at(&pattern(2, 10), 2 * BS).unwrap();
    assert_eq!(read_id(&d, 2).unwrap(), Some(10), "a whole write replaces it");
    drop(d);
    let d = open_file(&r, DeviceWriteMode::Back).unwrap();
    assert_eq!(read_id(&d, 2).unwrap(), Some(10));
}

/// Scenario 5b: a zeroed slot table used to revert every dirty block with no
/// warning. The start is now refused, saying how many dirty blocks the
/// device held at its last flush.
#[test]
fn a_zeroed_slot_table_refuses_the_start_naming_the_dirty_blocks() {
    let r = file_rig();
    let d = open_file(&r, DeviceWriteMode::Back).unwrap();
    for block in 0..3 {
        d.write_at(&pattern(block, 1), block * BS).unwrap();
    }
    d.flush().unwrap();
    let table = d.layout.entry_offset(0)..d.layout.data_start;
    drop(d);
    let f = std::fs::OpenOptions::new().write(true).open(&r.path).unwrap();
    f.write_all_at(&vec![0u8; (table.end - table.start) as usize], table.start).unwrap();
    let err = open_file(&r, DeviceWriteMode::Back).err().expect("refused").to_string();
    assert!(err.contains("empty but held 3 dirty blocks") && err.contains("--cache-device-discard-damaged"), "{err}");
}

/// Scenario 5c: a byte flipped in a slot while the server runs used to be
/// served as data (hits were not checked). A damaged clean copy is now read
/// from the backend instead, and a damaged dirty one fails.
#[test]
fn a_byte_flipped_under_a_running_device_is_never_served() {
    let r = file_rig();
    let d = open_file(&r, DeviceWriteMode::Back).unwrap();
    assert_eq!(read_id(&d, 5).unwrap(), Some(0)); // cached clean
    d.write_at(&pattern(6, 3), 6 * BS).unwrap(); // dirty
    let slot = |b: u64| d.layout.slot_offset(d.lock().slot_of[&b]);
    flip(&r.path, slot(5) + 100);
    flip(&r.path, slot(6) + 100);
    assert_eq!(read_id(&d, 5).unwrap(), Some(0), "the backend's copy");
    assert!(read_id(&d, 6).is_err(), "the only copy is damaged: an error, not other data");
    assert_eq!(d.stats.checksum_failures.load(Ordering::Relaxed), 2);
    assert_eq!(read_id(&d, 5).unwrap(), Some(0), "cached again, correctly");
}

/// A cleaning batch whose second backend write fails leaves the first block
/// dirty too: it reached the backend but no flush made it durable there, so
/// calling it clean (and later dropping its device copy) could lose it.
#[test]
fn a_write_back_batch_that_fails_midway_leaves_every_block_dirty() {
    let mode = DeviceWriteMode::Back;
    let dirty_after_clean = |fault: Option<Fault>| {
        let log = Log::new(fault);
        let storage = Recorded::new(Run::formatted(mode), &log, Target::Device);
        let backend = Arc::new(Recorded::new(initial_backend(), &log, Target::Backend));
        let d =
            CacheDevice::open_on(Box::new(backend), Box::new(storage), device_len(), "batch".as_ref(), &options(mode))
                .unwrap();
        for block in 0..3 {
            d.write_at(&pattern(block, 1), block * BS).unwrap();
        }
        let cleaning_starts_at = log.lock().unwrap().tried();
        let cleaned = d.clean(Duration::ZERO);
        (cleaning_starts_at, cleaned.is_ok(), d.occupancy().1)
    };
    let (first_write_back, cleaned, dirty) = dirty_after_clean(None);
    assert!(cleaned && dirty == 0, "without a fault all three are cleaned");
    let second_write_back = Fault { at: first_write_back + 1, errno: libc::EIO };
    let (_, cleaned, dirty) = dirty_after_clean(Some(second_write_back));
    assert!(!cleaned);
    assert_eq!(dirty, 3, "the block written before the failure was never flushed");
}

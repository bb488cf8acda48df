use super::*;
use crate::backend::{Backend, MemoryBackend};
use crate::cache::CacheMode;
use hearth_warmup::plan::{Plan, Source};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

const BS: u64 = 4096;

/// A memory backend of `blocks` blocks, each filled with its number + 1.
fn backend(blocks: u64) -> Arc<MemoryBackend> {
    let b = Arc::new(MemoryBackend::new(blocks * BS));
    for i in 0..blocks {
        b.write_at(&[i as u8 + 1; BS as usize], i * BS).unwrap();
    }
    b
}

fn cache(backend: &Arc<MemoryBackend>, blocks: u64) -> BlockCache {
    let policy = hearth_policy::build("lru", blocks * BS).unwrap();
    BlockCache::new(Box::new(backend.clone()), policy, BS as u32, CacheMode::Through)
}

fn settings(dir: &Path, mode: WarmupMode, budget_blocks: u64, staging: usize) -> WarmupSettings {
    WarmupSettings {
        log: dir.join("warmup.log"),
        mode,
        budget: budget_blocks * BS,
        staging,
        log_size: 1 << 20,
        preload: false,
    }
}

fn read(cache: &BlockCache, block: u64) -> Vec<u8> {
    let mut buf = vec![0u8; BS as usize];
    cache.read(block * BS, &mut buf).unwrap();
    buf
}

/// The block's bytes if the cache holds it (without a backend read).
fn cached(cache: &BlockCache, block: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    cache.read_cached(block * BS, BS as usize, &mut out).then(|| out.iter().flat_map(|s| s.iter().copied()).collect())
}

fn backend_block(backend: &MemoryBackend, block: u64) -> Vec<u8> {
    backend.snapshot()[(block * BS) as usize..((block + 1) * BS) as usize].to_vec()
}

/// Restarts on `s`: recovers the log, pre-loads a fresh cache, starts the monitor.
fn restart(s: &WarmupSettings, backend: &Arc<MemoryBackend>, blocks: u64) -> (BlockCache, Plan, PreloadStats) {
    let c = cache(backend, blocks);
    let log = WarmupLog::open(s, BS as u32).unwrap();
    assert_eq!(log.warning, None);
    let plan = log.plan().expect("a usable log");
    let stats = log.preload(&c, &plan, &|_| {}).unwrap();
    let monitor = log.start(stats).unwrap();
    c.set_content_log(monitor);
    (c, plan, stats)
}

#[test]
fn metadata_log_preloads_the_newest_blocks_from_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    // A 2-record staging buffer: most records reach the volume through the writer thread.
    let s = settings(dir.path(), WarmupMode::Metadata, 4, 64);
    let backend = backend(64);
    let first = cache(&backend, 16);
    let monitor = start_export("t", &s, &first, None).unwrap();
    for b in 1..=6 {
        read(&first, b);
    }
    read(&first, 2); // a hit: nothing new is loaded
    first.write(9 * BS, &[0xee; BS as usize], false).unwrap();
    assert_eq!(monitor.stats.records.load(Ordering::Relaxed), 7);
    assert!(monitor.seal());
    drop(first);

    let (second, plan, stats) = restart(&s, &backend, 16);
    let planned: Vec<u64> = plan.items.iter().map(|i| i.lba).collect();
    assert_eq!(planned, vec![9, 6, 5, 4], "newest unique blocks first, within the budget");
    assert!(plan.items.iter().all(|i| i.source == Source::Backend));
    assert_eq!((stats.blocks, stats.bytes, stats.from_log), (4, 4 * BS, 0));
    for b in [9, 6, 5, 4] {
        assert_eq!(cached(&second, b), Some(backend_block(&backend, b)), "block {b}");
    }
    assert_eq!(cached(&second, 3), None, "beyond the budget");
    assert_eq!(second.stats.hits.load(Ordering::Relaxed) + second.stats.misses.load(Ordering::Relaxed), 4);

    // The resumed log's Open record was made durable before serving: the
    // volume is no longer sealed, and what this run loads comes after it.
    let volume = std::fs::read(&s.log).unwrap();
    let rec = hearth_warmup::log::recover(&volume).unwrap();
    assert!(!rec.sealed);
    assert_eq!(rec.next_seq, 7 + 2, "7 blocks, the seal and the Open record");
}

#[test]
fn preloaded_blocks_keep_the_logs_recency_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), WarmupMode::Metadata, 2, 1 << 10);
    let backend = backend(64);
    let first = cache(&backend, 4);
    let monitor = start_export("t", &s, &first, None).unwrap();
    for b in [1, 2, 3] {
        read(&first, b);
    }
    assert!(monitor.seal());
    // Blocks 3 then 2 are pre-loaded into an LRU cache of 4 blocks; two
    // new blocks fill it, a third evicts the least recent: block 2.
    let (second, plan, _) = restart(&s, &backend, 4);
    assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![3, 2]);
    for b in [10, 11, 12] {
        read(&second, b);
    }
    assert_eq!(cached(&second, 2), None, "the older logged block goes first");
    assert!(cached(&second, 3).is_some(), "the newest logged block stays");
}

#[test]
fn a_prefetched_block_is_logged_when_a_demand_promotes_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), WarmupMode::Metadata, 16, 1 << 10);
    let backend = backend(64);
    // 50 blocks: a 2-block prefetch partition.
    let c = cache(&backend, 50);
    let monitor = start_export("t", &s, &c, None).unwrap();
    assert!(c.start_prefetch(7));
    c.prefetch(7).unwrap();
    assert_eq!(monitor.stats.records.load(Ordering::Relaxed), 0, "not while it waits in the partition");
    assert_eq!(c.classify_demand(7), hearth_prefetch::Class::Promote);
    assert_eq!(monitor.stats.records.load(Ordering::Relaxed), 1);
    assert!(monitor.seal());
    let (_, plan, _) = restart(&s, &backend, 50);
    assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![7]);
}

#[test]
fn data_log_supplies_current_blocks_after_a_clean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), WarmupMode::Data, 16, 8 << 10);
    let backend = backend(64);
    let first = cache(&backend, 16);
    let monitor = start_export("t", &s, &first, None).unwrap();
    read(&first, 3);
    first.write(3 * BS, &[0xa1; BS as usize], false).unwrap(); // cached: logged with its new data
    read(&first, 5);
    first.write(6 * BS + 100, b"partial", false).unwrap(); // absent: logged without data
    assert!(monitor.seal());
    drop(first);

    let (second, plan, stats) = restart(&s, &backend, 16);
    let sources: Vec<(u64, bool)> = plan.items.iter().map(|i| (i.lba, i.source != Source::Backend)).collect();
    assert_eq!(sources, vec![(6, false), (5, true), (3, true)]);
    assert_eq!(plan.warning, None);
    assert_eq!((stats.blocks, stats.from_log), (3, 2));
    for b in [3, 5, 6] {
        assert_eq!(cached(&second, b), Some(backend_block(&backend, b)), "block {b}");
    }
    assert_eq!(&cached(&second, 6).unwrap()[100..107], b"partial");
}

#[test]
fn after_a_crash_logged_data_is_not_trusted_and_nothing_stale_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), WarmupMode::Data, 16, 64 << 10);
    let backend = backend(64);
    let first = cache(&backend, 16);
    let monitor = start_export("t", &s, &first, None).unwrap();
    read(&first, 5);
    read(&first, 8);
    assert!(monitor.sync(), "as at an NBD FLUSH");
    // Block 5 changes; the record is still staged when the server dies.
    first.write(5 * BS, &[0x55; BS as usize], false).unwrap();
    drop((first, monitor)); // no seal: the staging buffer is lost

    let c = cache(&backend, 16);
    let log = WarmupLog::open(&s, BS as u32).unwrap();
    let plan = log.plan().unwrap();
    assert!(plan.warning.as_deref().is_some_and(|w| w.contains("stale")), "{:?}", plan.warning);
    assert_eq!(plan.from_log(), 0);
    let stats = log.preload(&c, &plan, &|_| {}).unwrap();
    assert_eq!((stats.blocks, stats.from_log), (2, 0));
    assert_eq!(cached(&c, 5), Some(vec![0x55; BS as usize]), "the backend's newer contents, not the logged ones");
    assert_eq!(cached(&c, 8), Some(backend_block(&backend, 8)));
}

#[test]
fn logged_data_is_distrusted_when_the_backend_changed_behind_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), WarmupMode::Data, 16, 64 << 10);
    let disk = dir.path().join("disk.img");
    let file_cache = || {
        let file = crate::backend::FileBackend::sparse(&disk, 64 * BS, false).unwrap();
        let policy = hearth_policy::build("lru", 16 * BS).unwrap();
        BlockCache::new(Box::new(file), policy, BS as u32, CacheMode::Through)
    };
    let first = file_cache();
    let monitor = start_export("t", &s, &first, Some(&disk)).unwrap();
    first.write(3 * BS, &[3; BS as usize], false).unwrap();
    first.flush().unwrap();
    assert!(monitor.seal());
    drop((first, monitor));
    let from_log = |backend: Option<&Path>| {
        let mut log = WarmupLog::open(&s, BS as u32).unwrap();
        log.check_backend(backend).unwrap();
        (log.plan().unwrap().from_log(), log.warning)
    };
    assert_eq!(from_log(Some(&disk)), (1, None), "the backend is as the log left it");
    assert!(from_log(None).1.unwrap().contains("does not keep data"));

    // Another program writes the backend (after the clock has moved on).
    std::thread::sleep(std::time::Duration::from_millis(50));
    let f = OpenOptions::new().write(true).open(&disk).unwrap();
    f.write_all_at(&[9; BS as usize], 3 * BS).unwrap();
    drop(f);
    let (n, warning) = from_log(Some(&disk));
    assert_eq!(n, 0);
    assert!(warning.unwrap().contains("modified after the warmup log"));
    let c = file_cache();
    let monitor = start_export("t", &WarmupSettings { preload: true, ..s.clone() }, &c, Some(&disk)).unwrap();
    assert_eq!((monitor.preloaded.blocks, monitor.preloaded.from_log), (1, 0));
    assert_eq!(cached(&c, 3), Some(vec![9; BS as usize]), "the backend's bytes, not the log's");
}

#[test]
fn missing_corrupt_or_incompatible_logs_start_on_demand_with_a_new_log() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), WarmupMode::Metadata, 16, 1 << 10);
    let backend = backend(64);

    let log = WarmupLog::open(&s, BS as u32).unwrap();
    assert!(log.warning.as_deref().is_some_and(|w| w.contains("no warmup log") && w.contains("on-demand")));
    assert!(log.plan().is_none());
    let c = cache(&backend, 16);
    let m = log.start(PreloadStats::default()).unwrap();
    c.set_content_log(m.clone());
    read(&c, 7);
    assert!(m.seal());

    // Corrupt header: the warning names the byte.
    let mut volume = std::fs::read(&s.log).unwrap();
    volume[30] ^= 1;
    std::fs::write(&s.log, &volume).unwrap();
    let log = WarmupLog::open(&s, BS as u32).unwrap();
    let w = log.warning.clone().unwrap();
    assert!(w.contains("corrupt") && w.contains("byte 60") && w.contains("on-demand"), "{w}");
    assert!(log.plan().is_none());
    let c = cache(&backend, 16);
    let m = log.start(PreloadStats::default()).unwrap();
    c.set_content_log(m.clone());
    read(&c, 11);
    assert!(m.seal());
    let (_, plan, _) = restart(&s, &backend, 16);
    assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![11], "the new log only");

    // A log of another block size.
    let log = WarmupLog::open(&s, 8192).unwrap();
    assert!(log.warning.unwrap().contains("4096-byte blocks without data"));
}

#[test]
fn config_file_table_validates_and_errors_name_the_key() {
    let text = "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n[export.warmup]\nlog = \"/tmp/w\"\n";
    let c = crate::Config::parse(&format!("{text}mode = \"data\"\npreload = true\n")).unwrap();
    let settings = c.validate().unwrap();
    assert_eq!(settings.exports[0].warmup.as_ref().map(|w| (w.mode, w.preload)), Some((WarmupMode::Data, true)));
    let c = crate::Config::parse(&format!("{text}budget = \"many\"\n")).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.starts_with("export[0] (\"a\").warmup.budget:"), "{e}");
    let two = format!("{text}{}", text.replace("name = \"a\"", "name = \"b\""));
    let e = crate::Config::parse(&two).unwrap().validate().unwrap_err().to_string();
    assert!(e.starts_with("export[1] (\"b\").warmup.log: /tmp/w is export[0]'s warmup log too"), "{e}");
    let e = crate::Config::parse(&format!("{text}buffer = 1\n")).unwrap_err().to_string();
    assert!(e.contains("buffer"), "{e}");
}

#[test]
fn settings_default_and_name_bad_keys() {
    let c: WarmupConfig = toml::from_str("log = \"/tmp/x\"").unwrap();
    let s = c.settings(1 << 30).unwrap();
    assert_eq!((s.mode, s.staging, s.budget, s.preload), (WarmupMode::Metadata, 256 << 10, 1 << 30, false));
    let c: WarmupConfig = toml::from_str("log = \"/tmp/x\"\nmode = \"data\"\nbudget = \"8GiB\"").unwrap();
    let s = c.settings(1 << 30).unwrap();
    assert_eq!((s.staging, s.budget), (128 << 20, 1 << 30), "the budget is capped at the cache size");
    let c: WarmupConfig = toml::from_str("log = \"/tmp/x\"\nstaging = \"lots\"").unwrap();
    assert_eq!(c.settings(1 << 30).unwrap_err().key, "staging");
    assert!(toml::from_str::<WarmupConfig>("log = \"/tmp/x\"\nmode = \"blocks\"").is_err());
}

//! Random runs of a server logging, flushing, sealing and crashing (losing
//! its staging buffer and tearing its last write at a random byte), each
//! followed by recovery, a pre-load plan and a resumed writer. Whatever
//! happens, a block planned from the log must carry the newest contents ever
//! logged for it, the plan must be newest first without repeats, and a clean
//! shutdown must yield a sealed log.

use hearth_warmup::log::{recover, Layout, LogWriter, Write, HEADER_LEN};
use hearth_warmup::plan::{plan_preload, Source};
use proptest::prelude::*;

const BLOCK: usize = 512;

#[derive(Clone, Debug)]
enum Op {
    Log(u64),
    Flush,
    /// Clean shutdown and restart.
    Seal,
    /// Crash: staged records are lost and the newest flush is cut at this fraction.
    Crash(f64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..6).prop_map(Op::Log),
        2 => Just(Op::Flush),
        1 => Just(Op::Seal),
        1 => (0.0f64..1.0).prop_map(Op::Crash),
    ]
}

fn apply(volume: &mut [u8], writes: &[Write]) {
    for w in writes {
        volume[w.offset as usize..][..w.bytes.len()].copy_from_slice(&w.bytes);
    }
}

/// Contents of version `v` of a block.
fn contents(lba: u64, v: u64) -> Vec<u8> {
    let mut d = vec![0u8; BLOCK];
    d[..8].copy_from_slice(&lba.to_le_bytes());
    d[8..16].copy_from_slice(&v.to_le_bytes());
    d
}

fn check_plan(volume: &[u8], newest: &[u64; 6], clean: bool) -> Result<(), TestCaseError> {
    let rec = recover(volume).map_err(|e| TestCaseError::fail(e.to_string()))?;
    if clean {
        prop_assert!(rec.sealed, "a clean shutdown must leave a sealed log");
    }
    let seqs: Vec<u64> = rec.blocks.iter().map(|b| b.seq).collect();
    prop_assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let plan = plan_preload(&rec, 100);
    let mut seen = std::collections::HashSet::new();
    for item in &plan.items {
        prop_assert!(seen.insert(item.lba), "block {} planned twice", item.lba);
        if let Source::Log { offset, len } = item.source {
            let data = &volume[offset as usize..][..len as usize];
            let version = u64::from_le_bytes(data[8..16].try_into().unwrap());
            prop_assert_eq!(version, newest[item.lba as usize], "stale data for block {}", item.lba);
            prop_assert_eq!(data, &contents(item.lba, version)[..]);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn planned_log_data_is_never_stale(slots in 2u64..9, ops in prop::collection::vec(op(), 1..60)) {
        let layout = Layout::for_volume(HEADER_LEN + slots * 1024, BLOCK as u32, true, 77).unwrap();
        let mut volume = vec![0u8; layout.volume_bytes() as usize];
        apply(&mut volume, &[Write { offset: 0, bytes: layout.encode_header() }]);
        let mut writer = LogWriter::create(layout, 3 * layout.slot_size as usize);
        let mut version = 0u64;
        // Newest version ever logged per block, staged or not.
        let mut newest = [0u64; 6];
        for op in ops {
            match op {
                Op::Log(lba) => {
                    version += 1;
                    let data = contents(lba, version);
                    if writer.log_block(lba, Some(&data)).is_err() {
                        apply(&mut volume, &writer.flush());
                        writer.log_block(lba, Some(&data)).unwrap();
                    }
                    newest[lba as usize] = version;
                }
                Op::Flush => apply(&mut volume, &writer.flush()),
                Op::Seal => {
                    apply(&mut volume, &writer.seal());
                    check_plan(&volume, &newest, true)?;
                    let (w, open) = LogWriter::resume(&recover(&volume).unwrap(), 3 * layout.slot_size as usize);
                    apply(&mut volume, &open);
                    writer = w;
                }
                Op::Crash(cut) => {
                    let mut writes = writer.flush();
                    if let Some(last) = writes.last_mut() {
                        last.bytes.truncate((last.bytes.len() as f64 * cut) as usize);
                    }
                    apply(&mut volume, &writes);
                    check_plan(&volume, &newest, false)?;
                    let (w, open) = LogWriter::resume(&recover(&volume).unwrap(), 3 * layout.slot_size as usize);
                    apply(&mut volume, &open);
                    writer = w;
                }
            }
        }
    }
}

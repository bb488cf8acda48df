//! The pre-load plan: which blocks to load into a new or restarted cache,
//! in which order, and from where.
//!
//! Rules: the newest unique blocks the log names, newest first, up to a
//! budget; a block logged twice counts once, at its newest record. Data comes
//! from the log only if that record carries data the log can vouch for
//! ([`LoggedBlock::data_trusted`](crate::log::LoggedBlock)); every other block
//! is read from the backend, so the cache never receives stale contents.

use hearth_core::key_map;

use crate::log::{Recovered, RECORD_HEADER};

/// Where a pre-loaded block's contents come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Read `len` bytes at `offset` on the logging volume.
    Log { offset: u64, len: u32 },
    /// Read the block's current contents from the backend.
    Backend,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreloadItem {
    pub lba: u64,
    pub source: Source,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Newest first.
    pub items: Vec<PreloadItem>,
    /// Why logged data is not used, when the log has data but is not sealed.
    pub warning: Option<String>,
}

impl Plan {
    pub fn from_log(&self) -> usize {
        self.items.iter().filter(|i| matches!(i.source, Source::Log { .. })).count()
    }
}

/// Plans a pre-load of at most `budget_blocks` blocks from a recovered log.
pub fn plan_preload(log: &Recovered, budget_blocks: u64) -> Plan {
    let distrusted = log.blocks.iter().any(|b| b.has_data && !b.data_trusted);
    let warning = distrusted.then(|| {
        if log.sealed {
            "warmup log data from before the last crash may be stale: those blocks are read from the backend"
        } else {
            "warmup log was not closed cleanly (torn or missing records): its data may be stale, so every block is read from the backend"
        }
        .to_string()
    });
    let mut seen = key_map::<()>(log.blocks.len().min(budget_blocks as usize));
    let mut items = Vec::new();
    // Blocks are oldest first; walk them newest first.
    for b in log.blocks.iter().rev() {
        if items.len() as u64 >= budget_blocks {
            break;
        }
        if seen.insert(b.lba, ()).is_some() {
            continue; // an older record of a block already planned
        }
        let source = if b.data_trusted {
            Source::Log { offset: log.layout.slot_offset(b.slot) + RECORD_HEADER as u64, len: log.layout.block_size }
        } else {
            Source::Backend
        };
        items.push(PreloadItem { lba: b.lba, source });
    }
    Plan { items, warning }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{recover, Layout, LogWriter, Write, HEADER_LEN};

    fn volume_with(layout: Layout, logged: &[(u64, Option<u8>)], seal: bool) -> Vec<u8> {
        let mut volume = vec![0u8; layout.volume_bytes() as usize];
        let mut writes = vec![Write { offset: 0, bytes: layout.encode_header() }];
        let mut w = LogWriter::create(layout, 1 << 20);
        for &(lba, fill) in logged {
            let data = fill.map(|f| vec![f; layout.block_size as usize]);
            w.log_block(lba, data.as_deref()).unwrap();
        }
        writes.extend(if seal { w.seal() } else { w.flush() });
        for w in writes {
            volume[w.offset as usize..w.offset as usize + w.bytes.len()].copy_from_slice(&w.bytes);
        }
        volume
    }

    fn read(volume: &[u8], source: Source) -> &[u8] {
        let Source::Log { offset, len } = source else { panic!("not from the log: {source:?}") };
        &volume[offset as usize..offset as usize + len as usize]
    }

    #[test]
    fn a_block_logged_twice_preloads_its_newest_version_newest_first() {
        let layout = Layout::for_volume(HEADER_LEN + 16 * 1024, 512, true, 5).unwrap();
        // Block 7 is logged with version 1, then blocks 8 and 9, then block 7 with version 2.
        let volume = volume_with(layout, &[(7, Some(1)), (8, Some(8)), (9, Some(9)), (7, Some(2))], true);
        let plan = plan_preload(&recover(&volume).unwrap(), 10);
        assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![7, 9, 8]);
        assert_eq!(plan.warning, None);
        assert_eq!(read(&volume, plan.items[0].source), vec![2u8; 512]);
        assert_eq!(read(&volume, plan.items[1].source), vec![9u8; 512]);
        // The budget keeps the newest.
        let plan = plan_preload(&recover(&volume).unwrap(), 2);
        assert_eq!(plan.items.iter().map(|i| i.lba).collect::<Vec<_>>(), vec![7, 9]);
    }

    #[test]
    fn a_newer_record_without_data_sends_the_block_to_the_backend() {
        let layout = Layout::for_volume(HEADER_LEN + 16 * 1024, 512, true, 5).unwrap();
        let volume = volume_with(layout, &[(7, Some(1)), (7, None)], true);
        let plan = plan_preload(&recover(&volume).unwrap(), 10);
        assert_eq!(plan.items, vec![PreloadItem { lba: 7, source: Source::Backend }]);
    }

    #[test]
    fn an_unsealed_log_never_supplies_data() {
        let layout = Layout::for_volume(HEADER_LEN + 16 * 1024, 512, true, 5).unwrap();
        let volume = volume_with(layout, &[(1, Some(1)), (2, Some(2))], false);
        let plan = plan_preload(&recover(&volume).unwrap(), 10);
        assert_eq!(plan.from_log(), 0);
        assert_eq!(
            plan.items.iter().map(|i| (i.lba, i.source)).collect::<Vec<_>>(),
            vec![(2, Source::Backend), (1, Source::Backend)]
        );
        assert!(plan.warning.unwrap().contains("stale"));
    }
}

//! Cleaning: dirty blocks written back (and the backend flushed) once old
//! enough, by a background thread and at shutdown.

use std::io;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{CacheDevice, SlotState, CLEAN_BATCH};

impl CacheDevice {
    /// Settles dirty blocks dirtied at least `age` ago, stranded ones
    /// included ([`CacheDevice::settle`]), [`CLEAN_BATCH`] blocks per lock
    /// hold. Returns how many were settled, or the first failure (the rest
    /// stay dirty for the next try).
    pub fn clean(&self, age: Duration) -> io::Result<u64> {
        let mut cleaned = 0;
        loop {
            let mut st = self.lock();
            let batch: Vec<u64> = st
                .dirtied
                .iter()
                .filter(|(_, since)| since.elapsed() >= age)
                .filter_map(|(&slot, _)| match st.slots[slot as usize] {
                    SlotState::Valid { block, .. } => Some(block),
                    _ => None,
                })
                .take(CLEAN_BATCH)
                .collect();
            if batch.is_empty() {
                if st.dirtied.is_empty() && st.record.dirty > 0 {
                    // Nothing dirty: a table found empty after this is not a lost one.
                    let record = super::layout::StateRecord { dirty: 0, ..st.record };
                    self.write_record(&mut st, record);
                }
                if st.dirtied.is_empty() && st.marked_dirty {
                    self.mark_clean(&mut st);
                }
                return Ok(cleaned);
            }
            cleaned += self.settle(&mut st, &batch)? as u64;
        }
    }

    /// Cleans dirty blocks older than `max_age` every `max_age / 4` (10 ms
    /// to 1 s) until the device is dropped. Failures are logged by
    /// [`CacheDevice::settle`] once until write-backs work again.
    pub fn spawn_cleaner(device: &Arc<CacheDevice>, max_age: Duration) -> io::Result<()> {
        let weak: Weak<CacheDevice> = Arc::downgrade(device);
        let tick = (max_age / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        std::thread::Builder::new().name("hearth-device-cleaner".into()).spawn(move || loop {
            std::thread::sleep(tick);
            let Some(device) = weak.upgrade() else { return };
            let _ = device.clean(max_age);
        })?;
        Ok(())
    }
}

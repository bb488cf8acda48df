//! The client content tracking (CCT) table of Chen, Zhou and Li (USENIX'03).
//!
//! A storage server never hears that a client evicted a block, but every
//! read and write names the client buffer the data goes to or comes from.
//! If buffer `addr` held block `a` and a new request puts `b` there, the
//! client must have evicted `a`. The table remembers, per buffer slot, which
//! block it holds: one `u64` (8 bytes) per client cache slot, in a dense
//! vector indexed by `addr / slot_bytes`.

use hearth_core::Key;

/// Stored value for a slot that holds nothing yet (keys are stored + 1).
const EMPTY: u64 = 0;

/// Refuse to track buffer addresses that would need a table over this many
/// slots (1 GiB of table): a client sending such addresses is misbehaving.
pub const MAX_SLOTS: u64 = 1 << 27;

/// A buffer-to-block pairing the table cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UntrackableBuffer {
    #[error("client buffer address {addr:#x} is beyond the {MAX_SLOTS} slots tracked")]
    Address { addr: u64 },
    #[error("block number u64::MAX cannot be tracked")]
    LastBlock,
}

#[derive(Clone, Debug)]
pub struct Cct {
    slot_bytes: u64,
    slots: Vec<u64>,
}

/// What a recorded request taught us.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// The slot already held this block (a re-read or re-write in place).
    Same,
    /// The slot was empty.
    Filled,
    /// The slot held another block, which the client therefore evicted.
    Replaced(Key),
}

impl Cct {
    /// A table for buffers of `slot_bytes` bytes (the client's page size).
    pub fn new(slot_bytes: u64) -> Self {
        assert!(slot_bytes > 0, "slot size must be positive");
        Cct { slot_bytes, slots: Vec::new() }
    }

    /// Records that buffer `addr` now holds `key`.
    pub fn record(&mut self, addr: u64, key: Key) -> Result<Observed, UntrackableBuffer> {
        let slot = addr / self.slot_bytes;
        if slot >= MAX_SLOTS {
            return Err(UntrackableBuffer::Address { addr });
        }
        let slot = slot as usize;
        if slot >= self.slots.len() {
            self.slots.resize(slot + 1, EMPTY);
        }
        let stored = key.checked_add(1).ok_or(UntrackableBuffer::LastBlock)?;
        let old = std::mem::replace(&mut self.slots[slot], stored);
        Ok(match old {
            EMPTY => Observed::Filled,
            o if o == stored => Observed::Same,
            o => Observed::Replaced(o - 1),
        })
    }

    /// Bytes of table per tracked slot.
    pub const fn bytes_per_slot() -> usize {
        std::mem::size_of::<u64>()
    }

    /// Slots the table currently spans.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_evictions_from_reused_buffers() {
        let mut t = Cct::new(4096);
        assert_eq!(t.record(0, 10), Ok(Observed::Filled));
        assert_eq!(t.record(4096, 11), Ok(Observed::Filled));
        // Same block, same buffer: no eviction (a re-read or a write in place).
        assert_eq!(t.record(0, 10), Ok(Observed::Same));
        // An address inside the slot maps to the slot.
        assert_eq!(t.record(100, 12), Ok(Observed::Replaced(10)));
        // Block 0 is a real block, not "empty".
        assert_eq!(t.record(4096, 0), Ok(Observed::Replaced(11)));
        assert_eq!(t.record(4096, 13), Ok(Observed::Replaced(0)));
        assert_eq!(t.slots(), 2);
        assert!(Cct::bytes_per_slot() <= 16);
        assert!(t.record(u64::MAX, 1).is_err());
    }
}

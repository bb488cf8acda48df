//! The cache device's on-disk format, and recovery of its slot table.
//!
//! ```text
//! [header: 4 KiB][slot table: 32 B per slot, padded to the block size][data slots: one block each]
//! ```
//!
//! The header holds a magic, the format version, the block size, the slot
//! count, the export's size and an identity (export name and backend
//! location), so a device formatted for another export or block size is
//! refused. Each slot entry is `block, sequence, CRC-32 of the slot's data,
//! flags (valid, dirty), CRC-32 of the entry`; an all-zero entry is an empty
//! slot. CRC-32 (`crc32fast`, already the workspace's checksum) detects torn
//! and corrupt data; it is not a defence against deliberate tampering.

use std::io;

/// `HRTHCDEV`: a Hearth cache device.
pub const MAGIC: &[u8; 8] = b"HRTHCDEV";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 4096;
pub const ENTRY_LEN: usize = 32;
/// Longest identity kept in the header.
pub const MAX_IDENTITY: usize = 1024;
const HEADER_CRC_AT: usize = HEADER_LEN as usize - 4;
const FLAG_VALID: u32 = 1;
const FLAG_DIRTY: u32 = 2;

/// Where things are on a device of a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub block_size: u64,
    pub slots: u64,
    /// Byte offset of slot 0's data.
    pub data_start: u64,
}

impl Layout {
    /// The most slots a device of `device_size` bytes holds, `None` if fewer than two
    /// (one block and the spare a copy-on-write needs).
    pub fn for_size(device_size: u64, block_size: u64) -> Option<Layout> {
        let mut slots = device_size.saturating_sub(HEADER_LEN) / (block_size + ENTRY_LEN as u64);
        loop {
            let layout = Layout::with_slots(slots, block_size);
            if slots < 2 {
                return None;
            }
            if layout.total_len() <= device_size {
                return Some(layout);
            }
            slots -= 1;
        }
    }

    pub fn with_slots(slots: u64, block_size: u64) -> Layout {
        let table_end = HEADER_LEN + slots * ENTRY_LEN as u64;
        Layout { block_size, slots, data_start: table_end.div_ceil(block_size) * block_size }
    }

    /// Bytes the header, table and slots take.
    pub fn total_len(&self) -> u64 {
        self.data_start + self.slots * self.block_size
    }

    pub fn entry_offset(&self, slot: u64) -> u64 {
        HEADER_LEN + slot * ENTRY_LEN as u64
    }

    pub fn slot_offset(&self, slot: u64) -> u64 {
        self.data_start + slot * self.block_size
    }
}

/// What the header says the device was formatted for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub block_size: u32,
    pub slots: u64,
    pub export_size: u64,
    pub identity: String,
}

impl Header {
    pub fn encode(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN as usize];
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.block_size.to_le_bytes());
        h[16..24].copy_from_slice(&self.slots.to_le_bytes());
        h[24..32].copy_from_slice(&self.export_size.to_le_bytes());
        let id = &self.identity.as_bytes()[..self.identity.len().min(MAX_IDENTITY)];
        h[32..34].copy_from_slice(&(id.len() as u16).to_le_bytes());
        h[34..34 + id.len()].copy_from_slice(id);
        let crc = crc32fast::hash(&h[..HEADER_CRC_AT]);
        h[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// `Ok(None)` for an all-zero header (a device never formatted).
    pub fn decode(h: &[u8]) -> Result<Option<Header>, String> {
        if h.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        if &h[0..8] != MAGIC {
            return Err("not a hearth cache device (no HRTHCDEV magic); give a new or zeroed file".into());
        }
        let crc = u32::from_le_bytes(h[HEADER_CRC_AT..].try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&h[..HEADER_CRC_AT]) {
            return Err("header checksum mismatch (corrupt header)".into());
        }
        let version = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(format!("format version {version}, this build reads {VERSION}"));
        }
        let id_len = usize::from(u16::from_le_bytes(h[32..34].try_into().expect("2 bytes")));
        if id_len > MAX_IDENTITY {
            return Err(format!("identity of {id_len} bytes (corrupt header)"));
        }
        Ok(Some(Header {
            block_size: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
            slots: u64::from_le_bytes(h[16..24].try_into().expect("8 bytes")),
            export_size: u64::from_le_bytes(h[24..32].try_into().expect("8 bytes")),
            identity: String::from_utf8_lossy(&h[34..34 + id_len]).into_owned(),
        }))
    }

    /// Why a device with this header cannot serve `wanted`, if it cannot.
    pub fn mismatch(&self, wanted: &Header) -> Option<String> {
        if self.identity != wanted.identity || self.export_size != wanted.export_size {
            return Some(format!(
                "formatted for {:?} of {} bytes, not {:?} of {} bytes",
                self.identity, self.export_size, wanted.identity, wanted.export_size
            ));
        }
        if self.block_size != wanted.block_size {
            return Some(format!(
                "formatted with block size {}, the export uses {}",
                self.block_size, wanted.block_size
            ));
        }
        if self.slots != wanted.slots {
            return Some(format!(
                "formatted with {} slots, the configured size gives {} (give the size it was created with)",
                self.slots, wanted.slots
            ));
        }
        None
    }
}

/// One slot's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub block: u64,
    /// Larger for later writes; recovery keeps a block's highest.
    pub seq: u64,
    /// CRC-32 of the slot's data.
    pub crc: u32,
    /// Newer than the backend (write-back onto the device).
    pub dirty: bool,
}

/// What a slot table entry holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoded {
    Empty,
    Valid(Entry),
    /// Torn or corrupt.
    Bad,
}

impl Entry {
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut e = [0u8; ENTRY_LEN];
        e[0..8].copy_from_slice(&self.block.to_le_bytes());
        e[8..16].copy_from_slice(&self.seq.to_le_bytes());
        e[16..20].copy_from_slice(&self.crc.to_le_bytes());
        let flags = FLAG_VALID | if self.dirty { FLAG_DIRTY } else { 0 };
        e[20..24].copy_from_slice(&flags.to_le_bytes());
        let crc = crc32fast::hash(&e[..24]);
        e[24..28].copy_from_slice(&crc.to_le_bytes());
        e
    }

    pub fn decode(e: &[u8]) -> Decoded {
        if e.iter().all(|&b| b == 0) {
            return Decoded::Empty;
        }
        let crc = u32::from_le_bytes(e[24..28].try_into().expect("4 bytes"));
        let flags = u32::from_le_bytes(e[20..24].try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&e[..24]) || flags & FLAG_VALID == 0 || e[28..].iter().any(|&b| b != 0) {
            return Decoded::Bad;
        }
        Decoded::Valid(Entry {
            block: u64::from_le_bytes(e[0..8].try_into().expect("8 bytes")),
            seq: u64::from_le_bytes(e[8..16].try_into().expect("8 bytes")),
            crc: u32::from_le_bytes(e[16..20].try_into().expect("4 bytes")),
            dirty: flags & FLAG_DIRTY != 0,
        })
    }
}

/// The slot table after recovery.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// `(slot, entry)` kept, oldest sequence first (the order to replay them into a policy).
    pub kept: Vec<(u64, Entry)>,
    /// Slots whose entries must be cleared: torn or corrupt entries, data
    /// that fails its checksum, blocks beyond the export, and older copies of
    /// a block (a copy-on-write cut before it cleared the old slot).
    pub clear: Vec<u64>,
    /// How many of `clear` were damaged (not merely superseded copies).
    pub damaged: usize,
}

/// Recovers a slot table: for each block keeps the highest-sequence entry
/// whose data matches its checksum (`data_crc(slot)` reads and hashes it,
/// only for valid entries of blocks below `blocks`).
pub fn recover(entries: &[u8], blocks: u64, mut data_crc: impl FnMut(u64) -> io::Result<u32>) -> io::Result<Recovered> {
    let mut out = Recovered::default();
    let mut best: rustc_hash::FxHashMap<u64, (u64, Entry)> = Default::default();
    for (slot, raw) in entries.chunks_exact(ENTRY_LEN).enumerate() {
        let slot = slot as u64;
        let entry = match Entry::decode(raw) {
            Decoded::Empty => continue,
            Decoded::Valid(e) if e.block < blocks && data_crc(slot)? == e.crc => e,
            Decoded::Valid(_) | Decoded::Bad => {
                out.clear.push(slot);
                out.damaged += 1;
                continue;
            }
        };
        match best.get(&entry.block) {
            Some(&(_, held)) if held.seq >= entry.seq => out.clear.push(slot),
            Some(&(old_slot, _)) => {
                out.clear.push(old_slot);
                best.insert(entry.block, (slot, entry));
            }
            None => {
                best.insert(entry.block, (slot, entry));
            }
        }
    }
    out.kept = best.into_values().collect();
    out.kept.sort_by_key(|&(_, e)| e.seq);
    out.clear.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(u64, Option<Entry>)], slots: u64) -> Vec<u8> {
        let mut t = vec![0u8; slots as usize * ENTRY_LEN];
        for &(slot, e) in entries {
            let at = slot as usize * ENTRY_LEN;
            if let Some(e) = e {
                t[at..at + ENTRY_LEN].copy_from_slice(&e.encode());
            }
        }
        t
    }

    fn entry(block: u64, seq: u64, crc: u32, dirty: bool) -> Entry {
        Entry { block, seq, crc, dirty }
    }

    #[test]
    fn layout_fits_the_device_and_keeps_a_spare() {
        let l = Layout::for_size(1 << 20, 4096).unwrap();
        assert!(l.total_len() <= 1 << 20);
        assert!(Layout::with_slots(l.slots + 1, 4096).total_len() > 1 << 20, "{l:?} is not the most slots");
        assert_eq!(l.data_start % 4096, 0);
        assert!(l.slot_offset(0) >= l.entry_offset(l.slots));
        assert_eq!(Layout::for_size(HEADER_LEN + 4096 + 32, 4096), None, "one slot leaves no spare");
    }

    #[test]
    fn header_round_trips_and_names_what_differs() {
        let h = Header { block_size: 4096, slots: 100, export_size: 1 << 30, identity: "disk file /a".into() };
        let bytes = h.encode();
        assert_eq!(Header::decode(&bytes).unwrap(), Some(h.clone()));
        assert_eq!(Header::decode(&[0u8; HEADER_LEN as usize]).unwrap(), None);
        let other = Header { identity: "disk file /b".into(), ..h.clone() };
        assert!(h.mismatch(&other).unwrap().contains("/b"));
        let other = Header { block_size: 512, ..h.clone() };
        assert!(h.mismatch(&other).unwrap().contains("block size 4096"));
        let mut torn = bytes.clone();
        torn[20] ^= 1;
        assert!(Header::decode(&torn).unwrap_err().contains("checksum"));
        let mut foreign = bytes;
        foreign[0] = b'X';
        assert!(Header::decode(&foreign).unwrap_err().contains("magic"));
    }

    #[test]
    fn entries_round_trip_and_torn_ones_are_bad() {
        let e = entry(7, 9, 0xdead_beef, true);
        assert_eq!(Entry::decode(&e.encode()), Decoded::Valid(e));
        assert_eq!(Entry::decode(&[0u8; ENTRY_LEN]), Decoded::Empty);
        let mut torn = e.encode();
        torn[..16].fill(0); // half written over an empty entry
        assert_eq!(Entry::decode(&torn), Decoded::Bad);
    }

    #[test]
    fn recovery_keeps_the_highest_sequence_of_a_duplicated_block() {
        // A copy-on-write cut after the new entry and before the old one was cleared.
        let t = table(&[(0, Some(entry(5, 10, 1, true))), (3, Some(entry(5, 11, 1, true)))], 4);
        let r = recover(&t, 100, |_| Ok(1)).unwrap();
        assert_eq!(r.kept, vec![(3, entry(5, 11, 1, true))]);
        assert_eq!((r.clear, r.damaged), (vec![0], 0));
        // The same in the other slot order.
        let t = table(&[(0, Some(entry(5, 11, 1, true))), (3, Some(entry(5, 10, 1, true)))], 4);
        assert_eq!(recover(&t, 100, |_| Ok(1)).unwrap().kept, vec![(0, entry(5, 11, 1, true))]);
    }

    #[test]
    fn recovery_falls_back_to_the_older_copy_when_the_newer_data_is_torn() {
        // Slot 3's data never fully landed: its checksum fails, slot 0 still has the older write.
        let t = table(&[(0, Some(entry(5, 10, 1, true))), (3, Some(entry(5, 11, 2, true)))], 4);
        let r = recover(&t, 100, |slot| Ok(if slot == 3 { 99 } else { 1 })).unwrap();
        assert_eq!(r.kept, vec![(0, entry(5, 10, 1, true))]);
        assert_eq!((r.clear, r.damaged), (vec![3], 1));
    }

    #[test]
    fn recovery_drops_bad_entries_and_blocks_beyond_the_export_and_orders_by_sequence() {
        let mut t = table(
            &[
                (0, Some(entry(1, 30, 1, false))),
                (1, Some(entry(2, 20, 1, false))),
                (2, Some(entry(500, 5, 1, false))),
                (4, Some(entry(3, 25, 1, true))),
            ],
            6,
        );
        t[5 * ENTRY_LEN + 3] = 0x55; // garbage in an empty entry
        let r = recover(&t, 100, |_| Ok(1)).unwrap();
        assert_eq!(r.kept.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![1, 4, 0]);
        assert_eq!((r.clear, r.damaged), (vec![2, 5], 2));
    }
}

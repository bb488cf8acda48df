//! The cache device's on-disk format, and recovery of its slot table.
//!
//! ```text
//! [header: 4 KiB][slot table: 32 B per slot, padded to the block size][data slots: one block each]
//! ```
//!
//! The header's first 2 KiB are written once, at format: a magic, the format
//! version, the block size, the slot count, the export's size and an
//! identity (export name and backend identity), so a device formatted for
//! another export or block size is refused. Then two 512-byte [`StateRecord`]
//! copies, written alternately (a torn write spoils one, never both): the
//! epoch entries must carry to count, the last sequence a completed device
//! sync covered, and the dirty blocks at that sync.
//!
//! Each slot entry is `block, sequence, CRC-32 of the slot's data, flags
//! (valid, dirty), epoch, CRC-32 of the entry`; an all-zero entry is an empty
//! slot, and an entry of an older epoch is void (a fence bumps the epoch to
//! void every entry at once). Entries are 32 bytes inside one 512-byte
//! sector, so a power cut leaves each whole or unwritten. CRC-32
//! (`crc32fast`, already the workspace's checksum) detects torn and corrupt
//! data; it is not a defence against deliberate tampering.

/// `HRTHCDEV`: a Hearth cache device.
pub const MAGIC: &[u8; 8] = b"HRTHCDEV";
pub const VERSION: u32 = 2;
pub const HEADER_LEN: u64 = 4096;
pub const ENTRY_LEN: usize = 32;
/// Longest identity kept in the header.
pub const MAX_IDENTITY: usize = 1024;
/// The part written once at format, its CRC in its last 4 bytes.
const STATIC_LEN: usize = 2048;
const HEADER_CRC_AT: usize = STATIC_LEN - 4;
/// Where the two state record copies are, and their length.
pub const STATE_RECORD_AT: [u64; 2] = [STATIC_LEN as u64, STATIC_LEN as u64 + 512];
pub const STATE_RECORD_LEN: usize = 512;
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
    /// The static part and a first state record (epoch 1, nothing synced).
    pub fn encode(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN as usize];
        let first = StateRecord { counter: 1, epoch: 1, synced_seq: 0, dirty: 0 };
        let at = first.offset() as usize;
        h[at..at + STATE_RECORD_LEN].copy_from_slice(&first.encode());
        h[0..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.block_size.to_le_bytes());
        h[16..24].copy_from_slice(&self.slots.to_le_bytes());
        h[24..32].copy_from_slice(&self.export_size.to_le_bytes());
        let id = &self.identity.as_bytes()[..self.identity.len().min(MAX_IDENTITY)];
        h[32..34].copy_from_slice(&(id.len() as u16).to_le_bytes());
        h[34..34 + id.len()].copy_from_slice(id);
        let crc = crc32fast::hash(&h[..HEADER_CRC_AT]);
        h[HEADER_CRC_AT..STATIC_LEN].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// `Ok(None)` for an all-zero header (a device never formatted).
    pub fn decode(h: &[u8]) -> Result<Option<Header>, String> {
        let h = &h[..STATIC_LEN];
        if h.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        if &h[0..8] != MAGIC {
            return Err("not a hearth cache device (no HRTHCDEV magic); give a new or zeroed file".into());
        }
        let crc = u32::from_le_bytes(h[HEADER_CRC_AT..STATIC_LEN].try_into().expect("4 bytes"));
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

/// What a device sync last made durable, kept twice in the header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateRecord {
    /// Larger for later records: recovery takes the larger valid copy.
    pub counter: u64,
    /// Entries of another epoch are void.
    pub epoch: u32,
    /// Every entry of at most this sequence was on the device when a sync
    /// completed: a dirty one whose data fails its checksum is damage, not
    /// a write the crash cut.
    pub synced_seq: u64,
    /// Dirty blocks at that sync: an empty table with this above zero was
    /// zeroed or replaced, not cleaned.
    pub dirty: u64,
}

impl StateRecord {
    pub fn encode(&self) -> [u8; STATE_RECORD_LEN] {
        let mut r = [0u8; STATE_RECORD_LEN];
        r[0..8].copy_from_slice(&self.counter.to_le_bytes());
        r[8..12].copy_from_slice(&self.epoch.to_le_bytes());
        r[12..20].copy_from_slice(&self.synced_seq.to_le_bytes());
        r[20..28].copy_from_slice(&self.dirty.to_le_bytes());
        let crc = crc32fast::hash(&r[..STATE_RECORD_LEN - 4]);
        r[STATE_RECORD_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        r
    }

    pub fn decode(r: &[u8]) -> Option<StateRecord> {
        let crc = u32::from_le_bytes(r[STATE_RECORD_LEN - 4..].try_into().expect("4 bytes"));
        if r.iter().all(|&b| b == 0) || crc != crc32fast::hash(&r[..STATE_RECORD_LEN - 4]) {
            return None;
        }
        Some(StateRecord {
            counter: u64::from_le_bytes(r[0..8].try_into().expect("8 bytes")),
            epoch: u32::from_le_bytes(r[8..12].try_into().expect("4 bytes")),
            synced_seq: u64::from_le_bytes(r[12..20].try_into().expect("8 bytes")),
            dirty: u64::from_le_bytes(r[20..28].try_into().expect("8 bytes")),
        })
    }

    /// The newer valid copy of the two in `header`, `None` if both are bad.
    pub fn newest(header: &[u8]) -> Option<StateRecord> {
        STATE_RECORD_AT
            .iter()
            .filter_map(|&at| StateRecord::decode(&header[at as usize..at as usize + STATE_RECORD_LEN]))
            .max_by_key(|r| r.counter)
    }

    /// Where this record goes: the copy the previous one did not use.
    pub fn offset(&self) -> u64 {
        STATE_RECORD_AT[(self.counter % 2) as usize]
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
    /// The device's epoch when written.
    pub epoch: u32,
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
        e[24..28].copy_from_slice(&self.epoch.to_le_bytes());
        let crc = crc32fast::hash(&e[..28]);
        e[28..32].copy_from_slice(&crc.to_le_bytes());
        e
    }

    pub fn decode(e: &[u8]) -> Decoded {
        if e.iter().all(|&b| b == 0) {
            return Decoded::Empty;
        }
        let crc = u32::from_le_bytes(e[28..32].try_into().expect("4 bytes"));
        let flags = u32::from_le_bytes(e[20..24].try_into().expect("4 bytes"));
        if crc != crc32fast::hash(&e[..28]) || flags & FLAG_VALID == 0 {
            return Decoded::Bad;
        }
        Decoded::Valid(Entry {
            block: u64::from_le_bytes(e[0..8].try_into().expect("8 bytes")),
            seq: u64::from_le_bytes(e[8..16].try_into().expect("8 bytes")),
            crc: u32::from_le_bytes(e[16..20].try_into().expect("4 bytes")),
            dirty: flags & FLAG_DIRTY != 0,
            epoch: u32::from_le_bytes(e[24..28].try_into().expect("4 bytes")),
        })
    }
}

/// The slot table after recovery.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// `(slot, entry)` kept, oldest sequence first (the order to replay them into a policy).
    pub kept: Vec<(u64, Entry)>,
    /// Dirty copies a sync had made durable whose data now fails its
    /// checksum: the newest copy of their block, so reads of it fail
    /// rather than return older data.
    pub poisoned: Vec<(u64, Entry)>,
    /// Slots whose entries must be cleared: older copies of a block (a
    /// copy-on-write cut before it cleared the old slot), entries of an
    /// older epoch, and the damage counted below.
    pub clear: Vec<u64>,
    /// Clean copies whose data fails its checksum (the backend has the data).
    pub damaged_clean: usize,
    /// Dirty copies no sync had covered whose data fails its checksum: a
    /// write the crash cut, never flushed, so the older copy stands.
    pub torn: usize,
    /// Entries that cannot be read (bad checksum, or a block beyond the
    /// export): whether they held dirty data cannot be told.
    pub unreadable: Vec<u64>,
}

/// Recovers a slot table: for each block keeps the highest-sequence entry
/// of the record's epoch whose data matches its checksum or that is
/// poisoned (see [`Recovered`]). `data_crc(slot)` reads and hashes a slot's
/// data, `None` if it cannot be read.
pub fn recover(
    entries: &[u8],
    blocks: u64,
    state: &StateRecord,
    mut data_crc: impl FnMut(u64) -> Option<u32>,
) -> Recovered {
    let mut out = Recovered::default();
    // Per block: the best (slot, entry, poisoned) so far.
    let mut best: rustc_hash::FxHashMap<u64, (u64, Entry, bool)> = Default::default();
    for (slot, raw) in entries.chunks_exact(ENTRY_LEN).enumerate() {
        let slot = slot as u64;
        let entry = match Entry::decode(raw) {
            Decoded::Empty => continue,
            Decoded::Valid(e) if e.epoch != state.epoch => {
                out.clear.push(slot);
                continue;
            }
            Decoded::Valid(e) if e.block < blocks => e,
            Decoded::Valid(_) | Decoded::Bad => {
                out.unreadable.push(slot);
                continue;
            }
        };
        let poisoned = data_crc(slot) != Some(entry.crc);
        if poisoned && !entry.dirty {
            out.damaged_clean += 1;
            out.clear.push(slot);
            continue;
        }
        if poisoned && entry.seq > state.synced_seq {
            out.torn += 1;
            out.clear.push(slot);
            continue;
        }
        match best.get(&entry.block) {
            Some(&(_, held, _)) if held.seq >= entry.seq => out.clear.push(slot),
            Some(&(old_slot, _, _)) => {
                out.clear.push(old_slot);
                best.insert(entry.block, (slot, entry, poisoned));
            }
            None => {
                best.insert(entry.block, (slot, entry, poisoned));
            }
        }
    }
    for (slot, entry, poisoned) in best.into_values() {
        if poisoned { &mut out.poisoned } else { &mut out.kept }.push((slot, entry));
    }
    out.kept.sort_by_key(|&(_, e)| e.seq);
    out.poisoned.sort_by_key(|&(_, e)| e.seq);
    out.clear.sort_unstable();
    out
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
        Entry { block, seq, crc, dirty, epoch: 1 }
    }

    /// Epoch 1, every sequence up to `synced_seq` synced.
    fn state(synced_seq: u64) -> StateRecord {
        StateRecord { counter: 1, epoch: 1, synced_seq, dirty: 0 }
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
        let r = recover(&t, 100, &state(0), |_| Some(1));
        assert_eq!(r.kept, vec![(3, entry(5, 11, 1, true))]);
        assert_eq!((r.clear, r.torn), (vec![0], 0));
        // The same in the other slot order.
        let t = table(&[(0, Some(entry(5, 11, 1, true))), (3, Some(entry(5, 10, 1, true)))], 4);
        assert_eq!(recover(&t, 100, &state(0), |_| Some(1)).kept, vec![(0, entry(5, 11, 1, true))]);
    }

    #[test]
    fn a_torn_unsynced_write_falls_back_to_the_older_copy_and_a_damaged_synced_one_is_poisoned() {
        // Slot 3's data fails its checksum, slot 0 still has the older write.
        let t = table(&[(0, Some(entry(5, 10, 1, true))), (3, Some(entry(5, 11, 2, true)))], 4);
        let data = |slot| Some(if slot == 3 { 99 } else { 1 });
        // No sync covered sequence 11: the crash cut that write, the older copy stands.
        let r = recover(&t, 100, &state(10), data);
        assert_eq!(r.kept, vec![(0, entry(5, 10, 1, true))]);
        assert_eq!((r.clear, r.torn, r.poisoned), (vec![3], 1, vec![]));
        // A sync covered it: it was durable, so its damage must not roll the block back.
        let r = recover(&t, 100, &state(11), data);
        assert_eq!((r.kept, r.poisoned), (vec![], vec![(3, entry(5, 11, 2, true))]));
        assert_eq!((r.clear, r.torn), (vec![0], 0));
        // An unreadable slot is damage like a bad checksum.
        let r = recover(&t, 100, &state(11), |slot| (slot == 0).then_some(1));
        assert_eq!(r.poisoned, vec![(3, entry(5, 11, 2, true))]);
    }

    #[test]
    fn recovery_sets_aside_unreadable_entries_drops_damaged_clean_ones_and_orders_by_sequence() {
        let mut t = table(
            &[
                (0, Some(entry(1, 30, 1, false))),
                (1, Some(entry(2, 20, 1, false))),
                (2, Some(entry(500, 5, 1, false))),
                (3, Some(entry(6, 7, 9, false))),
                (4, Some(entry(3, 25, 1, true))),
                (6, Some(Entry { epoch: 0, ..entry(8, 3, 1, true) })),
            ],
            7,
        );
        t[5 * ENTRY_LEN + 3] = 0x55; // garbage in an empty entry
        let r = recover(&t, 100, &state(100), |slot| Some(if slot == 3 { 8 } else { 1 }));
        assert_eq!(r.kept.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![1, 4, 0]);
        assert_eq!(r.unreadable, vec![2, 5], "beyond the export, and garbage");
        assert_eq!((r.clear, r.damaged_clean), (vec![3, 6], 1), "a damaged clean copy, and an older epoch's entry");
    }

    #[test]
    fn state_records_alternate_and_the_newer_valid_copy_wins() {
        let mut header = Header { block_size: 4096, slots: 9, export_size: 1 << 20, identity: "x".into() }.encode();
        assert_eq!(StateRecord::newest(&header).map(|r| (r.counter, r.epoch)), Some((1, 1)));
        let second = StateRecord { counter: 2, epoch: 1, synced_seq: 40, dirty: 3 };
        let at = second.offset() as usize;
        assert_ne!(at as u64, StateRecord { counter: 1, ..second }.offset());
        header[at..at + STATE_RECORD_LEN].copy_from_slice(&second.encode());
        assert_eq!(StateRecord::newest(&header), Some(second));
        header[at + 9] ^= 1; // torn: the older copy stands
        assert_eq!(StateRecord::newest(&header).map(|r| r.counter), Some(1));
        assert!(Header::decode(&header).unwrap().is_some(), "the static part does not cover the records");
    }
}

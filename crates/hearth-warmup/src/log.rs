//! The warmup log: what a cache loaded from its backend, written
//! sequentially and circularly to a logging volume, and read back after a
//! restart. Pure encode/decode and state machines; the caller does the I/O.
//!
//! # Layout
//!
//! ```text
//! offset 0          header (HEADER_LEN bytes)
//! offset HEADER_LEN slot 0, slot 1, ... slot n-1   (slot_size bytes each)
//! ```
//!
//! Record number `seq` (0, 1, 2, ...) always lives in slot `seq % n`, so the
//! log wraps without any pointer to update, and recovery needs no scan for
//! record boundaries: each slot is checked on its own. A slot is
//!
//! ```text
//! 0  magic u32      5  has_data u8    8  seq u64    24 crc32 u32
//! 4  kind u8        6  reserved u16   16 lba u64    28 reserved u32
//! 32 block data (block_size bytes) when has_data
//! ```
//!
//! all little-endian. The CRC covers the log's random id, bytes 0..24 and the
//! data, so a torn write, a slot left over from an older log on the same
//! volume, or a record in the wrong slot is rejected.
//!
//! Metadata-only logs (LBAs) use 32-byte slots; metadata+data logs (a
//! performance snapshot) round `32 + block_size` up to 512 bytes.
//!
//! # Staleness
//!
//! A data record is only as fresh as the moment it was logged, and the newest
//! records are exactly the ones a crash loses (staging buffer, torn tail).
//! So logged data is trusted only when
//!
//! * the log is *sealed*: its newest record is a [`Kind::Seal`] written at a
//!   clean shutdown and no record before it is missing, and
//! * the record is newer than the last restart after a crash: a writer
//!   resumed on an unsealed log first writes a [`Kind::Open`] record saying
//!   so, because versions logged just before the crash may be lost and a
//!   later seal cannot vouch for them.
//!
//! A resumed writer always opens with such a record (even after a clean
//! shutdown), and the server must make it durable before it serves: from
//! then on the old seal no longer describes the volume.
//!
//! This holds only if every change to a block's contents is logged: the
//! server logs client writes too (with the new data, or without data, which
//! makes older logged data for the block stale), not only backend loads.
//!
//! Records that fail these tests still name blocks worth pre-loading; the
//! pre-load reads their current contents from the backend ([`crate::plan`]).

use std::fmt;

/// Bytes reserved for the header at the start of the volume.
pub const HEADER_LEN: u64 = 512;
const HEADER_MAGIC: &[u8; 8] = b"HRTHWLOG";
const VERSION: u32 = 1;
const RECORD_MAGIC: u32 = 0x5752_4C48; // "HLRW" in little-endian bytes
/// Bytes of a slot before the block data.
pub const RECORD_HEADER: usize = 32;

/// What a record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The cache loaded (or was written) block `lba`.
    Block = 1,
    /// Clean shutdown: every record before this one is on the volume.
    Seal = 2,
    /// A writer resumed the log; `lba` is 1 if the previous run ended
    /// without a seal (its newest records may be lost), 0 otherwise.
    Open = 3,
}

/// One decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub kind: Kind,
    pub lba: u64,
    pub data: Option<Vec<u8>>,
}

/// Geometry of a log volume, stored in its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub block_size: u32,
    /// Whether slots have room for block data.
    pub with_data: bool,
    pub slot_size: u32,
    pub slot_count: u64,
    /// Random per log; stamps every record (see the module docs).
    pub log_id: u64,
}

/// Why a log cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogError {
    /// Byte offset in the volume the problem is at.
    pub offset: u64,
    pub what: String,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "warmup log, byte {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for LogError {}

fn err(offset: u64, what: impl Into<String>) -> LogError {
    LogError { offset, what: what.into() }
}

impl Layout {
    /// The largest log that fits `volume_bytes`. Fails if not even one slot fits.
    pub fn for_volume(volume_bytes: u64, block_size: u32, with_data: bool, log_id: u64) -> Result<Layout, LogError> {
        if block_size == 0 {
            return Err(err(0, "block size must be positive"));
        }
        let slot_size = if with_data {
            (RECORD_HEADER as u64 + u64::from(block_size)).next_multiple_of(512)
        } else {
            RECORD_HEADER as u64
        };
        let slot_size = u32::try_from(slot_size)
            .map_err(|_| err(0, format!("block size {block_size} is too large for a log slot")))?;
        let slot_count = volume_bytes.saturating_sub(HEADER_LEN) / u64::from(slot_size);
        if slot_count == 0 {
            return Err(err(0, format!("a volume of {volume_bytes} bytes holds no {slot_size}-byte slot after the {HEADER_LEN}-byte header")));
        }
        Ok(Layout { block_size, with_data, slot_size, slot_count, log_id })
    }

    /// Byte offset of slot `index`.
    pub fn slot_offset(&self, index: u64) -> u64 {
        HEADER_LEN + index * u64::from(self.slot_size)
    }

    /// Bytes the log occupies on its volume.
    pub fn volume_bytes(&self) -> u64 {
        self.slot_offset(self.slot_count)
    }

    pub fn encode_header(&self) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_LEN as usize];
        h[0..8].copy_from_slice(HEADER_MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.block_size.to_le_bytes());
        h[16..20].copy_from_slice(&self.slot_size.to_le_bytes());
        h[20..24].copy_from_slice(&u32::from(self.with_data).to_le_bytes());
        h[24..32].copy_from_slice(&self.slot_count.to_le_bytes());
        h[32..40].copy_from_slice(&self.log_id.to_le_bytes());
        let crc = crc32fast::hash(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Reads a header written by [`Layout::encode_header`]; every error names the field and its offset.
    pub fn decode_header(h: &[u8]) -> Result<Layout, LogError> {
        if h.len() < 64 {
            return Err(err(h.len() as u64, format!("header is {} bytes, needs 64", h.len())));
        }
        if &h[0..8] != HEADER_MAGIC {
            return Err(err(0, "no warmup log here (bad magic)"));
        }
        let u32_at = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
        if crc32fast::hash(&h[..60]) != u32_at(60) {
            return Err(err(60, "header checksum mismatch (corrupt header)"));
        }
        if u32_at(8) != VERSION {
            return Err(err(8, format!("log version {} is not supported (expected {VERSION})", u32_at(8))));
        }
        let with_data = match u32_at(20) {
            0 => false,
            1 => true,
            f => return Err(err(20, format!("unknown flags {f:#x}"))),
        };
        let layout = Layout::for_volume(u64::MAX, u32_at(12), with_data, u64_at(32)).map_err(|e| err(12, e.what))?;
        if u32_at(16) != layout.slot_size {
            return Err(err(
                16,
                format!(
                    "slot size {} does not match block size {} (expected {})",
                    u32_at(16),
                    u32_at(12),
                    layout.slot_size
                ),
            ));
        }
        if u64_at(24) == 0 {
            return Err(err(24, "slot count is 0"));
        }
        Ok(Layout { slot_count: u64_at(24), ..layout })
    }

    /// Encodes `record` into one slot. Data must be exactly one block and
    /// only in a log with data slots.
    pub fn encode_record(&self, record: &Record) -> Vec<u8> {
        let mut slot = vec![0u8; self.slot_size as usize];
        slot[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        slot[4] = record.kind as u8;
        slot[8..16].copy_from_slice(&record.seq.to_le_bytes());
        slot[16..24].copy_from_slice(&record.lba.to_le_bytes());
        let mut data_len = 0;
        if let Some(data) = &record.data {
            assert!(self.with_data, "this log has no room for block data");
            assert_eq!(data.len(), self.block_size as usize, "logged data must be one block");
            slot[5] = 1;
            slot[RECORD_HEADER..RECORD_HEADER + data.len()].copy_from_slice(data);
            data_len = data.len();
        }
        let crc = self.record_crc(&slot[..24], &slot[RECORD_HEADER..RECORD_HEADER + data_len]);
        slot[24..28].copy_from_slice(&crc.to_le_bytes());
        slot
    }

    fn record_crc(&self, head: &[u8], data: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&self.log_id.to_le_bytes());
        h.update(head);
        h.update(data);
        h.finalize()
    }

    /// Decodes the slot at `index`.
    pub fn decode_slot(&self, index: u64, slot: &[u8]) -> SlotState {
        if slot.len() < RECORD_HEADER || slot.len() < self.slot_size as usize {
            return SlotState::Corrupt("slot is cut short");
        }
        if slot[..RECORD_HEADER].iter().all(|&b| b == 0) {
            return SlotState::Empty;
        }
        if u32::from_le_bytes(slot[0..4].try_into().expect("4 bytes")) != RECORD_MAGIC {
            return SlotState::Corrupt("bad record magic");
        }
        let kind = match slot[4] {
            1 => Kind::Block,
            2 => Kind::Seal,
            3 => Kind::Open,
            _ => return SlotState::Corrupt("unknown record kind"),
        };
        let has_data = match slot[5] {
            0 => false,
            1 if self.with_data => true,
            _ => return SlotState::Corrupt("bad data flag"),
        };
        let data_len = if has_data { self.block_size as usize } else { 0 };
        let data = &slot[RECORD_HEADER..RECORD_HEADER + data_len];
        let crc = u32::from_le_bytes(slot[24..28].try_into().expect("4 bytes"));
        if self.record_crc(&slot[..24], data) != crc {
            return SlotState::Corrupt("checksum mismatch (torn or foreign write)");
        }
        let seq = u64::from_le_bytes(slot[8..16].try_into().expect("8 bytes"));
        if seq % self.slot_count != index {
            return SlotState::Corrupt("record is in the wrong slot for its sequence number");
        }
        let lba = u64::from_le_bytes(slot[16..24].try_into().expect("8 bytes"));
        SlotState::Valid(Record { seq, kind, lba, data: has_data.then(|| data.to_vec()) })
    }
}

/// What one slot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Never written.
    Empty,
    /// Written but unusable: torn, from another log, or damaged.
    Corrupt(&'static str),
    Valid(Record),
}

/// One contiguous write the caller must perform on the log volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// The staging buffer is full; flush before logging more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagingFull;

/// Appends records: they collect in an in-memory staging buffer of bounded
/// size and leave it as at most two sequential writes (one if the log did not
/// wrap), in record order.
pub struct LogWriter {
    layout: Layout,
    next_seq: u64,
    staging_limit: usize,
    staged: Vec<u8>,
    /// Sequence number of the first staged record.
    staged_from: u64,
}

impl LogWriter {
    /// A writer for a fresh log: write [`Layout::encode_header`] at offset 0
    /// first. (Slots of an older log on the volume fail the CRC: other id.)
    pub fn create(layout: Layout, staging_bytes: usize) -> LogWriter {
        let staging_limit = staging_bytes.max(layout.slot_size as usize);
        LogWriter { layout, next_seq: 0, staging_limit, staged: Vec::new(), staged_from: 0 }
    }

    /// Continues a recovered log. Returns the writer and the writes of its
    /// [`Kind::Open`] record, which must be durable before the server serves
    /// (see the module docs on staleness).
    pub fn resume(recovered: &Recovered, staging_bytes: usize) -> (LogWriter, Vec<Write>) {
        let mut w = LogWriter::create(recovered.layout, staging_bytes);
        w.next_seq = recovered.next_seq;
        w.staged_from = recovered.next_seq;
        w.stage(Kind::Open, u64::from(!recovered.sealed), None).expect("an empty staging buffer has room for one slot");
        let writes = w.flush();
        (w, writes)
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Records the cache loading `lba`, with its contents in a data log.
    pub fn log_block(&mut self, lba: u64, data: Option<&[u8]>) -> Result<(), StagingFull> {
        let data = if self.layout.with_data { data.map(<[u8]>::to_vec) } else { None };
        self.stage(Kind::Block, lba, data)
    }

    fn stage(&mut self, kind: Kind, lba: u64, data: Option<Vec<u8>>) -> Result<(), StagingFull> {
        if self.staged.len() + self.layout.slot_size as usize > self.staging_limit {
            return Err(StagingFull);
        }
        let slot = self.layout.encode_record(&Record { seq: self.next_seq, kind, lba, data });
        self.staged.extend_from_slice(&slot);
        self.next_seq += 1;
        Ok(())
    }

    /// Bytes waiting in the staging buffer.
    pub fn staged_bytes(&self) -> usize {
        self.staged.len()
    }

    /// The staged slots as `(slot index, bytes)`, oldest first, to feed a
    /// [`Recovery`] when the staging buffer survived but the log is behind.
    pub fn staged_slots(&self) -> impl Iterator<Item = (u64, &[u8])> {
        let n = self.layout.slot_count;
        self.staged.chunks(self.layout.slot_size as usize).zip(self.staged_from..).map(move |(s, seq)| (seq % n, s))
    }

    /// Empties the staging buffer into the writes that put it on the volume.
    pub fn flush(&mut self) -> Vec<Write> {
        let slot_size = self.layout.slot_size as usize;
        let mut writes: Vec<Write> = Vec::new();
        for (i, slot) in self.staged.chunks(slot_size).enumerate() {
            let index = (self.staged_from + i as u64) % self.layout.slot_count;
            let offset = self.layout.slot_offset(index);
            match writes.last_mut() {
                Some(w) if w.offset + w.bytes.len() as u64 == offset => w.bytes.extend_from_slice(slot),
                _ => writes.push(Write { offset, bytes: slot.to_vec() }),
            }
        }
        self.staged.clear();
        self.staged_from = self.next_seq;
        writes
    }

    /// Clean shutdown: stages a seal and flushes everything. The caller
    /// must make the writes durable in order (data before the seal).
    pub fn seal(&mut self) -> Vec<Write> {
        let mut writes = self.flush();
        self.stage(Kind::Seal, 0, None).expect("an empty staging buffer has room for one slot");
        writes.extend(self.flush());
        writes
    }
}

/// One block the log says the cache loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedBlock {
    pub seq: u64,
    pub lba: u64,
    /// Slot holding the record (its data is at `slot_offset(slot) + RECORD_HEADER`).
    pub slot: u64,
    pub has_data: bool,
    /// The record's data is current (see the module docs on staleness).
    pub data_trusted: bool,
}

/// What a scan of the log found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    pub layout: Layout,
    /// Valid block records, oldest first.
    pub blocks: Vec<LoggedBlock>,
    /// Newest record is a seal and no record before it is missing: logged
    /// data is current.
    pub sealed: bool,
    pub empty_slots: u64,
    pub corrupt_slots: u64,
    /// Sequence number the next record gets.
    pub next_seq: u64,
}

/// Checks slots one at a time (in any order); [`Recovery::finish`] sorts
/// out what is usable.
pub struct Recovery {
    layout: Layout,
    /// Valid record per slot: (seq, kind, lba, has_data).
    slots: Vec<Option<(u64, Kind, u64, bool)>>,
    empty: u64,
    corrupt: u64,
}

impl Recovery {
    pub fn new(layout: Layout) -> Recovery {
        Recovery { layout, slots: vec![None; layout.slot_count as usize], empty: 0, corrupt: 0 }
    }

    /// Checks slot `index`. Feeding a slot again (e.g. from a surviving
    /// staging buffer) keeps the newer valid record.
    pub fn feed(&mut self, index: u64, bytes: &[u8]) {
        match self.layout.decode_slot(index, bytes) {
            SlotState::Empty => self.empty += 1,
            SlotState::Corrupt(_) => self.corrupt += 1,
            SlotState::Valid(r) => {
                let entry = &mut self.slots[index as usize];
                if entry.is_none_or(|(seq, ..)| seq < r.seq) {
                    *entry = Some((r.seq, r.kind, r.lba, r.data.is_some()));
                }
            }
        }
    }

    pub fn finish(self) -> Recovered {
        let mut valid: Vec<(u64, Kind, u64, bool, u64)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|(seq, kind, lba, d)| (seq, kind, lba, d, i as u64)))
            .collect();
        valid.sort_unstable_by_key(|v| v.0);
        let next_seq = valid.last().map_or(0, |v| v.0 + 1);
        // Records that must all be present for the log to be complete.
        let expected = next_seq.min(self.layout.slot_count);
        let oldest_expected = next_seq - expected;
        let complete = valid.len() as u64 == expected && valid.first().is_none_or(|v| v.0 >= oldest_expected);
        let sealed = complete && valid.last().is_some_and(|v| v.1 == Kind::Seal);
        // Data at or before the newest restart after a crash may be stale.
        let crash_restart = valid.iter().rev().find(|v| v.1 == Kind::Open && v.2 == 1).map(|v| v.0);
        let blocks = valid
            .into_iter()
            .filter(|v| v.1 == Kind::Block)
            .map(|(seq, _, lba, has_data, slot)| {
                let data_trusted = has_data && sealed && crash_restart.is_none_or(|r| seq > r);
                LoggedBlock { seq, lba, slot, has_data, data_trusted }
            })
            .collect();
        Recovered {
            layout: self.layout,
            blocks,
            sealed,
            empty_slots: self.empty,
            corrupt_slots: self.corrupt,
            next_seq,
        }
    }
}

/// Recovers a whole log held in memory (tests, small logs): header, then every slot.
pub fn recover(volume: &[u8]) -> Result<Recovered, LogError> {
    let layout = Layout::decode_header(volume)?;
    if (volume.len() as u64) < layout.volume_bytes() {
        return Err(err(
            volume.len() as u64,
            format!(
                "volume ends before the log's {} slots do ({} bytes needed)",
                layout.slot_count,
                layout.volume_bytes()
            ),
        ));
    }
    let mut recovery = Recovery::new(layout);
    for i in 0..layout.slot_count {
        let o = layout.slot_offset(i) as usize;
        recovery.feed(i, &volume[o..o + layout.slot_size as usize]);
    }
    Ok(recovery.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A volume image the tests write into.
    fn apply(volume: &mut [u8], writes: &[Write]) {
        for w in writes {
            volume[w.offset as usize..w.offset as usize + w.bytes.len()].copy_from_slice(&w.bytes);
        }
    }

    fn block(fill: u8) -> Vec<u8> {
        vec![fill; 512]
    }

    #[test]
    fn header_round_trips_and_errors_name_the_field() {
        let layout = Layout::for_volume(1 << 20, 4096, true, 7).unwrap();
        assert_eq!(layout.slot_size, 4608);
        assert_eq!(Layout::decode_header(&layout.encode_header()), Ok(layout));
        let mut h = layout.encode_header();
        h[0] = b'X';
        assert_eq!(Layout::decode_header(&h).unwrap_err().offset, 0);
        let mut h = layout.encode_header();
        h[30] ^= 1;
        let e = Layout::decode_header(&h).unwrap_err();
        assert!(e.to_string().contains("byte 60") && e.what.contains("checksum"), "{e}");
        assert!(Layout::for_volume(100, 4096, false, 0).unwrap_err().what.contains("no 32-byte slot"));
    }

    #[test]
    fn records_round_trip_and_reject_damage() {
        let layout = Layout::for_volume(1 << 16, 512, true, 42).unwrap();
        let r = Record { seq: layout.slot_count + 3, kind: Kind::Block, lba: 99, data: Some(block(5)) };
        let slot = layout.encode_record(&r);
        assert_eq!(layout.decode_slot(3, &slot), SlotState::Valid(r.clone()));
        assert!(matches!(layout.decode_slot(4, &slot), SlotState::Corrupt(w) if w.contains("wrong slot")));
        let mut bad = slot.clone();
        bad[100] ^= 0xff; // a data byte
        assert!(matches!(layout.decode_slot(3, &bad), SlotState::Corrupt(w) if w.contains("checksum")));
        let other_log = Layout { log_id: 43, ..layout };
        assert!(matches!(other_log.decode_slot(3, &slot), SlotState::Corrupt(_)));
        assert_eq!(layout.decode_slot(3, &vec![0; layout.slot_size as usize]), SlotState::Empty);
    }

    #[test]
    fn writer_wraps_with_sequential_writes_and_recovery_sees_the_newest_lap() {
        // 5 metadata slots.
        let layout = Layout::for_volume(HEADER_LEN + 5 * 32, 4096, false, 1).unwrap();
        let mut volume = vec![0u8; layout.volume_bytes() as usize];
        apply(&mut volume, &[Write { offset: 0, bytes: layout.encode_header() }]);
        let mut w = LogWriter::create(layout, 4 * 32);
        for lba in 0..3 {
            w.log_block(100 + lba, None).unwrap();
        }
        apply(&mut volume, &w.flush());
        for lba in 3..7 {
            w.log_block(100 + lba, None).unwrap();
        }
        assert_eq!(w.log_block(0, None), Err(StagingFull));
        let writes = w.flush();
        // Records 3,4 go to slots 3,4; 5,6 wrap to slots 0,1: two writes.
        assert_eq!(
            writes.iter().map(|w| (w.offset, w.bytes.len())).collect::<Vec<_>>(),
            vec![(HEADER_LEN + 3 * 32, 64), (HEADER_LEN, 64)]
        );
        apply(&mut volume, &writes);
        let rec = recover(&volume).unwrap();
        assert_eq!(rec.blocks.iter().map(|b| b.lba).collect::<Vec<_>>(), vec![102, 103, 104, 105, 106]);
        assert_eq!((rec.next_seq, rec.sealed, rec.corrupt_slots), (7, false, 0));
        apply(&mut volume, &w.seal());
        let rec = recover(&volume).unwrap();
        assert!(rec.sealed);
        assert_eq!(rec.blocks.iter().map(|b| b.lba).collect::<Vec<_>>(), vec![103, 104, 105, 106]);
    }

    #[test]
    fn torn_tail_is_dropped_and_unseals_the_log() {
        let layout = Layout::for_volume(HEADER_LEN + 8 * 1024, 512, true, 9).unwrap();
        assert_eq!(layout.slot_size, 1024);
        assert_eq!(layout.slot_count, 8);
        let mut volume = vec![0u8; layout.volume_bytes() as usize];
        apply(&mut volume, &[Write { offset: 0, bytes: layout.encode_header() }]);
        let mut w = LogWriter::create(layout, 1 << 20);
        for lba in 0..4 {
            w.log_block(lba, Some(&block(lba as u8))).unwrap();
        }
        apply(&mut volume, &w.seal());
        assert!(recover(&volume).unwrap().sealed);
        // After a restart the server logs two more blocks; the second write is torn halfway.
        let (mut w, open) = LogWriter::resume(&recover(&volume).unwrap(), 1 << 20);
        apply(&mut volume, &open);
        w.log_block(10, Some(&block(10))).unwrap();
        w.log_block(11, Some(&block(11))).unwrap();
        let writes = w.flush();
        assert_eq!(writes.len(), 1);
        // The second slot's header and the start of its data land; the rest does not.
        let torn_at = layout.slot_size as usize + 200;
        let torn = Write { offset: writes[0].offset, bytes: writes[0].bytes[..torn_at].to_vec() };
        apply(&mut volume, &[torn]);
        let rec = recover(&volume).unwrap();
        assert_eq!(rec.corrupt_slots, 1);
        assert_eq!(rec.blocks.iter().map(|b| b.lba).collect::<Vec<_>>(), vec![0, 1, 2, 3, 10]);
        // The newest record is no longer the seal and one is missing: data must not be trusted.
        assert!(!rec.sealed);
        assert!(rec.blocks.iter().all(|b| b.has_data && !b.data_trusted));
        // Records 0-3, seal 4, open 5, block 10 at 6; 7 was torn.
        assert_eq!(rec.next_seq, 7);
        // The restarted server says it recovered from a crash, logs block 12 and shuts down
        // cleanly. The log is sealed again, but block 11's newer contents were lost in the
        // crash, so only what was logged after the restart is trusted.
        let (mut w, open) = LogWriter::resume(&rec, 1 << 20);
        apply(&mut volume, &open);
        w.log_block(12, Some(&block(12))).unwrap();
        apply(&mut volume, &w.seal());
        let rec = recover(&volume).unwrap();
        assert!(rec.sealed);
        let trusted: Vec<(u64, bool)> = rec.blocks.iter().map(|b| (b.lba, b.data_trusted)).collect();
        // (Open, block 12 and the seal took slots 7, 0 and 1: blocks 0 and 1 were overwritten.)
        assert_eq!(trusted, vec![(2, false), (3, false), (10, false), (12, true)]);
    }

    #[test]
    fn a_surviving_staging_buffer_adds_what_the_log_lacks() {
        let layout = Layout::for_volume(HEADER_LEN + 8 * 32, 4096, false, 3).unwrap();
        let mut volume = vec![0u8; layout.volume_bytes() as usize];
        apply(&mut volume, &[Write { offset: 0, bytes: layout.encode_header() }]);
        let mut w = LogWriter::create(layout, 1 << 10);
        w.log_block(10, None).unwrap();
        apply(&mut volume, &w.flush());
        w.log_block(11, None).unwrap(); // still staged
        let lbas = |r: Recovered| r.blocks.iter().map(|b| b.lba).collect::<Vec<_>>();
        assert_eq!(lbas(recover(&volume).unwrap()), vec![10]);
        let mut recovery = Recovery::new(layout);
        for i in 0..layout.slot_count {
            let o = layout.slot_offset(i) as usize;
            recovery.feed(i, &volume[o..o + 32]);
        }
        for (i, s) in w.staged_slots() {
            recovery.feed(i, s);
        }
        assert_eq!(lbas(recovery.finish()), vec![10, 11]);
    }
}

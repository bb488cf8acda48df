//! The recording layer under a cache device and its backend: every write,
//! sync and flush of both goes into one log, in order, so a checker can
//! build what a power cut at any point could have left on each; and any
//! one of them can be made to fail (EIO or ENOSPC).

use std::io;
use std::sync::{Arc, Mutex};

use crate::backend::Backend;
use crate::cache_device::DeviceStorage;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Device,
    Backend,
}

#[derive(Clone, Debug)]
pub enum Kind {
    Write {
        offset: u64,
        data: Vec<u8>,
    },
    /// A device sync or a backend flush: every earlier write of its target is durable.
    Barrier,
}

#[derive(Clone, Debug)]
pub struct Logged {
    pub target: Target,
    pub kind: Kind,
}

/// The k-th write or barrier (counted over both targets from 0) fails with `errno`.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub at: usize,
    pub errno: i32,
}

#[derive(Default)]
pub struct Log {
    pub ops: Vec<Logged>,
    /// Writes and barriers tried, the failed ones included.
    tried: usize,
    fault: Option<Fault>,
    pub faults_hit: usize,
}

impl Log {
    pub fn new(fault: Option<Fault>) -> Arc<Mutex<Log>> {
        Arc::new(Mutex::new(Log { fault, ..Log::default() }))
    }

    /// Logs `op` unless it is the one to fail.
    fn record(&mut self, op: Logged) -> io::Result<()> {
        let n = self.tried;
        self.tried += 1;
        if let Some(f) = self.fault.filter(|f| f.at == n) {
            self.faults_hit += 1;
            return Err(io::Error::from_raw_os_error(f.errno));
        }
        self.ops.push(op);
        Ok(())
    }

    pub fn tried(&self) -> usize {
        self.tried
    }
}

/// Bytes in memory (what the page cache shows) plus the shared log.
pub struct Recorded {
    pub bytes: Mutex<Vec<u8>>,
    /// While set, every write and barrier fails with ENOSPC (a full file system).
    pub refusing: std::sync::atomic::AtomicBool,
    log: Arc<Mutex<Log>>,
    target: Target,
}

impl Recorded {
    pub fn new(initial: Vec<u8>, log: &Arc<Mutex<Log>>, target: Target) -> Recorded {
        Recorded { bytes: Mutex::new(initial), refusing: Default::default(), log: log.clone(), target }
    }

    fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let bytes = self.bytes.lock().unwrap();
        let end = offset as usize + buf.len();
        if end > bytes.len() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        buf.copy_from_slice(&bytes[offset as usize..end]);
        Ok(())
    }

    fn refused(&self) -> io::Result<()> {
        if self.refusing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    fn write(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.refused()?;
        let op = Logged { target: self.target, kind: Kind::Write { offset, data: buf.to_vec() } };
        self.log.lock().unwrap().record(op)?;
        self.bytes.lock().unwrap()[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn barrier(&self) -> io::Result<()> {
        self.refused()?;
        self.log.lock().unwrap().record(Logged { target: self.target, kind: Kind::Barrier })
    }
}

impl DeviceStorage for Recorded {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        self.barrier()
    }
}

impl Backend for Arc<Recorded> {
    fn size(&self) -> u64 {
        self.bytes.lock().unwrap().len() as u64
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.barrier()
    }
    fn describe(&self) -> String {
        "recorded memory".into()
    }
}

/// What `target` holds after a power cut once the first `prefix` logged
/// ops ran: everything before its last barrier, then those of the writes
/// after it that `keep(i)` keeps (`i` counts them from 0).
pub fn crash_image(
    initial: &[u8],
    ops: &[Logged],
    prefix: usize,
    target: Target,
    keep: &dyn Fn(usize) -> bool,
) -> Vec<u8> {
    let mine: Vec<&Logged> = ops[..prefix].iter().filter(|o| o.target == target).collect();
    let last_barrier = mine.iter().rposition(|o| matches!(o.kind, Kind::Barrier));
    let mut image = initial.to_vec();
    let mut unsynced = 0;
    for (i, op) in mine.iter().enumerate() {
        let Kind::Write { offset, data } = &op.kind else { continue };
        let durable = last_barrier.is_some_and(|b| i < b);
        if !durable {
            let kept = keep(unsynced);
            unsynced += 1;
            if !kept {
                continue;
            }
        }
        image[*offset as usize..*offset as usize + data.len()].copy_from_slice(data);
    }
    image
}

/// How many writes of `target` in the first `prefix` ops follow its last barrier.
pub fn unsynced_writes(ops: &[Logged], prefix: usize, target: Target) -> usize {
    let mine: Vec<&Logged> = ops[..prefix].iter().filter(|o| o.target == target).collect();
    let from = mine.iter().rposition(|o| matches!(o.kind, Kind::Barrier)).map_or(0, |b| b + 1);
    mine[from..].iter().filter(|o| matches!(o.kind, Kind::Write { .. })).count()
}

//! Where a cache device keeps its bytes: a file or block device in the
//! server, and in the tests a stand-in that records every write and sync
//! (to build crash states) or fails the k-th of them (to inject faults).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

pub trait DeviceStorage: Send + Sync {
    /// Fills `buf` from `offset`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`; durable only after [`sync`](Self::sync).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Makes every completed write durable.
    fn sync(&self) -> io::Result<()>;
}

impl DeviceStorage for File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.sync_data()
    }
}

/// Storage shared with its creator (a test looking at the bytes after the device is gone).
impl<T: DeviceStorage + ?Sized> DeviceStorage for Arc<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        (**self).sync()
    }
}

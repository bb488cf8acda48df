//! One configurable backend for the server's unit tests: a memory backend
//! with switches for the faults and timings a test needs (pauses that
//! reorder concurrent calls, a held or refused write, calls made on a thread
//! that must never make them).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::Duration;

use super::{Backend, MemoryBackend, SharedSlice};

/// When a [`TestBackend`] pauses, for a pseudo-random 0..`max_us` µs per call.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Pause {
    #[default]
    Never,
    /// After every read and write: concurrent calls finish in an order
    /// different from the one they took effect in.
    AfterEachCall { max_us: u64 },
    /// Before every write: a copy written earlier can land later.
    BeforeWrites { max_us: u64 },
}

/// Switches a test flips while the backend is in use.
#[derive(Default)]
pub(crate) struct Switches {
    /// The next write is held 300 ms before it lands.
    pub hold_next_write: AtomicBool,
    /// Every write fails.
    pub fail_writes: AtomicBool,
    /// Calls made on this thread are counted in `calls_on_watched_thread`.
    pub watched_thread: Option<ThreadId>,
    pub calls_on_watched_thread: AtomicUsize,
}

#[derive(Clone)]
pub(crate) struct TestBackend {
    pub memory: Arc<MemoryBackend>,
    pub switches: Arc<Switches>,
    pause: Pause,
    calls: Arc<AtomicU64>,
    /// Hands out the memory's bytes ([`Backend::share`]), as the memory
    /// backend does: a cache in front then keeps none of its own.
    shares: bool,
}

impl TestBackend {
    /// A zeroed memory backend of `size` bytes, no pauses, no faults.
    pub fn new(size: u64) -> TestBackend {
        TestBackend::over(Arc::new(MemoryBackend::new(size)))
    }

    /// The same switches in front of an existing memory backend.
    pub fn over(memory: Arc<MemoryBackend>) -> TestBackend {
        let (switches, calls) = (Default::default(), Default::default());
        TestBackend { memory, switches, pause: Pause::Never, calls, shares: true }
    }

    /// Keeps the memory's bytes to itself: a cache in front keeps copies,
    /// as in front of a backend that is not RAM.
    pub fn keeping_bytes(mut self) -> TestBackend {
        self.shares = false;
        self
    }

    pub fn pausing(mut self, pause: Pause) -> TestBackend {
        self.pause = pause;
        self
    }

    /// Counts the calls made on `thread` (see [`Switches::watched_thread`]).
    pub fn watching(mut self, thread: ThreadId) -> TestBackend {
        self.switches = Arc::new(Switches { watched_thread: Some(thread), ..Default::default() });
        self
    }

    fn sleep_up_to(&self, max_us: u64) {
        let n = self.calls.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        std::thread::sleep(Duration::from_micros((n >> 40) % max_us));
    }

    fn before(&self, write: bool) {
        if self.switches.watched_thread == Some(std::thread::current().id()) {
            self.switches.calls_on_watched_thread.fetch_add(1, Ordering::Relaxed);
        }
        if let (Pause::BeforeWrites { max_us }, true) = (self.pause, write) {
            self.sleep_up_to(max_us);
        }
    }

    /// A write, with the switches' faults and pauses around it.
    fn write_with<T>(&self, write: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        self.before(true);
        if self.switches.fail_writes.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected write error"));
        }
        if self.switches.hold_next_write.swap(false, Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(300));
        }
        let r = write();
        self.after();
        r
    }

    fn after(&self) {
        if let Pause::AfterEachCall { max_us } = self.pause {
            self.sleep_up_to(max_us);
        }
    }
}

impl Backend for TestBackend {
    fn size(&self) -> u64 {
        self.memory.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.before(false);
        let r = self.memory.read_at(buf, offset);
        self.after();
        r
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_with(|| self.memory.write_at(buf, offset))
    }
    // Shared reads take effect when asked, like the memory's own, and are not
    // counted as calls: a cache makes them on its async reader by design.
    fn share(&self, offset: u64, len: usize, out: &mut Vec<SharedSlice>) {
        if self.shares {
            self.memory.share(offset, len, out);
        }
    }
    fn shares_bytes(&self) -> bool {
        self.shares
    }
    fn flush(&self) -> io::Result<()> {
        self.before(false);
        Ok(())
    }
    fn describe(&self) -> String {
        "test memory".into()
    }
}

//! The vocabulary every Hearth crate shares: what a request is, the one
//! interface every replacement policy implements, and the arena-backed list
//! most policies are built from.
//!
//! Nothing here does I/O. The simulator and the server both drive policies
//! through [`Policy`], so a policy behaves the same in both.

pub mod ctx_event;
pub mod error;
pub mod fenwick;
pub mod key_index;
pub mod list;
pub mod request;
pub mod runs;
pub mod size;
pub mod units;

pub use ctx_event::CtxEvent;
pub use error::ValueError;
pub use fenwick::Fenwick;
pub use key_index::KeyIndex;
pub use list::{List, Slab, NIL};
pub use request::{accesses, Accesses, Mode, Request};
pub use runs::{block_of, run_keyed, RunHash, RunMap, RunSet};
pub use size::{format_bytes, parse_bytes};
pub use units::{format_duration, format_rate, parse_duration, parse_percent, parse_rate};

/// Asks the CPU to load the cache line holding `value` into its cache: a
/// hint for data a loop will read soon, which never changes what it reads.
#[inline]
pub fn prefetch_line<T>(value: &T) {
    prefetch_address((value as *const T).cast());
}

/// [`prefetch_line`] of any address, even one that is not the program's:
/// a prefetch never faults.
#[inline]
pub fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of every x86_64 target, and a prefetch only hints
    // the cache: it never faults and reads nothing the program sees.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Identifier of a cached item: a block number in block mode, an object id in
/// object mode.
pub type Key = u64;

/// `Access::next_access` for a key that is never requested again.
pub const NEVER: u64 = u64::MAX;

/// What the client asked for. Caches treat reads and writes alike unless a
/// driver says otherwise; the analyzer reports the mix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Op {
    #[default]
    Read,
    Write,
    /// Anything else a trace records (trim, flush, unknown opcodes).
    Other,
}

/// One cache request as a policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub key: Key,
    /// Bytes the item occupies in the cache (the block size in block mode).
    pub size: u32,
    /// Logical time: the index of this request in the stream, starting at 0.
    pub vtime: u64,
    /// `vtime` of the next request for `key`, or [`NEVER`]. Only offline
    /// policies (OPT) read it; drivers fill it from a first pass.
    pub next_access: u64,
    pub op: Op,
    /// Client, thread or context the request belongs to (0 when unknown).
    pub ctx: u32,
}

/// The interface every replacement policy implements (libCacheSim's shape:
/// find / insert / evict / remove over a byte capacity).
///
/// A demand request is `lookup`, then `insert` on a miss; [`Policy::access`]
/// does both. Implementations must keep `occupancy() <= capacity()` after
/// every call and must not allocate per request once warm.
pub trait Policy: Send {
    /// Short name used in reports, e.g. `"LRU"`.
    fn name(&self) -> String;
    /// Capacity in bytes.
    fn capacity(&self) -> u64;
    /// Bytes currently held.
    fn occupancy(&self) -> u64;
    /// Items currently held.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether `key` is resident, without touching any policy state.
    fn contains(&self, key: Key) -> bool;
    /// A demand lookup. On a hit, updates recency/frequency state and returns
    /// true. On a miss it may update history (ghost) state and returns false.
    fn lookup(&mut self, a: &Access) -> bool;
    /// Inserts `a.key` (not resident), evicting as needed; every victim's key
    /// is pushed to `evicted`. Callers never insert items larger than the
    /// capacity.
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>);
    /// Evicts one item chosen by the policy and returns its key.
    fn evict(&mut self, now: &Access) -> Option<Key>;
    /// Drops `key` if resident (invalidation); returns whether it was.
    fn remove(&mut self, key: Key) -> bool;
    /// A request for resident `a.key` that the driver does not count as a
    /// use (EV and DEMOTE leave recency to client evictions). Online
    /// policies ignore it; offline ones (OPT) learn the block's next use from
    /// `a.next_access`, which would otherwise lie in the past.
    fn observe_next_access(&mut self, _a: &Access) {}

    /// `key` is requested a few requests from now: a policy may bring its
    /// entry into the CPU cache meanwhile, so that its lookup then does not
    /// wait on memory. No effect on decisions. (The simulator calls it
    /// ahead of each access; a big cache's metadata misses the CPU cache on
    /// nearly every request.)
    fn warm(&self, _key: Key) {}

    /// `key` is requested some way further ahead than [`Policy::warm`]'s:
    /// a policy may ask for the memory its index probes first for `key`
    /// without reading anything (a prefetch that waits on nothing), so that
    /// `warm`'s lookup then finds it in the CPU cache.
    fn warm_index(&self, _key: Key) {}

    /// Wall-clock time spent training models so far, for a policy that
    /// learns while it runs (reports only: no decision reads it); `None`
    /// for one that does not.
    fn training_time(&self) -> Option<std::time::Duration> {
        None
    }

    /// Evicts until `a` fits, pushing victims to `evicted`: the first step
    /// of most `insert` implementations.
    fn make_room(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        while self.occupancy() + u64::from(a.size) > self.capacity() {
            match self.evict(a) {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
    }

    /// A full demand request: lookup, and insert on a miss. Returns whether it
    /// hit. Items larger than the whole cache are never admitted.
    fn access(&mut self, a: &Access, evicted: &mut Vec<Key>) -> bool {
        if self.lookup(a) {
            return true;
        }
        if u64::from(a.size) <= self.capacity() {
            self.insert(a, evicted);
        }
        false
    }
}

/// How many accesses ahead of the one it takes next a driver (the
/// simulator's replayer, the server's cache) calls [`Policy::warm`]: about
/// as many lookups as it takes an entry's line to arrive from memory.
pub const WARM_AHEAD: usize = 8;
/// How many accesses ahead it calls [`Policy::warm_index`]: twice as far, so
/// that the index line has arrived by the time `warm` reads it.
pub const WARM_INDEX_AHEAD: usize = 2 * WARM_AHEAD;

/// A fast hash map for integer keys (policies index every request).
pub type KeyMap<V> = rustc_hash::FxHashMap<Key, V>;

/// An empty [`KeyMap`] with room for `n` keys.
pub fn key_map<V>(n: usize) -> KeyMap<V> {
    let mut m = KeyMap::default();
    m.reserve(n);
    m
}

/// Fills every access's `next_access` with the `vtime` of the next access to
/// the same key ([`NEVER`] if none): one backward pass, as OPT needs.
pub fn fill_next_access(accesses: &mut [Access]) {
    let mut next_use = key_map::<u64>(accesses.len() / 4);
    for access in accesses.iter_mut().rev() {
        access.next_access = next_use.insert(access.key, access.vtime).unwrap_or(NEVER);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_access_points_at_the_next_use_of_the_same_key() {
        let mut a: Vec<Access> = [5u64, 6, 5, 7, 6, 5]
            .iter()
            .enumerate()
            .map(|(i, &key)| Access { key, vtime: i as u64, ..Access::default() })
            .collect();
        fill_next_access(&mut a);
        let next: Vec<u64> = a.iter().map(|a| a.next_access).collect();
        assert_eq!(next, vec![2, 4, 5, NEVER, NEVER, NEVER]);
    }
}

//! The placement core and its policy, addressed by block number.
//!
//! The core is the simulator's own ([`StorageCache`]); the server hands it
//! each block renamed by [`run_keyed`], so that the policy's index keeps a
//! multi-block request's blocks on shared cache lines (see
//! [`hearth_core::runs`]), and renames keys coming back with [`block_of`].
//! Every call the cache makes on the core goes through here, so no renamed
//! key leaks out.

use hearth_core::{block_of, run_keyed, Access};
use hearth_placement::{Demand, EvictionAction, Placement, Stats, StorageCache};

pub(super) struct BlockCore(StorageCache);

/// [`hearth_core::WARM_AHEAD`] and [`hearth_core::WARM_INDEX_AHEAD`] in
/// blocks: the simulator's replayer's distances.
const WARM_AHEAD: u64 = hearth_core::WARM_AHEAD as u64;
const WARM_INDEX_AHEAD: u64 = hearth_core::WARM_INDEX_AHEAD as u64;

fn renamed(a: &Access) -> Access {
    Access { key: run_keyed(a.key), ..*a }
}

impl BlockCore {
    pub(super) fn new(core: StorageCache) -> BlockCore {
        BlockCore(core)
    }

    /// A demand access of block `a.key`.
    pub(super) fn demand(&mut self, a: &Access) -> Demand {
        self.0.demand(&renamed(a))
    }

    /// Call before each block of a request over `blocks` is taken, in
    /// order: the policy brings the entries of the blocks a few places on
    /// into the CPU cache (no effect on decisions), so that a big cache's
    /// lookups overlap their waits on memory instead of taking them one by
    /// one. The first block also warms the index lines of the first few.
    pub(super) fn warm_ahead(&self, block: u64, blocks: &std::ops::Range<u64>) {
        let policy = self.0.policy();
        if block == blocks.start {
            (block + 1..blocks.end.min(block + WARM_INDEX_AHEAD)).for_each(|b| policy.warm_index(run_keyed(b)));
        }
        if block + WARM_INDEX_AHEAD < blocks.end {
            policy.warm_index(run_keyed(block + WARM_INDEX_AHEAD));
        }
        if block + WARM_AHEAD < blocks.end {
            policy.warm(run_keyed(block + WARM_AHEAD));
        }
    }

    /// Places block `a.key` (see [`StorageCache::place`]).
    pub(super) fn place(&mut self, a: &Access) {
        self.0.place(&renamed(a))
    }

    /// Evicts until `room` more bytes fit beside the policy's blocks
    /// ([`StorageCache::make_room`]); `now` is the access that asks.
    pub(super) fn make_room(&mut self, room: u64, now: &Access) {
        self.0.make_room(room, &renamed(now))
    }

    pub(super) fn remove(&mut self, block: u64) -> bool {
        self.0.remove(run_keyed(block))
    }

    /// A client evicted `block` ([`StorageCache::client_evicted`]).
    pub(super) fn client_evicted(&mut self, block: u64, now: &Access) -> EvictionAction {
        match self.0.client_evicted(run_keyed(block), &renamed(now)) {
            EvictionAction::None => EvictionAction::None,
            EvictionAction::Reload(key) => EvictionAction::Reload(block_of(key)),
            EvictionAction::StoreDemoted(key) => EvictionAction::StoreDemoted(block_of(key)),
        }
    }

    /// Whether the policy holds `block`.
    pub(super) fn holds(&self, block: u64) -> bool {
        self.0.policy().contains(run_keyed(block))
    }

    /// How many blocks the last call evicted.
    pub(super) fn evicted_count(&self) -> usize {
        self.0.evicted().len()
    }

    /// The `i`th block the last call evicted.
    pub(super) fn evicted(&self, i: usize) -> u64 {
        block_of(self.0.evicted()[i])
    }

    /// The policy's capacity in bytes.
    pub(super) fn capacity(&self) -> u64 {
        self.0.policy().capacity()
    }

    /// Blocks the policy holds.
    pub(super) fn len(&self) -> usize {
        self.0.policy().len()
    }

    pub(super) fn placement(&self) -> Placement {
        self.0.placement()
    }

    pub(super) fn stats(&self) -> &Stats {
        self.0.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_core::Op;

    fn read(block: u64, vtime: u64) -> Access {
        Access { key: block, size: 4096, vtime, next_access: hearth_core::NEVER, op: Op::Read, ctx: 0 }
    }

    #[test]
    fn blocks_go_in_and_come_back_out_by_their_own_numbers() {
        let lru = hearth_policy::build("lru", 2 * 4096).unwrap();
        let mut core = BlockCore::new(StorageCache::new(lru, Placement::Access));
        for (vtime, block) in [(1, 7u64), (2, 8), (3, 1 << 40)] {
            core.place(&read(block, vtime));
        }
        assert_eq!((core.evicted_count(), core.evicted(0)), (1, 7));
        assert!(core.holds(8) && core.holds(1 << 40) && !core.holds(7));
        assert_eq!(core.demand(&read(8, 4)), Demand::Hit);
        assert!(core.remove(8) && !core.holds(8));
        assert_eq!(core.len(), 1);

        let lru = hearth_policy::build("lru", 2 * 4096).unwrap();
        let mut core = BlockCore::new(StorageCache::new(lru, Placement::Eviction { reload_threshold: 0 }));
        core.demand(&read(12345, 1));
        assert_eq!(core.client_evicted(12345, &read(12345, 2)), EvictionAction::Reload(12345));
        assert!(core.holds(12345));
    }

    /// A policy that records the keys it is asked to warm.
    struct Warmed {
        lru: Box<dyn hearth_core::Policy>,
        warm: std::sync::Arc<std::sync::Mutex<(Vec<u64>, Vec<u64>)>>,
    }

    impl hearth_core::Policy for Warmed {
        fn name(&self) -> String {
            self.lru.name()
        }
        fn capacity(&self) -> u64 {
            self.lru.capacity()
        }
        fn occupancy(&self) -> u64 {
            self.lru.occupancy()
        }
        fn len(&self) -> usize {
            self.lru.len()
        }
        fn contains(&self, key: u64) -> bool {
            self.lru.contains(key)
        }
        fn lookup(&mut self, a: &Access) -> bool {
            self.lru.lookup(a)
        }
        fn insert(&mut self, a: &Access, evicted: &mut Vec<u64>) {
            self.lru.insert(a, evicted)
        }
        fn evict(&mut self, now: &Access) -> Option<u64> {
            self.lru.evict(now)
        }
        fn remove(&mut self, key: u64) -> bool {
            self.lru.remove(key)
        }
        fn warm(&self, key: u64) {
            self.warm.lock().unwrap().0.push(block_of(key));
        }
        fn warm_index(&self, key: u64) {
            self.warm.lock().unwrap().1.push(block_of(key));
        }
    }

    #[test]
    fn a_request_warms_each_later_block_once_and_nothing_outside_it() {
        let warm = std::sync::Arc::default();
        let lru = hearth_policy::build("lru", 64 * 4096).unwrap();
        let core = BlockCore::new(StorageCache::new(
            Box::new(Warmed { lru, warm: std::sync::Arc::clone(&warm) }),
            Placement::Access,
        ));
        let request = 100..140u64;
        request.clone().for_each(|b| core.warm_ahead(b, &request));
        let (entries, index) = std::mem::take(&mut *warm.lock().unwrap());
        assert_eq!(
            index,
            (101..140).collect::<Vec<_>>(),
            "every block after the first: its index line, once, in order"
        );
        assert_eq!(entries, (108..140).collect::<Vec<_>>(), "its entry eight blocks ahead, once");
        let one = 7..8u64;
        core.warm_ahead(7, &one);
        assert_eq!(*warm.lock().unwrap(), (vec![], vec![]), "a one-block request warms nothing");
    }
}

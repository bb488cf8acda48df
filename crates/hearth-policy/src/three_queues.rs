//! What S3-FIFO, S3-FIFO-d, QD-LP-FIFO and CLOCK-2Q+ share: a small FIFO that new
//! items enter, a main queue, and a ghost FIFO remembering the keys and sizes
//! of items evicted from the small one, all three over one slab with one
//! index for residents and ghosts alike, each with its bytes and a byte budget
//! sized as libCacheSim sizes them. The policies differ in what an item keeps
//! ([`Entry`]), how hits count and how the main queue evicts.

use hearth_core::{Key, KeyIndex, List, Slab};

use crate::SpecError;

/// Indexes `lists`, `bytes` and `budgets`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    Small = 0,
    Main = 1,
    Ghost = 2,
}

/// A slab entry: a resident item or a ghost. `H` is its hit counter (a
/// `u8` or a `u32`); `S` whatever else a policy keeps per item (CLOCK-2Q+'s
/// admission stamp), untouched here.
#[derive(Clone, Copy)]
pub(crate) struct Entry<H, S = ()> {
    pub key: Key,
    pub size: u32,
    /// Hits in the small queue, or the main queue's CLOCK counter; reset as
    /// the entry enters a queue.
    pub hits: H,
    pub stamp: S,
    pub queue: Queue,
}

impl<H: Default, S: Default> Entry<H, S> {
    pub fn new(key: Key, size: u32) -> Self {
        Entry { key, size, hits: H::default(), stamp: S::default(), queue: Queue::Small }
    }
}

pub(crate) struct ThreeQueues<H: Copy, S: Copy = ()> {
    /// Byte budgets of the small, main and ghost queues.
    budgets: [u64; 3],
    index: KeyIndex,
    pub slab: Slab<Entry<H, S>>,
    /// Newest at the head of each queue.
    lists: [List; 3],
    bytes: [u64; 3],
    /// The key whose lookup just found its ghost (see [`ThreeQueues::find`]).
    ghost_hit: Option<Key>,
}

impl<H: Copy + Default + Into<u32>, S: Copy> ThreeQueues<H, S> {
    /// Queues for `policy` whose small queue gets `small` of the capacity,
    /// the main one the rest, and whose ghosts may hold `ghost` x capacity bytes.
    pub fn new(policy: &'static str, capacity: u64, small: f64, ghost: f64) -> Result<Self, SpecError> {
        if !(small > 0.0 && small < 1.0) {
            return Err(SpecError::range(policy, format!("small must be in (0, 1), got {small}")));
        }
        if ghost.is_nan() || ghost < 0.0 {
            return Err(SpecError::range(policy, format!("ghost must be >= 0, got {ghost}")));
        }
        // Truncating products, as libCacheSim sizes its queues.
        let small_budget = (capacity as f64 * small) as u64;
        let ghost_budget = (capacity as f64 * ghost) as u64;
        Ok(ThreeQueues {
            budgets: [small_budget, capacity - small_budget, ghost_budget],
            index: KeyIndex::with_capacity(1024),
            slab: Slab::default(),
            lists: [List::new(); 3],
            bytes: [0; 3],
            ghost_hit: None,
        })
    }

    pub fn budget(&self, queue: Queue) -> u64 {
        self.budgets[queue as usize]
    }
    /// Resizes a queue (S3-FIFO-d moves bytes between them); a queue over its
    /// new budget is trimmed by the policy when it next evicts from it.
    pub fn set_budget(&mut self, queue: Queue, bytes: u64) {
        self.budgets[queue as usize] = bytes;
    }
    pub fn bytes(&self, queue: Queue) -> u64 {
        self.bytes[queue as usize]
    }
    pub fn list(&self, queue: Queue) -> &List {
        &self.lists[queue as usize]
    }
    pub fn tail(&self, queue: Queue) -> Option<u32> {
        self.list(queue).tail()
    }
    pub fn is_empty(&self, queue: Queue) -> bool {
        self.list(queue).is_empty()
    }
    pub fn resident_bytes(&self) -> u64 {
        self.bytes(Queue::Small) + self.bytes(Queue::Main)
    }
    pub fn resident_len(&self) -> usize {
        self.list(Queue::Small).len() + self.list(Queue::Main).len()
    }
    pub fn contains(&self, key: Key) -> bool {
        self.index.get(&key).is_some_and(|&i| self.slab.get(i).queue != Queue::Ghost)
    }

    /// Brings `key`'s node into the CPU cache (see `Policy::warm`).
    pub fn warm(&self, key: Key) {
        if let Some(&i) = self.index.get(&key) {
            self.slab.prefetch(i);
        }
    }

    /// Brings the index line `key`'s probe starts at into the CPU cache
    /// (see `Policy::warm_index`).
    pub fn warm_index(&self, key: Key) {
        self.index.prefetch(key);
    }

    /// The slot of resident `key`. A ghost of it is forgotten and noted for
    /// [`ThreeQueues::was_ghost`].
    pub fn find(&mut self, key: Key) -> Option<u32> {
        self.ghost_hit = None;
        let &i = self.index.get(&key)?;
        if self.slab.get(i).queue == Queue::Ghost {
            self.forget(i);
            self.ghost_hit = Some(key);
            return None;
        }
        Some(i)
    }

    /// Whether the last [`ThreeQueues::find`] found a ghost of `key`; asked
    /// once, by the insert that follows the miss.
    pub fn was_ghost(&mut self, key: Key) -> bool {
        self.ghost_hit.take() == Some(key)
    }

    /// A new slot for `item`, indexed but in no queue yet.
    pub fn alloc(&mut self, item: Entry<H, S>) -> u32 {
        let i = self.slab.alloc(item);
        self.index.insert(item.key, i);
        i
    }

    /// Puts the (unlinked) slot `i` at the head of `queue`.
    pub fn push_front(&mut self, i: u32, queue: Queue) {
        let e = self.slab.get_mut(i);
        e.queue = queue;
        e.hits = H::default();
        self.bytes[queue as usize] += u64::from(e.size);
        self.slab.push_front(&mut self.lists[queue as usize], i);
    }

    /// Moves slot `i` to the head of its queue, as CLOCK spares an item.
    pub fn move_to_front(&mut self, i: u32) {
        let queue = self.slab.get(i).queue;
        self.slab.move_to_front(&mut self.lists[queue as usize], i);
    }

    pub fn unlink(&mut self, i: u32) {
        let e = *self.slab.get(i);
        self.slab.unlink(&mut self.lists[e.queue as usize], i);
        self.bytes[e.queue as usize] -= u64::from(e.size);
    }

    /// Frees the (unlinked) slot `i`; returns its key.
    pub fn drop_slot(&mut self, i: u32) -> Key {
        let e = self.slab.release(i);
        self.index.remove(&e.key);
        e.key
    }

    /// Unlinks and frees slot `i`; returns its key.
    pub fn forget(&mut self, i: u32) -> Key {
        self.unlink(i);
        self.drop_slot(i)
    }

    /// Makes the (unlinked) small-queue victim `i` a ghost, dropping the
    /// oldest ghosts to make room; one larger than the whole ghost queue is
    /// freed instead.
    pub fn remember(&mut self, i: u32) {
        let size = u64::from(self.slab.get(i).size);
        let budget = self.budget(Queue::Ghost);
        if size > budget {
            self.drop_slot(i);
            return;
        }
        while self.bytes(Queue::Ghost) + size > budget {
            let Some(oldest) = self.tail(Queue::Ghost) else { break };
            self.forget(oldest);
        }
        self.push_front(i, Queue::Ghost);
    }

    /// Walks the small queue from its oldest item: items with at least
    /// `threshold` hits move to the main queue, the first other one becomes a
    /// ghost and its key is returned. None if every item moved.
    pub fn drain_small(&mut self, threshold: u32) -> Option<Key> {
        while let Some(i) = self.tail(Queue::Small) {
            self.unlink(i);
            if self.slab.get(i).hits.into() >= threshold {
                self.push_front(i, Queue::Main);
            } else {
                let key = self.slab.get(i).key;
                self.remember(i);
                return Some(key);
            }
        }
        None
    }

    /// Forgets `key`, resident or ghost, and a ghost hit just noted for it
    /// (an invalidated item leaves no ghost: its data is gone); whether it
    /// was resident.
    pub fn remove(&mut self, key: Key) -> bool {
        if self.ghost_hit == Some(key) {
            self.ghost_hit = None;
        }
        let Some(&i) = self.index.get(&key) else { return false };
        let resident = self.slab.get(i).queue != Queue::Ghost;
        self.forget(i);
        resident
    }

    #[cfg(test)]
    pub fn queue_of(&self, key: Key) -> Queue {
        self.slab.get(self.index[&key]).queue
    }
}

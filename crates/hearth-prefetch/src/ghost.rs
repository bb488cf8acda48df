//! A bounded memory of the suffixes a rule table replaced, with the count
//! each had (round 19 of `docs/dev/prefetch-graph-remedies.md`): a suffix
//! pushed out of its list and added again comes back at its remembered
//! count instead of 1, so a successor that keeps recurring is not judged
//! as a one-off by least-frequent replacement. Entries are 64-bit
//! fingerprints of (prefix key, block); the oldest is forgotten first once
//! `capacity` are held (the ghost's ageing).

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use hearth_core::Key;
use rustc_hash::{FxHashMap, FxHasher};

use crate::rules::PrefixKey;

pub struct Ghost {
    /// Fingerprint -> (count when replaced, sequence number of its entry).
    counts: FxHashMap<u64, (u32, u64)>,
    /// Entries oldest first, as (fingerprint, sequence number); an entry
    /// whose suffix was recalled or replaced again since is stale.
    order: VecDeque<(u64, u64)>,
    capacity: usize,
    next_seq: u64,
}

impl Ghost {
    pub fn new(capacity: usize) -> Ghost {
        Ghost { counts: FxHashMap::default(), order: VecDeque::new(), capacity: capacity.max(1), next_seq: 0 }
    }

    /// Remembers that suffix `block` of `key` was replaced at `count`.
    pub fn remember(&mut self, key: &PrefixKey, block: Key, count: u32) {
        let fp = fingerprint(key, block);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.counts.insert(fp, (count, seq));
        self.order.push_back((fp, seq));
        while self.counts.len() > self.capacity || self.order.len() > 2 * self.capacity {
            let Some((old, old_seq)) = self.order.pop_front() else { break };
            if self.counts.get(&old).is_some_and(|&(_, s)| s == old_seq) {
                self.counts.remove(&old);
            }
        }
    }

    /// The count suffix `block` of `key` had when last replaced, forgetting
    /// it (it is back in its list), or 0 if not remembered.
    pub fn recall(&mut self, key: &PrefixKey, block: Key) -> u32 {
        self.counts.remove(&fingerprint(key, block)).map_or(0, |(count, _)| count)
    }

    /// Suffixes remembered.
    pub fn len(&self) -> usize {
        self.counts.len()
    }
}

fn fingerprint(key: &PrefixKey, block: Key) -> u64 {
    let mut h = FxHasher::default();
    key.hash(&mut h);
    block.hash(&mut h);
    // Fx mixes weakly; finish with splitmix64's finaliser so nearby keys
    // get unrelated fingerprints.
    let mut z = h.finish();
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recalls_once_and_forgets_the_oldest_past_capacity() {
        let key = PrefixKey::blocks(1, &[5, 6]);
        let mut g = Ghost::new(2);
        g.remember(&key, 10, 3);
        g.remember(&key, 11, 1);
        assert_eq!(g.recall(&key, 10), 3);
        assert_eq!(g.recall(&key, 10), 0, "a recalled suffix is back in its list, no longer a ghost");
        assert_eq!(g.recall(&PrefixKey::position(1, 5), 11), 0, "another key's suffix is another ghost");
        g.remember(&key, 12, 2);
        g.remember(&key, 13, 4); // capacity 2: 11, the oldest held, goes
        assert_eq!(g.len(), 2);
        assert_eq!((g.recall(&key, 11), g.recall(&key, 12), g.recall(&key, 13)), (0, 2, 4));
    }

    #[test]
    fn a_suffix_replaced_again_is_kept_at_its_newest_count() {
        let key = PrefixKey::blocks(2, &[7]);
        let mut g = Ghost::new(2);
        g.remember(&key, 10, 1);
        g.remember(&key, 10, 5); // replaced again: the older entry is stale
        g.remember(&key, 11, 1);
        g.remember(&key, 12, 1); // three live: the oldest live entry (10's second; its first is stale) goes
        assert_eq!(g.len(), 2);
        assert_eq!(g.recall(&key, 10), 0, "10 was the least recently replaced");
        assert_eq!((g.recall(&key, 11), g.recall(&key, 12)), (1, 1));
    }
}

//! The rule table every QuickMine variant mines into and looks up: rules
//! `prefix -> block`, keyed by [`PrefixKey`] (template and blocks, or
//! template and position), bounded as the paper bounds it: at most
//! `max_prefixes` prefixes (LRU: a prefix is used when mined or looked up)
//! and at most `max_suffixes` suffixes per prefix (LFU by support count). A
//! new suffix may only replace one that has outlived a grace period of
//! `grace` updates of its prefix, so fresh suffixes get a chance to gather
//! support before LFU judges them.

use hearth_core::{Key, List, Slab};
use rustc_hash::FxHashMap;

/// What a rule is keyed by: the context's template (class) and either the
/// context's last `order` blocks (1..=3, oldest first, unused slots 0) or,
/// with `order` 0, the position of its last block (`of[0]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PrefixKey {
    pub class: u32,
    pub order: u8,
    pub of: [Key; 3],
}

impl PrefixKey {
    /// The key of the blocks `prefix` (1..=3 of them).
    pub fn blocks(class: u32, prefix: &[Key]) -> PrefixKey {
        let mut of = [0; 3];
        of[..prefix.len()].copy_from_slice(prefix);
        PrefixKey { class, order: prefix.len() as u8, of }
    }
    /// The key of the `position`-th read of a context.
    pub fn position(class: u32, position: u64) -> PrefixKey {
        PrefixKey { class, order: 0, of: [position, 0, 0] }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Suffix {
    pub block: Key,
    /// Times the block followed the prefix within the lookahead window.
    pub count: u32,
    /// Of those, times it came right after the prefix.
    pub next: u32,
    /// The prefix's update count when this suffix was added.
    born: u32,
}

#[derive(Clone, Copy)]
struct PrefixNode {
    key: PrefixKey,
    updates: u32,
    len: usize,
}

/// Bounded rule store: LRU over prefixes, LFU with grace over suffixes.
pub struct RuleCache {
    index: FxHashMap<PrefixKey, u32>,
    slab: Slab<PrefixNode>,
    lru: List,
    /// Slot `i` owns `suffixes[i * max_suffixes ..][.. max_suffixes]`.
    suffixes: Vec<Suffix>,
    max_prefixes: usize,
    max_suffixes: usize,
    grace: u32,
    rules: usize,
    /// Rule additions so far: the clock [`RuleCache::first_added`] counts in.
    clock: u64,
    /// When each rule was first added, if kept (for the miss account).
    history: Option<FxHashMap<(PrefixKey, Key), u64>>,
}

impl RuleCache {
    pub fn new(max_prefixes: usize, max_suffixes: usize, grace: u32) -> Self {
        RuleCache {
            index: FxHashMap::default(),
            slab: Slab::default(),
            lru: List::new(),
            suffixes: Vec::new(),
            max_prefixes: max_prefixes.max(1),
            max_suffixes: max_suffixes.max(1),
            grace,
            rules: 0,
            clock: 0,
            history: None,
        }
    }

    /// Keeps, from now on, when each rule was first added (memory grows
    /// with every distinct rule ever seen).
    pub fn keep_history(&mut self) {
        self.history.get_or_insert_with(FxHashMap::default);
    }

    /// Rule additions so far.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// The clock at which rule `key -> block` was first added, if history is
    /// kept and it was.
    pub fn first_added(&self, key: &PrefixKey, block: Key) -> Option<u64> {
        self.history.as_ref()?.get(&(*key, block)).copied()
    }

    /// Prefixes held.
    pub fn prefixes(&self) -> usize {
        self.index.len()
    }
    /// Rules (prefix, suffix) held.
    pub fn rules(&self) -> usize {
        self.rules
    }

    fn slot(&mut self, key: PrefixKey) -> u32 {
        if let Some(&i) = self.index.get(&key) {
            self.slab.move_to_front(&mut self.lru, i);
            return i;
        }
        if self.index.len() == self.max_prefixes {
            let victim = self.slab.pop_back(&mut self.lru).expect("a full cache has prefixes");
            let node = self.slab.release(victim);
            self.index.remove(&node.key);
            self.rules -= node.len;
        }
        let i = self.slab.alloc(PrefixNode { key, updates: 0, len: 0 });
        self.slab.push_front(&mut self.lru, i);
        self.index.insert(key, i);
        let needed = (i as usize + 1) * self.max_suffixes;
        if self.suffixes.len() < needed {
            self.suffixes.resize(needed, Suffix::default());
        }
        i
    }

    /// Counts one occurrence of rule `key -> block`, `next` if the block
    /// came right after the prefix.
    pub fn add(&mut self, key: PrefixKey, block: Key, next: bool) {
        self.clock += 1;
        if let Some(history) = &mut self.history {
            history.entry((key, block)).or_insert(self.clock);
        }
        let i = self.slot(key);
        let node = self.slab.get_mut(i);
        node.updates = node.updates.wrapping_add(1);
        let now = node.updates;
        let base = i as usize * self.max_suffixes;
        let list = &mut self.suffixes[base..base + node.len];
        if let Some(s) = list.iter_mut().find(|s| s.block == block) {
            s.count += 1;
            s.next += u32::from(next);
            return;
        }
        let fresh = Suffix { block, count: 1, next: u32::from(next), born: now };
        if node.len < self.max_suffixes {
            self.suffixes[base + node.len] = fresh;
            node.len += 1;
            self.rules += 1;
            return;
        }
        let grace = self.grace;
        let victim = list.iter_mut().filter(|s| now.wrapping_sub(s.born) >= grace).min_by_key(|s| s.count);
        if let Some(v) = victim {
            *v = fresh;
        }
    }

    /// The suffixes of `key` (unordered), marking the prefix used.
    pub fn lookup(&mut self, key: &PrefixKey) -> &[Suffix] {
        let Some(&i) = self.index.get(key) else { return &[] };
        self.slab.move_to_front(&mut self.lru, i);
        let base = i as usize * self.max_suffixes;
        &self.suffixes[base..base + self.slab.get(i).len]
    }

    /// The suffixes of `key` without marking the prefix used (for reports).
    pub fn peek(&self, key: &PrefixKey) -> &[Suffix] {
        let Some(&i) = self.index.get(key) else { return &[] };
        let base = i as usize * self.max_suffixes;
        &self.suffixes[base..base + self.slab.get(i).len]
    }

    /// Every prefix with its suffixes, for tests and reports.
    pub fn snapshot(&self) -> Vec<(PrefixKey, Vec<Suffix>)> {
        let mut all: Vec<_> = self
            .index
            .iter()
            .map(|(&k, &i)| {
                let base = i as usize * self.max_suffixes;
                (k, self.suffixes[base..base + self.slab.get(i).len].to_vec())
            })
            .collect();
        all.sort_by_key(|(k, _)| *k);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_period_protects_new_suffixes() {
        let key = PrefixKey::blocks(0, &[1, 2]);
        let mut no_grace = RuleCache::new(4, 2, 0);
        let mut grace = RuleCache::new(4, 2, 3);
        for c in [&mut no_grace, &mut grace] {
            c.add(key, 10, true);
            c.add(key, 10, false);
            c.add(key, 11, false); // full: {10: 2, 11: 1}
            c.add(key, 12, false); // without grace, 12 replaces 11 at once
        }
        let blocks = |c: &RuleCache| c.snapshot()[0].1.iter().map(|s| s.block).collect::<Vec<_>>();
        assert_eq!(blocks(&no_grace), vec![10, 12], "the newest suffix is the least frequent");
        // With grace 3, 11 (one update old) is protected; 10 is the only
        // suffix past its grace, so LFU among those picks it.
        assert_eq!(blocks(&grace), vec![12, 11]);
        grace.add(key, 13, false);
        assert_eq!(blocks(&grace), vec![12, 11], "all in grace: the newcomer is dropped");
        grace.add(key, 14, false);
        assert_eq!(blocks(&grace), vec![12, 14], "11 outlived its grace");
    }

    #[test]
    fn suffixes_count_how_often_they_came_next() {
        let key = PrefixKey::blocks(3, &[7]);
        let mut c = RuleCache::new(4, 4, 0);
        c.add(key, 8, true);
        c.add(key, 8, false);
        c.add(key, 9, true);
        let s = c.lookup(&key).to_vec();
        assert_eq!(s.iter().map(|s| (s.block, s.count, s.next)).collect::<Vec<_>>(), vec![(8, 2, 1), (9, 1, 1)]);
        assert!(c.lookup(&PrefixKey::position(3, 7)).is_empty(), "a position key is another key");
    }
}

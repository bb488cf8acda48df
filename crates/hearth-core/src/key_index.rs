//! The map from a cached item's key to its node in a policy's slab, built
//! so a simulator can bring a lookup's memory into the CPU cache ahead of
//! the lookup.
//!
//! A cache of a million objects has an index far larger than the CPU's
//! caches, so nearly every request's lookup waits on memory. A general hash
//! map (hashbrown) keeps its control bytes and its entries in two arrays,
//! and no API gives the address a key will probe without doing the lookup.
//! Here each slot holds the key and the node side by side (16 bytes, four a
//! cache line) and a key's first slot is a multiply and a shift away, so
//! [`KeyIndex::prefetch`] can ask for that line with nothing to wait on.
//!
//! Open addressing with linear probing, at most 3/4 full, and backward-shift
//! deletion (no tombstones, so probes stay short however many keys come and
//! go). Lookups, inserts and removals give the same answers as a
//! `HashMap<Key, u32>`; its order, like a hash map's, means nothing.

use crate::Key;

/// A slot's value when it holds no key: no slab index reaches it.
const EMPTY: u32 = u32::MAX;
/// Fibonacci hashing's multiplier (2^64 / golden ratio, odd): the product's
/// top bits depend on every key bit, so block numbers in a row spread out.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;
const MIN_SLOTS: usize = 16;

#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Slot {
    key: Key,
    value: u32,
}

const VACANT: Slot = Slot { key: 0, value: EMPTY };

/// Key to slab index (any `u32` but `u32::MAX`, which is `NIL`).
#[derive(Clone)]
pub struct KeyIndex {
    slots: Box<[Slot]>,
    /// `slots.len() - 1` (a power of two less one).
    mask: usize,
    /// 64 - log2(slots.len()): the product's top bits pick the home slot.
    shift: u32,
    len: usize,
}

impl Default for KeyIndex {
    fn default() -> Self {
        KeyIndex::with_capacity(0)
    }
}

impl KeyIndex {
    /// An empty index with room for `n` keys before it grows.
    pub fn with_capacity(n: usize) -> Self {
        let slots = (n.saturating_mul(4) / 3 + 1).next_power_of_two().max(MIN_SLOTS);
        KeyIndex {
            slots: vec![VACANT; slots].into_boxed_slice(),
            mask: slots - 1,
            shift: 64 - slots.trailing_zeros(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn home(&self, key: Key) -> usize {
        (key.wrapping_mul(SPREAD) >> self.shift) as usize
    }

    /// Where `key` is, or the empty slot that ends its probe.
    fn find(&self, key: Key) -> (usize, bool) {
        let mut i = self.home(key);
        loop {
            let slot = &self.slots[i];
            if slot.value == EMPTY {
                return (i, false);
            }
            if slot.key == key {
                return (i, true);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Asks the CPU to load the line `key`'s probe starts at: a hint, with
    /// no memory access to wait on (see `Policy::warm_index`).
    #[inline]
    pub fn prefetch(&self, key: Key) {
        crate::prefetch_line(&self.slots[self.home(key)]);
    }

    pub fn get(&self, key: &Key) -> Option<&u32> {
        match self.find(*key) {
            (i, true) => Some(&self.slots[i].value),
            _ => None,
        }
    }

    /// `key`'s value, to change in place (never to `u32::MAX`).
    pub fn get_mut(&mut self, key: &Key) -> Option<&mut u32> {
        match self.find(*key) {
            (i, true) => Some(&mut self.slots[i].value),
            _ => None,
        }
    }

    pub fn contains_key(&self, key: &Key) -> bool {
        self.find(*key).1
    }

    /// Every value, in no particular order (callers sort what they need).
    pub fn values(&self) -> impl Iterator<Item = &u32> {
        self.slots.iter().filter(|s| s.value != EMPTY).map(|s| &s.value)
    }

    /// Every value, to change in place (never to `u32::MAX`).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut u32> {
        self.slots.iter_mut().filter(|s| s.value != EMPTY).map(|s| &mut s.value)
    }

    /// Sets `key`'s value, returning the one it replaces.
    pub fn insert(&mut self, key: Key, value: u32) -> Option<u32> {
        assert!(value != EMPTY, "a KeyIndex value must not be u32::MAX");
        let (i, found) = self.find(key);
        if found {
            return Some(std::mem::replace(&mut self.slots[i].value, value));
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
            return self.insert(key, value);
        }
        self.slots[i] = Slot { key, value };
        self.len += 1;
        None
    }

    /// Drops `key`, returning its value. The keys after it in its run move
    /// back into the hole when their probe passes over it.
    pub fn remove(&mut self, key: &Key) -> Option<u32> {
        let (mut hole, found) = self.find(*key);
        if !found {
            return None;
        }
        let value = self.slots[hole].value;
        let mut j = (hole + 1) & self.mask;
        while self.slots[j].value != EMPTY {
            let home = self.home(self.slots[j].key);
            // The key at j may fill the hole if its probe from home passes it.
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.slots[hole] = VACANT;
        self.len -= 1;
        Some(value)
    }

    fn grow(&mut self) {
        let old = std::mem::replace(self, KeyIndex::with_capacity(self.slots.len()));
        for slot in old.slots.iter().filter(|s| s.value != EMPTY) {
            let (i, _) = self.find(slot.key);
            self.slots[i] = *slot;
        }
        self.len = old.len;
    }
}

/// `index[&key]`, as a `HashMap`'s: panics if `key` is absent.
impl std::ops::Index<&Key> for KeyIndex {
    type Output = u32;
    fn index(&self, key: &Key) -> &u32 {
        self.get(key).expect("key in KeyIndex")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn agrees_with_a_hash_map_through_growth_and_removals() {
        let mut index = KeyIndex::default();
        let mut model: HashMap<Key, u32> = HashMap::new();
        // A Lehmer-style walk over a small key range: many hits, many
        // collisions, runs that wrap around the end of the table.
        let mut x: u64 = 1;
        for step in 0..200_000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = (x >> 40) % 5000 * if step % 3 == 0 { 1 << 40 } else { 1 };
            match x % 4 {
                0 => assert_eq!(index.remove(&key), model.remove(&key), "remove {key}"),
                1 => {
                    if let Some(value) = index.get_mut(&key) {
                        *value += 1;
                    }
                    if let Some(value) = model.get_mut(&key) {
                        *value += 1;
                    }
                }
                _ => assert_eq!(index.insert(key, step), model.insert(key, step), "insert {key}"),
            }
            assert_eq!(index.len(), model.len());
        }
        index.values_mut().for_each(|value| *value /= 2);
        model.values_mut().for_each(|value| *value /= 2);
        for key in 0..5000 {
            assert_eq!(index.get(&key), model.get(&key), "get {key}");
            assert_eq!(index.contains_key(&(key << 40)), model.contains_key(&(key << 40)));
        }
    }

    #[test]
    fn removing_every_key_empties_it() {
        let mut index = KeyIndex::with_capacity(4);
        for key in 0..1000 {
            index.insert(key * 7, key as u32);
        }
        for key in 0..1000 {
            assert_eq!(index.remove(&(key * 7)), Some(key as u32));
        }
        assert!(index.is_empty());
        assert!(index.slots.iter().all(|s| s.value == EMPTY));
    }
}

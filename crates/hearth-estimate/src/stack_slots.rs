//! The slot table behind [`crate::mrc::StackDistances`]: the size of the
//! item whose latest request is in each slot (0 once the item has been
//! requested again), with prefix sums in O(log n).
//!
//! While every item has had the same size (always so in block mode), only
//! which slots are live is kept: one bit a slot, counted by word and by
//! group of words. That is 1/32 of a table of sizes, so the table of a
//! pass over millions of items stays in the core's cache where a table of
//! sizes did not (a cache miss on nearly every request). The first item of
//! another size turns the bits into sizes, and the pass goes on from there.

use hearth_core::{prefetch_line, Fenwick};

/// Slots per block of sizes: a block's sizes are summed directly (256 bytes).
const BLOCK: usize = 64;
/// Blocks (or words of bits) per group: summed directly; groups are summed
/// through a Fenwick tree, which is small enough to stay in cache.
const GROUP: usize = 64;
/// Slots per word of live bits.
const WORD: usize = 64;
/// Slot tables are sized in multiples of this, so blocks, words and groups
/// are whole.
pub(crate) const GRAIN: usize = BLOCK * GROUP;

/// Bytes per cache line, the unit [`prefetch_line`] loads.
const CACHE_LINE: usize = 64;

pub(crate) enum Slots {
    /// Every item so far has had one size.
    Uniform(LiveBits),
    Sized(SizedSlots),
}

impl Slots {
    /// `len` empty slots (a multiple of [`GRAIN`]).
    pub(crate) fn new(len: usize) -> Slots {
        Slots::Uniform(LiveBits::packed(0, len, 0))
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Slots::Uniform(bits) => bits.bits.len() * WORD,
            Slots::Sized(sized) => sized.sizes.len(),
        }
    }

    /// Size of the item in `slot` (0 if it is not live).
    pub(crate) fn size(&self, slot: usize) -> u32 {
        match self {
            Slots::Uniform(bits) => bits.size * u32::from(bits.is_live(slot)),
            Slots::Sized(sized) => sized.sizes[slot],
        }
    }

    /// Sum of sizes in slots `0..end`.
    pub(crate) fn prefix_sum(&self, end: usize) -> u64 {
        match self {
            Slots::Uniform(bits) => bits.prefix_count(end) * u64::from(bits.size),
            Slots::Sized(sized) => sized.prefix_sum(end),
        }
    }

    /// Puts an item of `size` (at least 1) in the empty `slot`.
    pub(crate) fn fill(&mut self, slot: usize, size: u32) {
        if let Slots::Uniform(bits) = self {
            if bits.size == 0 {
                bits.size = size;
            }
            if bits.size == size {
                bits.add(slot, true);
                return;
            }
            *self = Slots::Sized(bits.to_sized());
        }
        let Slots::Sized(sized) = self else { unreachable!("turned into sizes above") };
        sized.set(slot, size);
    }

    /// Empties `slot`; returns the size it held.
    pub(crate) fn clear(&mut self, slot: usize) -> u32 {
        let size = self.size(slot);
        if size > 0 {
            match self {
                Slots::Uniform(bits) => bits.add(slot, false),
                Slots::Sized(sized) => sized.set(slot, 0),
            }
        }
        size
    }

    /// Where each live slot among `0..used` goes when [`pack`](Self::pack)
    /// moves them to the front in order.
    pub(crate) fn packing(&self, used: usize) -> Packing<'_> {
        match self {
            Slots::Uniform(bits) => {
                // Live slots before each word: a rank is one lookup and a
                // popcount, in a table 1/64 of the slots.
                let mut live = 0;
                let before = bits.bits[..used.div_ceil(WORD)]
                    .iter()
                    .map(|w| {
                        let start = live;
                        live += w.count_ones();
                        start
                    })
                    .collect();
                Packing::Ranked { before, bits: &bits.bits }
            }
            Slots::Sized(sized) => {
                let mut live = 0;
                let map = sized.sizes[..used]
                    .iter()
                    .map(|&s| {
                        live += u32::from(s > 0);
                        live.wrapping_sub(1)
                    })
                    .collect();
                Packing::Mapped(map)
            }
        }
    }

    /// Moves the live slots among `0..used` to the front, keeping their
    /// order, in a table of `len` slots.
    pub(crate) fn pack(&mut self, used: usize, len: usize) {
        *self = match self {
            Slots::Uniform(bits) => {
                let live = bits.word_counts.iter().map(|&c| c as usize).sum();
                Slots::Uniform(LiveBits::packed(live, len, bits.size))
            }
            Slots::Sized(sized) => {
                let mut sizes: Vec<u32> = sized.sizes[..used].iter().copied().filter(|&s| s > 0).collect();
                sizes.resize(len, 0);
                Slots::Sized(SizedSlots::from_sizes(sizes))
            }
        };
    }

    /// Starts loading what [`prefix_sum`](Self::prefix_sum)`(slot + 1)` and
    /// [`clear`](Self::clear)`(slot)` will read (a hint only).
    pub(crate) fn prefetch(&self, slot: usize) {
        if slot >= self.len() {
            return; // a stale slot, renumbered since it was filed
        }
        match self {
            Slots::Uniform(bits) => {
                let word = slot / WORD;
                prefetch_line(&bits.bits[word]);
                prefetch_line(&bits.word_counts[word / GROUP * GROUP]);
                prefetch_line(&bits.word_counts[word]);
            }
            Slots::Sized(sized) => {
                let block = slot / BLOCK;
                let slots = &sized.sizes[block * BLOCK..=slot];
                slots.iter().step_by(CACHE_LINE / size_of::<u32>()).for_each(prefetch_line);
                prefetch_line(&slots[slots.len() - 1]);
                prefetch_line(&sized.block_sums[block]);
            }
        }
    }
}

/// Where [`Slots::pack`] moves each live slot ([`Slots::packing`]).
pub(crate) enum Packing<'a> {
    /// By rank among the live bits.
    Ranked { before: Vec<u32>, bits: &'a [u64] },
    /// Slot by slot.
    Mapped(Vec<u32>),
}

impl Packing<'_> {
    /// The new place of live slot `old`.
    pub(crate) fn new_slot(&self, old: u32) -> u32 {
        let old = old as usize;
        match self {
            Packing::Ranked { before, bits } => {
                let (word, bit) = (old / WORD, old % WORD);
                before[word] + (bits[word] & ((1u64 << bit) - 1)).count_ones()
            }
            Packing::Mapped(map) => map[old],
        }
    }

    /// The new place of a mark between slots: how many live slots lie
    /// below `old` (any place up to the slots in use, live or not).
    pub(crate) fn live_below(&self, old: u32) -> u32 {
        let old = old as usize;
        match self {
            Packing::Ranked { before, bits } => match before.get(old / WORD) {
                Some(&start) => start + (bits[old / WORD] & ((1u64 << (old % WORD)) - 1)).count_ones(),
                None => before.last().map_or(0, |&start| start + bits[before.len() - 1].count_ones()),
            },
            // `map` holds each slot's live rank, and a dead slot the rank of
            // the last live one before it (u32::MAX for none).
            Packing::Mapped(map) => match old.checked_sub(1) {
                None => 0,
                Some(below) => map.get(below).or(map.last()).map_or(0, |&rank| rank.wrapping_add(1)),
            },
        }
    }
}

/// Live slots of items that all have `size` bytes.
pub(crate) struct LiveBits {
    /// Bytes of every item (0 before the first).
    size: u32,
    /// Bit `s % 64` of word `s / 64` is set when slot `s` is live.
    bits: Vec<u64>,
    /// Live slots per word.
    word_counts: Vec<u8>,
    /// Live slots per group of [`GROUP`] words.
    groups: Fenwick,
}

impl LiveBits {
    /// `len` slots of which the first `live` are live.
    fn packed(live: usize, len: usize, size: u32) -> LiveBits {
        let words = len / WORD;
        let mut bits = vec![0u64; words];
        bits[..live / WORD].fill(u64::MAX);
        if !live.is_multiple_of(WORD) {
            bits[live / WORD] = (1u64 << (live % WORD)) - 1;
        }
        let word_counts: Vec<u8> = bits.iter().map(|w| w.count_ones() as u8).collect();
        let groups = Fenwick::from_values(word_counts.chunks(GROUP).map(|g| g.iter().map(|&c| u64::from(c)).sum()));
        LiveBits { size, bits, word_counts, groups }
    }

    fn is_live(&self, slot: usize) -> bool {
        self.bits[slot / WORD] >> (slot % WORD) & 1 == 1
    }

    /// Live slots among `0..end`.
    fn prefix_count(&self, end: usize) -> u64 {
        let word = end / WORD;
        let group = word / GROUP;
        let mut count = self.groups.prefix(group as u64) + sum_first(&self.word_counts[group * GROUP..], word % GROUP);
        if !end.is_multiple_of(WORD) {
            count += u64::from((self.bits[word] & ((1u64 << (end % WORD)) - 1)).count_ones());
        }
        count
    }

    /// Marks `slot` live or not; it must be the other way now.
    fn add(&mut self, slot: usize, live: bool) {
        let word = slot / WORD;
        self.bits[word] ^= 1 << (slot % WORD);
        let delta = if live { 1 } else { -1 };
        self.word_counts[word] = self.word_counts[word].wrapping_add_signed(delta as i8);
        self.groups.add((word / GROUP) as u64, delta);
    }

    fn to_sized(&self) -> SizedSlots {
        let sizes = (0..self.bits.len() * WORD).map(|s| if self.is_live(s) { self.size } else { 0 }).collect();
        SizedSlots::from_sizes(sizes)
    }
}

/// Sum of the first `n` of a group's word counts, eight at a time: a loop
/// over the bytes one by one was a fifth of a pass's time.
fn sum_first(counts: &[u8], n: usize) -> u64 {
    let eights = |i: usize| u64::from_le_bytes(counts[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    let mut sum: u64 = (0..n / 8).map(|i| byte_sum(eights(i))).sum();
    if !n.is_multiple_of(8) {
        sum += byte_sum(eights(n / 8) & ((1u64 << (8 * (n % 8))) - 1));
    }
    sum
}

/// Sum of the 8 bytes of `x`: pairs into 16-bit lanes (each at most 510),
/// then the lanes by one multiply into the top 16 bits (at most 2040, and
/// the lower partial sums never carry into them).
fn byte_sum(x: u64) -> u64 {
    const LOW_BYTES: u64 = 0x00ff_00ff_00ff_00ff;
    let pairs = (x & LOW_BYTES) + ((x >> 8) & LOW_BYTES);
    pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48
}

/// Slot sizes, summed by block and through a Fenwick tree over groups of
/// blocks.
pub(crate) struct SizedSlots {
    sizes: Vec<u32>,
    /// Sum of `sizes` per block.
    block_sums: Vec<u64>,
    /// Sums of `block_sums` per group.
    groups: Fenwick,
}

impl SizedSlots {
    fn from_sizes(sizes: Vec<u32>) -> SizedSlots {
        let block_sums: Vec<u64> = sizes.chunks(BLOCK).map(|block| block.iter().map(|&s| u64::from(s)).sum()).collect();
        let groups = Fenwick::from_values(block_sums.chunks(GROUP).map(|g| g.iter().sum()));
        SizedSlots { sizes, block_sums, groups }
    }

    /// Sum of sizes in slots `0..end`: whole groups from the tree, then
    /// whole blocks of `end`'s group, then slots of `end`'s block.
    fn prefix_sum(&self, end: usize) -> u64 {
        let block = end / BLOCK;
        let group = block / GROUP;
        self.groups.prefix(group as u64)
            + self.block_sums[group * GROUP..block].iter().sum::<u64>()
            + self.sizes[block * BLOCK..end].iter().map(|&s| u64::from(s)).sum::<u64>()
    }

    fn set(&mut self, slot: usize, size: u32) {
        let delta = i64::from(size) - i64::from(self.sizes[slot]);
        self.sizes[slot] = size;
        let block = slot / BLOCK;
        self.block_sums[block] = self.block_sums[block].wrapping_add_signed(delta);
        self.groups.add((block / GROUP) as u64, delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        // Fills and clears, of one size and then of two, against a plain
        // array of sizes, at every end up to the whole table.
        #[test]
        fn prefix_sums_match_a_plain_array(
            ops in proptest::collection::vec((0..2 * GRAIN, 0u32..3), 1..300),
            second_size_from in 0usize..300,
        ) {
            let mut slots = Slots::new(2 * GRAIN);
            let mut plain = vec![0u32; 2 * GRAIN];
            for (n, &(slot, what)) in ops.iter().enumerate() {
                let size = if n >= second_size_from && what == 2 { 9 } else { 4 };
                if plain[slot] == 0 {
                    slots.fill(slot, size);
                    plain[slot] = size;
                } else {
                    prop_assert_eq!(slots.clear(slot), plain[slot]);
                    plain[slot] = 0;
                }
            }
            for end in (0..=2 * GRAIN).step_by(61).chain([2 * GRAIN - 1, 2 * GRAIN]) {
                let want: u64 = plain[..end].iter().map(|&s| u64::from(s)).sum();
                prop_assert_eq!(slots.prefix_sum(end), want, "end {}", end);
            }
        }

        // Marks anywhere up to the slots in use move to the count of live
        // slots below them, with one size (ranked) and with two (mapped).
        #[test]
        fn marks_move_below_as_many_live_slots(
            live in proptest::collection::vec(any::<bool>(), 1..300),
            two_sizes in any::<bool>(),
        ) {
            let mut slots = Slots::new(GRAIN);
            for (slot, _) in live.iter().enumerate().filter(|(_, &l)| l) {
                slots.fill(slot, if two_sizes && slot % 3 == 0 { 9 } else { 4 });
            }
            let used = live.len();
            let packing = slots.packing(used);
            for mark in 0..=used {
                let below = live[..mark].iter().filter(|&&l| l).count() as u32;
                prop_assert_eq!(packing.live_below(mark as u32), below, "mark {}", mark);
            }
        }

        #[test]
        fn word_counts_sum_as_one_by_one(counts in proptest::collection::vec(0u8..=64, GROUP), n in 0..GROUP) {
            prop_assert_eq!(sum_first(&counts, n), counts[..n].iter().map(|&c| u64::from(c)).sum::<u64>());
        }
    }
}

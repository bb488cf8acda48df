//! Writes tracked per stripe of blocks (`block % stripes`), so a cache that
//! reads below itself without its lock can tell whether a write may have
//! raced with that read: the RAM cache ([`crate::cache`]) and the cache
//! device ([`crate::cache_device`]) fill what they fetched only if the
//! block's stripe had no write in flight when they looked and none began
//! since. Two writes in flight on one stripe may reach the layer below in
//! either order, so both learn that they raced.

use std::ops::Range;

#[derive(Clone, Copy, Default)]
struct Stripe {
    writes_begun: u64,
    writes_in_flight: u32,
    /// Set when a write began while another was in flight; cleared when the
    /// stripe drains.
    conflict: bool,
}

pub(crate) struct WriteStripes {
    stripes: Vec<Stripe>,
}

/// A block's stripe as a reader saw it before reading below the cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Glance {
    writes_begun: u64,
    quiet: bool,
}

impl Glance {
    /// A glance after which no fill is ever safe.
    pub(crate) const NEVER_SAFE: Glance = Glance { writes_begun: 0, quiet: false };
}

impl WriteStripes {
    pub(crate) fn new(count: usize) -> WriteStripes {
        WriteStripes { stripes: vec![Stripe::default(); count] }
    }

    fn of(&self, block: u64) -> usize {
        (block % self.stripes.len() as u64) as usize
    }

    pub(crate) fn begin(&mut self, blocks: Range<u64>) {
        for i in touched(self.stripes.len(), blocks) {
            let s = &mut self.stripes[i];
            s.conflict |= s.writes_in_flight > 0;
            s.writes_in_flight += 1;
            s.writes_begun += 1;
        }
    }

    /// Ends a write begun with [`begin`](Self::begin); returns whether it
    /// raced with another write on any of its stripes.
    pub(crate) fn end(&mut self, blocks: Range<u64>) -> bool {
        let mut raced = false;
        for i in touched(self.stripes.len(), blocks) {
            let s = &mut self.stripes[i];
            raced |= s.conflict;
            s.writes_in_flight -= 1;
            if s.writes_in_flight == 0 {
                s.conflict = false;
            }
        }
        raced
    }

    /// Counts a change to `block` made under the caller's lock, with no
    /// [`begin`](Self::begin)/[`end`](Self::end) around it.
    pub(crate) fn changed(&mut self, block: u64) {
        let i = self.of(block);
        self.stripes[i].writes_begun += 1;
    }

    /// Whether a write is in flight on `block`'s stripe.
    pub(crate) fn writing(&self, block: u64) -> bool {
        self.stripes[self.of(block)].writes_in_flight > 0
    }

    pub(crate) fn glance(&self, block: u64) -> Glance {
        let s = self.stripes[self.of(block)];
        Glance { writes_begun: s.writes_begun, quiet: s.writes_in_flight == 0 }
    }

    /// Whether data read below since `glance` may fill the cache: the stripe
    /// was quiet then, is quiet now, and no write began in between.
    pub(crate) fn unchanged_since(&self, block: u64, glance: Glance) -> bool {
        let s = self.stripes[self.of(block)];
        glance.quiet && s.writes_in_flight == 0 && s.writes_begun == glance.writes_begun
    }
}

/// The stripes of `count` that `blocks` touch, each once.
fn touched(count: usize, blocks: Range<u64>) -> impl Iterator<Item = usize> {
    let count = count as u64;
    let n = (blocks.end - blocks.start).min(count);
    (blocks.start..blocks.start + n).map(move |b| (b % count) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_is_safe_only_without_writes_since_the_glance() {
        let mut w = WriteStripes::new(4);
        let g = w.glance(5);
        assert!(w.unchanged_since(5, g));
        assert!(w.unchanged_since(9, w.glance(9)), "another block of the same stripe, unwritten");
        w.begin(9..10); // block 9 shares block 5's stripe
        assert!(w.writing(5) && !w.unchanged_since(5, g) && !w.unchanged_since(5, w.glance(5)));
        assert!(!w.end(9..10), "alone");
        assert!(!w.unchanged_since(5, g), "a write began since the glance");
        assert!(w.unchanged_since(5, w.glance(5)));
        let g = w.glance(5);
        w.changed(5);
        assert!(!w.unchanged_since(5, g));
        assert!(!w.unchanged_since(0, Glance::NEVER_SAFE));
    }

    #[test]
    fn overlapping_writes_both_learn_they_raced() {
        let mut w = WriteStripes::new(4);
        w.begin(0..2);
        w.begin(1..3);
        assert!(w.end(0..2));
        assert!(w.end(1..3));
        w.begin(0..100); // longer than the stripes: each counted once
        assert!(!w.end(0..100));
        assert!(!w.writing(3));
    }
}

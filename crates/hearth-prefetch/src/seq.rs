//! SEQ: Linux-style adaptive read-ahead over the one request stream the
//! storage server sees (it knows no contexts).
//!
//! Two windows, as in Linux 2.6: the *current* window holds blocks already
//! read ahead for the stream, the *ahead* window the next batch. A second
//! sequential access starts a current window of [`INITIAL`] blocks; the
//! first access inside it reads the ahead window (twice its size); an access
//! reaching the ahead window makes it current and reads a new ahead window
//! twice as large, up to `max` blocks (128 KiB). Any other access resets.

use hearth_core::Key;

use crate::{Demand, Prefetcher};

/// Blocks in the first window after a sequential pair.
pub const INITIAL: u64 = 4;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Window {
    start: u64,
    len: u64,
}

impl Window {
    fn contains(&self, b: u64) -> bool {
        b >= self.start && b - self.start < self.len
    }
    fn end(&self) -> u64 {
        self.start + self.len
    }
    fn push(&self, out: &mut Vec<Key>) {
        out.extend(self.start..self.end());
    }
}

pub struct Seq {
    max: u64,
    prev: Option<u64>,
    current: Window,
    ahead: Window,
}

impl Seq {
    /// `max` = largest window in blocks.
    pub fn new(max: u64) -> Self {
        Seq { max: max.max(1), prev: None, current: Window::default(), ahead: Window::default() }
    }
    fn next_ahead(&self) -> Window {
        Window { start: self.current.end(), len: (self.current.len * 2).min(self.max) }
    }
}

impl Prefetcher for Seq {
    fn name(&self) -> String {
        "SEQ".into()
    }
    fn access(&mut self, d: &Demand, _cached: &dyn Fn(Key) -> bool, out: &mut Vec<Key>) {
        let b = d.block;
        if self.ahead.contains(b) {
            self.current = self.ahead;
            self.ahead = self.next_ahead();
            self.ahead.push(out);
        } else if self.current.contains(b) {
            if self.ahead.len == 0 {
                self.ahead = self.next_ahead();
                self.ahead.push(out);
            }
        } else if self.prev.is_some_and(|p| p.wrapping_add(1) == b) {
            self.current = Window { start: b + 1, len: INITIAL.min(self.max) };
            self.ahead = Window::default();
            self.current.push(out);
        } else {
            self.current = Window::default();
            self.ahead = Window::default();
        }
        self.prev = Some(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;
    use hearth_core::Op;

    fn step(p: &mut dyn Prefetcher, b: u64) -> Vec<Key> {
        let mut out = Vec::new();
        let d = Demand { block: b, ctx: 0, time_ns: 0, op: Op::Read, class: Class::Miss };
        p.access(&d, &|_| false, &mut out);
        out
    }

    #[test]
    fn windows_double_up_to_the_cap_and_reset_on_random_access() {
        let mut s = Seq::new(16);
        assert!(step(&mut s, 100).is_empty(), "one access is no stream");
        assert_eq!(step(&mut s, 101), (102..106).collect::<Vec<_>>());
        // First access inside the current window reads the ahead window (8).
        assert_eq!(step(&mut s, 102), (106..114).collect::<Vec<_>>());
        assert!(step(&mut s, 103).is_empty());
        // Reaching the ahead window: a new one of 16 (the cap).
        assert_eq!(step(&mut s, 106), (114..130).collect::<Vec<_>>());
        assert_eq!(step(&mut s, 114), (130..146).collect::<Vec<_>>(), "capped at 16");
        assert!(step(&mut s, 5000).is_empty());
        assert!(step(&mut s, 131).is_empty(), "windows were reset");
    }
}

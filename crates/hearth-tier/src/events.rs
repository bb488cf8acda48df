//! The simulator's clock: a queue of future events ordered by time.
//!
//! Events at the same time pop in `priority` order (lower first), then in
//! the order they were pushed, so a run is deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Item<E> {
    time: u64,
    priority: u8,
    seq: u64,
    event: E,
}

impl<E> Item<E> {
    fn key(&self) -> (u64, u8, u64) {
        (self.time, self.priority, self.seq)
    }
}

impl<E> PartialEq for Item<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<E> Eq for Item<E> {}
impl<E> PartialOrd for Item<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Item<E> {
    // Reversed: `BinaryHeap` is a max-heap and we want the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Item<E>>,
    next_seq: u64,
    now: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { heap: BinaryHeap::new(), next_seq: 0, now: 0 }
    }
}

impl<E> EventQueue<E> {
    /// The time of the event popped last (0 before the first).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Schedules `event` at `time`.
    ///
    /// # Panics
    /// If `time` is before [`EventQueue::now`]: the clock never runs back.
    pub fn push(&mut self, time: u64, priority: u8, event: E) {
        assert!(time >= self.now, "event scheduled at {time} ns, before the clock ({} ns)", self.now);
        self.heap.push(Item { time, priority, seq: self.next_seq, event });
        self.next_seq += 1;
    }

    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|item| item.time)
    }

    /// Removes the earliest event and advances the clock to its time.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        let item = self.heap.pop()?;
        self.now = item.time;
        Some((item.time, item.event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_priority_then_push_order() {
        let mut q = EventQueue::default();
        q.push(30, 1, "c");
        q.push(10, 1, "a-late-priority");
        q.push(10, 0, "a-first");
        q.push(20, 1, "b1");
        q.push(20, 1, "b2");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(10, "a-first"), (10, "a-late-priority"), (20, "b1"), (20, "b2"), (30, "c")]);
        assert_eq!(q.now(), 30);
    }

    #[test]
    #[should_panic(expected = "before the clock")]
    fn refuses_events_in_the_past() {
        let mut q = EventQueue::default();
        q.push(10, 0, ());
        q.pop();
        q.push(9, 0, ());
    }
}

//! Size, as libCacheSim's: evict the largest resident item (Williams et
//! al.'s SIZE), so many small items stay. Residents sit in a binary max-heap
//! keyed by size that moves items exactly as libCacheSim's `pqueue` does
//! (1-based, a node rises only past a strictly smaller parent and sinks only
//! below a strictly larger child, the right child taken only when the left
//! is strictly smaller), so equal sizes leave in the same order and the miss
//! counts match. A hit re-keys the item by the request's size, as there;
//! the bytes it occupies stay those it was inserted with.

use hearth_core::{key_map, Access, Key, KeyMap, Policy};

pub struct Size {
    capacity: u64,
    used: u64,
    /// Key -> position in `heap`.
    index: KeyMap<u32>,
    /// Slot 0 is unused so that the children of `i` are `2i` and `2i + 1`.
    heap: Vec<Node>,
}

#[derive(Clone, Copy)]
struct Node {
    /// The size of its last request, which orders the heap.
    priority: u32,
    key: Key,
    /// The bytes it occupies (its size when inserted).
    size: u32,
}

impl Size {
    pub fn new(capacity: u64) -> Self {
        Size { capacity, used: 0, index: key_map(1024), heap: vec![Node { priority: 0, key: 0, size: 0 }] }
    }

    fn place(&mut self, pos: usize, node: Node) {
        self.heap[pos] = node;
        self.index.insert(node.key, pos as u32);
    }

    fn bubble_up(&mut self, mut pos: usize) {
        let node = self.heap[pos];
        while pos > 1 && self.heap[pos / 2].priority < node.priority {
            self.place(pos, self.heap[pos / 2]);
            pos /= 2;
        }
        self.place(pos, node);
    }

    fn percolate_down(&mut self, mut pos: usize) {
        let node = self.heap[pos];
        loop {
            let mut child = 2 * pos;
            if child >= self.heap.len() {
                break;
            }
            if child + 1 < self.heap.len() && self.heap[child].priority < self.heap[child + 1].priority {
                child += 1;
            }
            if node.priority >= self.heap[child].priority {
                break;
            }
            self.place(pos, self.heap[child]);
            pos = child;
        }
        self.place(pos, node);
    }

    /// Takes the node at `pos` out of the heap, refilling the hole with the
    /// last node as libCacheSim's `pqueue_remove` does; returns it.
    fn take(&mut self, pos: usize) -> Node {
        let node = self.heap[pos];
        self.index.remove(&node.key);
        let last = self.heap.pop().expect("pos is in the heap");
        if pos < self.heap.len() {
            self.place(pos, last);
            if node.priority < last.priority {
                self.bubble_up(pos);
            } else {
                self.percolate_down(pos);
            }
        }
        self.used -= u64::from(node.size);
        node
    }
}

impl Policy for Size {
    fn name(&self) -> String {
        "Size".into()
    }
    indexed_residency!();
    fn lookup(&mut self, a: &Access) -> bool {
        let Some(&pos) = self.index.get(&a.key) else { return false };
        let pos = pos as usize;
        let old = self.heap[pos].priority;
        self.heap[pos].priority = a.size;
        if old < a.size {
            self.bubble_up(pos);
        } else {
            self.percolate_down(pos);
        }
        true
    }
    fn insert(&mut self, a: &Access, evicted: &mut Vec<Key>) {
        self.make_room(a, evicted);
        self.heap.push(Node { priority: a.size, key: a.key, size: a.size });
        self.bubble_up(self.heap.len() - 1);
        self.used += u64::from(a.size);
    }
    fn evict(&mut self, _now: &Access) -> Option<Key> {
        if self.heap.len() == 1 {
            return None;
        }
        Some(self.take(1).key)
    }
    fn remove(&mut self, key: Key) -> bool {
        let Some(&pos) = self.index.get(&key) else { return false };
        self.take(pos as usize);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(s: &mut Size, key: Key, size: u32) -> Vec<Key> {
        let mut evicted = Vec::new();
        s.access(&Access { key, size, ..Access::default() }, &mut evicted);
        evicted
    }

    #[test]
    fn the_largest_goes_first() {
        let mut s = Size::new(10);
        request(&mut s, 1, 2);
        request(&mut s, 2, 5);
        request(&mut s, 3, 3);
        assert_eq!(request(&mut s, 4, 4), vec![2]);
        assert_eq!(request(&mut s, 5, 4), vec![4]);
        assert_eq!(s.occupancy(), 9);
        // A hit at a larger size re-keys the item (its bytes stay 2): 1 now goes first.
        request(&mut s, 1, 5);
        assert_eq!(request(&mut s, 6, 2), vec![1]);
        assert!(s.remove(3) && !s.contains(3) && s.occupancy() == 6);
    }
}

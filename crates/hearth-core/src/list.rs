//! Doubly linked lists threaded through one slab of nodes.
//!
//! Policies keep one `Slab` per cache and any number of `List`s (LRU stack,
//! ghost queue, MQ's queues) whose nodes live in it. A node sits in at most
//! one list at a time; moving it between lists costs no allocation, which is
//! what keeps the per-request hot path allocation-free.

/// Index meaning "no node".
pub const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node<T> {
    prev: u32,
    next: u32,
    val: T,
}

/// Node storage with a free list. Indices stay valid until `release`.
#[derive(Clone, Debug)]
pub struct Slab<T: Copy> {
    nodes: Vec<Node<T>>,
    free: Vec<u32>,
}

/// One list's head, tail and length; its links live in a [`Slab`].
#[derive(Clone, Copy, Debug)]
pub struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl Default for List {
    fn default() -> Self {
        List { head: NIL, tail: NIL, len: 0 }
    }
}

impl List {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Most recently pushed-front node (MRU end).
    pub fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }
    /// Least recently pushed-front node (LRU end).
    pub fn tail(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }
}

impl<T: Copy> Default for Slab<T> {
    fn default() -> Self {
        Slab { nodes: Vec::new(), free: Vec::new() }
    }
}

impl<T: Copy> Slab<T> {
    pub fn with_capacity(n: usize) -> Self {
        Slab { nodes: Vec::with_capacity(n), free: Vec::new() }
    }

    /// Stores `val` in an unlinked node and returns its index.
    pub fn alloc(&mut self, val: T) -> u32 {
        let node = Node { prev: NIL, next: NIL, val };
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                u32::try_from(self.nodes.len() - 1).expect("slab holds at most u32::MAX - 1 nodes")
            }
        }
    }

    /// Frees an unlinked node and returns its value.
    pub fn release(&mut self, i: u32) -> T {
        self.free.push(i);
        self.nodes[i as usize].val
    }

    /// Asks the CPU to load node `i` into its cache (see `Policy::warm`).
    pub fn prefetch(&self, i: u32) {
        if let Some(node) = self.nodes.get(i as usize) {
            crate::prefetch_line(node);
        }
    }
    pub fn get(&self, i: u32) -> &T {
        &self.nodes[i as usize].val
    }
    pub fn get_mut(&mut self, i: u32) -> &mut T {
        &mut self.nodes[i as usize].val
    }
    /// The node after `i` towards the tail.
    pub fn next(&self, i: u32) -> Option<u32> {
        let n = self.nodes[i as usize].next;
        (n != NIL).then_some(n)
    }
    /// The node before `i` towards the head.
    pub fn prev(&self, i: u32) -> Option<u32> {
        let p = self.nodes[i as usize].prev;
        (p != NIL).then_some(p)
    }

    pub fn push_front(&mut self, list: &mut List, i: u32) {
        let old = list.head;
        let n = &mut self.nodes[i as usize];
        n.prev = NIL;
        n.next = old;
        if old != NIL {
            self.nodes[old as usize].prev = i;
        } else {
            list.tail = i;
        }
        list.head = i;
        list.len += 1;
    }

    pub fn push_back(&mut self, list: &mut List, i: u32) {
        let old = list.tail;
        let n = &mut self.nodes[i as usize];
        n.next = NIL;
        n.prev = old;
        if old != NIL {
            self.nodes[old as usize].next = i;
        } else {
            list.head = i;
        }
        list.tail = i;
        list.len += 1;
    }

    /// Links the unlinked node `i` right after `at` (towards the tail), which
    /// must be in `list`.
    pub fn insert_after(&mut self, list: &mut List, at: u32, i: u32) {
        let next = self.nodes[at as usize].next;
        let n = &mut self.nodes[i as usize];
        n.prev = at;
        n.next = next;
        self.nodes[at as usize].next = i;
        if next != NIL {
            self.nodes[next as usize].prev = i;
        } else {
            list.tail = i;
        }
        list.len += 1;
    }

    /// Unlinks `i`, which must be in `list`.
    pub fn unlink(&mut self, list: &mut List, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            list.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            list.tail = prev;
            // Evictions walk the list from its tail: start loading the node
            // the next one will unlink beside the new tail.
            if prev != NIL {
                self.prefetch(self.nodes[prev as usize].prev);
            }
        }
        list.len -= 1;
        let n = &mut self.nodes[i as usize];
        n.prev = NIL;
        n.next = NIL;
    }

    pub fn move_to_front(&mut self, list: &mut List, i: u32) {
        if list.head != i {
            self.unlink(list, i);
            self.push_front(list, i);
        }
    }

    /// Unlinks and returns the tail node's index (the node stays allocated).
    pub fn pop_back(&mut self, list: &mut List) -> Option<u32> {
        let t = list.tail()?;
        self.unlink(list, t);
        Some(t)
    }

    /// Unlinks and returns the head node's index (the node stays allocated).
    pub fn pop_front(&mut self, list: &mut List) -> Option<u32> {
        let h = list.head()?;
        self.unlink(list, h);
        Some(h)
    }

    /// Iterates a list from head (MRU) to tail (LRU).
    pub fn iter<'a>(&'a self, list: &List) -> impl Iterator<Item = u32> + 'a {
        let mut cur = list.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let i = cur;
            cur = self.nodes[i as usize].next;
            Some(i)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(s: &Slab<u64>, l: &List) -> Vec<u64> {
        s.iter(l).map(|i| *s.get(i)).collect()
    }

    #[test]
    fn push_move_pop_keep_order_and_links() {
        let mut s = Slab::default();
        let mut l = List::new();
        let a = s.alloc(1);
        let b = s.alloc(2);
        let c = s.alloc(3);
        s.push_front(&mut l, a);
        s.push_front(&mut l, b);
        s.push_back(&mut l, c);
        assert_eq!(keys(&s, &l), vec![2, 1, 3]);
        s.move_to_front(&mut l, c);
        assert_eq!(keys(&s, &l), vec![3, 2, 1]);
        assert_eq!(s.pop_back(&mut l), Some(a));
        assert_eq!(s.release(a), 1);
        assert_eq!(l.len(), 2);
        // The freed slot is reused.
        assert_eq!(s.alloc(9), a);
        s.unlink(&mut l, b);
        assert_eq!(keys(&s, &l), vec![3]);
        assert_eq!(l.head(), l.tail());
    }

    #[test]
    fn insert_after_links_in_the_middle_and_at_the_tail() {
        let mut s = Slab::default();
        let mut l = List::new();
        let a = s.alloc(1);
        let b = s.alloc(2);
        let c = s.alloc(3);
        s.push_front(&mut l, a);
        s.insert_after(&mut l, a, c);
        s.insert_after(&mut l, a, b);
        assert_eq!(keys(&s, &l), vec![1, 2, 3]);
        assert_eq!((l.tail(), l.len()), (Some(c), 3));
        assert_eq!((s.prev(c), s.next(b)), (Some(b), Some(c)));
    }
}

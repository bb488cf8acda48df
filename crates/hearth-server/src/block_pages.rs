//! Block buffers in huge pages: a global allocator for the `hearth` binary.
//!
//! Every cached block is an `Arc<[u8]>` of the block size (a power of two,
//! 512 B to 1 MiB). After random small writes the system allocator hands a
//! large write's 256 buffers out of a heap they were freed all over, and
//! the copy into them pays a page-table miss on most of them: 1 MiB TCP
//! writes cost 466 µs of server CPU after 4 KiB random writes against 285
//! fresh (docs/dev/issue45-profiles.md). [`BlockPages`] serves exactly the
//! layouts of such buffers from 2 MiB-aligned regions advised
//! `MADV_HUGEPAGE`, where a few page-table entries cover thousands of
//! blocks, and hands every other layout to the system allocator.
//!
//! Each size keeps its freed slots for its next allocations (the cache
//! recycles buffers the same way); regions are never returned to the
//! system, as the heap's blocks mostly are not either. Slots are spaced as
//! glibc spaces these sizes (the object plus 16 bytes, rounded to 16), the
//! spacing the measurements were made with: spreading blocks to a page
//! boundary each was measured slower.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::Mutex;

/// The counts an `Arc` keeps before its data.
const ARC_COUNTS: usize = 2 * std::mem::size_of::<usize>();
/// The smallest and largest block sizes, as powers of two (512 B, 1 MiB).
const SMALLEST_BLOCK_SHIFT: u32 = 9;
const LARGEST_BLOCK_SHIFT: u32 = 20;
const SIZES: usize = (LARGEST_BLOCK_SHIFT - SMALLEST_BLOCK_SHIFT + 1) as usize;
/// The huge page size regions are aligned to.
const HUGE_PAGE: usize = 2 << 20;
/// Bytes mapped each time a size runs out of slots: a multiple of the huge
/// page, and room for 31 slots of the largest size.
const REGION: usize = 32 << 20;

/// The global allocator: block-buffer layouts from huge-page regions,
/// everything else from [`System`].
pub struct BlockPages {
    sizes: [Mutex<Slots>; SIZES],
}

/// One block size's slots: freed ones (a list threaded through their first
/// word), then the untouched rest of the current region.
struct Slots {
    freed: usize,
    next: usize,
    end: usize,
}

impl Default for BlockPages {
    fn default() -> Self {
        Self::new()
    }
}

impl BlockPages {
    pub const fn new() -> Self {
        const EMPTY: Mutex<Slots> = Mutex::new(Slots { freed: 0, next: 0, end: 0 });
        BlockPages { sizes: [EMPTY; SIZES] }
    }

    /// Whether `layout` is a block buffer's, and which size it is.
    fn block_index(layout: Layout) -> Option<usize> {
        let data = layout.size().checked_sub(ARC_COUNTS)?;
        let shift = data.trailing_zeros();
        let block = data.is_power_of_two() && (SMALLEST_BLOCK_SHIFT..=LARGEST_BLOCK_SHIFT).contains(&shift);
        (block && layout.align() <= 16).then(|| (shift - SMALLEST_BLOCK_SHIFT) as usize)
    }

    /// The distance between slots of size `index`.
    fn spacing(index: usize) -> usize {
        ((512 << index) + ARC_COUNTS + 16).next_multiple_of(16)
    }
}

impl Slots {
    /// A slot of `spacing` bytes, or null when no memory can be mapped.
    ///
    /// # Safety
    /// `freed` holds only slots of this size, each with its successor in
    /// its first word.
    unsafe fn take(&mut self, spacing: usize) -> *mut u8 {
        if self.freed != 0 {
            let slot = self.freed as *mut u8;
            self.freed = unsafe { (slot as *const usize).read() };
            return slot;
        }
        if self.end - self.next < spacing {
            let Some(region) = map_region() else { return ptr::null_mut() };
            self.next = region;
            self.end = region + REGION;
        }
        let slot = self.next as *mut u8;
        self.next += spacing;
        slot
    }

    /// # Safety
    /// `slot` was taken from these slots and is no longer used.
    unsafe fn give_back(&mut self, slot: *mut u8) {
        unsafe { (slot as *mut usize).write(self.freed) };
        self.freed = slot as usize;
    }
}

/// A fresh [`REGION`] aligned to [`HUGE_PAGE`] and advised for huge pages
/// (advice only: without transparent huge pages it is ordinary memory).
fn map_region() -> Option<usize> {
    let len = REGION + HUGE_PAGE;
    // SAFETY: an anonymous private mapping touches no existing memory.
    let at = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return None;
    }
    let at = at as usize;
    let start = at.next_multiple_of(HUGE_PAGE);
    // SAFETY: both trimmed ends lie in the mapping just made and are unused.
    unsafe {
        if start > at {
            libc::munmap(at as *mut libc::c_void, start - at);
        }
        let tail = at + len - (start + REGION);
        if tail > 0 {
            libc::munmap((start + REGION) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, REGION, libc::MADV_HUGEPAGE);
    }
    Some(start)
}

// SAFETY: block layouts get slots of at least their size at 16-byte
// alignment (regions are page aligned, spacing a multiple of 16, and such
// layouts ask for at most 16), each handed out once until given back;
// every other layout is the system allocator's, untouched.
unsafe impl GlobalAlloc for BlockPages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match Self::block_index(layout) {
            Some(index) => {
                let mut slots = self.sizes[index].lock().unwrap_or_else(|e| e.into_inner());
                unsafe { slots.take(Self::spacing(index)) }
            }
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match Self::block_index(layout) {
            Some(index) => {
                let mut slots = self.sizes[index].lock().unwrap_or_else(|e| e.into_inner());
                unsafe { slots.give_back(ptr) }
            }
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::block_index(layout).is_none() {
            return unsafe { System.alloc_zeroed(layout) };
        }
        let slot = unsafe { self.alloc(layout) };
        if !slot.is_null() {
            unsafe { slot.write_bytes(0, layout.size()) };
        }
        slot
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with this alignment is a
        // valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if Self::block_index(layout).is_none() && Self::block_index(new_layout).is_none() {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            unsafe {
                ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        moved
    }
}

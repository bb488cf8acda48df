//! A global allocator that aborts on any single allocation larger than a
//! limit, so "a few input bytes ask for gigabytes" is reported as a crash
//! (with the input saved) instead of passing unnoticed or being killed by the
//! kernel. libFuzzer's own `-malloc_limit_mb` needs sanitizer malloc hooks,
//! which a `--sanitizer none` build does not have; this works with any
//! fuzzer. The limit is 256 MiB, or `HEARTH_FUZZ_MALLOC_LIMIT_MB`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

pub struct LimitAlloc;

static LIMIT: AtomicUsize = AtomicUsize::new(256 << 20);
static INIT: Once = Once::new();

/// Reads `HEARTH_FUZZ_MALLOC_LIMIT_MB` once.
pub fn init_from_env() {
    INIT.call_once(|| {
        if let Some(mb) = std::env::var("HEARTH_FUZZ_MALLOC_LIMIT_MB").ok().and_then(|v| v.parse::<usize>().ok()) {
            LIMIT.store(mb << 20, Ordering::Relaxed);
        }
    });
}

#[cold]
fn too_big(size: usize) -> ! {
    // No allocation here: format the number into a stack buffer.
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = size;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(b"==hearth-fuzz== allocation of ");
    let _ = err.write_all(&digits[i..]);
    let _ = err.write_all(b" bytes exceeds the malloc limit (HEARTH_FUZZ_MALLOC_LIMIT_MB)\n");
    std::process::abort();
}

unsafe impl GlobalAlloc for LimitAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > LIMIT.load(Ordering::Relaxed) {
            too_big(layout.size());
        }
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > LIMIT.load(Ordering::Relaxed) {
            too_big(layout.size());
        }
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > LIMIT.load(Ordering::Relaxed) {
            too_big(new_size);
        }
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: LimitAlloc = LimitAlloc;

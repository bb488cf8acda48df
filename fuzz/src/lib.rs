//! Harness code shared by the fuzz targets in `fuzz_targets/`: each target is
//! one line calling a function here, so the logic stays fuzzer-independent
//! (it could be driven by AFL or honggfuzz the same way).
//!
//! Every harness calls the crates' public decoding APIs the way the server or
//! the CLI does, and asserts cheap invariants; a failed assertion is a crash
//! like any panic.

pub mod alloc;
pub mod config;
pub mod nbd;
pub mod trace;

/// Call once per input (cheap after the first call).
pub fn init() {
    alloc::init_from_env();
}

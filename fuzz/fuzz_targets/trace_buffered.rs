#![no_main]
//! Storage-level buffered traces (hearth_trace::buffered).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::trace::buffered_trace(data);
});

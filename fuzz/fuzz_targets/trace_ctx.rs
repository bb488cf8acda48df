#![no_main]
//! Context-tagged traces (hearth_trace::ctx::read_ctx_trace).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::trace::ctx(data);
});

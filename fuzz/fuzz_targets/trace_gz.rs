#![no_main]
//! Gzip-compressed traces (first byte picks the format).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::trace::compressed(hearth_fuzz::trace::Compression::Gzip, data);
});

#![no_main]
//! hearth_trace::open(path, Some(Format::OracleGeneral)) on an uncompressed file.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::trace::format(hearth_trace::Format::OracleGeneral, data);
});

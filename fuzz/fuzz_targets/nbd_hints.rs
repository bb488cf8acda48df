#![no_main]
//! NBD_CMD_HEARTH_HINT payloads (hearth_nbd::hints::decode).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::nbd::hint_payload(data);
});

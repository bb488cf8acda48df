#![no_main]
//! Whole NBD option haggling (hearth_nbd::Negotiation), as hearth-server's handshake() drives it.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::nbd::handshake(data);
});

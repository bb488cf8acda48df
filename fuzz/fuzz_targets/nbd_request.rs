#![no_main]
//! NBD transmission request headers (Request::decode + validate) and payloads, as hearth-server's transmission() reads them.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::nbd::requests(data);
});

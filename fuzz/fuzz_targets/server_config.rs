#![no_main]
//! hearth.toml: hearth_server::Config::parse + validate.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::config::config(data);
});

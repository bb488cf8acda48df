#![no_main]
//! hearth_trace::open("t.csv", None): format sniffing of .csv traces (msr, spc, cpcsv).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    hearth_fuzz::init();
    hearth_fuzz::trace::sniff_csv(data);
});

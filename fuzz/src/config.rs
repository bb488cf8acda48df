//! `hearth.toml` (hearth-server's `Config::parse` + `Config::validate`), as
//! `hearth serve` loads it. Nothing is opened: `validate` only checks.

use hearth_server::config::{parse_duration, Config, SizeValue};

pub fn config(data: &[u8]) {
    // Config::load reads the file with read_to_string: non-UTF-8 never gets here.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut c = match Config::parse(text) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.is_empty(), "empty parse error");
            return;
        }
    };
    let exports = c.exports.len();
    match c.validate() {
        Err(e) => assert!(!e.is_empty(), "empty validation error"),
        Ok(()) => {
            assert!(exports > 0);
            assert!(!c.server.listen.is_empty() || !c.server.unix.is_empty(), "no listener after validate");
            for (i, e) in c.exports.iter().enumerate() {
                assert!(c.exports[..i].iter().all(|o| o.name != e.name), "duplicate names validated");
                assert!(e.name.len() <= hearth_nbd::MAX_STRING);
                let bs = e.block_size().expect("validated block size");
                assert!(bs.is_power_of_two() && (512..=1 << 20).contains(&bs));
                e.cache_bytes().expect("validated cache size");
                e.write_mode().expect("validated write mode");
                e.latency().expect("validated latency");
                assert!((1..=256).contains(&e.background_reads()));
                if let Some(s) = &e.size {
                    assert!(s.bytes().expect("validated size") > 0);
                }
            }
        }
    }
    // The size and duration parsers on their own, on every string value.
    for e in &c.exports {
        for s in [&e.size, &e.cache_size, &e.block_size, &e.dirty_limit, &e.bandwidth].into_iter().flatten() {
            if let SizeValue::Text(t) = s {
                let _ = hearth_core::parse_bytes(t);
            }
        }
        if let Some(l) = &e.latency {
            let _ = parse_duration(l);
        }
    }
}

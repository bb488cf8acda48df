//! `hearth.toml` (hearth-server's `Config::parse` + `Config::validate`), as
//! `hearth serve` loads it. Nothing is opened: `validate` only checks and
//! parses.

use hearth_server::config::{parse_duration, BackendSpec, Config, SizeValue};

pub fn config(data: &[u8]) {
    // Config::load reads the file with read_to_string: non-UTF-8 never gets here.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let c = match Config::parse(text) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.to_string().is_empty(), "empty parse error");
            return;
        }
    };
    let exports = c.exports.len();
    // The raw values, for the parsers on their own below.
    let raw: Vec<_> = c
        .exports
        .iter()
        .map(|e| {
            (
                [
                    e.size.clone(),
                    e.cache_size.clone(),
                    e.block_size.clone(),
                    e.dirty_limit.clone(),
                    e.bandwidth.clone(),
                ],
                e.latency.clone(),
            )
        })
        .collect();
    match c.validate() {
        Err(e) => assert!(!e.to_string().is_empty(), "empty validation error"),
        Ok(settings) => {
            assert_eq!(settings.exports.len(), exports);
            assert!(exports > 0);
            let server = &settings.server;
            assert!(!server.listen.is_empty() || !server.unix.is_empty(), "no listener after validate");
            for (i, e) in settings.exports.iter().enumerate() {
                assert!(settings.exports[..i].iter().all(|o| o.name != e.name), "duplicate names validated");
                assert!(e.name.len() <= hearth_nbd::MAX_STRING);
                assert!(e.block_size.is_power_of_two() && (512..=1 << 20).contains(&e.block_size));
                assert!((1..=256).contains(&e.background_reads));
                match e.backend {
                    BackendSpec::Sparse { size, .. } | BackendSpec::Memory { size } => assert!(size > 0),
                    BackendSpec::File { .. } | BackendSpec::Nbd { .. } | BackendSpec::Http { .. } => {}
                }
            }
        }
    }
    // The size and duration parsers on their own, on every string value.
    for (sizes, latency) in &raw {
        for s in sizes.iter().flatten() {
            if let SizeValue::Text(t) = s {
                let _ = hearth_core::parse_bytes(t);
            }
        }
        if let Some(l) = latency {
            let _ = parse_duration(l);
        }
    }
}

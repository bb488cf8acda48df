//! The admin endpoint beside `/metrics` (`server.admin`): `POST
//! /mode?export=NAME&mode=MODE` switches an export's cache mode while it
//! serves, as Open CAS's `casadm --set-cache-mode` does. Modes are
//! `through`, `around`, `back` and `pass` (`write-through`, `write-around`,
//! `write-back` and `pass-through` too). Leaving write-back writes every
//! dirty block back first; writes wait meanwhile, reads go on.

use std::sync::Arc;

use tracing::{info, warn};

use crate::cache::WriteMode;
use crate::Export;

/// An HTTP status and a JSON body.
pub(crate) type Answer = (&'static str, String);

/// Answers `POST {target}`, where `target` is the request's path and query.
pub(crate) async fn answer(target: &str, exports: &[Arc<Export>]) -> Answer {
    let Some(query) = target.strip_prefix("/mode?") else {
        return refused("400 Bad Request", "expected POST /mode?export=NAME&mode=MODE");
    };
    let (mut name, mut mode) = (None, None);
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("export", v)) => name = Some(percent_decoded(v)),
            Some(("mode", v)) => mode = Some(percent_decoded(v)),
            _ => return refused("400 Bad Request", &format!("unknown parameter {pair:?}: expected export and mode")),
        }
    }
    let (Some(name), Some(mode)) = (name, mode) else {
        return refused("400 Bad Request", "both export=NAME and mode=MODE are needed");
    };
    let Some(export) = exports.iter().find(|e| e.info.name == name).cloned() else {
        return refused("404 Not Found", &format!("no export {name:?}"));
    };
    let to = match mode.as_str() {
        "through" | "write-through" => WriteMode::Through,
        "around" | "write-around" => WriteMode::Around,
        "back" | "write-back" => WriteMode::Back { dirty_limit: export.write_back_limit },
        "pass" | "pass-through" => WriteMode::Pass,
        _ => return refused("400 Bad Request", &format!("mode {mode:?} is not through, around, back or pass")),
    };
    // Leaving write-back writes dirty data to the backend: not on the runtime.
    match tokio::task::spawn_blocking(move || export.cache.set_mode(to)).await {
        Ok(Ok(from)) => {
            info!(export = %name, from = from.name(), to = to.name(), "cache mode switched");
            ("200 OK", serde_json::json!({ "export": name, "from": from.name(), "to": to.name() }).to_string())
        }
        Ok(Err(e)) => {
            warn!(export = %name, to = to.name(), error = %e, "cache mode switch failed");
            refused("409 Conflict", &format!("export {name:?} stays in its mode: {e}"))
        }
        Err(e) => refused("500 Internal Server Error", &format!("the switch did not finish: {e}")),
    }
}

pub(crate) fn refused(status: &'static str, why: &str) -> Answer {
    (status, serde_json::json!({ "error": why }).to_string())
}

/// `%XX` escapes decoded (`+` kept: it is not a space in a path's query here).
fn percent_decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_decoded_and_broken_ones_kept() {
        assert_eq!(percent_decoded("my%20disk%2F1"), "my disk/1");
        assert_eq!(percent_decoded("100%"), "100%");
        assert_eq!(percent_decoded("a%zz"), "a%zz");
    }
}

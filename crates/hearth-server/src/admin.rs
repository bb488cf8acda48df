//! The admin endpoint beside `/metrics` (`server.admin`): `POST
//! /mode?export=NAME&mode=MODE` switches an export's cache mode while it
//! serves, as Open CAS's `casadm --set-cache-mode` does. Modes are
//! `through`, `around`, `back` and `pass` (`write-through`, `write-around`,
//! `write-back` and `pass-through` too). Leaving write-back writes every
//! dirty block back first; writes wait meanwhile, reads go on.
//!
//! The door's lock: with `server.admin_token_file`, a request must carry
//! the file's token (`Authorization: Bearer TOKEN`); without one, the
//! endpoint is served on loopback addresses only ([`Admin::check_address`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tracing::{info, warn};

use crate::cache::CacheMode;
use crate::error::AdminError;
use crate::Export;

/// The admin endpoint, on: the SHA-256 of the token requests must bear, if any.
#[derive(Clone)]
pub(crate) struct Admin {
    token: Option<[u8; 32]>,
}

impl Admin {
    /// Reads the token from `token_file` (surrounding whitespace dropped).
    pub(crate) fn new(token_file: Option<&Path>) -> Result<Admin, AdminError> {
        let Some(path) = token_file else { return Ok(Admin { token: None }) };
        let refused = |message: String| AdminError::Token { path: path.into(), message };
        let text = std::fs::read(path).map_err(|e| refused(e.to_string()))?;
        let token = text.trim_ascii();
        if token.is_empty() {
            return Err(refused("empty: it must hold the token".into()));
        }
        Ok(Admin { token: Some(openssl::sha::sha256(token)) })
    }

    /// Without a token, only loopback may reach the endpoint: refuses any
    /// other bound address.
    pub(crate) fn check_address(&self, bound: SocketAddr) -> Result<(), AdminError> {
        match self.token.is_none() && !bound.ip().to_canonical().is_loopback() {
            true => Err(AdminError::Unguarded(bound)),
            false => Ok(()),
        }
    }

    /// Whether the request head `head` may change state: it bears the
    /// token (compared in constant time), or none is asked for.
    pub(crate) fn authorizes(&self, head: &[u8]) -> bool {
        let Some(token) = &self.token else { return true };
        let bearer = head.split(|&b| b == b'\n').skip(1).find_map(|line| {
            let (name, value) = std::str::from_utf8(line).ok()?.split_once(':')?;
            let value = value.trim();
            let (scheme, credential) = value.split_once(' ')?;
            (name.trim().eq_ignore_ascii_case("authorization") && scheme.eq_ignore_ascii_case("bearer"))
                .then(|| credential.trim().to_string())
        });
        // Digests of equal length, so neither the length nor a prefix leaks.
        bearer.is_some_and(|b| openssl::memcmp::eq(&openssl::sha::sha256(b.as_bytes()), token))
    }
}

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
    let Some(export) = exports.iter().find(|e| e.name() == name).cloned() else {
        return refused("404 Not Found", &format!("no export {name:?}"));
    };
    let to = match mode.as_str() {
        "through" | "write-through" => CacheMode::Through,
        "around" | "write-around" => CacheMode::Around,
        "back" | "write-back" => export.write_back_mode(),
        "pass" | "pass-through" => CacheMode::PassThrough,
        _ => return refused("400 Bad Request", &format!("mode {mode:?} is not through, around, back or pass")),
    };
    // Leaving write-back writes dirty data to the backend: not on the runtime.
    match tokio::task::spawn_blocking(move || export.cache().set_mode(to)).await {
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

/// `%XX` escapes decoded (`+` kept: it is not a space in a path's query
/// here; a broken escape is kept as written).
fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bearer_token_authorizes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cret\n").unwrap();
        let admin = Admin::new(Some(&file)).unwrap();
        let head = |auth: &str| format!("POST /mode?x HTTP/1.1\r\nHost: h\r\n{auth}\r\n\r\n").into_bytes();
        assert!(admin.authorizes(&head("Authorization: Bearer s3cret")));
        assert!(admin.authorizes(&head("authorization:  bearer s3cret ")), "names and schemes ignore case");
        for wrong in ["Authorization: Bearer s3cre", "Authorization: Bearer s3cretx", "Authorization: Basic s3cret", ""]
        {
            assert!(!admin.authorizes(&head(wrong)), "{wrong:?}");
        }
        assert!(admin.check_address("0.0.0.0:9109".parse().unwrap()).is_ok(), "a token guards any address");
        let open = Admin::new(None).unwrap();
        assert!(open.authorizes(&head("")));
        assert!(open.check_address("127.0.0.1:9109".parse().unwrap()).is_ok());
        assert!(open.check_address("[::1]:9109".parse().unwrap()).is_ok());
        let e = open.check_address("0.0.0.0:9109".parse().unwrap()).unwrap_err().to_string();
        assert!(e.contains("server.admin_token_file (--admin-token-file)") && !e.contains('\n'), "{e}");
        std::fs::write(&file, " \n").unwrap();
        assert!(Admin::new(Some(&file)).is_err(), "an empty token");
    }

    #[test]
    fn escapes_are_decoded_and_broken_ones_kept() {
        assert_eq!(percent_decoded("my%20disk%2F1"), "my disk/1");
        assert_eq!(percent_decoded("100%"), "100%");
        assert_eq!(percent_decoded("a%zz"), "a%zz");
    }
}

//! TLS with external pre-shared keys (OpenSSL): the `username:hexkey` files
//! GnuTLS's `psktool` writes, which qemu (`tls-creds-psk`, its `keys.psk`),
//! nbdkit (`--tls-psk`) and libnbd (`tls-psk-file=`) read. A client proves
//! it holds the key of the user it names; that user is its identity.
//!
//! TLS 1.2 (ECDHE-PSK or plain PSK suites) and TLS 1.3 are offered: GnuTLS
//! clients pick TLS 1.3 with an (EC)DHE exchange when both sides have it.

use std::collections::HashMap;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use openssl::ex_data::Index;
use openssl::ssl::{Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslVersion};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_openssl::SslStream;
use tracing::warn;

use super::tls_error;
use crate::error::TlsError;

/// Longest key accepted: what fits OpenSSL's PSK buffer on every version.
const MAX_KEY_BYTES: usize = 256;

#[derive(Clone)]
pub struct PskAcceptor {
    context: Arc<SslContext>,
    /// Where the key lookup leaves the user a connection named (OpenSSL's
    /// own record of it is empty under TLS 1.3).
    user_slot: Index<Ssl, String>,
}

impl PskAcceptor {
    pub(super) fn new(path: &Path) -> Result<PskAcceptor, TlsError> {
        let keys = read_keys(path)?;
        let openssl = |e: openssl::error::ErrorStack| tls_error(path, format!("OpenSSL: {e}"));
        let mut context = SslContextBuilder::new(SslMethod::tls_server()).map_err(openssl)?;
        context.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(openssl)?;
        // TLS 1.2 suites that authenticate by PSK, forward-secret ones first.
        context.set_cipher_list("ECDHEPSK:PSK:!eNULL").map_err(openssl)?;
        context.set_options(SslOptions::NO_RENEGOTIATION);
        let user_slot = Ssl::new_ex_index().map_err(openssl)?;
        context.set_psk_server_callback(move |ssl, user, key| {
            let user = String::from_utf8_lossy(user.unwrap_or_default());
            match keys.get(user.as_ref()) {
                Some(known) => {
                    key[..known.len()].copy_from_slice(known);
                    ssl.set_ex_data(user_slot, user.into_owned());
                    Ok(known.len())
                }
                None => {
                    warn!(%user, "TLS client named a PSK user not in the key file");
                    // No key: the handshake fails.
                    Ok(0)
                }
            }
        });
        Ok(PskAcceptor { context: Arc::new(context.build()), user_slot })
    }

    /// The handshake, and the user whose key the client proved it holds.
    pub(super) async fn accept<S>(&self, stream: S) -> Result<(SslStream<S>, String), openssl::ssl::Error>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut stream = SslStream::new(Ssl::new(&self.context)?, stream)?;
        Pin::new(&mut stream).accept().await?;
        let user = stream.ssl().ex_data(self.user_slot).cloned().unwrap_or_default();
        Ok((stream, user))
    }
}

/// The keys of a `username:hexkey` file; an error names the file and line.
pub(super) fn read_keys(path: &Path) -> Result<HashMap<String, Vec<u8>>, TlsError> {
    let text = std::fs::read_to_string(path).map_err(|e| tls_error(path, e))?;
    parse_keys(&text).map_err(|e| tls_error(path, e))
}

/// `username:hexkey` per line (blank lines skipped); an error names the line.
fn parse_keys(text: &str) -> Result<HashMap<String, Vec<u8>>, String> {
    let mut keys = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}", i + 1);
        if line.trim().is_empty() {
            continue;
        }
        let Some((user, hex)) = line.split_once(':') else {
            return Err(at("expected username:hexkey"));
        };
        if user.is_empty() {
            return Err(at("empty user name"));
        }
        let key = decode_hex(hex.trim()).ok_or_else(|| at(&format!("the key of {user:?} is not hexadecimal bytes")))?;
        if key.is_empty() || key.len() > MAX_KEY_BYTES {
            return Err(at(&format!("the key of {user:?} is {} bytes; 1..={MAX_KEY_BYTES} are accepted", key.len())));
        }
        if keys.insert(user.to_string(), key).is_some() {
            return Err(at(&format!("user {user:?} is listed twice")));
        }
    }
    if keys.is_empty() {
        return Err("no username:hexkey line in it".into());
    }
    Ok(keys)
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || !hex.is_ascii() {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_are_read_as_psktool_writes_them() {
        let keys = parse_keys("alice:00ff10\n\nbob:0A0b\n").unwrap();
        assert_eq!(keys["alice"], vec![0x00, 0xff, 0x10]);
        assert_eq!(keys["bob"], vec![0x0a, 0x0b]);
        for (text, why) in [
            ("alice", "line 1: expected username:hexkey"),
            (":00", "line 1: empty user name"),
            ("alice:00\nbob:0g", "line 2: the key of \"bob\" is not hexadecimal bytes"),
            ("alice:001", "line 1: the key of \"alice\" is not hexadecimal bytes"),
            ("alice:", "line 1: the key of \"alice\" is 0 bytes"),
            ("alice:00\nalice:01", "line 2: user \"alice\" is listed twice"),
            ("\n", "no username:hexkey line in it"),
        ] {
            let err = parse_keys(text).unwrap_err();
            assert!(err.starts_with(why), "{text:?}: {err}");
        }
        assert!(parse_keys(&format!("a:{}", "00".repeat(MAX_KEY_BYTES + 1))).is_err());
    }
}

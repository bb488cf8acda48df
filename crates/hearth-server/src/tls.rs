//! The server's TLS setup: certificates read from a directory laid out as
//! qemu-nbd and nbdkit expect (`server-cert.pem`, `server-key.pem`, and
//! `ca-cert.pem` when clients must present a certificate), turned into the
//! acceptor that a connection hands itself to after NBD_OPT_STARTTLS.
//!
//! rustls offers TLS 1.2 and 1.3 (the NBD protocol requires 1.2) and no
//! external pre-shared keys, so the PSK files qemu and nbdkit accept are not
//! supported.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// Reads the certificates in `dir`; with `verify_peer`, clients must present
/// a certificate signed by `ca-cert.pem`. Errors name the file.
pub fn acceptor(dir: &Path, verify_peer: bool) -> anyhow::Result<TlsAcceptor> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert_path = dir.join("server-cert.pem");
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("{}: {e}", cert_path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{}: no certificate in it", cert_path.display());
    }
    let key_path = dir.join("server-key.pem");
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| anyhow::anyhow!("{}: {e}", key_path.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let builder = if verify_peer {
        let ca_path = dir.join("ca-cert.pem");
        let mut roots = RootCertStore::empty();
        for cert in
            CertificateDer::pem_file_iter(&ca_path).map_err(|e| anyhow::anyhow!("{}: {e}", ca_path.display()))?
        {
            let cert = cert.map_err(|e| anyhow::anyhow!("{}: {e}", ca_path.display()))?;
            roots.add(cert).map_err(|e| anyhow::anyhow!("{}: {e}", ca_path.display()))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| anyhow::anyhow!("{}: {e}", ca_path.display()))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| anyhow::anyhow!("{} and {}: {e}", cert_path.display(), key_path.display()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

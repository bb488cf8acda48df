//! TLS with X.509 certificates (rustls): read from a directory laid out as
//! qemu-nbd and nbdkit expect (`server-cert.pem`, `server-key.pem`, and
//! `ca-cert.pem` when clients must present a certificate).

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use super::tls_error;
use crate::error::TlsError;

/// Reads the certificates in `dir`; with `verify_peer`, clients must present
/// a certificate signed by `ca-cert.pem`. Errors name the file.
pub(super) fn acceptor(dir: &Path, verify_peer: bool) -> Result<TlsAcceptor, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert_path = dir.join("server-cert.pem");
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| tls_error(&cert_path, e))?;
    if certs.is_empty() {
        return Err(tls_error(&cert_path, "no certificate in it"));
    }
    super::warn_if_expiring(&cert_path, &certs);
    let key_path = dir.join("server-key.pem");
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| tls_error(&key_path, e))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(dir, e))?;
    let builder = if verify_peer {
        let ca_path = dir.join("ca-cert.pem");
        let cas = CertificateDer::pem_file_iter(&ca_path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| tls_error(&ca_path, e))?;
        super::warn_if_expiring(&ca_path, &cas);
        let mut roots = RootCertStore::empty();
        for cert in cas {
            roots.add(cert).map_err(|e| tls_error(&ca_path, e))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| tls_error(&ca_path, e))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError { path: cert_path.clone(), message: format!("with {}: {e}", key_path.display()) })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The subject of a client's certificate as an RFC 4514 name
/// (`CN=alice,O=Example,C=GB`: the last relative name first), what export
/// identity lists are matched against; `None` if it cannot be read.
pub(super) fn identity(certificate: &CertificateDer<'_>) -> Option<String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) = X509Certificate::from_der(certificate.as_ref()).ok()?;
    let registry = x509_parser::objects::oid_registry();
    let mut names = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let mut parts = Vec::new();
        for attribute in rdn.iter() {
            let oid = attribute.attr_type();
            let kind =
                x509_parser::objects::oid2abbrev(oid, registry).map_or_else(|_| oid.to_id_string(), str::to_string);
            // RFC 4514 escapes these in values.
            let value = attribute.as_str().ok()?.replace('\\', "\\\\").replace(',', "\\,").replace('+', "\\+");
            parts.push(format!("{kind}={value}"));
        }
        names.push(parts.join("+"));
    }
    names.reverse();
    Some(names.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_the_subject_in_rfc_4514_order() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        // Encoded in this order: C, O, CN (the most specific last, as CAs do).
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(rcgen::DnType::CountryName, "GB");
        params.distinguished_name.push(rcgen::DnType::OrganizationName, "Example, Ltd");
        params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(identity(cert.der()).as_deref(), Some("CN=alice,O=Example\\, Ltd,C=GB"));
    }
}

//! TLS to an upstream NBD server (`nbds://`, `nbds+unix://`), with the
//! credentials libnbd's URIs name: `tls-certificates=DIR` (`ca-cert.pem`
//! to verify the server with, and `client-cert.pem` and `client-key.pem`
//! if the server asks for a client certificate) through rustls, or
//! `tls-psk-file=FILE` with a user name through OpenSSL, as the server side.
//!
//! Over TCP the server's certificate must name the host of the URI; over a
//! Unix socket there is no host name, so only its chain is verified, as
//! libnbd does.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hearth_client::{StartTls, Stream};
use openssl::ssl::{ErrorCode, HandshakeError, SslConnector, SslMethod, SslVerifyMode, SslVersion};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::tls_error;
use crate::error::TlsError;

/// The TLS credentials of an upstream URI, as written (files are read when
/// the backend connects).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpstreamCredentials {
    /// `tls-certificates=DIR`.
    Certificates(PathBuf),
    /// `tls-psk-file=FILE` and the user whose key in it to use.
    Psk { file: PathBuf, user: String },
}

/// A TLS client for one upstream, its files read.
pub enum Connector {
    Certificates {
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    },
    /// And the user it names, for its refusals.
    Psk(SslConnector, String),
}

impl Connector {
    /// Reads the credentials; `host` is the URI's host (`None` over a Unix
    /// socket). Errors name the file.
    pub fn new(credentials: &UpstreamCredentials, host: Option<&str>) -> Result<Connector, TlsError> {
        match credentials {
            UpstreamCredentials::Certificates(dir) => certificates(dir, host),
            UpstreamCredentials::Psk { file, user } => psk(file, user),
        }
    }
}

fn certificates(dir: &Path, host: Option<&str>) -> Result<Connector, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let ca_path = dir.join("ca-cert.pem");
    let cas = read_certificates(&ca_path)?;
    let mut roots = RootCertStore::empty();
    for cert in cas {
        roots.add(cert).map_err(|e| tls_error(&ca_path, e))?;
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| tls_error(&ca_path, e))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(dir, e))?;
    let (builder, name) = match host {
        Some(host) => {
            let name = ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_string())
                .map_err(|e| tls_error(dir, format!("host {host:?}: {e}")))?;
            (builder.with_webpki_verifier(webpki), name)
        }
        None => {
            let verifier = Arc::new(ChainOnly(webpki));
            (builder.dangerous().with_custom_certificate_verifier(verifier), ServerName::try_from("localhost").unwrap())
        }
    };
    // A client certificate, if the directory holds one (libnbd's layout).
    let cert_path = dir.join("client-cert.pem");
    let config = if cert_path.exists() {
        let certs = read_certificates(&cert_path)?;
        let key_path = dir.join("client-key.pem");
        let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| tls_error(&key_path, e))?;
        builder.with_client_auth_cert(certs, key).map_err(|e| tls_error(&cert_path, e))?
    } else {
        builder.with_no_client_auth()
    };
    Ok(Connector::Certificates { config: Arc::new(config), name })
}

/// The certificates in a PEM file (at least one), warned about if near their end.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| tls_error(path, e))?;
    if certs.is_empty() {
        return Err(tls_error(path, "no certificate in it"));
    }
    super::warn_if_expiring(path, &certs);
    Ok(certs)
}

fn psk(file: &Path, user: &str) -> Result<Connector, TlsError> {
    let keys = super::psk::read_keys(file)?;
    let key = keys.get(user).cloned().ok_or_else(|| tls_error(file, format!("no key for user {user:?}")))?;
    let openssl = |e: openssl::error::ErrorStack| tls_error(file, format!("OpenSSL: {e}"));
    let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(openssl)?;
    builder.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(openssl)?;
    builder.set_cipher_list("ECDHEPSK:PSK:!eNULL").map_err(openssl)?;
    // The key authenticates the server: there is no certificate to check.
    builder.set_verify(SslVerifyMode::NONE);
    let identity = user.as_bytes().to_vec();
    builder.set_psk_client_callback(move |_, _hint, identity_out, key_out| {
        // OpenSSL wants the identity NUL-terminated.
        if identity.len() >= identity_out.len() || key.len() > key_out.len() {
            return Ok(0);
        }
        identity_out[..identity.len()].copy_from_slice(&identity);
        identity_out[identity.len()] = 0;
        key_out[..key.len()].copy_from_slice(&key);
        Ok(key.len())
    });
    Ok(Connector::Psk(builder.build(), user.to_string()))
}

impl StartTls for Connector {
    fn handshake(&self, mut socket: Box<dyn Stream>) -> io::Result<Box<dyn Stream>> {
        match self {
            Connector::Certificates { config, name } => {
                let mut session = rustls::ClientConnection::new(config.clone(), name.clone())
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                while session.is_handshaking() {
                    session.complete_io(&mut socket)?;
                }
                Ok(Box::new(rustls::StreamOwned::new(session, socket)))
            }
            Connector::Psk(connector, user) => {
                let refused =
                    |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::PermissionDenied, e.to_string());
                let config = connector.configure().map_err(|e| refused(&e))?;
                let stream = config.use_server_name_indication(false).verify_hostname(false).connect("", socket);
                let stream = stream.map_err(|e| match e {
                    HandshakeError::SetupFailure(e) => refused(&e),
                    // GnuTLS servers hang up on an unknown user or a wrong key.
                    HandshakeError::Failure(mid) if mid.error().code() == ErrorCode::SYSCALL && mid.error().io_error().is_none() => {
                        refused(&format!("the server hung up, as it does when it does not know user {user:?} or holds another key for it"))
                    }
                    HandshakeError::Failure(mid) | HandshakeError::WouldBlock(mid) => refused(mid.error()),
                })?;
                Ok(Box::new(stream))
            }
        }
    }
}

/// Verifies the chain to the CA but not the name: for Unix sockets, which
/// have no host name to match.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the name only after the chain.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verified => verified,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

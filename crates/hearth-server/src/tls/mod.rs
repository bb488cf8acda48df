//! The server's TLS: the acceptor a connection hands its stream to after
//! NBD_OPT_STARTTLS, and the identity the client proved.
//!
//! Two kinds of credentials, as qemu-nbd's `tls-creds-x509` and
//! `tls-creds-psk` (and nbdkit's `--tls-certificates` and `--tls-psk`) offer:
//! X.509 certificates through rustls ([`certificates`]), and external
//! pre-shared keys through OpenSSL ([`psk`]), since rustls has no external
//! PSK. A server uses one kind or the other. [`client`] is the other end,
//! for the caching proxy's `nbds://` upstreams.

mod certificates;
pub mod client;
mod psk;

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::config::TlsCredentials;
use crate::error::TlsError;

/// Who a TLS client proved to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// The subject of its verified certificate, as an RFC 4514 name.
    Subject(String),
    /// The user name whose pre-shared key it holds.
    PskUser(String),
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::Subject(name) => f.write_str(name),
            Identity::PskUser(user) => write!(f, "PSK user {user}"),
        }
    }
}

/// Performs the server side of TLS handshakes.
#[derive(Clone)]
pub enum Acceptor {
    Certificates(tokio_rustls::TlsAcceptor),
    Psk(psk::PskAcceptor),
}

impl Acceptor {
    /// Reads the credentials; errors name the file and what is wrong.
    pub fn new(credentials: &TlsCredentials) -> Result<Acceptor, TlsError> {
        Ok(match credentials {
            TlsCredentials::Certificates { dir, verify_peer } => {
                Acceptor::Certificates(certificates::acceptor(dir, *verify_peer)?)
            }
            TlsCredentials::Psk(path) => Acceptor::Psk(psk::PskAcceptor::new(path)?),
        })
    }

    /// The handshake over `stream`, and the client's identity if it proved one.
    pub async fn accept<S>(&self, stream: S) -> io::Result<(TlsStream<S>, Option<Identity>)>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let refused =
            |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::PermissionDenied, format!("TLS handshake: {e}"));
        match self {
            Acceptor::Certificates(acceptor) => {
                let stream = acceptor.accept(stream).await.map_err(|e| refused(&e))?;
                let certificate = stream.get_ref().1.peer_certificates().and_then(|c| c.first());
                let identity = certificate.and_then(certificates::identity).map(Identity::Subject);
                Ok((TlsStream::Rustls(Box::new(stream)), identity))
            }
            Acceptor::Psk(acceptor) => {
                let (stream, user) = acceptor.accept(stream).await.map_err(|e| refused(&e))?;
                Ok((TlsStream::OpenSsl(stream), Some(Identity::PskUser(user))))
            }
        }
    }
}

/// The acceptor new handshakes use, built again from the same files on
/// [`Reloadable::reload`] (SIGHUP). A connection keeps the configuration its
/// handshake used, so replacing it drops no one; a reload that fails leaves
/// the old acceptor in place.
#[derive(Clone)]
pub struct Reloadable {
    credentials: TlsCredentials,
    current: Arc<parking_lot::RwLock<Acceptor>>,
}

impl Reloadable {
    pub fn new(credentials: &TlsCredentials) -> Result<Reloadable, TlsError> {
        let acceptor = Acceptor::new(credentials)?;
        Ok(Reloadable { credentials: credentials.clone(), current: Arc::new(parking_lot::RwLock::new(acceptor)) })
    }

    /// What the next handshake uses.
    pub fn current(&self) -> Acceptor {
        self.current.read().clone()
    }

    /// Reads the certificates, key and CA (or the key file) again; on an
    /// error the old ones stay in use and the error names the file.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = Acceptor::new(&self.credentials)?;
        *self.current.write() = fresh;
        Ok(())
    }
}

/// A connection after its TLS handshake, whichever library made it.
pub enum TlsStream<S> {
    Rustls(Box<tokio_rustls::server::TlsStream<S>>),
    OpenSsl(tokio_openssl::SslStream<S>),
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            TlsStream::Rustls(s) => Pin::new(s).poll_read(cx, buf),
            TlsStream::OpenSsl(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            TlsStream::Rustls(s) => Pin::new(s).poll_write(cx, buf),
            TlsStream::OpenSsl(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            TlsStream::Rustls(s) => Pin::new(s).poll_flush(cx),
            TlsStream::OpenSsl(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            TlsStream::Rustls(s) => Pin::new(s).poll_shutdown(cx),
            TlsStream::OpenSsl(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// A certificate this close to its end is warned about at start.
const EXPIRY_WARNING: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Logs one warning per certificate in `path` that has expired or expires
/// within 30 days: TLS peers would refuse it, and the operator should hear
/// of it before they do.
pub(crate) fn warn_if_expiring(path: &Path, certs: &[rustls::pki_types::CertificateDer<'_>]) {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let now = x509_parser::time::ASN1Time::now().timestamp();
    for der in certs {
        let Ok((_, cert)) = X509Certificate::from_der(der.as_ref()) else { continue };
        let not_after = cert.validity().not_after;
        let left = not_after.timestamp() - now;
        let (file, subject) = (path.display(), cert.subject());
        if left <= 0 {
            tracing::warn!(%file, %subject, expired = %not_after, "TLS certificate has expired");
        } else if left < EXPIRY_WARNING.as_secs() as i64 {
            tracing::warn!(%file, %subject, expires = %not_after, "TLS certificate expires within 30 days");
        }
    }
}

fn tls_error(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError { path: path.into(), message: e.to_string() }
}

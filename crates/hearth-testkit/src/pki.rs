//! A test certificate authority: certificates and keys in the layout qemu,
//! nbdkit and libnbd read (`ca-cert.pem`, `PREFIX-cert.pem`, `PREFIX-key.pem`).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// A CA, and a certificate and key signed by it.
pub struct Authority {
    cert: Certificate,
    key: KeyPair,
}

impl Authority {
    pub fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Authority { cert, key }
    }

    /// Writes `{prefix}-cert.pem` and `{prefix}-key.pem` signed by this CA,
    /// and the CA's own `ca-cert.pem`, into `dir`.
    pub fn issue(&self, dir: &Path, prefix: &str, names: &[&str], usage: ExtendedKeyUsagePurpose) {
        self.issue_with(dir, prefix, names, usage, |_| {});
    }

    /// As `issue`, for a certificate that expired yesterday.
    pub fn issue_expired(&self, dir: &Path, prefix: &str, names: &[&str], usage: ExtendedKeyUsagePurpose) {
        self.issue_with(dir, prefix, names, usage, |params| {
            let now = time::OffsetDateTime::now_utc();
            params.not_before = now - time::Duration::days(60);
            params.not_after = now - time::Duration::days(1);
        });
    }

    fn issue_with(
        &self,
        dir: &Path,
        prefix: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        adjust: impl FnOnce(&mut CertificateParams),
    ) {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or(prefix));
        params.extended_key_usages = vec![usage];
        adjust(&mut params);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(format!("{prefix}-cert.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{prefix}-key.pem")), key.serialize_pem()).unwrap();
        self.trust(dir);
    }

    pub fn trust(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("ca-cert.pem"), self.cert.pem()).unwrap();
    }
}

/// The certificate directories the TLS tests share, in qemu/nbdkit/libnbd
/// layout, under one temporary directory.
pub struct Pki {
    pub root: tempfile::TempDir,
    pub ca: Authority,
    /// The CA, and a server certificate for the names given to [`Pki::new`].
    pub server: PathBuf,
    /// Trusts the CA and holds a client certificate it signed
    /// (`CN=hearth-test-client`).
    pub client: PathBuf,
    /// Trusts the CA but holds no certificate of its own.
    pub anonymous: PathBuf,
    /// Trusts the CA and holds a client certificate from another CA.
    pub rogue_client: PathBuf,
    /// Trusts only another CA, and so no certificate the CA signed.
    pub wrong_ca: PathBuf,
}

impl Pki {
    /// A CA named `ca_name` with a server certificate for `server_names`.
    pub fn new(ca_name: &str, server_names: &[&str]) -> Pki {
        let root = tempfile::tempdir().unwrap();
        let dir = |name: &str| root.path().join(name);
        let ca = Authority::new(ca_name);
        let (server, client, anonymous, rogue_client, wrong_ca) =
            (dir("server"), dir("client"), dir("anonymous"), dir("rogue-client"), dir("wrong-ca"));
        ca.issue(&server, "server", server_names, ExtendedKeyUsagePurpose::ServerAuth);
        ca.issue(&client, "client", &["hearth-test-client"], ExtendedKeyUsagePurpose::ClientAuth);
        ca.trust(&anonymous);
        let another = Authority::new("Another CA");
        another.issue(&rogue_client, "client", &["intruder"], ExtendedKeyUsagePurpose::ClientAuth);
        ca.trust(&rogue_client); // it trusts the server; the server must not trust it
        another.trust(&wrong_ca);
        Pki { root, ca, server, client, anonymous, rogue_client, wrong_ca }
    }

    /// A client certificate from the CA with subject `CN={name}`, in `dir`.
    pub fn issue_client(&self, dir: &Path, name: &str) {
        self.ca.issue(dir, "client", &[name], ExtendedKeyUsagePurpose::ClientAuth);
    }
}

/// Writes `lines` (`user:hexkey`) as `dir/keys.psk`, the name qemu's
/// `tls-creds-psk` reads; its path.
pub fn psk_key_file(dir: &Path, lines: &[&str]) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("keys.psk");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

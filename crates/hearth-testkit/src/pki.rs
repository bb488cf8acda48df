//! A test certificate authority: certificates and keys in the layout qemu,
//! nbdkit and libnbd read (`ca-cert.pem`, `PREFIX-cert.pem`, `PREFIX-key.pem`).

use std::path::Path;

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

/// Writes `lines` (`user:hexkey`) as `dir/keys.psk`, the name qemu's
/// `tls-creds-psk` reads; its path.
pub fn psk_key_file(dir: &Path, lines: &[&str]) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("keys.psk");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

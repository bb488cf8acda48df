//! TLS (NBD_OPT_STARTTLS) against real clients: nbdinfo with `nbds://` URIs
//! and `tls-certificates=`, qemu-io with a `tls-creds-x509` object, and the
//! refusals an operator relies on — a plain-text client when TLS is
//! required, a client without a certificate or with one from another CA
//! when peers are verified. Certificates are made for each test (rcgen).
//! Settings refused at start are the binary's:
//! crates/hearth/tests/serve_refusals.rs.

mod serve_support;

use std::path::Path;
use std::process::Command;

use hearth_server::config::{Config, ExportConfig, ServerConfig, SizeValue, TlsMode};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose};
use serve_support::pki::Pki;
use serve_support::{export, have, qemu_io_tls, run, Server};

/// The test certificates: a server certificate for 127.0.0.1 and localhost.
fn pki() -> Pki {
    Pki::new("Hearth test CA", &["127.0.0.1", "localhost"])
}

/// A 4 MiB export "hearth" on a free loopback port, TLS `mode` with the
/// server certificates of `certificates`, `adjust`ed for the test.
fn start_tls(certificates: &Path, mode: TlsMode, adjust: impl FnOnce(&mut ServerConfig, &mut ExportConfig)) -> Server {
    let mut server = ServerConfig {
        listen: vec!["127.0.0.1:0".to_string()],
        tls: mode,
        tls_certificates: Some(certificates.to_path_buf()),
        ..Default::default()
    };
    let mut export = export("hearth", &["--backend", "memory", "--size", "4MiB"]);
    adjust(&mut server, &mut export);
    Server::start(Config { server, exports: vec![export] })
}

fn start(pki: &Pki, mode: TlsMode, verify_peer: bool) -> Server {
    start_tls(&pki.server, mode, |server, _| server.tls_verify_peer = verify_peer)
}

fn tls_uri(server: &Server, certificates: &Path) -> String {
    format!("nbds://{}/hearth?tls-certificates={}", server.tcp.unwrap(), certificates.display())
}

fn nbdinfo(uri: &str) -> std::process::Output {
    Command::new("nbdinfo").arg(uri).output().unwrap()
}

#[test]
fn required_tls_serves_real_clients_and_refuses_plain_text() {
    if !have("nbdinfo") || !have("qemu-io") {
        return;
    }
    let pki = pki();
    let mut server = start(&pki, TlsMode::Require, false);

    let out = run(Command::new("nbdinfo").arg(tls_uri(&server, &pki.anonymous)));
    assert!(out.contains("export-size: 4194304"), "{out}");

    // qemu-io writes and reads back over TLS (GnuTLS on its side).
    let addr = server.tcp.unwrap();
    let creds = format!("tls-creds-x509,id=tls0,endpoint=client,dir={}", pki.anonymous.display());
    let qemu_io = |commands: &[&str]| qemu_io_tls(addr, &creds, commands);
    qemu_io(&["write -P 0xa7 65536 131072", "flush"]);
    let out = qemu_io(&["read -P 0xa7 65536 131072", "read -P 0 0 65536"]);
    assert!(!out.contains("Pattern verification failed"), "{out}");

    // A plain-text client learns nothing and gets nothing.
    let plain = nbdinfo(&format!("nbd://{addr}/hearth"));
    assert!(!plain.status.success(), "a plain-text client must be refused when TLS is required");
    let listed = Command::new("nbdinfo").args(["--list", &format!("nbd://{addr}/")]).output().unwrap();
    let listed_out = String::from_utf8_lossy(&listed.stdout);
    assert!(!listed_out.contains("export=\"hearth\""), "exports listed in plain text:\n{listed_out}");
    assert!(server.alive(), "refusals must not take the server down");
    let out = run(Command::new("nbdinfo").arg(tls_uri(&server, &pki.anonymous)));
    assert!(out.contains("export-size: 4194304"), "still serving over TLS: {out}");
}

#[test]
fn optional_tls_lets_the_client_choose() {
    if !have("nbdinfo") {
        return;
    }
    let pki = pki();
    let server = start(&pki, TlsMode::On, false);
    let addr = server.tcp.unwrap();
    assert!(run(Command::new("nbdinfo").arg(format!("nbd://{addr}/hearth"))).contains("export-size: 4194304"));
    assert!(run(Command::new("nbdinfo").arg(tls_uri(&server, &pki.anonymous))).contains("export-size: 4194304"));
}

#[test]
fn verified_peers_need_a_certificate_from_the_servers_ca() {
    if !have("nbdinfo") {
        return;
    }
    let pki = pki();
    let mut server = start(&pki, TlsMode::Require, true);
    let out = run(Command::new("nbdinfo").arg(tls_uri(&server, &pki.client)));
    assert!(out.contains("export-size: 4194304"), "{out}");
    for (who, certificates) in [("no certificate", &pki.anonymous), ("another CA's certificate", &pki.rogue_client)] {
        let refused = nbdinfo(&tls_uri(&server, certificates));
        assert!(!refused.status.success(), "a client with {who} must be refused");
    }
    assert!(server.alive());
    let log = server.log_text();
    assert!(log.contains("TLS handshake"), "the refusal is logged:\n{log}");
}

#[test]
fn an_export_serves_only_the_tls_identities_it_names() {
    if !have("nbdinfo") {
        return;
    }
    let pki = pki();
    // A second client of the same CA, under another name.
    let bob = pki.root.path().join("bob");
    pki.issue_client(&bob, "bob");
    let mut server = start_tls(&pki.server, TlsMode::Require, |server, export| {
        server.tls_verify_peer = true;
        export.tls_identities = vec!["CN=hearth-test-client".to_string()];
    });
    let out = run(Command::new("nbdinfo").arg(tls_uri(&server, &pki.client)));
    assert!(out.contains("export-size: 4194304"), "{out}");
    let refused = nbdinfo(&tls_uri(&server, &bob));
    assert!(!refused.status.success(), "bob is verified but not named: the export must not exist for him");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("No such file or directory for export"),
        "refused as an unknown export (NBD_REP_ERR_UNKNOWN):\n{err}"
    );
    assert!(server.alive());
    let log = server.log_text();
    assert!(log.contains("identity=CN=hearth-test-client") && log.contains("identity=CN=bob"), "{log}");
}

/// A certificate valid from 60 days ago until `days_left` days from now
/// (negative: expired).
fn dated(params: &mut CertificateParams, days_left: i64) -> time::OffsetDateTime {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(60);
    params.not_after = now + time::Duration::days(days_left);
    params.not_after
}

/// Writes a CA valid for `ca_days` more days and a server certificate it
/// signed valid for `server_days` more days into `dir`, in nbdkit's layout;
/// returns their end dates.
fn dated_pki(dir: &Path, ca_days: i64, server_days: i64) -> (time::OffsetDateTime, time::OffsetDateTime) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "Dated CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_end = dated(&mut params, ca_days);
    let ca_key = KeyPair::generate().unwrap();
    let ca = params.self_signed(&ca_key).unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "dated server");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_end = dated(&mut params, server_days);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("ca-cert.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server-cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server-key.pem"), key.serialize_pem()).unwrap();
    (ca_end, server_end)
}

/// Expired and soon-to-expire certificates are loaded (the operator may be
/// replacing them) but each gets one warning naming its file and end date;
/// certificates with more than 30 days left get none (issue 42).
#[test]
fn certificates_near_their_end_are_warned_about_at_start() {
    let root = tempfile::tempdir().unwrap();
    let warnings = |ca_days: i64, server_days: i64| {
        let dir = root.path().join(format!("pki{ca_days}_{server_days}"));
        let ends = dated_pki(&dir, ca_days, server_days);
        let server = start_tls(&dir, TlsMode::Require, |server, export| {
            server.tls_verify_peer = true;
            export.size = Some(SizeValue::Text("1MiB".to_string()));
        });
        let log = server.log_text();
        let lines: Vec<String> = log.lines().filter(|l| l.contains("TLS certificate")).map(String::from).collect();
        (lines, ends)
    };
    // The month as x509-parser prints it ("Nov 27 ...") and the year.
    let date = |d: time::OffsetDateTime| (d.month().to_string()[..3].to_string(), d.year().to_string());
    let (lines, (ca_end, server_end)) = warnings(10, -1);
    assert_eq!(lines.len(), 2, "one line per certificate:\n{}", lines.join("\n"));
    let server_line = lines.iter().find(|l| l.contains("server-cert.pem")).expect("the server certificate named");
    let (month, year) = date(server_end);
    assert!(
        server_line.contains("has expired") && server_line.contains(&month) && server_line.contains(&year),
        "{server_line}"
    );
    let ca_line = lines.iter().find(|l| l.contains("ca-cert.pem")).expect("the CA named");
    let (month, year) = date(ca_end);
    assert!(
        ca_line.contains("expires within 30 days") && ca_line.contains(&month) && ca_line.contains(&year),
        "{ca_line}"
    );

    let (lines, _) = warnings(400, 31);
    assert!(lines.is_empty(), "more than 30 days left: {lines:?}");
}

/// Under --tls-verify-peer, certificates the server's CA signed but that
/// cannot vouch for a client are refused: one that has expired, and one
/// issued for servers only (no clientAuth purpose). A good one still serves.
#[test]
fn verified_peers_refuse_expired_and_server_only_client_certificates() {
    if !have("nbdinfo") {
        return;
    }
    let pki = pki();
    let expired = pki.root.path().join("expired");
    pki.ca.issue_expired(&expired, "client", &["late-client"], ExtendedKeyUsagePurpose::ClientAuth);
    let server_only = pki.root.path().join("server-only");
    pki.ca.issue(&server_only, "client", &["misused"], ExtendedKeyUsagePurpose::ServerAuth);
    let mut server = start(&pki, TlsMode::Require, true);
    for (who, certificates, why) in [
        ("an expired certificate", &expired, "xpired"),
        ("a server-only certificate", &server_only, "extended key usage for client authentication"),
    ] {
        let before = server.log_text().matches("TLS handshake").count();
        assert!(!nbdinfo(&tls_uri(&server, certificates)).status.success(), "a client with {who} must be refused");
        let refused_for = |log: &str| {
            let lines: Vec<_> = log.lines().filter(|l| l.contains("TLS handshake")).collect();
            lines.len() > before && lines[before..].iter().any(|l| l.contains(why))
        };
        let log = server.log_text_once(refused_for);
        assert!(refused_for(&log), "{who}: {why:?} in:\n{log}");
    }
    assert!(run(Command::new("nbdinfo").arg(tls_uri(&server, &pki.client))).contains("export-size: 4194304"));
    assert!(server.alive());
}

/// A raw NBD client that asks for STARTTLS, then offers TLS 1.0 and 1.1
/// only (Python's ssl over OpenSSL); prints how the handshake ended.
const OLD_TLS_CLIENT: &str = r#"
import socket, ssl, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def take(n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            sys.exit("closed by the server")
        data += chunk
    return data
take(18)
s.sendall(struct.pack(">I", 3) + b"IHAVEOPT" + struct.pack(">II", 5, 0))
reply = take(20)
assert struct.unpack(">I", reply[12:16])[0] == 1, "STARTTLS not acknowledged"
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
context.set_ciphers("ALL:@SECLEVEL=0")
context.minimum_version = ssl.TLSVersion.TLSv1
context.maximum_version = ssl.TLSVersion.TLSv1_1
try:
    context.wrap_socket(s)
    print("handshake completed")
except ssl.SSLError as e:
    print("refused:", e)
"#;

/// TLS below 1.2 is refused by both kinds of server: certificates (rustls)
/// and pre-shared keys (OpenSSL, minimum TLS 1.2), each logging why.
#[test]
fn clients_offering_only_tls_1_0_or_1_1_are_refused() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.psk");
    std::fs::write(&keys, "alice:00112233445566778899aabbccddeeff\n").unwrap();
    let certificates = start(&pki, TlsMode::Require, false);
    let psk = start_tls(&pki.server, TlsMode::Require, |server, _| {
        server.tls_certificates = None;
        server.tls_psk = Some(keys.clone());
    });
    // rustls refuses a hello without TLS 1.2's signature_algorithms extension.
    for (kind, server, why) in
        [("certificates", &certificates, "peer is incompatible"), ("PSK", &psk, "unsupported protocol")]
    {
        let out = run(Command::new("python3").args(["-c", OLD_TLS_CLIENT, &server.tcp.unwrap().port().to_string()]));
        assert!(out.starts_with("refused:"), "{kind}: {out}");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let log = server.log_text();
        let line = log.lines().find(|l| l.contains("TLS handshake")).unwrap_or_else(|| panic!("{kind}: {log}"));
        assert!(line.contains(why), "{kind}: {why:?} in {line}");
    }
}

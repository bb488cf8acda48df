//! SIGHUP reloads the server's TLS credentials (issue 42): a real TLS
//! client connected before the signal goes on reading, new clients get the
//! new certificate (one from another CA, so only a client trusting that CA
//! gets in), and a broken replacement keeps the old credentials, with one
//! log line naming the file.

mod serve_support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::ExtendedKeyUsagePurpose;
use serve_support::pki::Authority;
use serve_support::{have, have_python_nbd, Server, PYTHON};

/// Connects over TLS, writes a pattern, says `connected`, then reads the
/// pattern back for every line on stdin, saying `read ok` each time.
const LONG_CLIENT: &str = r#"
import sys, nbd
h = nbd.NBD()
h.set_tls(nbd.TLS_REQUIRE)
h.set_uri_allow_local_file(True)
h.connect_uri(sys.argv[1])
data = bytes(range(256)) * 256
h.pwrite(data, 0)
print("connected", flush=True)
for line in sys.stdin:
    assert h.pread(len(data), 0) == data
    print("read ok", flush=True)
"#;

fn nbdinfo_ok(server: &Server, trust: &Path) -> bool {
    let uri = format!("nbds://{}/hearth?tls-certificates={}", server.tcp.unwrap(), trust.display());
    let out = Command::new("nbdinfo").arg(uri).output().unwrap();
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("export-size: 4194304")
}

/// Waits (10 s at most) until the log has `count` lines containing `text`.
fn wait_for_log(server: &Server, text: &str, count: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.log_text();
        if log.lines().filter(|l| l.contains(text)).count() >= count {
            return log;
        }
        assert!(Instant::now() < deadline, "no {count} line(s) with {text:?} in the log:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn hangup(server: &Server) {
    let status = Command::new("kill").args(["-HUP", &server.pid().to_string()]).status().unwrap();
    assert!(status.success());
}

#[test]
fn sighup_swaps_certificates_for_new_clients_and_keeps_established_ones() {
    if !have("nbdinfo") || !have_python_nbd() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (Authority::new("Old CA"), Authority::new("New CA"));
    let certificates = root.path().join("server");
    old_ca.issue(&certificates, "server", &["127.0.0.1", "localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    let (trust_old, trust_new) = (root.path().join("trust-old"), root.path().join("trust-new"));
    old_ca.trust(&trust_old);
    new_ca.trust(&trust_new);

    let args = ["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0", "--tls", "require"];
    let mut server = Server::start(
        &[&args[..], &["--tls-certificates", certificates.to_str().unwrap()]].concat(),
        &root.path().join("log"),
    );
    assert!(nbdinfo_ok(&server, &trust_old), "the old certificate is served at start");
    assert!(!nbdinfo_ok(&server, &trust_new), "a client trusting only the new CA is refused before the reload");

    let uri = format!("nbds://{}/hearth?tls-certificates={}", server.tcp.unwrap(), trust_old.display());
    let mut client = Command::new(PYTHON)
        .args(["-c", LONG_CLIENT, &uri])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_client = client.stdin.take().unwrap();
    let mut from_client = BufReader::new(client.stdout.take().unwrap()).lines();
    assert_eq!(from_client.next().unwrap().unwrap(), "connected");

    // Replace the certificate and key with ones from the new CA, then SIGHUP.
    new_ca.issue(&certificates, "server", &["127.0.0.1", "localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    hangup(&server);
    wait_for_log(&server, "TLS credentials reloaded", 1);
    assert!(nbdinfo_ok(&server, &trust_new), "a new client gets the new certificate");
    assert!(!nbdinfo_ok(&server, &trust_old), "the old certificate is no longer served");
    writeln!(to_client, "read").unwrap();
    assert_eq!(from_client.next().unwrap().unwrap(), "read ok", "the connection made before SIGHUP still reads");

    // A broken replacement: the old (new CA's) credentials stay, one line names the file.
    std::fs::write(certificates.join("server-cert.pem"), "not a certificate\n").unwrap();
    hangup(&server);
    let log = wait_for_log(&server, "not reloaded", 1);
    let failures: Vec<_> = log.lines().filter(|l| l.contains("not reloaded")).collect();
    assert_eq!(failures.len(), 1, "{log}");
    assert!(failures[0].contains("server-cert.pem"), "the line names the file: {}", failures[0]);
    assert!(nbdinfo_ok(&server, &trust_new), "still serving with the credentials loaded before");
    writeln!(to_client, "read").unwrap();
    assert_eq!(from_client.next().unwrap().unwrap(), "read ok");
    drop(to_client);
    assert!(client.wait().unwrap().success());
    assert!(server.alive());
}

#[test]
fn sighup_rereads_the_pre_shared_key_file() {
    if !have("nbdinfo") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let key = |name: &str, hex: &str| {
        let path = root.path().join(name);
        std::fs::write(&path, format!("alice:{hex}\n")).unwrap();
        path
    };
    let (old, new) = ("00112233445566778899aabbccddeeff", "ffeeddccbbaa99887766554433221100");
    let server_keys = key("server.psk", old);
    let (client_old, client_new) = (key("old.psk", old), key("new.psk", new));
    let args = ["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0", "--tls", "require"];
    let server =
        Server::start(&[&args[..], &["--tls-psk", server_keys.to_str().unwrap()]].concat(), &root.path().join("log"));
    let served = |keys: &Path| {
        let uri = format!("nbds://alice@{}/hearth?tls-psk-file={}", server.tcp.unwrap(), keys.display());
        Command::new("nbdinfo").arg(uri).output().unwrap().status.success()
    };
    assert!(served(&client_old) && !served(&client_new));
    std::fs::write(&server_keys, format!("alice:{new}\n")).unwrap();
    hangup(&server);
    wait_for_log(&server, "TLS credentials reloaded", 1);
    assert!(served(&client_new) && !served(&client_old), "alice's new key is the one that works");
    std::fs::write(&server_keys, "alice:not-hex\n").unwrap();
    hangup(&server);
    let log = wait_for_log(&server, "not reloaded", 1);
    assert!(log.lines().any(|l| l.contains("not reloaded") && l.contains("server.psk")), "{log}");
    assert!(served(&client_new), "a bad key file keeps the keys loaded before");
}

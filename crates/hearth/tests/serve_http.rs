//! `hearth serve --backend http` refusing an upstream at start, as the
//! binary reports it (a non-zero exit, the reason on stderr): a web server
//! that ignores byte ranges, a writable export, an `https://` server with
//! an unknown certificate. What is served runs in-process:
//! crates/hearth-server/tests/serve_http.rs.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hearth_testkit::{free_port, wait_for_port};

const SIZE: usize = 4 << 20;

struct Setup {
    dir: tempfile::TempDir,
    www: PathBuf,
    port: u16,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    std::fs::write(www.join("disk.img"), hearth_testkit::pattern(SIZE, 23)).unwrap();
    Setup { dir, www, port: free_port() }
}

#[test]
fn a_server_that_ignores_ranges_or_a_writable_export_is_refused_at_start() {
    let s = setup();
    // Python's http.server answers every GET with the whole file (200).
    let mut python = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1", &s.port.to_string(), "--directory"])
        .arg(&s.www)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(s.port, || "python's http.server did not start".into());
    let url = format!("http://127.0.0.1:{}/disk.img", s.port);
    let hearth = env!("CARGO_BIN_EXE_hearth");
    let start = |extra: &[&str]| {
        let mut cmd = Command::new(hearth);
        cmd.args(["serve", "--backend", "http", "--upstream", &url, "--listen", "127.0.0.1:0"]).args(extra);
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let err = start(&["--read-only"]);
    assert!(err.contains("ignores byte-range requests") && err.contains(&url), "{err}");
    let err = start(&[]);
    assert!(err.contains("read_only: backend \"http\" is read-only"), "{err}");
    let _ = python.kill();
    let _ = python.wait();
}

/// `https://` upstreams are verified (ureq with rustls, against the public
/// CAs of webpki-roots): a web server whose certificate no such CA signed
/// (here self-signed, as a man in the middle would present) is refused at
/// start in one line, at once: a certificate is not retried as an outage.
#[test]
fn an_https_server_with_an_unknown_certificate_is_refused_at_start() {
    let s = setup();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap().self_signed(&key).unwrap();
    let (cert_path, key_path) = (s.dir.path().join("cert.pem"), s.dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let script = "import http.server, ssl, sys\n\
        server = http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)\n\
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
        context.load_cert_chain(sys.argv[2], sys.argv[3])\n\
        server.socket = context.wrap_socket(server.socket, server_side=True)\n\
        server.serve_forever()\n";
    let mut python = Command::new("python3")
        .args(["-c", script, &s.port.to_string()])
        .args([&cert_path, &key_path])
        .current_dir(&s.www)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_port(s.port, || "python's https server did not start".into());
    let url = format!("https://127.0.0.1:{}/disk.img", s.port);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--backend", "http", "--upstream", &url, "--read-only", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let _ = python.kill();
    let _ = python.wait();
    assert!(!out.status.success(), "served {url} with a self-signed certificate");
    let lines: Vec<_> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line:\n{err}");
    assert!(
        lines[0].contains(&url) && lines[0].contains("certificate is refused (invalid peer certificate: UnknownIssuer"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "refused after {:?}, not at once", started.elapsed());
}

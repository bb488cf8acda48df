//! Access control by client address against the real server: the server's
//! allow/deny lists refuse a connection at accept (with a log line), an
//! export's allow list hides it from other clients, and allowed clients are
//! unaffected, on the NBD and the metrics listeners. Clients come from
//! different loopback addresses (127.0.0.x).

mod serve_support;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use hearth_server::Config;
use serve_support::raw::{self, OPT_GO, REP_ACK, REP_ERR_UNKNOWN, REP_INFO};
use serve_support::{connect_from, have, run, Server};

/// Greeting, flags, then GO to `export`; returns the connection and the
/// last reply type.
fn open_from(source: &str, addr: SocketAddr, export: &str) -> (TcpStream, u32) {
    let mut s = connect_from(source, addr);
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).unwrap();
    std::io::Write::write_all(&mut s, &3u32.to_be_bytes()).unwrap();
    raw::send_option(&mut s, OPT_GO, &raw::go_data(export));
    loop {
        let (_, kind, _) = raw::option_reply(&mut s);
        if kind != REP_INFO {
            return (s, kind);
        }
    }
}

fn go_from(source: &str, addr: SocketAddr, export: &str) -> u32 {
    open_from(source, addr, export).1
}

fn start(dir: &std::path::Path) -> Server {
    let config = dir.join("hearth.toml");
    std::fs::write(
        &config,
        r#"
[server]
listen = ["127.0.0.1:0"]
metrics = "127.0.0.1:0"
admin = true
allow = ["127.0.0.0/8"]
deny = ["127.0.0.3"]

[[export]]
name = "open"
backend = "memory"
size = "1MiB"

[[export]]
name = "inner"
backend = "memory"
size = "2MiB"
allow = ["127.0.0.2/32"]

[[export]]
name = "single"
backend = "memory"
size = "1MiB"
max_connections = 1
"#,
    )
    .unwrap();
    Server::start(Config::load(&config).unwrap())
}

#[test]
fn addresses_are_refused_at_accept_and_exports_hidden_by_their_allow_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let addr = server.tcp.unwrap();

    // 127.0.0.2 may use both exports.
    assert_eq!(go_from("127.0.0.2", addr, "inner"), REP_ACK);
    assert_eq!(go_from("127.0.0.2", addr, "open"), REP_ACK);
    // 127.0.0.1 may use "open" only; "inner" does not exist for it.
    assert_eq!(go_from("127.0.0.1", addr, "open"), REP_ACK);
    assert_eq!(go_from("127.0.0.1", addr, "inner"), REP_ERR_UNKNOWN);

    // 127.0.0.3 is denied: closed before the greeting.
    let mut denied = connect_from("127.0.0.3", addr);
    assert!(raw::closed(&mut denied), "a denied address must be closed at accept");
    std::thread::sleep(Duration::from_millis(100));
    let log = server.log_text();
    assert!(log.contains("connection refused: address not allowed") && log.contains("127.0.0.3"), "{log}");
    assert!(server.alive());

    if have("nbdinfo") {
        let listed = run(Command::new("nbdinfo").args(["--list", &format!("nbd://{addr}/")]));
        assert!(listed.contains("export=\"open\"") && !listed.contains("export=\"inner\""), "{listed}");
        let out = run(Command::new("nbdinfo").arg(format!("nbd://{addr}/open")));
        assert!(out.contains("export-size: 1048576"), "{out}");
    }
}

/// `request` from `source` to the metrics listener: the status line and body.
fn http_from(source: &str, server: &Server, request: &str) -> (String, String) {
    let url = server.metrics.as_deref().expect("metrics");
    let addr: SocketAddr = url.strip_prefix("http://").and_then(|r| r.split('/').next()).unwrap().parse().unwrap();
    let mut s = connect_from(source, addr);
    std::io::Write::write_all(&mut s, format!("{request}\r\nHost: {addr}\r\n\r\n").as_bytes()).unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP answer");
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// An export's own allow list hides it on the metrics listener too (issue
/// 42): /metrics and /advice leave it out for addresses it does not allow,
/// and POST /mode does not know it, as NBD clients from there do not.
#[test]
fn an_exports_allow_list_hides_it_from_metrics_advice_and_admin() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let names = |page: &str| ["open", "inner", "single"].map(|e| page.contains(&format!("export=\"{e}\"")));
    let (_, metrics) = http_from("127.0.0.2", &server, "GET /metrics HTTP/1.0");
    assert_eq!(names(&metrics), [true, true, true], "127.0.0.2 may use every export");
    let (_, metrics) = http_from("127.0.0.1", &server, "GET /metrics HTTP/1.0");
    assert_eq!(names(&metrics), [true, false, true], "\"inner\" allows 127.0.0.2 only:\n{metrics}");
    let (_, advice) = http_from("127.0.0.1", &server, "GET /advice HTTP/1.0");
    assert!(advice.contains("\"open\"") && !advice.contains("\"inner\""), "{advice}");
    let (_, advice) = http_from("127.0.0.2", &server, "GET /advice HTTP/1.0");
    assert!(advice.contains("\"inner\""), "{advice}");

    let (status, body) = http_from("127.0.0.1", &server, "POST /mode?export=inner&mode=pass HTTP/1.0");
    assert!(status.contains("404") && body.contains("no export"), "{status} {body}");
    let (status, _) = http_from("127.0.0.2", &server, "POST /mode?export=inner&mode=through HTTP/1.0");
    assert!(status.contains("200"), "{status}");
}

#[test]
fn an_export_past_its_max_connections_refuses_the_next_client_with_a_reason() {
    const REP_ERR_POLICY: u32 = 0x8000_0002;
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    let addr = server.tcp.unwrap();
    let (mut first, kind) = open_from("127.0.0.1", addr, "single");
    assert_eq!(kind, REP_ACK);
    // The export takes one connection: the next GO is refused, and closed.
    let (mut second, kind) = open_from("127.0.0.1", addr, "single");
    assert_eq!(kind, REP_ERR_POLICY);
    assert!(raw::closed(&mut second));
    // Other exports are unaffected.
    assert_eq!(go_from("127.0.0.1", addr, "open"), REP_ACK);
    raw::answers(&mut first, 0);
    drop(first);
    // Its slot is free once the first client leaves.
    let mut again = None;
    for _ in 0..50 {
        let (s, kind) = open_from("127.0.0.1", addr, "single");
        if kind == REP_ACK {
            again = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    raw::answers(again.as_mut().expect("the slot came back"), 0);
    let log = server.log_text();
    assert!(log.contains("the export's max_connections reached"), "{log}");
    assert!(server.alive());
}

//! The metrics and admin listener's locks against the real server (issue
//! 42): it obeys the server's allow/deny lists as the NBD listeners do,
//! `POST /mode` needs the bearer token of `--admin-token-file`, and admin on
//! a non-loopback address without a token is refused at start. Clients come
//! from different loopback addresses (127.0.0.x).

mod serve_support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;

use serve_support::{connect_from, Server};

const TOKEN: &str = "7f3a9c0e5b2d4f61";

/// `request` (a request head, `\r\n`-separated, without the blank line)
/// sent from `source`: the status line and body, or `None` if the server
/// closed the connection without answering.
fn http_from(source: &str, addr: SocketAddr, request: &str) -> Option<(String, String)> {
    let mut s = connect_from(source, addr);
    // A refused client may be closed before its request is written.
    let _ = write!(s, "{request}\r\nHost: {addr}\r\nContent-Length: 0\r\n\r\n");
    let mut response = Vec::new();
    let _ = s.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.lines().next().unwrap_or("").to_string(), body.to_string()))
}

/// The metrics listener's port on 127.0.0.1 (it is bound to 0.0.0.0).
fn metrics_addr(server: &Server) -> SocketAddr {
    let url = server.metrics.as_deref().expect("--metrics");
    let bound: SocketAddr = url.strip_prefix("http://").and_then(|r| r.split('/').next()).unwrap().parse().unwrap();
    SocketAddr::from(([127, 0, 0, 1], bound.port()))
}

fn start(dir: &Path, extra: &[&str]) -> Result<Server, String> {
    let mut args = vec!["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0", "--write-back"];
    args.extend(["--metrics", "0.0.0.0:0", "--admin", "--allow", "127.0.0.1"]);
    args.extend(extra);
    Server::try_start(&args, &dir.join("log"))
}

#[test]
fn the_admin_door_obeys_the_access_list_and_asks_for_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("admin.token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let server = start(dir.path(), &["--admin-token-file", token_file.to_str().unwrap()]).unwrap();
    let addr = metrics_addr(&server);
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let switch = |source: &str, auth: &str| {
        http_from(source, addr, &format!("POST /mode?export=hearth&mode=pass HTTP/1.0\r\n{auth}"))
    };
    let mode = || {
        let (status, page) = http_from("127.0.0.1", addr, "GET /metrics HTTP/1.0").expect("an answer");
        assert!(status.contains("200"), "{status}");
        ["back", "pass"]
            .into_iter()
            .find(|m| page.contains(&format!("hearth_cache_mode{{export=\"hearth\",mode=\"{m}\"}} 1")))
    };

    // 127.0.0.2 is not on the allow list: closed unanswered, token or not, and /metrics is not shown.
    assert_eq!(switch("127.0.0.2", &bearer), None, "a POST from a refused address was answered");
    assert_eq!(http_from("127.0.0.2", addr, "GET /metrics HTTP/1.0"), None, "/metrics shown to a refused address");
    assert_eq!(mode(), Some("back"), "a refused address switched the mode");

    // An allowed address still needs the token.
    for auth in ["", "Authorization: Bearer wrong", "Authorization: Basic N2YzYTljMGU1YjJkNGY2MQ=="] {
        let (status, body) = switch("127.0.0.1", auth).expect("an answer");
        assert!(status.contains("401") && body.contains("Bearer"), "{auth:?}: {status} {body}");
    }
    assert_eq!(mode(), Some("back"), "switched without the token");
    let (status, body) = switch("127.0.0.1", &bearer).expect("an answer");
    assert!(status.contains("200"), "{status}: {body}");
    assert_eq!(mode(), Some("pass"));
    let log = server.log_text();
    assert!(log.contains("metrics connection refused: address not allowed") && log.contains("127.0.0.2"), "{log}");
    assert!(log.contains("admin request refused"), "{log}");
}

#[test]
fn admin_beyond_loopback_without_a_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = match start(dir.path(), &[]) {
        Ok(server) => {
            let answer = http_from("127.0.0.1", metrics_addr(&server), "POST /mode?export=hearth&mode=pass HTTP/1.0");
            panic!("admin served on 0.0.0.0 with no token; a POST from loopback got {answer:?}");
        }
        Err(log) => log,
    };
    let lines: Vec<_> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line:\n{log}");
    assert!(lines[0].contains("not loopback") && lines[0].contains("--admin-token-file"), "{log}");

    let empty = dir.path().join("empty.token");
    std::fs::write(&empty, "\n").unwrap();
    let log =
        start(dir.path(), &["--admin-token-file", empty.to_str().unwrap()]).err().expect("an empty token refused");
    assert!(log.contains("empty.token: empty"), "{log}");
}

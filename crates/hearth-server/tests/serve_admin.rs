//! The metrics and admin listener's locks against the real server (issue
//! 42): it obeys the server's allow/deny lists as the NBD listeners do,
//! `POST /mode` needs the bearer token of `--admin-token-file` (admin on a
//! non-loopback address without a token is refused at start:
//! crates/hearth/tests/serve_refusals.rs). Clients come from different
//! loopback addresses (127.0.0.x).

mod serve_support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;

use hearth_server::config::{Config, ServerConfig};
use serve_support::{connect_from, export, Server};

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

/// A write-back export "hearth" with admin on the metrics listener, bound
/// to every address, allowing 127.0.0.1 only and asking for `token_file`.
fn start(token_file: &Path) -> Server {
    let server = ServerConfig {
        listen: vec!["127.0.0.1:0".to_string()],
        metrics: Some("0.0.0.0:0".to_string()),
        admin: true,
        admin_token_file: Some(token_file.to_path_buf()),
        allow: vec!["127.0.0.1".to_string()],
        ..Default::default()
    };
    Server::start(Config {
        server,
        exports: vec![export("hearth", &["--backend", "memory", "--size", "4MiB", "--write-back"])],
    })
}

#[test]
fn the_admin_door_obeys_the_access_list_and_asks_for_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("admin.token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let server = start(&token_file);
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

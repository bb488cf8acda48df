//! What `hearth serve` refuses before it serves, as the binary reports it:
//! a non-zero exit and the bad setting named on stderr, in one line where
//! the rule is about flags the operator combined. The tests of what is
//! served run the server in-process (crates/hearth-server/tests).

mod serve_support;

use serve_support::pki::psk_key_file;
use serve_support::{have, refused_at_start, refused_in_one_line};

const ALICE_KEY: &str = "5f0c0d8e2b7a41c39e6d1f2a8b4c7e90d3a5b6c7e8f90123456789abcdef0011";

#[test]
fn bad_address_lists_are_named_before_serving() {
    refused_at_start(&["--allow", "10.0.0.0/8", "--allow", "10.0.0.0/33"], "server.allow[1]: \"10.0.0.0/33\"");
}

/// The key is the client's credential: optional TLS would let a plain-text
/// client skip it, as it did the certificate under verify-peer, so
/// `--tls on --tls-psk` is refused at start in one line naming the flags
/// (issue 42).
#[test]
fn psk_with_optional_tls_is_refused_at_start() {
    if !have("nbdinfo") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let keys = psk_key_file(&root.path().join("server"), &[&format!("alice:{ALICE_KEY}")]);
    let args = ["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0", "--tls", "on"];
    let args = [&args[..], &["--tls-psk", keys.to_str().unwrap()]].concat();
    let line = refused_in_one_line(&args, &root.path().join("log"), "--tls on --tls-psk");
    assert!(line.contains("--tls on --tls-psk") && line.contains("require"), "{line}");
}

#[test]
fn psk_settings_are_checked_before_serving() {
    let root = tempfile::tempdir().unwrap();
    let fails = refused_at_start;
    let good = psk_key_file(&root.path().join("good"), &[&format!("alice:{ALICE_KEY}")]);
    let good = good.to_str().unwrap();
    fails(&["--tls-psk", good], "server.tls_psk: given, but server.tls is \"off\"");
    fails(&["--tls", "require", "--tls-psk", good, "--tls-verify-peer"], "with server.tls_psk the key verifies");
    let bad = psk_key_file(&root.path().join("bad"), &[&format!("alice:{ALICE_KEY}"), "bob:xyz"]);
    fails(&["--tls", "require", "--tls-psk", bad.to_str().unwrap()], "bad/keys.psk: line 2: the key of \"bob\"");
    fails(&["--tls", "require", "--tls-psk", "/nonexistent/keys.psk"], "/nonexistent/keys.psk:");
    let dir = root.path().join("certificates");
    std::fs::create_dir_all(&dir).unwrap();
    fails(&["--tls", "require", "--tls-psk", good, "--tls-certificates", dir.to_str().unwrap()], "cannot be used with");
}

/// Admin on a metrics address that is not loopback needs a token: without
/// one the server does not start (one line naming the flag), nor with an
/// empty token file.
#[test]
fn admin_beyond_loopback_without_a_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0", "--write-back"];
    args.extend(["--metrics", "0.0.0.0:0", "--admin", "--allow", "127.0.0.1"]);
    let line = refused_in_one_line(&args, &dir.path().join("log"), "--admin on 0.0.0.0 without a token");
    assert!(line.contains("not loopback") && line.contains("--admin-token-file"), "{line}");

    let empty = dir.path().join("empty.token");
    std::fs::write(&empty, "\n").unwrap();
    refused_at_start(
        &["--metrics", "0.0.0.0:0", "--admin", "--admin-token-file", empty.to_str().unwrap()],
        "empty.token: empty",
    );
}

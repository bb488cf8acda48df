//! What `hearth serve` refuses before it serves, as the binary reports it:
//! a non-zero exit and the bad setting named on stderr, in one line where
//! the rule is about flags the operator combined. The tests of what is
//! served run the server in-process (crates/hearth-server/tests).

mod serve_support;

use std::path::Path;

use serve_support::pki::{psk_key_file, Pki};
use std::process::Command;

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

fn pki() -> Pki {
    Pki::new("Hearth test CA", &["127.0.0.1", "localhost"])
}

/// Optional TLS would let a plain-text client skip the certificate check,
/// so verify-peer with `--tls on` is refused at start, in one line naming
/// the flags (issue 42).
#[test]
fn verify_peer_with_optional_tls_is_refused_at_start() {
    if !have("nbdinfo") {
        return;
    }
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0", "--tls", "on", "--tls-verify-peer"];
    let log = dir.path().join("log");
    let args = [&args[..], &["--tls-certificates", pki.server.to_str().unwrap()]].concat();
    let line = refused_in_one_line(&args, &log, "--tls on --tls-verify-peer");
    assert!(line.contains("--tls on --tls-verify-peer") && line.contains("require"), "{line}");
}

#[test]
fn tls_settings_are_checked_before_serving() {
    let pki = pki();
    let fails = refused_at_start;
    fails(&["--tls", "require"], "server.tls_certificates: required");
    fails(&["--tls", "sometimes"], "is not off, on or require");
    fails(&["--tls-verify-peer", "--tls-certificates", pki.server.to_str().unwrap()], "server.tls is \"off\"");
    fails(&["--tls-verify-peer"], "server.tls_verify_peer: needs server.tls = \"require\"");
    let empty = tempfile::tempdir().unwrap();
    fails(&["--tls", "on", "--tls-certificates", empty.path().to_str().unwrap()], "server-cert.pem");
    // A certificate without its key, with another certificate's key, and verify-peer without a CA.
    let partial = |name: &str, files: &[(&str, &Path)]| {
        let dir = empty.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        for (file, from) in files {
            std::fs::copy(from.join(file), dir.join(file)).unwrap();
        }
        dir
    };
    let keyless = partial("keyless", &[("server-cert.pem", &pki.server)]);
    fails(&["--tls", "require", "--tls-certificates", keyless.to_str().unwrap()], "keyless/server-key.pem");
    let mismatched = partial("mismatched", &[("server-cert.pem", &pki.server)]);
    std::fs::copy(pki.client.join("client-key.pem"), mismatched.join("server-key.pem")).unwrap();
    fails(
        &["--tls", "require", "--tls-certificates", mismatched.to_str().unwrap()],
        "mismatched/server-cert.pem: with",
    );
    let no_ca = partial("no-ca", &[("server-cert.pem", &pki.server), ("server-key.pem", &pki.server)]);
    let no_ca_flags = ["--tls", "require", "--tls-verify-peer", "--tls-certificates", no_ca.to_str().unwrap()];
    fails(&no_ca_flags, "no-ca/ca-cert.pem");
    let certificates = ["--tls", "require", "--tls-certificates", pki.server.to_str().unwrap()];
    fails(
        &[&certificates[..], &["--tls-identity", "CN=alice"]].concat(),
        "tls_identities: needs server.tls_verify_peer",
    );
    let verified = [&certificates[..], &["--tls-verify-peer"]].concat();
    fails(
        &[&verified[..], &["--tls-identity", "alice"]].concat(),
        "tls_identities[0]: \"alice\" is not a distinguished name",
    );
}

/// `--backend nbd` with nothing listening at the upstream, or an upstream
/// that is not an NBD URI.
#[test]
fn a_missing_upstream_is_named_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = format!("nbd+unix:///?socket={}", dir.path().join("upstream.sock").display());
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--backend", "nbd", "--upstream", &upstream, "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot reach upstream nbd+unix:///?socket="), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_hearth"))
        .args(["serve", "--backend", "nbd", "--upstream", "http://x/y", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("upstream: \"http://x/y\": not an NBD URI"), "{err}");
}

/// A `tls-psk-file=` upstream needs a user: none in the URI, no
/// `tls-username=`, and no login name in `hearth`'s environment to fall
/// back on is refused at start in one line. Refused before dialling, so
/// no upstream needs to listen.
#[test]
fn a_psk_upstream_without_a_user_is_refused_at_start() {
    let root = tempfile::tempdir().unwrap();
    let alice = psk_key_file(&root.path().join("alice"), &[&format!("alice:{ALICE_KEY}")]);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // No user at all: none in the URI, no tls-username=, no login name to fall back on.
    let mut nameless = Command::new(env!("CARGO_BIN_EXE_hearth"));
    nameless.args(["serve", "--backend", "nbd", "--listen", "127.0.0.1:0", "--upstream"]);
    nameless.arg(format!("nbds://127.0.0.1:{port}/?tls-psk-file={}", alice.display()));
    let out = nameless.env_remove("LOGNAME").env_remove("USER").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.lines().count() == 1 && err.contains("no user for tls-psk-file="), "{err}");
}

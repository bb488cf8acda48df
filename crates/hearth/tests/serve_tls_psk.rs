//! TLS with pre-shared keys (`--tls-psk`, qemu's `tls-creds-psk`, libnbd's
//! `tls-psk-file=`) against real GnuTLS clients: nbdinfo and qemu-io served,
//! a wrong key, an unknown user and a plain-text client refused, optional
//! TLS refused at start, and exports limited to the key-file users they name.

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serve_support::{have, qemu_io_tls, Server};

const ALICE_KEY: &str = "5f0c0d8e2b7a41c39e6d1f2a8b4c7e90d3a5b6c7e8f90123456789abcdef0011";
const BOB_KEY: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";

/// Writes `lines` as `dir/keys.psk` (the name qemu's `tls-creds-psk` reads).
fn key_file(dir: &Path, lines: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("keys.psk");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn start(keys: &Path, log_dir: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0"];
    args.extend(["--tls", "require", "--tls-psk", keys.to_str().unwrap()]);
    args.extend(extra);
    Server::start(&args, &log_dir.join("log"))
}

fn nbdinfo(server: &Server, user: &str, keys: &Path) -> std::process::Output {
    // libnbd takes the TLS user name from the URI's user part.
    let uri = format!("nbds://{user}@{}/hearth?tls-psk-file={}", server.tcp.unwrap(), keys.display());
    Command::new("nbdinfo").arg(uri).output().unwrap()
}

fn served(out: &std::process::Output) -> bool {
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("export-size: 4194304")
}

#[test]
fn pre_shared_keys_serve_their_holders_and_refuse_everyone_else() {
    if !have("nbdinfo") || !have("qemu-io") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let server_keys =
        key_file(&root.path().join("server"), &[&format!("alice:{ALICE_KEY}"), &format!("bob:{BOB_KEY}")]);
    let alice = key_file(&root.path().join("alice"), &[&format!("alice:{ALICE_KEY}")]);
    let mut server = start(&server_keys, root.path(), &[]);

    let out = nbdinfo(&server, "alice", &alice);
    assert!(served(&out), "alice holds her key:\n{}", String::from_utf8_lossy(&out.stderr));

    // qemu-io (GnuTLS, tls-creds-psk reads DIR/keys.psk) writes and reads back.
    let addr = server.tcp.unwrap();
    let creds =
        format!("tls-creds-psk,id=tls0,endpoint=client,dir={},username=alice", alice.parent().unwrap().display());
    let qemu_io = |commands: &[&str]| qemu_io_tls(addr, &creds, commands);
    qemu_io(&["write -P 0x5c 65536 131072", "flush"]);
    let out = qemu_io(&["read -P 0x5c 65536 131072", "read -P 0 0 65536"]);
    assert!(!out.contains("Pattern verification failed"), "{out}");

    let wrong = key_file(&root.path().join("wrong"), &[&format!("alice:{BOB_KEY}")]);
    assert!(!served(&nbdinfo(&server, "alice", &wrong)), "alice's name with another key must be refused");
    let carol = key_file(&root.path().join("carol"), &[&format!("carol:{ALICE_KEY}")]);
    assert!(!served(&nbdinfo(&server, "carol", &carol)), "a user not in the server's file must be refused");
    let plain = Command::new("nbdinfo").arg(format!("nbd://{addr}/hearth")).output().unwrap();
    assert!(!plain.status.success(), "a plain-text client must be refused when TLS is required");

    assert!(server.alive(), "refusals must not take the server down");
    assert!(served(&nbdinfo(&server, "alice", &alice)), "still serving");
    let log = server.log_text();
    assert!(log.contains("identity=PSK user alice"), "the client's identity is logged:\n{log}");
    assert!(log.contains("user=carol") && log.contains("not in the key file"), "the unknown user is logged:\n{log}");
    assert!(log.contains("TLS handshake"), "the refusals are logged:\n{log}");
}

#[test]
fn an_export_serves_only_the_psk_users_it_names() {
    if !have("nbdinfo") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let server_keys =
        key_file(&root.path().join("server"), &[&format!("alice:{ALICE_KEY}"), &format!("bob:{BOB_KEY}")]);
    let alice = key_file(&root.path().join("alice"), &[&format!("alice:{ALICE_KEY}")]);
    let bob = key_file(&root.path().join("bob"), &[&format!("bob:{BOB_KEY}")]);
    let mut server = start(&server_keys, root.path(), &["--tls-identity", "alice"]);
    assert!(served(&nbdinfo(&server, "alice", &alice)));
    let refused = nbdinfo(&server, "bob", &bob);
    assert!(!refused.status.success(), "bob holds a key but is not named: the export must not exist for him");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("No such file or directory for export"), "refused as an unknown export:\n{err}");
    assert!(server.alive());
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
    let keys = key_file(&root.path().join("server"), &[&format!("alice:{ALICE_KEY}")]);
    let args = ["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0", "--tls", "on"];
    match Server::try_start(&[&args[..], &["--tls-psk", keys.to_str().unwrap()]].concat(), &root.path().join("log")) {
        Ok(server) => {
            let plain = Command::new("nbdinfo").arg(format!("nbd://{}/hearth", server.tcp.unwrap())).output().unwrap();
            panic!(
                "started with --tls on --tls-psk; a plain-text client without the key {}",
                if plain.status.success() { "was served" } else { "was refused" }
            );
        }
        Err(log) => {
            let lines: Vec<_> = log.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "one line:\n{log}");
            assert!(lines[0].contains("--tls on --tls-psk") && lines[0].contains("require"), "{log}");
        }
    }
}

#[test]
fn psk_settings_are_checked_before_serving() {
    let root = tempfile::tempdir().unwrap();
    let hearth = env!("CARGO_BIN_EXE_hearth");
    let base = ["serve", "--backend", "memory", "--size", "1MiB", "--listen", "127.0.0.1:0"];
    let fails = |extra: &[&str], want: &str| {
        let out = Command::new(hearth).args(base).args(extra).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{extra:?}: want {want:?} in:\n{err}");
    };
    let good = key_file(&root.path().join("good"), &[&format!("alice:{ALICE_KEY}")]);
    let good = good.to_str().unwrap();
    fails(&["--tls-psk", good], "server.tls_psk: given, but server.tls is \"off\"");
    fails(&["--tls", "require", "--tls-psk", good, "--tls-verify-peer"], "with server.tls_psk the key verifies");
    let bad = key_file(&root.path().join("bad"), &[&format!("alice:{ALICE_KEY}"), "bob:xyz"]);
    fails(&["--tls", "require", "--tls-psk", bad.to_str().unwrap()], "bad/keys.psk: line 2: the key of \"bob\"");
    fails(&["--tls", "require", "--tls-psk", "/nonexistent/keys.psk"], "/nonexistent/keys.psk:");
    let dir = root.path().join("certificates");
    std::fs::create_dir_all(&dir).unwrap();
    fails(&["--tls", "require", "--tls-psk", good, "--tls-certificates", dir.to_str().unwrap()], "cannot be used with");
}

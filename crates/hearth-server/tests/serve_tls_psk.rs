//! TLS with pre-shared keys (`--tls-psk`, qemu's `tls-creds-psk`, libnbd's
//! `tls-psk-file=`) against real GnuTLS clients: nbdinfo and qemu-io served,
//! a wrong key, an unknown user and a plain-text client refused, and
//! exports limited to the key-file users they name. Settings refused at
//! start are the binary's: crates/hearth/tests/serve_refusals.rs.

mod serve_support;

use std::path::Path;
use std::process::Command;

use hearth_server::config::{Config, ServerConfig, TlsMode};
use serve_support::pki::psk_key_file;
use serve_support::{export, have, qemu_io_tls, Server};

const ALICE_KEY: &str = "5f0c0d8e2b7a41c39e6d1f2a8b4c7e90d3a5b6c7e8f90123456789abcdef0011";
const BOB_KEY: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";

/// A 4 MiB export "hearth" served only to the key file's users, or only to
/// `identities` of them.
fn start(keys: &Path, identities: &[&str]) -> Server {
    let mut export = export("hearth", &["--backend", "memory", "--size", "4MiB"]);
    export.tls_identities = identities.iter().map(|i| i.to_string()).collect();
    Server::start(Config {
        server: ServerConfig {
            listen: vec!["127.0.0.1:0".to_string()],
            tls: TlsMode::Require,
            tls_psk: Some(keys.to_path_buf()),
            ..Default::default()
        },
        exports: vec![export],
    })
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
        psk_key_file(&root.path().join("server"), &[&format!("alice:{ALICE_KEY}"), &format!("bob:{BOB_KEY}")]);
    let alice = psk_key_file(&root.path().join("alice"), &[&format!("alice:{ALICE_KEY}")]);
    let mut server = start(&server_keys, &[]);

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

    let wrong = psk_key_file(&root.path().join("wrong"), &[&format!("alice:{BOB_KEY}")]);
    assert!(!served(&nbdinfo(&server, "alice", &wrong)), "alice's name with another key must be refused");
    let carol = psk_key_file(&root.path().join("carol"), &[&format!("carol:{ALICE_KEY}")]);
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
        psk_key_file(&root.path().join("server"), &[&format!("alice:{ALICE_KEY}"), &format!("bob:{BOB_KEY}")]);
    let alice = psk_key_file(&root.path().join("alice"), &[&format!("alice:{ALICE_KEY}")]);
    let bob = psk_key_file(&root.path().join("bob"), &[&format!("bob:{BOB_KEY}")]);
    let mut server = start(&server_keys, &["alice"]);
    assert!(served(&nbdinfo(&server, "alice", &alice)));
    let refused = nbdinfo(&server, "bob", &bob);
    assert!(!refused.status.success(), "bob holds a key but is not named: the export must not exist for him");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("No such file or directory for export"), "refused as an unknown export:\n{err}");
    assert!(server.alive());
}

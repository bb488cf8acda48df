//! docs/attach.md's commands, run as written: every `sh` block after a
//! "Tested:" line is read from the page and each command in it run against
//! a real server, with only the address, the Unix socket and the client
//! certificate directory replaced by the test's. TLS commands go to a
//! server requiring TLS and verified client certificates.

mod serve_support;

use std::path::Path;
use std::process::Command;

use hearth_server::config::{Config, ServerConfig, TlsMode};
use rcgen::ExtendedKeyUsagePurpose;
use serve_support::pki::Authority;
use serve_support::{export, have, Server};

/// The commands of the page's tested blocks, continuation lines joined.
fn tested_commands(page: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "Tested:" {
            continue;
        }
        assert_eq!(lines.by_ref().find(|l| !l.trim().is_empty()), Some("```sh"), "a sh block follows \"Tested:\"");
        let mut command = String::new();
        for line in lines.by_ref().take_while(|l| *l != "```") {
            match line.strip_suffix('\\') {
                Some(part) => command.push_str(part),
                None => {
                    command.push_str(line);
                    commands.push(std::mem::take(&mut command));
                }
            }
        }
    }
    commands
}

#[test]
fn the_attach_pages_commands_work_as_written() {
    if !have("nbdinfo") || !have("nbdcopy") || !have("qemu-img") || !have("qemu-io") {
        return;
    }
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/attach.md")).unwrap();
    let commands = tested_commands(&page);
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new("attach CA");
    let (server_pki, client_pki) = (dir.path().join("pki"), dir.path().join("client-pki"));
    ca.issue(&server_pki, "server", &["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    ca.issue(&client_pki, "client", &["attach-client"], ExtendedKeyUsagePurpose::ClientAuth);
    let socket = dir.path().join("hearth.sock");
    let disk = dir.path().join("disk.img");
    let exports =
        || vec![export("disk", &["--backend", "sparse", "--size", "16MiB", "--path", disk.to_str().unwrap()])];
    let listen = vec!["127.0.0.1:0".to_string()];
    let plain = Server::start(Config {
        server: ServerConfig { listen: listen.clone(), unix: vec![socket.clone()], ..Default::default() },
        exports: exports(),
    });
    let tls = Server::start(Config {
        server: ServerConfig {
            listen,
            tls: TlsMode::Require,
            tls_verify_peer: true,
            tls_certificates: Some(server_pki.clone()),
            ..Default::default()
        },
        exports: exports(),
    });

    let mut ran = 0;
    for command in &commands {
        let server = if command.contains("tls") { &tls } else { &plain };
        let addr = server.tcp.unwrap();
        let local = command
            .replace("127.0.0.1:10809", &addr.to_string())
            .replace("host=127.0.0.1,port=10809", &format!("host={},port={}", addr.ip(), addr.port()))
            .replace("/run/hearth.sock", socket.to_str().unwrap())
            .replace("/etc/hearth/client-pki", client_pki.to_str().unwrap());
        let out = Command::new("sh").args(["-c", &local]).current_dir(dir.path()).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{command}\nran as: {local}\nstdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(!stdout.contains("Pattern verification failed"), "{command}:\n{stdout}");
        if command.starts_with("nbdinfo") && !command.contains("--") {
            assert!(stdout.contains("export-size: 16777216"), "{command}:\n{stdout}");
        }
        if command.starts_with("qemu-img info") {
            assert!(stdout.contains("virtual size: 16 MiB"), "{command}:\n{stdout}");
        }
        if command.starts_with("qemu-img compare") {
            assert!(stdout.contains("Images are identical"), "{command}:\n{stdout}");
        }
        ran += 1;
    }
    assert_eq!(ran, 14, "the page's tested commands: {commands:#?}");
    assert!(tls.log_text().contains("identity=CN=attach-client"), "TLS commands used the client certificate");
}

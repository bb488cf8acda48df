//! `hearth serve`'s own flags against unmodified NBD clients: `--run`
//! (captive mode) driving qemu-io, and `-r` over a config file's exports.
//! The other client interop tests run the server in-process
//! (crates/hearth-server/tests/serve_interop.rs).

mod serve_support;

use std::process::Command;

use serve_support::{have, pattern, run, Server};

#[test]
fn qemu_io_writes_and_verifies_patterns_over_tcp() {
    if !have("qemu-io") {
        return;
    }
    // A 1 MiB cache under 8 MiB of data: verification crosses evictions and misses.
    // The server is captive (--run): it stops when qemu-io is done.
    let reads = ["read -P 0x5a 0 1000", "read -P 0xa5 1000 5000", "read -P 0x5a 6000 7M", "read -P 0x3c 12M 4K"];
    let commands = ["write -P 0x5a 0 8M", "write -P 0xa5 1000 5000", "write -P 0x3c 12M 4K"]
        .iter()
        .chain(&reads)
        .chain(&["read -P 0x00 13M 1M", "flush"])
        .map(|c| format!("-c '{c}'"))
        .collect::<Vec<_>>()
        .join(" ");
    // The check is real: a wrong expected pattern is reported.
    let script = format!(
        r#"qemu-io -f raw {commands} "$uri" || exit 1; echo ===; qemu-io -f raw -c 'read -P 0x77 0 4K' "$uri" 2>&1; exit 0"#
    );
    let out = run(Command::new(env!("CARGO_BIN_EXE_hearth")).args([
        "serve",
        "--backend",
        "memory",
        "--size",
        "16MiB",
        "--cache-size",
        "1MiB",
        "--name",
        "disk",
        "--listen",
        "127.0.0.1:0",
        "--run",
        &script,
    ]));
    let (out, wrong) = out.split_once("===").expect("both qemu-io runs");
    assert!(!out.contains("fail"), "{out}");
    assert_eq!(out.matches("read ").count(), 5, "{out}");
    assert!(wrong.contains("Pattern verification failed"), "{wrong}");
}

/// `-r` makes every export of a config file read-only, as `qemu-nbd -r` and
/// `nbdkit -r`: a write that reaches the server gets EPERM and changes
/// nothing, and qemu-io sees a read-only export.
#[test]
fn read_only_flag_covers_every_export_of_a_config_file() {
    if !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nbd.sock");
    let disk = dir.path().join("disk.img");
    std::fs::write(&disk, pattern(1 << 20, 3)).unwrap();
    let config = dir.path().join("hearth.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nunix = [\"{}\"]\n\n[[export]]\nname = \"mem\"\nbackend = \"memory\"\nsize = \"1MiB\"\n\n\
             [[export]]\nname = \"file\"\nbackend = \"file\"\npath = \"{}\"\n",
            sock.display(),
            disk.display()
        ),
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap(), "-r"], &dir.path().join("log"));
    for (export, before) in [("mem", vec![0; 4096]), ("file", pattern(1 << 20, 3)[..4096].to_vec())] {
        // hearth-client sends the WRITE whatever the flags say: the server refuses it.
        let mut client = hearth_client::Client::connect_unix(&sock, export).unwrap();
        let refused = client.write(0, &[0x5a; 4096], false).unwrap_err();
        assert!(refused.to_string().starts_with("NBD error 1 "), "{export}: EPERM expected: {refused}");
        assert_eq!(client.read(0, 4096).unwrap(), before, "{export}: the refused write changed the data");
        let out = Command::new("qemu-io")
            .args(["-f", "raw", "-c", "write -P 0x5a 0 4K", &server.uri(export)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(!text.contains("wrote 4096"), "{export}: qemu-io wrote to a read-only export:\n{text}");
    }
    assert!(std::fs::read(&disk).unwrap() == pattern(1 << 20, 3), "the backing file changed");
}

//! `hearth serve` among other processes, as nbdkit behaves: a second server
//! never takes the Unix socket of a live one, a socket left by a server that
//! has gone is reused, a path that is not a socket is never removed,
//! `--pidfile` names the server while it runs, and `--run CMD` serves CMD
//! (nbdkit's captive mode) and exits with its status.

mod serve_support;

use std::process::Command;

use serve_support::{have, run, Server};

fn memory_export(socket: &std::path::Path) -> Vec<String> {
    ["--backend", "memory", "--size", "4MiB", "--unix", socket.to_str().unwrap()].map(String::from).to_vec()
}

fn start(args: &[String], log: &std::path::Path) -> Result<Server, String> {
    Server::try_start(&args.iter().map(String::as_str).collect::<Vec<_>>(), log)
}

/// The second server is refused with one line, and the first still serves
/// through its socket (issue 42: the socket file used to be deleted).
#[test]
fn a_second_server_does_not_take_a_live_servers_socket() {
    if !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("hearth.sock");
    let mut first = start(&memory_export(&socket), &dir.path().join("first.log")).unwrap();
    let uri = first.uri("hearth");
    assert!(run(Command::new("nbdinfo").arg(&uri)).contains("export-size: 4194304"));

    let second = start(&memory_export(&socket), &dir.path().join("second.log"));
    let log = match second {
        Ok(_) => panic!("a second server started on the live server's socket {}", socket.display()),
        Err(log) => log,
    };
    let lines: Vec<_> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line:\n{log}");
    assert!(lines[0].contains("server.unix") && lines[0].contains("Address already in use"), "{log}");

    assert!(socket.exists(), "the live server's socket file was removed");
    assert!(first.alive());
    let out = Command::new("nbdinfo").arg(&uri).output().unwrap();
    assert!(out.status.success(), "the first server is unreachable: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_stale_socket_is_reused_and_other_files_are_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    // A socket nothing listens on any more, as a killed server leaves it.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let server = start(&memory_export(&stale), &dir.path().join("stale.log")).unwrap();
    assert!(std::os::unix::net::UnixStream::connect(&stale).is_ok(), "serving on the reused path");
    drop(server);

    let file = dir.path().join("data");
    std::fs::write(&file, b"keep me").unwrap();
    let log = match start(&memory_export(&file), &dir.path().join("file.log")) {
        Ok(_) => panic!("served on a path that is a regular file"),
        Err(log) => log,
    };
    assert!(log.contains("server.unix"), "{log}");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me", "a regular file was touched");
}

/// `--pidfile` holds the server's pid once it is ready, and is gone after a
/// clean exit.
#[test]
fn the_pidfile_names_the_server_until_it_exits() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("hearth.pid");
    let mut args = memory_export(&dir.path().join("hearth.sock"));
    args.extend(["--pidfile".to_string(), pidfile.to_str().unwrap().to_string()]);
    let server = start(&args, &dir.path().join("log")).unwrap();
    let written = std::fs::read_to_string(&pidfile).expect("the pidfile is written by the time of `ready`");
    assert_eq!(written, format!("{}\n", server.pid()));
    assert!(server.stop("TERM"), "a clean exit");
    assert!(!pidfile.exists(), "the pidfile is removed at exit");
}

/// `hearth serve ARGS --run COMMAND`, to completion.
fn captive(args: &[String], command: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hearth"))
        .arg("serve")
        .args(args)
        .args(["--log", "warn", "--run", command])
        .output()
        .unwrap()
}

/// The command reaches the export through `$uri` and sees nbdkit's other
/// variables; the server is gone when it exits, with its status.
#[test]
fn run_serves_the_command_and_exits_with_its_status() {
    if !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("hearth.sock");
    let out = captive(
        &memory_export(&socket),
        r#"nbdinfo "$uri" && echo "unixsocket=$unixsocket port=$port exportname=$exportname nbd=$nbd" && exit 7"#,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "the command's status:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("export-size: 4194304"), "{stdout}");
    let uri = format!("nbd+unix:///hearth?socket={}", socket.display());
    let vars = format!("unixsocket={} port= exportname=hearth nbd={uri}", socket.display());
    assert!(stdout.contains(&vars), "want {vars:?} in:\n{stdout}");
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_err(), "the server still listens after --run exited");

    // Over TCP, $uri names the bound port; a command that succeeds is a success.
    let tcp = ["--backend", "memory", "--size", "1MiB", "--name", "disk", "--listen", "127.0.0.1:0"].map(String::from);
    let out = captive(&tcp, r#"echo "uri=$uri port=$port"; nbdinfo --size "$uri""#);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let port = stdout.lines().find_map(|l| l.split_once(" port=")).map(|(_, p)| p.to_string()).expect("port line");
    assert!(stdout.contains(&format!("uri=nbd://127.0.0.1:{port}/disk")) && stdout.contains("1048576"), "{stdout}");

    // A failure and a signal, as a shell reports them.
    assert_eq!(captive(&tcp, "exit 3").status.code(), Some(3));
    assert_eq!(captive(&tcp, "kill -TERM $$").status.code(), Some(128 + 15));
}

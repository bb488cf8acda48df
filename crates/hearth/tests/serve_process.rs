//! `hearth serve` among other processes, as nbdkit behaves: a second server
//! never takes the Unix socket of a live one, a socket left by a server that
//! has gone is reused, a path that is not a socket is never removed, and
//! `--pidfile` names the server while it runs.

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

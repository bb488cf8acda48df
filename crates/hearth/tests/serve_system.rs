//! `hearth serve` as a system service: privilege drop after binding
//! (`--user`/`--group`, nbdkit's `-u`/`-g`), systemd socket activation
//! (`LISTEN_FDS`, driven by `systemd-socket-activate`) and the unit files
//! in contrib/systemd.

mod serve_support;

use std::process::Command;

use serve_support::{free_port, have, run, Server};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("the privilege-drop tests need root under CI=true");
        }
        eprintln!("skipped: not root");
    }
    root
}

/// The `Uid:`/`Gid:`/`Groups:` values of /proc/PID/status.
fn ids(pid: u32) -> (String, String, String) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name} in {status}"));
        line[name.len()..].split_whitespace().collect::<Vec<_>>().join(" ")
    };
    (field("Uid:"), field("Gid:"), field("Groups:"))
}

fn id(flag: &str, user: &str) -> String {
    run(Command::new("id").args([flag, user])).trim().to_string()
}

fn memory_export() -> Vec<&'static str> {
    vec!["--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0"]
}

/// Started as root with `--user nobody`, the server runs as nobody (real,
/// effective, saved and filesystem ids; no supplementary groups but
/// nobody's) and still serves reads and writes on the port root bound.
#[test]
fn user_drops_root_after_binding_and_still_serves() {
    if !is_root() || !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[&memory_export()[..], &["--user", "nobody"]].concat(), &dir.path().join("log"));
    let (uid, gid) = (id("-u", "nobody"), id("-g", "nobody"));
    let (uids, gids, groups) = ids(server.pid());
    assert_eq!(uids, [uid.as_str(); 4].join(" "), "Uid: real, effective, saved, filesystem");
    assert_eq!(gids, [gid.as_str(); 4].join(" "));
    assert_eq!(groups, gid, "supplementary groups: only nobody's own");
    // Every thread (the runtime's workers, the background readers), not only the first.
    let tasks: Vec<_> =
        std::fs::read_dir(format!("/proc/{}/task", server.pid())).unwrap().map(|t| t.unwrap().path()).collect();
    assert!(tasks.len() > 1, "a multi-threaded server");
    for task in tasks {
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        assert_eq!(uid_line.split_whitespace().skip(1).collect::<Vec<_>>(), [uid.as_str(); 4], "{}", task.display());
    }
    let uri = format!("nbd://{}/hearth", server.tcp.unwrap());
    let out =
        run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x3c 0 1M", "-c", "read -P 0x3c 0 1M", &uri]));
    assert!(!out.contains("Pattern verification failed"), "{out}");
    assert!(server.log_text().contains("privileges dropped"), "{}", server.log_text());
}

/// `--group` alone changes only the group, as nbdkit's `-g`.
#[test]
fn group_alone_keeps_the_user() {
    if !is_root() || !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&[&memory_export()[..], &["--group", "nogroup"]].concat(), &dir.path().join("log"));
    let gid = run(Command::new("getent").args(["group", "nogroup"])).split(':').nth(2).unwrap().to_string();
    let (uids, gids, groups) = ids(server.pid());
    assert_eq!(uids, "0 0 0 0");
    assert_eq!(gids, [gid.as_str(); 4].join(" "));
    assert_eq!(groups, gid);
    assert!(run(Command::new("nbdinfo").arg(format!("nbd://{}/hearth", server.tcp.unwrap())))
        .contains("export-size: 4194304"));
}

/// A user or group that does not exist, or a start without root, is
/// refused before anything is bound, in one line naming the flag.
#[test]
fn a_user_that_cannot_be_taken_is_refused_at_start() {
    if !is_root() || !have("setpriv") {
        return;
    }
    let hearth = env!("CARGO_BIN_EXE_hearth");
    let refused = |cmd: &mut Command, want: &str| {
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<_> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            !out.status.success() && lines.len() == 1 && lines[0].contains(want),
            "want one line with {want:?}:\n{err}"
        );
    };
    let serve = |extra: &[&str]| {
        let mut cmd = Command::new(hearth);
        cmd.arg("serve").args(memory_export()).args(extra);
        cmd
    };
    refused(&mut serve(&["--user", "no-such-user-42"]), "--user no-such-user-42: no such user");
    refused(
        &mut serve(&["--user", "nobody", "--group", "no-such-group-42"]),
        "--group no-such-group-42: no such group",
    );
    let (nobody, nogroup) = (id("-u", "nobody"), id("-g", "nobody"));
    let mut unprivileged = Command::new("setpriv");
    let (reuid, regid) = (format!("--reuid={nobody}"), format!("--regid={nogroup}"));
    // A copy nobody can reach: the build directory may sit under a directory only root may enter.
    let open_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open_dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let copy = open_dir.path().join("hearth");
    std::fs::copy(hearth, &copy).unwrap();
    unprivileged.args([reuid.as_str(), regid.as_str(), "--clear-groups", copy.to_str().unwrap(), "serve"]);
    unprivileged.args(memory_export()).args(["--user", "nobody"]);
    refused(&mut unprivileged, &format!("--user nobody: changing user or group needs root (running as uid {nobody})"));
}

/// `systemd-socket-activate -l ADDR... PROGRAM ARGS...`: it binds, then
/// execs the program (same pid) at the first connection, with LISTEN_FDS set.
fn socket_activated(listen: &[String], program: &[&str], log: &std::path::Path) -> Server {
    let mut command = Command::new("systemd-socket-activate");
    for l in listen {
        command.args(["-l", l]);
    }
    command.args(program);
    let server = Server::spawn(command, log);
    // Its sockets are bound once it has said so for each.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.log_text().matches("Listening on").count() < listen.len() {
        assert!(std::time::Instant::now() < deadline, "systemd-socket-activate did not listen:\n{}", server.log_text());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    server
}

/// Started by systemd-socket-activate with a TCP and a Unix socket, the
/// server binds nothing itself: it serves real clients on both inherited
/// sockets, names them in its `listening` lines, and leaves the socket file
/// to the manager that made it.
#[test]
fn socket_activation_serves_on_the_inherited_sockets() {
    if !have("systemd-socket-activate") || !have("nbdinfo") || !have("qemu-io") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let socket = dir.path().join("activated.sock");
    let listen = [format!("127.0.0.1:{port}"), socket.display().to_string()];
    let program = [env!("CARGO_BIN_EXE_hearth"), "serve", "--backend", "memory", "--size", "4MiB"];
    let mut server = socket_activated(&listen, &program, &dir.path().join("log"));
    // This first connection waits in the backlog while the server starts.
    let tcp_uri = format!("nbd://127.0.0.1:{port}/hearth");
    assert!(run(Command::new("nbdinfo").arg(&tcp_uri)).contains("export-size: 4194304"));
    server.wait_ready().unwrap();
    assert_eq!(server.tcp, Some(format!("127.0.0.1:{port}").parse().unwrap()));
    assert_eq!(server.unix.as_deref(), Some(socket.as_path()));
    let unix_uri = format!("nbd+unix:///hearth?socket={}", socket.display());
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -P 0x5a 0 64k", &unix_uri]));
    let out = run(Command::new("qemu-io").args(["-f", "raw", "-c", "read -P 0x5a 0 64k", &tcp_uri]));
    assert!(!out.contains("Pattern verification failed"), "written over Unix, read over TCP:\n{out}");
    assert!(server.log_text().lines().all(|l| !l.contains("ERROR")), "{}", server.log_text());
    assert!(server.stop("TERM"), "exits 0 on SIGTERM");
    assert!(socket.exists(), "the inherited socket file belongs to the manager that bound it");
}

/// Sockets from systemd and `--listen`/`--unix` together are refused in one
/// line (which would the operator mean?); LISTEN_FDS for another process
/// is not ours, and the server binds its own.
#[test]
fn socket_activation_with_listen_flags_is_refused() {
    if !have("systemd-socket-activate") || !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let listen = [format!("127.0.0.1:{port}")];
    let program = [env!("CARGO_BIN_EXE_hearth"), "serve", "--backend", "memory", "--size", "4MiB"];
    let mut server =
        socket_activated(&listen, &[&program[..], &["--listen", "127.0.0.1:0"]].concat(), &dir.path().join("log"));
    let refused = Command::new("nbdinfo").arg(format!("nbd://127.0.0.1:{port}/hearth")).output().unwrap();
    assert!(!refused.status.success());
    let log = server.wait_ready().expect_err("started with both --listen and LISTEN_FDS");
    // What systemd-socket-activate says ends with its "Execing ..." line.
    let ours = log.split_once("Execing ").and_then(|(_, rest)| rest.split_once('\n')).map_or("", |(_, ours)| ours);
    let lines: Vec<_> = ours.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line:\n{log}");
    assert!(
        lines[0].contains("--listen/--unix") && lines[0].contains("systemd socket activation (LISTEN_FDS=1)"),
        "{log}"
    );

    let mut command = Command::new(env!("CARGO_BIN_EXE_hearth"));
    command.args(["serve", "--backend", "memory", "--size", "4MiB", "--listen", "127.0.0.1:0"]);
    command.env("LISTEN_PID", "1").env("LISTEN_FDS", "1");
    let mut other = Server::spawn(command, &dir.path().join("other.log"));
    other.wait_ready().unwrap();
    assert!(run(Command::new("nbdinfo").arg(other.uri("hearth"))).contains("export-size: 4194304"));
}

fn unit_file(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/systemd").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The values of `key=` lines in a unit file.
fn unit_values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines().filter_map(|l| l.strip_prefix(key)?.strip_prefix('=')).collect()
}

/// contrib/systemd's units pass `systemd-analyze verify` with no warning
/// (the binary pointed at the one built), and the service's ExecStart,
/// with only the binary, config and user replaced, serves on sockets like
/// the socket unit's under systemd-socket-activate, dropping root. No real
/// systemd runs here (PID 1 is not systemd): this is what can be checked.
#[test]
fn the_systemd_units_verify_and_their_command_line_serves() {
    if !have("systemd-analyze") || !have("systemd-socket-activate") || !have("nbdinfo") || !is_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hearth = env!("CARGO_BIN_EXE_hearth");
    let (service, socket) = (unit_file("hearth.service"), unit_file("hearth.socket"));
    std::fs::write(dir.path().join("hearth.service"), service.replace("/usr/local/bin/hearth", hearth)).unwrap();
    std::fs::write(dir.path().join("hearth.socket"), &socket).unwrap();
    let out = Command::new("systemd-analyze")
        .current_dir(dir.path())
        .args(["verify", "./hearth.service", "./hearth.socket"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify:\n{said}");

    assert_eq!(unit_values(&socket, "Accept"), ["no"], "hearth serves the listening sockets itself");
    let streams = unit_values(&socket, "ListenStream");
    assert_eq!(streams, ["10809", "/run/hearth/hearth.sock"]);
    let (port, unix) = (free_port(), dir.path().join("hearth.sock"));
    let listen = [format!("127.0.0.1:{port}"), unix.display().to_string()];

    let config = dir.path().join("hearth.toml");
    std::fs::write(&config, "[[export]]\nname = \"disk\"\nbackend = \"memory\"\nsize = \"4MiB\"\n").unwrap();
    let exec = unit_values(&service, "ExecStart");
    assert_eq!(exec.len(), 1);
    let mut words: Vec<String> = exec[0].split_whitespace().map(String::from).collect();
    assert_eq!(words[..2], ["/usr/local/bin/hearth", "serve"]);
    for (flag, value) in [("--config", config.to_str().unwrap()), ("--user", "nobody"), ("--group", "nogroup")] {
        let at = words.iter().position(|w| w == flag).unwrap_or_else(|| panic!("no {flag} in {exec:?}"));
        words[at + 1] = value.to_string();
    }
    words[0] = hearth.to_string();
    let program: Vec<&str> = words.iter().map(String::as_str).collect();
    let mut server = socket_activated(&listen, &program, &dir.path().join("log"));
    assert!(run(Command::new("nbdinfo").arg(format!("nbd://127.0.0.1:{port}/disk"))).contains("export-size: 4194304"));
    server.wait_ready().unwrap();
    let unix_uri = format!("nbd+unix:///disk?socket={}", unix.display());
    assert!(run(Command::new("nbdinfo").arg(unix_uri)).contains("export-size: 4194304"));
    let (uids, _, _) = ids(server.pid());
    assert_eq!(uids, [id("-u", "nobody").as_str(); 4].join(" "), "ExecStart's --user took effect");
}

//! `hearth serve` as a system service: privilege drop after binding
//! (`--user`/`--group`, nbdkit's `-u`/`-g`), systemd socket activation
//! (`LISTEN_FDS`, driven by `systemd-socket-activate`) and the unit files
//! in contrib/systemd.

mod serve_support;

use std::process::Command;

use serve_support::{have, run, Server};

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
    unprivileged.args([reuid.as_str(), regid.as_str(), "--clear-groups", hearth, "serve"]);
    unprivileged.args(memory_export()).args(["--user", "nobody"]);
    refused(&mut unprivileged, &format!("--user nobody: changing user or group needs root (running as uid {nobody})"));
}

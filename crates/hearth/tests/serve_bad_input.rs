//! Bad input over a raw TCP socket, bytes written by hand from the protocol
//! document: each case gets the protocol's error or a clean close, and the
//! server keeps serving other clients with bounded memory.

mod serve_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use std::time::Duration;

use serve_support::raw::*;
use serve_support::Server;

fn start(dir: &std::path::Path) -> (Server, SocketAddr) {
    start_with(dir, &[])
}

fn start_with(dir: &std::path::Path, extra: &[&str]) -> (Server, SocketAddr) {
    let mut args = vec![
        "--backend",
        "memory",
        "--size",
        "64MiB",
        "--cache-size",
        "8MiB",
        "--name",
        "disk",
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let s = Server::start(&args, &dir.join("log"));
    let addr = s.tcp.unwrap();
    (s, addr)
}

/// A fresh client can still do a write and read it back.
fn still_serving(addr: SocketAddr) {
    let mut s = hello(addr, 3);
    go(&mut s);
    request(&mut s, 0, 1, 77, 8192, 5);
    s.write_all(b"alive").unwrap();
    assert_eq!(simple_reply(&mut s), (0, 77));
    request(&mut s, 0, 0, 78, 8192, 5);
    assert_eq!(simple_reply(&mut s), (0, 78));
    let mut d = [0u8; 5];
    s.read_exact(&mut d).unwrap();
    assert_eq!(&d, b"alive");
    request(&mut s, 0, 2, 79, 0, 0); // NBD_CMD_DISC
    assert!(closed(&mut s));
}

#[test]
fn malformed_option_haggling_errors_or_closes_and_server_stays_up() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = start(dir.path());

    // Recoverable: errors, then the same connection negotiates fine.
    let mut s = hello(addr, 1);
    send_option(&mut s, OPT_GO, &[0, 0, 0, 50, b'd']); // name longer than the data
    assert_eq!(option_reply(&mut s).1, REP_ERR_INVALID);
    send_option(&mut s, 4242, b"whatever");
    assert_eq!(option_reply(&mut s).1, REP_ERR_UNSUP);
    send_option(&mut s, OPT_GO, &go_data("no-such-export"));
    assert_eq!(option_reply(&mut s).1, REP_ERR_UNKNOWN);
    send_option(&mut s, OPT_STRUCTURED_REPLY, b"x");
    assert_eq!(option_reply(&mut s).1, REP_ERR_INVALID, "structured reply takes no data");
    assert_eq!(go(&mut s), SIZE);
    drop(s);

    // Fatal: wrong option magic, unknown client flags, absurd option length.
    let mut s = hello(addr, 1);
    s.write_all(b"IHAVEOPX\0\0\0\x07\0\0\0\0").unwrap();
    assert!(closed(&mut s), "bad option magic must close");
    let mut s = hello(addr, 0x80);
    assert!(closed(&mut s), "unknown client flags must close");
    let mut s = hello(addr, 1);
    let mut m = IHAVEOPT.to_vec();
    m.extend_from_slice(&OPT_GO.to_be_bytes());
    m.extend_from_slice(&0x7fff_ffffu32.to_be_bytes());
    s.write_all(&m).unwrap();
    assert!(closed(&mut s), "a 2 GiB option must close, not be buffered");
    // Hanging up mid-handshake.
    let mut s = hello(addr, 1);
    s.write_all(&IHAVEOPT[..5]).unwrap();
    drop(s);

    still_serving(addr);
    assert!(server.alive());
}

#[test]
fn bad_requests_get_protocol_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = start(dir.path());
    let mut s = hello(addr, 3);
    go(&mut s);

    request(&mut s, 0, 0, 1, SIZE - 100, 4096); // read past the end
    assert_eq!(simple_reply(&mut s), (EINVAL, 1));
    request(&mut s, 0, 0, 2, 0, 0); // zero-length read
    assert_eq!(simple_reply(&mut s), (0, 2));
    request(&mut s, 0, 0, 3, 0, u32::MAX); // huge read
    assert_eq!(simple_reply(&mut s), (EINVAL, 3));
    request(&mut s, 0, 0, 4, u64::MAX - 10, 100); // offset + length overflows
    assert_eq!(simple_reply(&mut s), (EINVAL, 4));
    request(&mut s, 0, 42, 5, 0, 0); // unknown command
    assert_eq!(simple_reply(&mut s), (EINVAL, 5));
    request(&mut s, 1 << 12, 0, 6, 0, 512); // unknown command flag
    assert_eq!(simple_reply(&mut s), (EINVAL, 6));
    request(&mut s, 0, 3, 7, 4096, 0); // flush with an offset
    assert_eq!(simple_reply(&mut s), (EINVAL, 7));
    request(&mut s, 0, 4, 8, SIZE, 4096); // trim past the end
    assert_eq!(simple_reply(&mut s), (EINVAL, 8));
    request(&mut s, 0, 6, 9, SIZE - 1, 2); // write zeroes past the end
    assert_eq!(simple_reply(&mut s), (ENOSPC, 9));
    request(&mut s, 0, 7, 10, 0, 4096); // block status without a meta context
    assert_eq!(simple_reply(&mut s), (EINVAL, 10));

    // Writes past the end or over the size limit: refused, payload skipped,
    // and the stream stays in sync.
    request(&mut s, 0, 1, 11, SIZE - 10, 20);
    s.write_all(&[0xee; 20]).unwrap();
    assert_eq!(simple_reply(&mut s), (ENOSPC, 11));
    let huge = (64 << 20) + 1; // one byte over the default --max-request
    request(&mut s, 0, 1, 12, 0, huge);
    s.write_all(&vec![0xee; huge as usize]).unwrap();
    assert_eq!(simple_reply(&mut s), (EINVAL, 12));
    request(&mut s, 0, 0, 13, 0, 16);
    assert_eq!(simple_reply(&mut s), (0, 13));
    let mut d = [1u8; 16];
    s.read_exact(&mut d).unwrap();
    assert_eq!(d, [0u8; 16], "refused writes changed nothing");

    // With structured replies, a bad read gets an error chunk.
    let mut s = hello(addr, 3);
    send_option(&mut s, OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(option_reply(&mut s).1, REP_ACK);
    go(&mut s);
    request(&mut s, 0, 0, 14, SIZE, 1);
    let mut chunk = [0u8; 20];
    s.read_exact(&mut chunk).unwrap();
    assert_eq!(chunk[..4], [0x66, 0x8e, 0x33, 0xef], "structured reply magic");
    assert_eq!(chunk[4..8], [0, 1, 0x80, 0x01], "final NBD_REPLY_TYPE_ERROR");
    assert_eq!(u64::from_be_bytes(chunk[8..16].try_into().unwrap()), 14);
    let mut payload = vec![0u8; u32::from_be_bytes(chunk[16..20].try_into().unwrap()) as usize];
    s.read_exact(&mut payload).unwrap();
    assert_eq!(payload[..4], EINVAL.to_be_bytes());

    still_serving(addr);
    assert!(server.alive());
}

#[test]
fn disconnects_mid_request_and_floods_leave_the_server_up_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = start(dir.path());
    // Half a request header, then gone.
    let mut s = hello(addr, 3);
    go(&mut s);
    s.write_all(&0x2560_9513u32.to_be_bytes()).unwrap();
    drop(s);
    // A write header promising 1 MiB, 1000 bytes of it, then gone.
    let mut s = hello(addr, 3);
    go(&mut s);
    request(&mut s, 0, 1, 1, 0, 1 << 20);
    s.write_all(&[9u8; 1000]).unwrap();
    drop(s);
    // A bad request magic closes the connection.
    let mut s = hello(addr, 3);
    go(&mut s);
    s.write_all(&[0u8; 28]).unwrap();
    assert!(closed(&mut s));

    // 60 pipelined 32 MiB reads (1.9 GiB of replies) that are never read: the
    // per-connection budget must keep the server's memory bounded.
    let mut s = hello(addr, 3);
    go(&mut s);
    for i in 0..60u64 {
        request(&mut s, 0, 0, i, 0, 32 << 20);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let rss_kib = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:").map(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().unwrap()))
        .unwrap();
    assert!(rss_kib < 400 * 1024, "server RSS {rss_kib} KiB while a client floods it");
    drop(s);

    still_serving(addr);
    assert!(server.alive());
    let log = server.log_text();
    assert!(log.contains("connection closed"), "protocol violations are logged:\n{log}");
}

/// A client that stalls in the handshake (silent after the greeting, or a
/// trickle of half an option) is cut off after --handshake-timeout, while an
/// idle client past the handshake keeps its connection.
#[test]
fn stalled_handshakes_time_out_but_idle_sessions_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = start_with(dir.path(), &["--handshake-timeout", "1s"]);
    let mut silent = TcpStream::connect(addr).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut greeting = [0u8; 18];
    silent.read_exact(&mut greeting).unwrap();
    let mut trickle = hello(addr, 3);
    trickle.write_all(&IHAVEOPT[..5]).unwrap();
    let mut idle = hello(addr, 3);
    go(&mut idle);

    let waited = std::time::Instant::now();
    assert!(closed(&mut silent), "a silent client is disconnected");
    assert!(closed(&mut trickle), "a client stalled mid-option is disconnected");
    assert!(waited.elapsed() < Duration::from_secs(9), "closed by the timeout, not by the test's read timeout");
    std::thread::sleep(Duration::from_millis(1500));
    request(&mut idle, 0, 1, 5, 4096, 4);
    idle.write_all(b"idle").unwrap();
    assert_eq!(simple_reply(&mut idle), (0, 5), "a session idle past the handshake limit still works");
    still_serving(addr);
    assert!(server.alive());
    let log = server.log_text();
    assert!(log.contains("not finished within 1s"), "the timeout is logged:\n{log}");
}

#[test]
fn bad_config_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\ncache_szie = \"1MiB\"\n", "cache_szie"),
        (
            "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nblock_size = \"3KiB\"\n",
            "export[0] (\"a\").block_size",
        ),
        (
            "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\npolicy = \"belady-ish\"\n",
            "export[0] (\"a\").policy",
        ),
        ("[[export]]\nname = \"a\"\nbackend = \"file\"\n", "export[0] (\"a\").path"),
        (
            "[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\nbackground_reads = 0\n",
            "export[0] (\"a\").background_reads",
        ),
        // An offline bound: a server cannot know next uses.
        ("[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\npolicy = \"opt\"\n", "offline bound"),
        (
            "[server]\nlisten = [\"127.0.0.1:99999\"]\n[[export]]\nname = \"a\"\nbackend = \"memory\"\nsize = \"1MiB\"\n",
            "server.listen",
        ),
    ];
    for (text, key) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(["serve", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{text} was accepted");
        // Validation names the file too; a bind error comes after it, naming the address.
        let named = err.contains(key) && (err.contains("bad.toml") || key == "server.listen");
        assert!(named, "error for {key} does not name it and the file: {err}");
        // A listener that cannot bind fails before any export is opened.
        assert!(!err.contains("export ready"), "{err}");
    }
    // Export flags describe the one export of a flag-configured server: with
    // a config file each is refused by name.
    for flag in ["--cache-size", "--tier-idle", "--warmup-budget", "--description"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hearth"))
            .args(["serve", "--config", "any.toml", flag, "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(flag) && err.contains("--config"), "{flag}: {err}");
    }
}

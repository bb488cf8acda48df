//! Large requests: the server advertises its maximum request size
//! (NBD_INFO_BLOCK_SIZE) and serves requests up to it whole — through
//! libnbd, which reads the limit, and from a raw client that never asked —
//! while the per-connection payload budget keeps memory bounded.

mod serve_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use serve_support::raw::*;
use serve_support::{have, have_python_nbd, pattern, run, Server, PYTHON};

const MIB: u64 = 1 << 20;

fn start(dir: &std::path::Path, extra: &[&str]) -> (Server, SocketAddr) {
    let path = dir.join("disk.img");
    let mut args = vec!["--name", "disk", "--listen", "127.0.0.1:0", "--backend", "sparse", "--size", "1GiB"];
    args.extend_from_slice(&["--path", path.to_str().unwrap(), "--cache-size", "16MiB"]);
    args.extend_from_slice(extra);
    let s = Server::start(&args, &dir.join("log"));
    let addr = s.tcp.unwrap();
    (s, addr)
}

fn nbdinfo_max_block(server: &Server) -> u64 {
    let json = run(Command::new("nbdinfo").args(["--json", &server.uri("disk")]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["exports"][0]["block_size_maximum"].as_u64().expect("nbdinfo shows block_size_maximum")
}

#[test]
fn the_maximum_is_advertised_and_configurable() {
    if !have("nbdinfo") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (server, _) = start(dir.path(), &[]);
    assert_eq!(nbdinfo_max_block(&server), 64 * MIB, "default: what nbdkit accepts");
    drop(server);
    let (server, _) = start(dir.path(), &["--max-request", "128MiB"]);
    assert_eq!(nbdinfo_max_block(&server), 128 * MIB);
}

#[test]
fn libnbd_reads_and_writes_40_and_64_mib_whole() {
    if !have_python_nbd() {
        return;
    }
    for mode in [&[][..], &["--write-back"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let (server, _) = start(dir.path(), mode);
        let script = r#"
import os, sys, nbd
h = nbd.NBD()
h.connect_uri(sys.argv[1])
assert h.get_block_size(nbd.SIZE_MAXIMUM) == 64 << 20, h.get_block_size(nbd.SIZE_MAXIMUM)
for n, off in [(40 << 20, 4096), (64 << 20, 128 << 20)]:
    data = os.urandom(n)
    h.pwrite(data, off)
    h.flush()
    assert h.pread(n, off) == data, n
print("ok")
"#;
        let out = run(Command::new(PYTHON).args(["-c", script, &server.uri("disk")]));
        assert_eq!(out.trim(), "ok", "{mode:?}");
        assert!(server.stop("TERM"));
    }
}

fn raw_write(s: &mut TcpStream, cookie: u64, offset: u64, data: &[u8]) {
    request(s, 0, CMD_WRITE, cookie, offset, data.len() as u32);
    s.write_all(data).unwrap();
}

#[test]
fn raw_clients_that_never_negotiated_sizes_get_64_mib_whole() {
    for mode in [&[][..], &["--write-back"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let (mut server, addr) = start(dir.path(), mode);
        // NBD_OPT_GO asking for no NBD_INFO_BLOCK_SIZE.
        let mut s = hello(addr, 3);
        go(&mut s);
        set_timeout(&s, Duration::from_secs(60));
        for (i, (len, offset)) in [(40 * MIB, 3 * MIB + 512), (64 * MIB, 512 * MIB)].into_iter().enumerate() {
            let data = pattern(len as usize, i as u64 + 1);
            raw_write(&mut s, 10 + i as u64, offset, &data);
            assert_eq!(simple_reply(&mut s), (0, 10 + i as u64), "{len} B write, {mode:?}");
            request(&mut s, 0, CMD_READ, 20 + i as u64, offset, len as u32);
            assert_eq!(simple_reply(&mut s), (0, 20 + i as u64), "{len} B read, {mode:?}");
            assert!(read_data(&mut s, len as usize) == data, "{len} B read back differs, {mode:?}");
        }
        // One byte over the maximum: EINVAL, payload skipped, connection usable.
        let over = vec![0xee; (64 * MIB + 1) as usize];
        raw_write(&mut s, 30, 0, &over);
        assert_eq!(simple_reply(&mut s), (EINVAL, 30));
        request(&mut s, 0, CMD_READ, 31, 0, (64 * MIB + 1) as u32);
        assert_eq!(simple_reply(&mut s), (EINVAL, 31));
        answers(&mut s, 4096);
        assert!(server.alive());
    }
}

#[test]
fn pipelined_64_mib_writes_on_four_connections_stay_within_the_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = start(dir.path(), &[]);
    let before = memory_kib(server.pid(), "VmRSS");
    let data = pattern((64 * MIB) as usize, 3);
    std::thread::scope(|scope| {
        for c in 0..4u64 {
            let data = &data;
            scope.spawn(move || {
                let mut s = hello(addr, 3);
                go(&mut s);
                set_timeout(&s, Duration::from_secs(120));
                let mut reader = s.try_clone().unwrap();
                let replies =
                    std::thread::spawn(move || (0..4).map(|_| simple_reply(&mut reader).0).collect::<Vec<_>>());
                for i in 0..4u64 {
                    raw_write(&mut s, i, (c * 4 + i) * 64 * MIB, data);
                }
                assert_eq!(replies.join().unwrap(), [0; 4]);
            });
        }
    });
    let peak = memory_kib(server.pid(), "VmHWM");
    // Four connections' payload budgets (64 MiB each), the 16 MiB cache and
    // room for the binary's own working set.
    let budgets = (4 * 64 + 16 + 64) * 1024;
    eprintln!("4 connections x 4 pipelined 64 MiB writes: RSS {before} KiB before, peak {peak} KiB");
    assert!(peak < before + budgets, "peak RSS {peak} KiB over {before} + {budgets} KiB");
}

//! Raw NBD over a TCP socket, bytes written by hand from the protocol
//! document: for tests that must send what a well-behaved client never would.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub const IHAVEOPT: &[u8; 8] = b"IHAVEOPT";
pub const OPT_REPLY_MAGIC: [u8; 8] = [0, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9];
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const REP_ACK: u32 = 1;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = 0x8000_0001;
pub const REP_ERR_INVALID: u32 = 0x8000_0003;
pub const REP_ERR_UNKNOWN: u32 = 0x8000_0006;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const SIZE: u64 = 64 << 20;

pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_CACHE: u16 = 5;
pub const CMD_HEARTH_HINT: u16 = 0x4845;
pub const OPT_HEARTH_HINTS: u32 = 0x4845_0001;

/// Connects and checks the greeting; sends client flags.
pub fn hello(addr: SocketAddr, client_flags: u32) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut g = [0u8; 18];
    s.read_exact(&mut g).unwrap();
    assert_eq!(&g[..16], b"NBDMAGICIHAVEOPT");
    assert_eq!(g[16..], [0, 3], "fixed newstyle + no zeroes");
    s.write_all(&client_flags.to_be_bytes()).unwrap();
    s
}

pub fn send_option(s: &mut TcpStream, option: u32, data: &[u8]) {
    let mut m = IHAVEOPT.to_vec();
    m.extend_from_slice(&option.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m).unwrap();
}

pub fn option_reply(s: &mut TcpStream) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(h[..8], OPT_REPLY_MAGIC);
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    let mut data = vec![0u8; len];
    s.read_exact(&mut data).unwrap();
    (u32::from_be_bytes(h[8..12].try_into().unwrap()), u32::from_be_bytes(h[12..16].try_into().unwrap()), data)
}

pub fn go_data(name: &str) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    d
}

/// NBD_OPT_GO to "disk"; returns the size from NBD_INFO_EXPORT.
pub fn go(s: &mut TcpStream) -> u64 {
    send_option(s, OPT_GO, &go_data("disk"));
    let mut size = None;
    loop {
        let (opt, kind, data) = option_reply(s);
        assert_eq!(opt, OPT_GO);
        match kind {
            REP_INFO if data[..2] == [0, 0] => size = Some(u64::from_be_bytes(data[2..10].try_into().unwrap())),
            REP_INFO => {}
            REP_ACK => return size.expect("NBD_INFO_EXPORT before ACK"),
            other => panic!("unexpected GO reply {other:#x}"),
        }
    }
}

pub fn request(s: &mut TcpStream, flags: u16, command: u16, cookie: u64, offset: u64, len: u32) {
    let mut m = 0x2560_9513u32.to_be_bytes().to_vec();
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&command.to_be_bytes());
    m.extend_from_slice(&cookie.to_be_bytes());
    m.extend_from_slice(&offset.to_be_bytes());
    m.extend_from_slice(&len.to_be_bytes());
    s.write_all(&m).unwrap();
}

/// Reads a simple reply; returns (error, cookie).
pub fn simple_reply(s: &mut TcpStream) -> (u32, u64) {
    let mut r = [0u8; 16];
    s.read_exact(&mut r).unwrap();
    assert_eq!(r[..4], [0x67, 0x44, 0x66, 0x98], "simple reply magic");
    (u32::from_be_bytes(r[4..8].try_into().unwrap()), u64::from_be_bytes(r[8..16].try_into().unwrap()))
}

/// Whether the server closed the connection (EOF) rather than answering.
pub fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0))
        || matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

/// A hint request carrying `records` of (kind, a, b).
pub fn hint(s: &mut TcpStream, cookie: u64, records: &[(u16, u64, u64)]) {
    request(s, 0, CMD_HEARTH_HINT, cookie, 0, (records.len() * 24) as u32);
    let mut payload = Vec::with_capacity(records.len() * 24);
    for &(kind, a, b) in records {
        payload.extend_from_slice(&kind.to_be_bytes());
        payload.extend_from_slice(&[0u8; 6]);
        payload.extend_from_slice(&a.to_be_bytes());
        payload.extend_from_slice(&b.to_be_bytes());
    }
    s.write_all(&payload).unwrap();
}

/// Resident memory of process `pid`, in KiB (`VmRSS`, or `VmHWM` for the peak).
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|v| v.strip_prefix(':')))
        .map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no {field} for process {pid}"))
}

/// NBD_CMD_READ of `len` bytes at `offset`, which must succeed; returns the data.
pub fn read(s: &mut TcpStream, offset: u64, len: u32) -> Vec<u8> {
    request(s, 0, CMD_READ, 7, offset, len);
    assert_eq!(simple_reply(s), (0, 7), "read of {len} bytes at {offset}");
    read_data(s, len as usize)
}

/// Reads `n` bytes of read-reply data.
pub fn read_data(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut d = vec![0u8; n];
    s.read_exact(&mut d).unwrap();
    d
}

/// The connection still answers: a write, then a read of it back.
pub fn answers(s: &mut TcpStream, offset: u64) {
    request(s, 0, CMD_WRITE, 9001, offset, 5);
    s.write_all(b"alive").unwrap();
    assert_eq!(simple_reply(s), (0, 9001));
    request(s, 0, CMD_READ, 9002, offset, 5);
    assert_eq!(simple_reply(s), (0, 9002));
    assert_eq!(read_data(s, 5), b"alive");
}

pub fn set_timeout(s: &TcpStream, d: Duration) {
    s.set_read_timeout(Some(d)).unwrap();
    s.set_write_timeout(Some(d)).unwrap();
}

/// A session in transmission with no extension negotiated.
pub fn session(addr: SocketAddr) -> TcpStream {
    let mut s = hello(addr, 3);
    go(&mut s);
    s
}

/// A session with the hint extension negotiated.
pub fn hint_session(addr: SocketAddr) -> TcpStream {
    let mut s = hello(addr, 3);
    send_option(&mut s, OPT_HEARTH_HINTS, &[]);
    assert_eq!(option_reply(&mut s).1, REP_ACK);
    go(&mut s);
    s
}

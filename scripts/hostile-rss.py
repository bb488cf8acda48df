#!/usr/bin/env python3
"""Runs one hostile-client attack against an NBD server and reports the
server's RSS growth: the figures serve_hostile.rs asserts, next to any other
server's (nbdkit, qemu-nbd) on the same attack.

  scripts/hostile-rss.py PID HOST:PORT ATTACK [EXPORT]
ATTACK: unread   -- 2 M pipelined READ-past-end/FLUSH/zero-length READs, replies never read
        cache    -- 1,000 x CACHE(256 MiB) then disconnect; reports another client's slowest read
"""
import socket, struct, sys, time

def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def session(addr, export):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    g = s.recv(18, socket.MSG_WAITALL)
    assert g[:16] == b"NBDMAGICIHAVEOPT", g
    s.sendall(struct.pack(">I", 3))
    name = export.encode()
    data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
    s.sendall(b"IHAVEOPT" + struct.pack(">II", 7, len(data)) + data)
    while True:
        h = s.recv(20, socket.MSG_WAITALL)
        _, opt, kind, n = struct.unpack(">QIII", h)
        if n:
            s.recv(n, socket.MSG_WAITALL)
        if kind == 1:
            return s
        assert kind == 3, hex(kind)

def req(cmd, cookie, offset, length):
    return struct.pack(">IHHQQI", 0x25609513, 0, cmd, cookie, offset, length)

def flood(s, n, make):
    s.settimeout(1.0)
    sent = 0
    try:
        while sent < n:
            s.sendall(b"".join(make(i) for i in range(sent, min(n, sent + 1000))))
            sent += 1000
    except (socket.timeout, OSError):
        pass
    return sent

def main():
    pid, addr, attack = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    export = sys.argv[4] if len(sys.argv) > 4 else ""
    before = rss_kib(pid)
    a = session(addr, export)
    if attack == "unread":
        sent = flood(a, 2_000_000, lambda i: req(0, i, 1 << 40, 4096) if i % 3 == 0
                     else req(3, i, 0, 0) if i % 3 == 1 else req(0, i, 0, 0))
        time.sleep(1)
        print(f"unread: {sent} requests accepted, RSS {before} -> {rss_kib(pid)} KiB "
              f"(+{(rss_kib(pid) - before) / 1024:.1f} MiB)")
    elif attack == "cache":
        sent = flood(a, 1000, lambda i: req(5, i, (i % 4) << 28, 256 << 20))
        a.close()
        o = session(addr, export)
        slowest = 0.0
        for i in range(20):
            t = time.time()
            o.sendall(req(0, i, ((i * 37 + 3) % 256) << 22, 4096))
            o.settimeout(300)
            h = o.recv(16, socket.MSG_WAITALL)
            o.recv(4096, socket.MSG_WAITALL)
            slowest = max(slowest, time.time() - t)
        print(f"cache: {sent} CACHE sent, slowest other-client read {slowest * 1000:.0f} ms, "
              f"RSS {before} -> {rss_kib(pid)} KiB")
    else:
        sys.exit(f"unknown attack {attack}")

main()

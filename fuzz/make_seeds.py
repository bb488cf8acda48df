#!/usr/bin/env python3
"""Regenerates the seed corpus under fuzz/corpus/<target>/.

Hand-made valid inputs (a real NBD option sequence, real requests, a few
lines or records of each trace format) plus a few records of the real
cloudPhysicsIO traces in /work/shared/data when they are there. Every seed is
kept under 20 KB. Run from anywhere: python3 fuzz/make_seeds.py
"""

import gzip
import os
import shutil
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
DATA = next((d for d in ["/work/shared/data", os.path.join(HERE, "..", "data")]
             if os.path.exists(os.path.join(d, "cloudPhysicsIO.vscsi"))), None)


def seed(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    assert len(data) < 20_000, (target, name, len(data))
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- NBD handshake: 4 client flag bytes, then (IHAVEOPT, option, length, data)*
EXPORT_NAME, ABORT, LIST, STARTTLS, INFO, GO, STRUCTURED_REPLY, LIST_META, SET_META = 1, 2, 3, 5, 6, 7, 8, 9, 10
HEARTH_HINTS = 0x48450001


def option(o, data=b""):
    return b"IHAVEOPT" + struct.pack(">II", o, len(data)) + data


def nbd_string(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack(">I", len(s)) + s


def go_data(name, requests=()):
    return nbd_string(name) + struct.pack(">H", len(requests)) + b"".join(struct.pack(">H", r) for r in requests)


def meta_data(name, queries):
    return nbd_string(name) + struct.pack(">I", len(queries)) + b"".join(nbd_string(q) for q in queries)


flags = lambda f: struct.pack(">I", f)
# What qemu-nbd / nbd-client send: structured replies, base:allocation, then GO.
seed("nbd_handshake", "qemu_go", flags(3) + option(STRUCTURED_REPLY) + option(SET_META, meta_data("disk", ["base:allocation"]))
     + option(HEARTH_HINTS) + option(GO, go_data("disk", [3, 1, 2])))
seed("nbd_handshake", "list_info_export_name", flags(1) + option(LIST) + option(INFO, go_data("", [3]))
     + option(LIST_META, meta_data("disk", [])) + option(EXPORT_NAME, b"ro"))
seed("nbd_handshake", "starttls_abort", flags(3) + option(STARTTLS) + option(ABORT))
seed("nbd_handshake", "unknown_then_export_name", flags(1) + option(4242, b"\x01\x02\x03") + option(EXPORT_NAME, b"disk"))
seed("nbd_handshake", "list_meta_go_unicode", flags(3) + option(STRUCTURED_REPLY)
     + option(LIST_META, meta_data("ro", ["base:", "qemu:dirty-bitmap:x"])) + option(GO, go_data("ünïcode/ëxport", [0, 999])))

# ---- NBD requests: cfg byte (bit0 structured, bit1 base:allocation, bit2 hints,
# bit3 read-only, bits 4.. max request), size index, then 28-byte headers (+ payload).
READ, WRITE, DISC, FLUSH, TRIM, CACHE, WZ, BS, HINT = 0, 1, 2, 3, 4, 5, 6, 7, 0x4845


def req(cmd, offset=0, length=0, flags=0, cookie=1):
    return struct.pack(">IHHQQI", 0x25609513, flags, cmd, cookie, offset, length)


def hint_records(recs):
    return b"".join(struct.pack(">H6xQQ", k, a, b) for k, a, b in recs)


HINTS = hint_records([(1, 0x7f0000, 0), (2, 4096, 8192), (3, 7, 0), (4, 7, 3), (5, 7, 0)])
seed("nbd_request", "structured_mix", bytes([0x13, 4]) + req(READ, 0, 4096) + req(WRITE, 4096, 512, flags=1) + b"\xab" * 512
     + req(FLUSH) + req(TRIM, 8192, 4096) + req(WZ, 0, 65536, flags=2) + req(BS, 0, 1 << 20, flags=8) + req(CACHE, 0, 4096)
     + req(READ, 4096, 512, flags=4) + req(DISC))
seed("nbd_request", "hints", bytes([0x14, 4]) + req(HINT, 0, len(HINTS)) + HINTS + req(READ, 0, 4096) + req(DISC))
seed("nbd_request", "read_only_refusals", bytes([0x28, 2]) + req(WRITE, 0, 16) + b"x" * 16 + req(READ, 4096, 1)
     + req(99) + req(FLUSH, 1, 0) + req(READ, (1 << 64) - 1, 2))
seed("nbd_request", "simple_big", bytes([0x30, 7]) + req(READ, 0, 64 << 20) + req(WRITE, 1 << 40, 0) + req(TRIM, 0, 0xffffffff))

# ---- Hint payloads
seed("nbd_hints", "all_kinds", HINTS)
seed("nbd_hints", "one_buffer", hint_records([(1, 0x1000, 0)]))
seed("nbd_hints", "evictions", hint_records([(2, i * 4096, 4096) for i in range(16)]))

# ---- hearth.toml
seed("server_config", "full", """[server]
listen = ["127.0.0.1:0"]
unix = ["/tmp/h.sock"]
metrics = "127.0.0.1:0"
handshake_timeout = 10

[[export]]
name = "disk"
description = "memory disk"
backend = "memory"
size = "8MiB"
cache_size = 1048576
policy = "lru"
block_size = "4KiB"
write_mode = "back"
dirty_limit = "256KiB"
latency = "1ms"
bandwidth = "100MiB"
""")
seed("server_config", "file_ev_prefetch", """[[export]]
name = "f"
backend = "file"
path = "/tmp/disk.img"
read_only = true
direct = true
cache_size = "64MiB"
policy = "mq:m=8"
placement = "ev:2"
prefetch = "quickmine:g=5"
background_reads = 4

[[export]]
name = "s"
backend = "sparse"
path = "/tmp/sparse.img"
size = 1073741824
policy = "arc"
prefetch = "seq"
""")
seed("server_config", "tier_warmup", """[server]
listen = ["[::1]:10809"]

[[export]]
name = "t"
backend = "memory"
size = "1GiB"
cache_size = "16MiB"
latency = "250us"

[export.tier]
fast_path = "/tmp/fast.img"
fast_size = "128MiB"
migrate_bandwidth = "16MiB"
idle = "10ms"

[export.warmup]
log = "/tmp/warm.log"
mode = "data"
budget = "8MiB"
staging = "1MiB"
log_size = "64MiB"
preload = true
""")
seed("server_config", "minimal", '[[export]]\nname = "a"\nbackend = "memory"\nsize = 4096\n')

# ---- Traces
MSR = ("128166372003061629,hm,1,Read,383565824,32768,41286\n128166372016382155,web,0,Write,3221225472,4096,1059\n\n"
       "128166372026382245,hm,1,write,0,512,100\n128166372036382245,hm,0,READ,512,1024,100\n")
BLKPARSE = """  8,0    3        1     0.000000000  4096  Q  WS 1234 + 8 [fio]
  8,0    3        2     0.000001000  4096  G  WS 1234 + 8 [fio]
  8,0    3        3     0.000002000  4096  D  WS 1234 + 8 [fio]
  8,0    3        4     0.000100000     0  C  WS 1234 + 8 [0]
  8,16   1        5     0.000200000  4097  Q   R 99 + 16 [dd]
  8,16   1        6     0.000300000  4097  Q   D 0 + 2048 [fstrim]
  8,16   1        7     0.000400000  4097  Q  FN 0 + 0 [sync]
  8,16   1        8     0.000500000  4097  M  RA 115 + 8 [dd]

CPU0 (8,0):
 Reads Queued:           1,        8KiB  Writes Queued:           1,        4KiB
Total (8,0):
"""
SPC = "0,303567,3584,w,0.000000\n1,55590,3072,R,0.000026,extra\n0,1,512,r,0.5\n2,20941264,8192,W,0.551706\n"
CPCSV_HAND = "version,time,op,size,lbn\n1,5,28,512,10\n1,6,0x8a,1024,11\n1,7,35,0,0\n1,8,a8,4096,1\n"
TEXT = "42\n\n 7 \r\n42\n18446744073709551615\n0\n"
CTX = """# time ctx class / block
B 100 1 3
R 110 1 4096
W 120 1 4097
B 130 2 0
R 140 2 12
E 150 1
E 160 2
B 170 1 5
E 180 1
"""
BUFFERED = "client,op,block,buffer\n0,R,1234,0x7f0000\n0,W,77,\n3,r,0,4096\n1,w,18446744073709551615,0X10\n"


def vscsi_v1(cmd, nbytes, lbn, ts):
    return struct.pack("<IIIHHQQ", 7, nbytes, 1, cmd, 0x0100, lbn, ts)


def vscsi_v2(cmd, nbytes, lbn, ts):
    return struct.pack("<HHIIIQQQ", cmd, 0x0200, 7, nbytes, 1, lbn, ts, 250)


def oracle(t, oid, size, nxt):
    return struct.pack("<IQIq", t, oid, size, nxt)


VSCSI_V1 = vscsi_v1(0x28, 4096, 10, 1000) + vscsi_v1(0x2a, 512, 11, 2000) + vscsi_v1(0x35, 0, 0, 3000)
VSCSI_V2 = vscsi_v2(0x28, 4096, 10, 1000) + vscsi_v2(0x8a, 8192, 1 << 40, 2000) + vscsi_v2(0x00, 0, 0, 3000)
ORACLE = oracle(1, 42, 4096, 3) + oracle(1, 7, 100, -1) + oracle(2, 42, 4096, (1 << 63) - 1) + oracle(3, 9, 0, -1)

seed("trace_msr", "hand", MSR)
seed("trace_msr", "header", "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n1,h,0,Read,0,512,1\n2,h,1,Write,512,512,1\n")
seed("trace_blkparse", "hand", BLKPARSE)
seed("trace_spc", "hand", SPC)
seed("trace_cpcsv", "hand", CPCSV_HAND)
seed("trace_text", "hand", TEXT)
seed("trace_vscsi", "v1", VSCSI_V1)
seed("trace_vscsi", "v2", VSCSI_V2)
seed("trace_oracle", "hand", ORACLE)
seed("trace_ctx", "hand", CTX)
seed("trace_buffered", "hand", BUFFERED)
seed("trace_csv_sniff", "msr", MSR)
seed("trace_csv_sniff", "spc", SPC)
seed("trace_csv_sniff", "cpcsv", CPCSV_HAND)

# A few records of the real cloudPhysicsIO traces.
if DATA:
    def head_lines(name, n):
        with open(os.path.join(DATA, name), "rb") as f:
            return b"".join(f.readline() for _ in range(n))

    def head_bytes(name, n):
        with open(os.path.join(DATA, name), "rb") as f:
            return f.read(n)

    seed("trace_cpcsv", "cloudPhysicsIO_head", head_lines("cloudPhysicsIO.csv", 60))
    seed("trace_csv_sniff", "cloudPhysicsIO_head", head_lines("cloudPhysicsIO.csv", 30))
    seed("trace_text", "cloudPhysicsIO_head", head_lines("cloudPhysicsIO.txt", 60))
    seed("trace_vscsi", "cloudPhysicsIO_head", head_bytes("cloudPhysicsIO.vscsi", 40 * 32))
    seed("trace_oracle", "cloudPhysicsIO_head", head_bytes("cloudPhysicsIO.oracleGeneral.bin", 40 * 24))
else:
    print("no cloudPhysicsIO data found; hand-made seeds only", file=sys.stderr)

# Compressed: first byte is the index into Format::ALL
# (msr, blkparse, vscsi, spc, oracle, text, cpcsv), then the .gz / .zst file.
FORMATS = [("msr", MSR), ("blkparse", BLKPARSE), ("vscsi", VSCSI_V2), ("spc", SPC), ("oracle", ORACLE), ("text", TEXT),
           ("cpcsv", CPCSV_HAND)]
have_zstd = shutil.which("zstd") is not None
for i, (name, body) in enumerate(FORMATS):
    raw = body.encode() if isinstance(body, str) else body
    seed("trace_gz", name, bytes([i]) + gzip.compress(raw, mtime=0))
    if have_zstd:
        z = subprocess.run(["zstd", "-q", "-c", "-19"], input=raw, stdout=subprocess.PIPE, check=True).stdout
        seed("trace_zst", name, bytes([i]) + z)
# Two concatenated members / frames (both readers must read all of them).
seed("trace_gz", "two_members", bytes([5]) + gzip.compress(b"1\n2\n", mtime=0) + gzip.compress(b"3\n", mtime=0))
if have_zstd:
    frame = lambda b: subprocess.run(["zstd", "-q", "-c"], input=b, stdout=subprocess.PIPE, check=True).stdout
    seed("trace_zst", "two_frames", bytes([5]) + frame(b"1\n2\n") + frame(b"3\n"))
else:
    print("zstd not installed: no trace_zst seeds", file=sys.stderr)

total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(CORPUS) for f in fs)
print(f"seed corpus: {sum(len(fs) for _, _, fs in os.walk(CORPUS))} files, {total} bytes")

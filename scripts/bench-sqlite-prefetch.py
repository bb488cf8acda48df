#!/usr/bin/env python3
"""A real database over Hearth's NBD export, with context hints: SQLite's
transaction latency with prefetching off, the paper's QuickMine and
`qm-select` (issue 19's last must-show point).

SQLite runs in this process through an apsw VFS whose main database file
lives on `hearth serve`'s export: every page SQLite reads or writes is an NBD
READ or WRITE over a Unix socket (clients/python/hearth_nbd.py), and every
transaction is one context (`begin(ctx, template)` ... `end(ctx)`), so the
server's prefetcher sees what a kernel NBD client could not tell it. Only the
main database file goes over NBD: the rollback journal is in memory
(journal_mode=MEMORY) and temp tables too (temp_store=MEMORY), so nothing
else touches storage.

The benchmark, fixed before the first measured run (commit it first):

- Schema (order entry, TPC-C-like without warehouses and districts):
  customers(id, first, last, balance, payments, data 300 B),
  items(id, name, price, data 100 B),
  orders(id, customer_id, entered, total),
  order_lines(id, order_id, line, item_id, qty, amount, info 24 B);
  B-tree indexes customers(last), orders(customer_id, id),
  order_lines(order_id), order_lines(item_id, order_id).
  Last names are TPC-C's three syllables of a number below 1,000, so a last
  name is shared by about 20 customers.
- Size (scale 1): 20,000 customers, 5,000 items, 40,000 orders (customer of
  each uniform), 3-9 lines each (uniform; about 240,000 lines), loaded in
  order id order so an order's lines are adjacent. About 28 MB.
- Hearth: --backend file on a copy of the database padded with 8 MiB of
  room to grow, --latency 1ms, --policy lru, --cache-size a tenth of the
  database file (rounded down to 4 KiB), block size 4 KiB. Export "disk".
- SQLite: page_size 4096 (Hearth's block), cache_size 64 pages (256 KiB,
  about 1% of the database: a client with its own small buffer cache, so
  reads reach storage), locking_mode=EXCLUSIVE (one client; no locks
  needed in the VFS), journal_mode=MEMORY, synchronous=NORMAL (a sync is an
  NBD FLUSH), temp_store=MEMORY.
- Key popularity: Zipf with exponent 0.8 over customers and over items, the
  rank -> id mapping a fixed random permutation (hot rows are scattered over
  the file, not packed together). random.Random(seed), seed 1.
- Transactions (one client, think time 0), each BEGIN ... COMMIT:
  1. order-status, 40%: a customer by id, their newest order (index on
     orders.customer_id), its lines joined to items.
  2. browse-item, 30%: an item by id, its 5 newest order lines (index on
     order_lines.item_id), each line's order and that order's customer.
  3. new-order, 20%: a customer, 3-9 distinct items (their prices), a new
     order and its lines inserted, the customer's balance lowered.
  4. payment, 10%: the customers sharing a popular customer's last name
     (index on customers.last), the middle one by id pays: balance and
     payment count updated.
  3,000 transactions per run; the first 20% are warm-up: latency statistics
  and the server's counters (scraped from /metrics at the end of the
  warm-up and at the end, differenced) cover the other 2,400.
- Schemes: none, quickmine, qm-select. Three rounds, the scheme order
  rotated each round (round r starts at scheme r), min and median over
  rounds reported. Every run starts from a fresh copy of the same database.
- Checks per run: PRAGMA integrity_check is "ok" at the end (run after the
  final scrape), and a SHA-256 of every row every transaction read (and of
  the ids new orders got) is the same in every run: same transactions, same
  answers.

Latency is wall time per transaction (begin hint to end hint) on a machine
shared with other work: noisy, hence the rotation and min/median.

Usage: scripts/bench-sqlite-prefetch.py [--hearth BIN] [--rounds 3]
       [--scale 1.0] [--transactions 3000] [--schemes none,quickmine,qm-select]
       [--json] [--trace PATH]
(--scale and --transactions shrink it for the end-to-end test. --trace writes the first
run's page requests as a context-tagged trace for `hearth prefetch sim`: SQLite's requests
do not depend on the server, so it is every run's trace.)
"""

import argparse
import bisect
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import apsw

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "clients" / "python"))
from hearth_nbd import HearthClient  # noqa: E402

PAGE = 4096
SQLITE_CACHE_PAGES = 64
SEED = 1
ZIPF_EXPONENT = 0.8
WARMUP_SHARE = 0.2
GROWTH_ROOM = 8 << 20
SYLLABLES = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"]
TEMPLATES = [("order-status", 0.40), ("browse-item", 0.30), ("new-order", 0.20), ("payment", 0.10)]


def last_name(n):
    return SYLLABLES[n // 100] + SYLLABLES[n // 10 % 10] + SYLLABLES[n % 10]


def sizes(scale):
    """Row counts at a scale: (customers, items, orders)."""
    return max(50, int(20000 * scale)), max(20, int(5000 * scale)), max(100, int(40000 * scale))


# -- the database, built once locally ---------------------------------------
def pragmas(db, *settings):
    """Sets each PRAGMA, reading its answer (apsw runs a statement that returns rows lazily)."""
    for setting in settings:
        list(db.execute(f"PRAGMA {setting}"))


def populate(path, scale):
    customers, items, orders = sizes(scale)
    rng = random.Random(SEED)
    db = apsw.Connection(str(path))
    pragmas(db, f"page_size={PAGE}", "journal_mode=OFF", "synchronous=OFF")
    db.execute("""
        CREATE TABLE customers(id INTEGER PRIMARY KEY, first TEXT, last TEXT, balance REAL,
                               payments INTEGER, data TEXT);
        CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, price REAL, data TEXT);
        CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER, entered INTEGER, total REAL);
        CREATE TABLE order_lines(id INTEGER PRIMARY KEY, order_id INTEGER, line INTEGER,
                                 item_id INTEGER, qty INTEGER, amount REAL, info TEXT);
    """)
    text = lambda n: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(n))  # noqa: E731
    with db:
        db.executemany("INSERT INTO customers VALUES(?,?,?,?,?,?)",
                       ((c, text(12), last_name(rng.randrange(1000)), 0.0, 0, text(300))
                        for c in range(1, customers + 1)))
        prices = [round(rng.uniform(1, 100), 2) for _ in range(items)]
        db.executemany("INSERT INTO items VALUES(?,?,?,?)",
                       ((i, text(20), prices[i - 1], text(100)) for i in range(1, items + 1)))
        line_id = 0
        for o in range(1, orders + 1):
            lines = []
            for ln in range(1, rng.randint(3, 9) + 1):
                line_id += 1
                item, qty = rng.randint(1, items), rng.randint(1, 10)
                lines.append((line_id, o, ln, item, qty, round(qty * prices[item - 1], 2), text(24)))
            db.execute("INSERT INTO orders VALUES(?,?,?,?)",
                       (o, rng.randint(1, customers), o, sum(l[5] for l in lines)))
            db.executemany("INSERT INTO order_lines VALUES(?,?,?,?,?,?,?)", lines)
    db.execute("""
        CREATE INDEX customers_last ON customers(last);
        CREATE INDEX orders_customer ON orders(customer_id, id);
        CREATE INDEX lines_order ON order_lines(order_id);
        CREATE INDEX lines_item ON order_lines(item_id, order_id);
    """)
    db.close()


# -- the VFS: the main database file over NBD --------------------------------
class NbdFile:
    """SQLite's main database file as bytes 0..size of the NBD export. The
    export is larger (room to grow); the file's own size is kept here."""

    def __init__(self, client, size, trace=None):
        self.client, self.size, self.trace = client, size, trace
        self.reads = self.writes = 0
        self.ctx = None  # the open transaction's context, for the trace

    def record(self, kind, offset, length):
        """One trace line per 4 KiB block a request touches, inside a transaction."""
        if self.trace and self.ctx is not None and length:
            now = time.perf_counter_ns()
            for block in range(offset // PAGE, (offset + length - 1) // PAGE + 1):
                self.trace.write(f"{kind} {now} {self.ctx} {block}\n")

    def xRead(self, amount, offset):
        self.reads += 1
        n = max(0, min(amount, self.size - offset))
        self.record("R", offset, n)
        return self.client.read(offset, n) if n else b""  # short: SQLite zero-fills

    def xWrite(self, data, offset):
        end = offset + len(data)
        if end > self.client.size:
            raise apsw.FullError(f"database grew to {end} bytes, past the NBD export's {self.client.size}")
        self.writes += 1
        self.record("W", offset, len(data))
        self.client.write(offset, bytes(data))
        self.size = max(self.size, end)

    def xTruncate(self, newsize):
        self.size = newsize

    def xSync(self, flags):
        self.client.flush()

    def xFileSize(self):
        return self.size

    def xLock(self, level):
        pass  # locking_mode=EXCLUSIVE, one client

    def xUnlock(self, level):
        pass

    def xCheckReservedLock(self):
        return False

    def xFileControl(self, op, ptr):
        return False

    def xSectorSize(self):
        return PAGE

    def xDeviceCharacteristics(self):
        return 0

    def xClose(self):
        pass


class NbdVFS(apsw.VFS):
    """The main database goes to `file`; anything else (none with the pragmas
    above, but SQLite probes for journals) to the default VFS, locally."""

    def __init__(self, name, file):
        self.file = file
        super().__init__(name, "")

    def xOpen(self, name, flags):
        if flags[0] & apsw.mapping_open_flags["SQLITE_OPEN_MAIN_DB"]:
            return self.file
        return super().xOpen(name, flags)


# -- the workload -------------------------------------------------------------
class Zipf:
    """Ids 1..n drawn with P(rank k) ~ 1/k^s; ranks map to ids by a fixed permutation."""

    def __init__(self, n, s, rng):
        acc, self.cum = 0.0, []
        for k in range(1, n + 1):
            acc += 1.0 / k**s
            self.cum.append(acc)
        self.ids = list(range(1, n + 1))
        rng.shuffle(self.ids)

    def draw(self, rng):
        return self.ids[bisect.bisect_left(self.cum, rng.random() * self.cum[-1])]


def transactions(scale, count):
    """The transaction list: (template index, parameters), the same for every run."""
    customers, items, _ = sizes(scale)
    rng = random.Random(SEED)
    cz, iz = Zipf(customers, ZIPF_EXPONENT, rng), Zipf(items, ZIPF_EXPONENT, rng)
    cum = [sum(w for _, w in TEMPLATES[: i + 1]) for i in range(len(TEMPLATES))]
    out = []
    for _ in range(count):
        t = bisect.bisect_left(cum, rng.random() * cum[-1])
        if t == 0:
            out.append((t, (cz.draw(rng),)))
        elif t == 1:
            out.append((t, (iz.draw(rng),)))
        elif t == 2:
            picked = set()
            want = rng.randint(3, 9)
            while len(picked) < want:
                picked.add(iz.draw(rng))
            out.append((t, (cz.draw(rng), [(i, rng.randint(1, 10)) for i in sorted(picked)])))
        else:
            out.append((t, (cz.draw(rng), round(rng.uniform(1, 500), 2))))
    return out


def run_transaction(db, seq, t, params, digest):
    """Runs transaction number seq (template t) inside the caller's BEGIN/COMMIT."""
    def rows(sql, args=()):
        got = list(db.execute(sql, args))
        digest.update(repr(got).encode())
        return got

    if t == 0:  # order-status
        (c,) = params
        rows("SELECT first, last, balance FROM customers WHERE id=?", (c,))
        newest = rows("SELECT id, entered, total FROM orders WHERE customer_id=? ORDER BY id DESC LIMIT 1", (c,))
        if newest:
            rows("SELECT l.line, l.item_id, l.qty, l.amount, i.name FROM order_lines l"
                 " JOIN items i ON i.id=l.item_id WHERE l.order_id=? ORDER BY l.line", (newest[0][0],))
    elif t == 1:  # browse-item
        (item,) = params
        rows("SELECT name, price FROM items WHERE id=?", (item,))
        for order_id, qty in rows("SELECT order_id, qty FROM order_lines WHERE item_id=?"
                                  " ORDER BY order_id DESC LIMIT 5", (item,)):
            rows("SELECT o.entered, o.total, c.last, c.balance FROM orders o"
                 " JOIN customers c ON c.id=o.customer_id WHERE o.id=?", (order_id,))
    elif t == 2:  # new-order
        c, lines = params
        priced = [(i, q, rows("SELECT price FROM items WHERE id=?", (i,))[0][0]) for i, q in lines]
        total = round(sum(q * p for _, q, p in priced), 2)
        db.execute("INSERT INTO orders(customer_id, entered, total) VALUES(?,?,?)", (c, 1_000_000 + seq, total))
        order_id = db.last_insert_rowid()
        digest.update(repr(order_id).encode())
        db.executemany("INSERT INTO order_lines(order_id, line, item_id, qty, amount, info) VALUES(?,?,?,?,?,?)",
                       [(order_id, n, i, q, round(q * p, 2), "new") for n, (i, q, p) in enumerate(priced, 1)])
        db.execute("UPDATE customers SET balance=balance-? WHERE id=?", (total, c))
    else:  # payment
        c, amount = params
        (last,) = rows("SELECT last FROM customers WHERE id=?", (c,))[0]
        same = rows("SELECT id FROM customers WHERE last=? ORDER BY id", (last,))
        payer = same[len(same) // 2][0]
        db.execute("UPDATE customers SET balance=balance+?, payments=payments+1 WHERE id=?", (amount, payer))


# -- one run against a live server --------------------------------------------
class Server:
    """`hearth serve` on a copy of the database; stopped with SIGTERM."""

    def __init__(self, hearth, image, cache_size, scheme, workdir):
        self.sock = workdir / f"{scheme}.sock"
        self.log = open(workdir / f"{scheme}.log", "w")
        self.proc = subprocess.Popen(
            [str(hearth), "serve", "--backend", "file", "--path", str(image), "--latency", "1ms",
             "--cache-size", str(cache_size), "--policy", "lru", "--prefetch", scheme, "--name", "disk",
             "--unix", str(self.sock), "--metrics", "127.0.0.1:0", "--log", "warn"],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.metrics = None
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("metrics "):
                self.metrics = line.split(" ", 1)[1]
            elif line == "ready":
                return
        self.log.close()
        raise SystemExit(f"hearth serve --prefetch {scheme} exited before it was ready: "
                         f"{(workdir / f'{scheme}.log').read_text().strip()}")

    def counters(self):
        """The export's hearth_* samples by name and labels (without export="disk")."""
        with urllib.request.urlopen(self.metrics) as r:
            page = r.read().decode()
        out = {}
        for line in page.splitlines():
            if line.startswith("hearth_") and 'export="disk"' in line:
                key, value = line.rsplit(" ", 1)
                out[key.replace('export="disk",', "").replace('{export="disk"}', "")] = float(value)
        return out

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()


def run_scheme(hearth, db_file, txns, scheme, workdir, trace=None):
    """One run of `txns` against a fresh server with --prefetch `scheme`; with `trace` (an
    open text file) the run's page requests are also written there as a context-tagged
    trace (`hearth prefetch sim TRACE` replays it; requests outside transactions are left
    out)."""
    image = workdir / f"{scheme}.img"
    shutil.copyfile(db_file, image)
    db_size = image.stat().st_size
    with open(image, "r+b") as f:
        f.truncate(db_size + GROWTH_ROOM)
    server = Server(hearth, image, db_size // 10 // PAGE * PAGE, scheme, workdir)
    try:
        client = HearthClient.connect_unix(str(server.sock), "disk")
        if not client.hints:
            raise SystemExit("hearth serve did not accept NBD_OPT_HEARTH_HINTS")
        file = NbdFile(client, db_size, trace)
        vfs = NbdVFS(f"nbd-{scheme}", file)
        db = apsw.Connection(str(workdir / f"{scheme}.db"), vfs=f"nbd-{scheme}")
        pragmas(db, f"cache_size={SQLITE_CACHE_PAGES}", "locking_mode=EXCLUSIVE", "journal_mode=MEMORY",
                "synchronous=NORMAL", "temp_store=MEMORY")
        digest, latencies = hashlib.sha256(), []
        warmup = int(len(txns) * WARMUP_SHARE)
        for seq, (t, params) in enumerate(txns):
            if seq == warmup:
                before, reads_before = server.counters(), file.reads
            start = time.perf_counter()
            client.begin(seq + 1, t + 1)
            if trace:
                trace.write(f"B {time.perf_counter_ns()} {seq + 1} {t + 1}\n")
            file.ctx = seq + 1
            db.execute("BEGIN")
            run_transaction(db, seq, t, params, digest)
            db.execute("COMMIT")
            file.ctx = None
            if trace:
                trace.write(f"E {time.perf_counter_ns()} {seq + 1}\n")
            client.end(seq + 1)
            latencies.append(time.perf_counter() - start)
        after, reads_after = server.counters(), file.reads
        integrity = [r[0] for r in db.execute("PRAGMA integrity_check")]
        db.close()
        client.close()
        vfs.unregister()
    finally:
        server.stop()
    measured = sorted(latencies[warmup:])
    delta = lambda name: after.get(name, 0.0) - before.get(name, 0.0)  # noqa: E731
    return {
        "scheme": scheme,
        "transactions": len(measured),
        "mean_ms": statistics.fmean(measured) * 1e3,
        "p99_ms": measured[min(len(measured) - 1, int(0.99 * len(measured)))] * 1e3,
        "sqlite_reads": reads_after - reads_before,
        "reads": delta('hearth_requests_total{op="read"}'),
        "writes": delta('hearth_requests_total{op="write"}'),
        "server_read_ms": delta('hearth_request_duration_seconds_sum{op="read"}')
        / max(1.0, delta('hearth_request_duration_seconds_count{op="read"}')) * 1e3,
        "misses": delta("hearth_cache_misses_total"),
        "prefetches": delta("hearth_prefetches_total"),
        "promotes": delta("hearth_prefetch_promotes_total"),
        "wasted": delta("hearth_prefetch_wasted_total"),
        "integrity": integrity,
        "checksum": digest.hexdigest(),
        "db_bytes": db_size,
    }


# -- rounds and the report ----------------------------------------------------
def default_hearth():
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "hearth"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hearth", type=Path, default=default_hearth(), help="the hearth binary")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--transactions", type=int, default=3000)
    ap.add_argument("--schemes", default="none,quickmine,qm-select")
    ap.add_argument("--json", action="store_true", help="print the runs as JSON instead of tables")
    ap.add_argument("--trace", type=Path, help="write the first run's context-tagged trace (.ctx) here")
    args = ap.parse_args(argv)
    if args.transactions < 5 or args.rounds < 1 or args.scale <= 0:
        raise SystemExit(f"--transactions {args.transactions}, --rounds {args.rounds}, --scale {args.scale}:"
                         " need at least 5 transactions (20% are warm-up), 1 round and a positive scale")
    if not args.hearth.exists():
        raise SystemExit(f"--hearth {args.hearth}: no such file (build it: cargo build --release -p hearth)")
    schemes = args.schemes.split(",")
    with tempfile.TemporaryDirectory(prefix="hearth-sqlite-") as tmp:
        workdir = Path(tmp)
        db_file = workdir / "orders.db"
        populate(db_file, args.scale)
        txns = transactions(args.scale, args.transactions)
        runs = []
        for r in range(args.rounds):
            for scheme in schemes[r % len(schemes):] + schemes[: r % len(schemes)]:
                trace = open(args.trace, "w") if args.trace and not runs else None
                if trace:
                    trace.write("# hearth context-tagged trace: B time ctx class | R/W time ctx block | E time ctx\n")
                run = run_scheme(args.hearth, db_file, txns, scheme, workdir, trace)
                if trace:
                    trace.close()
                run["round"] = r + 1
                runs.append(run)
                if not args.json:
                    print(f"round {r + 1} {scheme:10} mean {run['mean_ms']:.2f} ms p99 {run['p99_ms']:.2f} ms"
                          f" server read {run['server_read_ms']:.3f} ms"
                          f" misses {run['misses']:.0f} prefetches {run['prefetches']:.0f}"
                          f" promotes {run['promotes']:.0f}", file=sys.stderr, flush=True)
    problems = [f"round {r['round']} {r['scheme']}: integrity_check says {r['integrity']}"
                for r in runs if r["integrity"] != ["ok"]]
    if len({r["checksum"] for r in runs}) != 1:
        problems.append("query results differ between runs: " +
                        ", ".join(f"{r['scheme']}/{r['round']} {r['checksum'][:12]}" for r in runs))
    if args.json:
        print(json.dumps(runs, indent=1))
    else:
        report(runs, schemes)
    if problems:
        raise SystemExit("\n".join(problems))
    return runs


def report(runs, schemes):
    r0 = runs[0]
    print(f"database {r0['db_bytes'] / 2**20:.1f} MiB, {r0['transactions']} measured transactions per run,"
          f" {len(runs) // len(schemes)} rounds; integrity ok and result checksum {r0['checksum'][:16]}"
          " identical in every run")
    print()
    print("| scheme | mean ms (min / median) | p99 ms (min / median) | server read ms (median) |"
          " NBD reads | misses | prefetches | promotes | wasted |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for s in schemes:
        mine = [r for r in runs if r["scheme"] == s]
        med = lambda k: statistics.median(r[k] for r in mine)  # noqa: E731
        low = lambda k: min(r[k] for r in mine)  # noqa: E731
        print(f"| {s} | {low('mean_ms'):.2f} / {med('mean_ms'):.2f} | {low('p99_ms'):.2f} / {med('p99_ms'):.2f} |"
              f" {med('server_read_ms'):.3f} | {med('reads'):,.0f} | {med('misses'):,.0f} |"
              f" {med('prefetches'):,.0f} | {med('promotes'):,.0f} | {med('wasted'):,.0f} |")


if __name__ == "__main__":
    main()

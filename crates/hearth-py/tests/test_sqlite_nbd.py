"""A real database over the live server: SQLite through scripts/bench-sqlite-prefetch.py's
VFS (every page an NBD request, every transaction a context), a small version of that
benchmark against `hearth serve` with no prefetching, QuickMine and qm-select."""

from __future__ import annotations

import importlib.util

from conftest import REPO, need


def load_bench():
    need(importlib.util.find_spec("apsw") is not None, "apsw is missing (pip install apsw==3.54.1.0)")
    spec = importlib.util.spec_from_file_location("bench_sqlite", REPO / "scripts" / "bench-sqlite-prefetch.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_sqlite_over_nbd_same_answers_and_quickmine_promotes(tmp_path, hearth_bin):
    bench = load_bench()
    db_file = tmp_path / "orders.db"
    bench.populate(db_file, 0.03)
    txns = bench.transactions(0.03, 300)
    runs = {s: bench.run_scheme(hearth_bin, db_file, txns, s, tmp_path) for s in ("none", "quickmine", "qm-select")}
    for scheme, run in runs.items():
        assert run["integrity"] == ["ok"], (scheme, run)
        # Every page SQLite read was an NBD READ. The server counts a request once it has
        # completed, so one read may be counted just after a scrape: allow a difference of 2.
        assert run["sqlite_reads"] > 0 and abs(run["reads"] - run["sqlite_reads"]) <= 2, (scheme, run)
    assert len({r["checksum"] for r in runs.values()}) == 1, runs
    assert runs["none"]["prefetches"] == 0, runs["none"]
    for scheme in ("quickmine", "qm-select"):
        assert 0 < runs[scheme]["promotes"] <= runs[scheme]["prefetches"], runs[scheme]

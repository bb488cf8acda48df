#!/usr/bin/env python3
"""Accuracy and cost of Hearth's one-pass miss-ratio curves against full
simulation at the same 40 sizes (hearth mrc's default grid: 0.1%..100% of the
footprint, log-spaced), on the bundled traces and two synthetic ones.

    scripts/bench-mrc.py                  # every trace below
    scripts/bench-mrc.py --quick          # the bundled traces only
    scripts/bench-mrc.py --big TRACE      # also: exact LRU and SHARDS 1% on TRACE
                                          # against one full LRU run at 10%

For each trace: exact LRU, SHARDS at 1% and miniature LRU at 1% against full
LRU; miniature ARC, LIRS, 2Q and MQ at 1% against their full runs. Prints
mean and max absolute miss-ratio error and seconds (wall, as `hearth mrc`
reports them). The traces and rates were fixed before any result was seen.
"""

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "data")
HEARTH = os.path.join(ROOT, "target", "release", "hearth")

TRACES = [
    ("cloudPhysics block (vscsi)", [os.path.join(SHARED, "cloudPhysicsIO.vscsi")]),
    ("cloudPhysics object (oracleGeneral)", [os.path.join(SHARED, "cloudPhysicsIO.oracleGeneral.bin")]),
    ("synth:zipf:1000000:0.8, 5M", ["synth:zipf:1000000:0.8", "--requests", "5000000"]),
    ("synth:oltp, 5M", ["synth:oltp", "--requests", "5000000"]),
]
RATE = "1%"
MINI_POLICIES = ["arc", "lirs", "2q", "mq"]


def mrc(trace_args, methods, policies):
    cmd = [HEARTH, "mrc", *trace_args, "-m", ",".join(methods), "-p", ",".join(policies), "--rate", RATE, "--json", "-q"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def miss(point):
    return 1 - point["hits"] / point["requests"]


def compare(name, curves):
    full = {c["points"][0]["policy"]: c for c in curves if c["method"] == "full"}
    for c in curves:
        if c["method"] == "full":
            continue
        policy = c["points"][0]["policy"]
        ref = full[policy]
        errors = [abs(miss(p) - miss(r)) for p, r in zip(c["points"], ref["points"])]
        print(
            f"  {name:<36} {policy:<5} {c['method']:<6} rate {c['rate']:.4f}  "
            f"MAE {sum(errors) / len(errors):.4f}  max {max(errors):.4f}  "
            f"{c['seconds']:7.2f} s vs full {ref['seconds']:7.2f} s"
        )


def big(trace):
    """Exact LRU and SHARDS 1% at 40 sizes vs one full LRU run at one size.

    Sizes are given in bytes (the default grid, resolved once from `hearth
    trace stats`), so no run pays the first pass that shares of the
    footprint need; all three read the trace once."""
    def timed(cmd):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start
    stats = json.loads(subprocess.run([HEARTH, "trace", "stats", trace, "--json", "-q"], check=True,
                                      stdout=subprocess.PIPE, text=True).stdout)
    footprint = stats["footprint_bytes"]
    grid = ",".join(str(max(1, round(footprint * 0.001 * 1000 ** (i / 39)))) for i in range(40))
    one = timed([HEARTH, "sim", trace, "-p", "lru", "-s", str(round(footprint * 0.1)), "-q", "--threads", "1"])
    exact = timed([HEARTH, "mrc", trace, "-m", "exact", "-s", grid, "-q"])
    shards = timed([HEARTH, "mrc", trace, "-m", "shards", "--rate", RATE, "-s", grid, "-q"])
    print(f"  {os.path.basename(trace)}: one full LRU run at 10% {one:.1f} s; "
          f"exact LRU curve (40 sizes) {exact:.1f} s ({one / exact:.2f}x less); "
          f"SHARDS {RATE} {shards:.1f} s ({one / shards:.1f}x less)  [wall, each reading the trace once]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--big", metavar="TRACE")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "hearth"], cwd=ROOT, check=True)
    traces = TRACES[:2] if args.quick else TRACES
    print(f"40 sizes, 0.1%..100% of the footprint; sampling rate {RATE}")
    for name, trace_args in traces:
        compare(name, mrc(trace_args, ["exact", "shards", "mini", "full"], ["lru"]))
        compare(name, mrc(trace_args, ["mini", "full"], MINI_POLICIES))
    if args.big:
        big(args.big)


if __name__ == "__main__":
    sys.exit(main())

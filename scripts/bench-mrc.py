#!/usr/bin/env python3
"""Accuracy and cost of Hearth's one-pass miss-ratio curves against full
simulation at the same 40 sizes (hearth mrc's default grid: 0.1%..100% of the
footprint, log-spaced), on the bundled traces and two synthetic ones.

    scripts/bench-mrc.py                  # every trace below
    scripts/bench-mrc.py --quick          # the bundled traces only
    scripts/bench-mrc.py --rates 1%,5%,10%  # SHARDS and miniatures at each rate
    scripts/bench-mrc.py --big TRACE      # also: exact LRU and SHARDS 1% on TRACE
                                          # against one full LRU run at 10%
    scripts/bench-mrc.py --big-zipf DIR   # as --big, on a Zipf oracleGeneral trace
                                          # generated into DIR (kept for reuse)
    scripts/bench-mrc.py --remaps 20      # SHARDS and miniature errors over 20 draws of the sample
    scripts/bench-mrc.py --shards-hot-keys 0 ...  # SHARDS_adj, unstratified (default: 128,
                                          # as hearth mrc; with --big, SHARDS_adj is
                                          # timed beside any other setting)

For each trace: exact LRU, SHARDS and miniature LRU against full LRU;
miniature ARC, LIRS, 2Q and MQ against their full runs, at each rate (1% by
default). Prints mean and max absolute miss-ratio error and seconds (wall, as
`hearth mrc` reports them). The traces and rates were fixed before any result
was seen. --big runs ROUNDS rounds, alternating the three commands, and
reports min and median wall and CPU (user + sys) seconds: on a shared
machine CPU time is the steadier figure.

--remaps N asks how much of SHARDS's error is the method and how much the
one sample its fixed hash draws: it runs shards and mini with
`--sample-seed 1..N`, each seed renaming every key by a bijection before it
is hashed (full results do not change, the sample does), and prints, for
SHARDS LRU and each miniature, the MAE's mean, median and max over the
draws, and seed 0's (the default sample).

The binary is $CARGO_TARGET_DIR/release/hearth (target/ by default), built
first, or $HEARTH as it is.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "data")
# $HEARTH names another build to measure (an older commit's); it is used as is.
HEARTH = os.environ.get("HEARTH") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "hearth")

TRACES = [
    ("cloudPhysics block (vscsi)", [os.path.join(SHARED, "cloudPhysicsIO.vscsi")]),
    ("cloudPhysics object (oracleGeneral)", [os.path.join(SHARED, "cloudPhysicsIO.oracleGeneral.bin")]),
    ("synth:zipf:1000000:0.8, 5M", ["synth:zipf:1000000:0.8", "--requests", "5000000"]),
    ("synth:oltp, 5M", ["synth:oltp", "--requests", "5000000"]),
]
RATE = "1%"
MINI_POLICIES = ["arc", "lirs", "2q", "mq"]
ROUNDS = 3
# The generated big trace: 50 M requests, Zipf 0.9 over 10 M blocks (bench-sim.sh's shape).
BIG_ZIPF = ("synth:zipf:10000000:0.9", "50000000")


# `hearth mrc --shards-hot-keys N` for every curve (main() sets it; 128 is the CLI's default).
SHARDS_HOT_KEYS = ["--shards-hot-keys", "128"]


def mrc(trace_args, methods, policies, rate=RATE):
    cmd = [HEARTH, "mrc", *trace_args, "-m", ",".join(methods), "-p", ",".join(policies), "--rate", rate,
           *SHARDS_HOT_KEYS, "--json", "-q"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def miss(point):
    return 1 - point["hits"] / point["requests"]


def compare(name, full, curves):
    """Each curve's error against the full simulation of its policy."""
    full = {c["points"][0]["policy"]: c for c in full}
    for c in curves:
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
        """Wall and CPU (user + sys) seconds of one run."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    stats = json.loads(subprocess.run([HEARTH, "trace", "stats", trace, "--json", "-q"], check=True,
                                      stdout=subprocess.PIPE, text=True).stdout)
    footprint = stats["footprint_bytes"]
    grid = ",".join(str(max(1, round(footprint * 0.001 * 1000 ** (i / 39)))) for i in range(40))
    commands = {
        "one full LRU run at 10%": [HEARTH, "sim", trace, "-p", "lru", "-s", str(round(footprint * 0.1)), "-q",
                                    "--threads", "1"],
        "exact LRU curve (40 sizes)": [HEARTH, "mrc", trace, "-m", "exact", "-s", grid, "-q"],
    }
    shards = [HEARTH, "mrc", trace, "-m", "shards", "--rate", RATE, "-s", grid, "-q", "--shards-hot-keys"]
    commands[f"SHARDS {RATE} (40 sizes), {SHARDS_HOT_KEYS[1]} hot keys"] = [*shards, SHARDS_HOT_KEYS[1]]
    if SHARDS_HOT_KEYS[1] != "0":
        commands[f"SHARDS {RATE} (40 sizes), SHARDS_adj"] = [*shards, "0"]
    times = {name: [] for name in commands}
    for _ in range(ROUNDS):
        for name, cmd in commands.items():
            times[name].append(timed(cmd))
    print(f"  {os.path.basename(trace)} ({stats['requests']} requests), {ROUNDS} rounds, min/median seconds:")
    one = times["one full LRU run at 10%"]
    for name, cmd in commands.items():
        line = f"    {name:<28}"
        for i, kind in enumerate(["wall", "CPU"]):
            t = [r[i] for r in times[name]]
            ratio = statistics.median(r[i] for r in one) / statistics.median(t)
            line += f" {kind} {min(t):6.2f} / {statistics.median(t):6.2f} ({ratio:5.1f}x less)"
        print(f"{line}   $ {' '.join(cmd)}")


def big_zipf(directory):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "zipf-10M-0.9-50M.oracleGeneral.bin")
    if not os.path.exists(path):
        spec, requests = BIG_ZIPF
        subprocess.run([HEARTH, "trace", "convert", spec, "--requests", requests, "-o", path, "-q"], check=True)
    return path


def remaps(name, trace_args, count, rate):
    """SHARDS's and the miniatures' errors at `rate` over samples 1..count
    (`hearth mrc --sample-seed`), against the full runs of the trace."""
    policies = ["lru", *MINI_POLICIES]
    full = {c["points"][0]["policy"]: c for c in mrc(trace_args, ["full"], policies)}
    errors = {}  # (method, policy) -> MAE per draw, seed 0 first
    for seed in range(count + 1):
        for curve in mrc([*trace_args, "--sample-seed", str(seed)], ["shards", "mini"], policies, rate):
            policy = curve["points"][0]["policy"]
            point_errors = [abs(miss(p) - miss(r)) for p, r in zip(curve["points"], full[policy]["points"])]
            errors.setdefault((curve["method"], policy), []).append(sum(point_errors) / len(point_errors))
    print(f"  {name} ({rate}, seeds 1..{count}): MAE mean / median / max over the draws, "
          f"draws within 0.01, and seed 0's")
    for (method, policy), maes in errors.items():
        drawn = maes[1:]
        print(f"    {method:<6} {policy:<5} {statistics.mean(drawn):.4f} / {statistics.median(drawn):.4f} / "
              f"{max(drawn):.4f}  within 0.01: {sum(e <= 0.01 for e in drawn):2}/{count}  seed 0 {maes[0]:.4f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rates", default=RATE, help="comma-separated sampling rates (default 1%%)")
    ap.add_argument("--big", metavar="TRACE")
    ap.add_argument("--big-zipf", metavar="DIR")
    ap.add_argument("--no-accuracy", action="store_true", help="only the --big timings")
    ap.add_argument("--remaps", type=int, metavar="N", help="sampled curves' errors over --sample-seed 1..N")
    ap.add_argument("--shards-hot-keys", type=int, default=128, metavar="N",
                    help="SHARDS stratified on N hot keys (hearth mrc --shards-hot-keys; 0: SHARDS_adj)")
    args = ap.parse_args()
    SHARDS_HOT_KEYS[1] = str(args.shards_hot_keys)
    if not os.environ.get("HEARTH"):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "hearth"], cwd=ROOT, check=True)
    traces = [] if args.no_accuracy else TRACES[:2] if args.quick else TRACES
    rates = args.rates.split(",")
    print(f"40 sizes, 0.1%..100% of the footprint; sampling rates {', '.join(rates)}; "
          f"SHARDS hot keys {args.shards_hot_keys}")
    if args.remaps:
        for name, trace_args in traces:
            for rate in rates:
                remaps(name, trace_args, args.remaps, rate)
        return
    for name, trace_args in traces:
        full = mrc(trace_args, ["full"], ["lru", *MINI_POLICIES])
        compare(name, full, mrc(trace_args, ["exact"], ["lru"]))
        for rate in rates:
            compare(name, full, mrc(trace_args, ["shards", "mini"], ["lru", *MINI_POLICIES], rate))
    for trace in [args.big, args.big_zipf and big_zipf(args.big_zipf)]:
        if trace:
            big(trace)


if __name__ == "__main__":
    sys.exit(main())

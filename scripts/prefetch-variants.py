#!/usr/bin/env python3
"""The paper's QuickMine against its issue-19 variants on every generated
context workload, in the simulator, each scheme's miss cut shown as a share
of the in-context ceiling (`hearth prefetch analyze --ceiling`).

For each workload and cache size it runs

    hearth prefetch sim --workload W --clients 100 --transactions 20000 --seed 1 \
        --cache-size C --device-latency 100us --schemes 'none;quickmine;qm-...' --json
    hearth prefetch analyze --workload W --clients 100 --transactions 20000 --seed 1 \
        --ceiling 10%,25% --json

and prints one markdown row per (workload, cache, scheme): misses, cut vs
none, cut as a share of the in-context predictable misses, prefetches
issued, accuracy, the simulated mean read latency, and where the read
misses left go (in-context predictable: prefetched but dropped unused before
the demand / never prefetched; not predictable in context). The simulator is
deterministic: the figures do not depend on the machine's load.

Displacement misses are misses on blocks the main cache gave up while the
guarded variant's spare prefetches held room it would have kept them in.

Usage: [SEED=n] [SCHEMES='none;quickmine;...'] scripts/prefetch-variants.py [HEARTH_BINARY]
(SEED defaults to 1, SCHEMES to every variant; `none` must be among them.)
"""

import json
import os
import subprocess
import sys

WORKLOADS = ["tpcw", "rubis", "dbt2", "docstore", "fileserver"]
SIZES = ["10%", "25%"]
SCHEMES = os.environ.get(
    "SCHEMES", "none;quickmine;qm-orders;qm-position;qm-ahead;qm-timely;qm-best;qm-guarded;qm-select").split(";")
COMMON = ["--clients", "100", "--transactions", "20000", "--seed", os.environ.get("SEED", "1")]


def hearth(binary, *args):
    out = subprocess.run([binary, "prefetch", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(target, "release", "hearth")
    print("| workload | cache | scheme | misses | cut % | share of in-ctx ceiling % | issued | accuracy | read µs "
          "| left: predictable, dropped / not prefetched | left: not predictable | displacement misses |")
    print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for w in WORKLOADS:
        ceilings = hearth(binary, "analyze", "--workload", w, *COMMON, "--ceiling", ",".join(SIZES), "--json")["ceiling"]
        for size, ceiling in zip(SIZES, ceilings):
            sim = hearth(binary, "sim", "--workload", w, *COMMON, "--cache-size", size,
                         "--device-latency", "100us", "--schemes", ";".join(SCHEMES), "--json")
            results = sim["results"]
            base = next(r for r in results if r["spec"] == "none")["stats"]["misses"]
            in_ctx = ceiling["in_context"]
            print(f"| {w} | {size} | ceiling: {ceiling['misses']} misses, {in_ctx} in context "
                  f"({100 * in_ctx / max(ceiling['misses'], 1):.1f}%) | | | | | | | | | |")
            for r in results:
                s = r["stats"]
                cut = base - s["misses"]
                issued = s["issued"]
                accuracy = f"{s['used'] / issued:.3f}" if issued else "-"
                read_us = r["timing"]["mean_read_ns"] / 1000
                left = r["remaining"]
                print(f"| {w} | {size} | {r['spec']} | {s['misses']} | {100 * cut / max(base, 1):.1f} | "
                      f"{100 * cut / max(in_ctx, 1):.1f} | {issued} | {accuracy} | {read_us:.1f} | "
                      f"{left['in_context_dropped']} / {left['in_context_not_prefetched']} | {left['not_in_context']} "
                  f"| {s['displaced']} |")


if __name__ == "__main__":
    main()

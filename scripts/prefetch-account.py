#!/usr/bin/env python3
"""The miss account (issue 46) of the paper's QuickMine and of the best
scheme on every generated context workload, in the simulator.

For each workload W and cache size C (10%, 25%) it runs

    hearth prefetch sim --workload W --clients 100 --transactions 20000 --seed S \
        --cache-size C --device-latency 100us --schemes 'none;quickmine;qm-...' --json

takes as the best scheme the one with the fewest misses (ties: the earlier
in SCHEMES), then

    hearth prefetch analyze --workload W --clients 100 --transactions 20000 --seed S \
        --ceiling 10%,25% --device-latency 100us --explain SCHEME --json

for QuickMine and for that scheme, and prints markdown tables: misses and
cut per scheme (with the cut as a share of the in-context ceiling), and the
account of each. The simulator is deterministic.

With EXPLAIN=0 it skips the accounts (the cut table only; the ceiling from
`analyze --ceiling`).

PREFETCH_FRACTION (a share of the cache) is passed to both commands as
--prefetch-fraction; unset, their default (4%). ADAPTIVE_PARTITION=1 adds
--adaptive-partition (the partition sized as the traffic goes, never below
that share).

Usage: [SEED=n] [SCHEMES='none;quickmine;...'] [WORKLOADS='tpcw;...'] [EXPLAIN=0] [PREFETCH_FRACTION=8%] [ADAPTIVE_PARTITION=1] scripts/prefetch-account.py [HEARTH_BINARY]
"""

import json
import os
import subprocess
import sys

WORKLOADS = os.environ.get("WORKLOADS", "tpcw;rubis;dbt2;docstore;fileserver;lsm;mailstore;graph").split(";")
SIZES = ["10%", "25%"]
SCHEMES = os.environ.get(
    "SCHEMES", "none;quickmine;qm-orders;qm-position;qm-ahead;qm-timely;qm-best;qm-guarded;qm-select").split(";")
SEED = os.environ.get("SEED", "1")
COMMON = ["--clients", "100", "--transactions", "20000", "--seed", SEED]
PARTITION = (["--prefetch-fraction", os.environ["PREFETCH_FRACTION"]] if os.environ.get("PREFETCH_FRACTION") else []) + (
    ["--adaptive-partition"] if os.environ.get("ADAPTIVE_PARTITION") == "1" else [])
REASONS = ["cold", "evicted", "mispredicted", "outranked", "cached_then", "throttled", "no_lookup", "pollution",
           "too_late", "unexplained"]
# misses.pollution split (round 18; "-" from binaries before it).
POLLUTION = ["pushed_out", "dropped_at_demand", "not_waiting", "own_earlier", "other_context"]


def hearth(binary, *args):
    out = subprocess.run([binary, "prefetch", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(target, "release", "hearth")
    cuts, accounts = [], []
    for w in WORKLOADS:
        best = {}
        ceilings = None
        for size in SIZES:
            sim = hearth(binary, "sim", "--workload", w, *COMMON, "--cache-size", size, "--device-latency", "100us", *PARTITION,
                         "--schemes", ";".join(SCHEMES), "--json")
            results = sim["results"]
            by_spec = {r["spec"]: r["stats"]["misses"] for r in results}
            contenders = [s for s in SCHEMES if s != "none"]
            best[size] = min(contenders, key=lambda s: (by_spec[s], contenders.index(s)))
            cuts.append((w, size, by_spec, best[size]))
        if os.environ.get("EXPLAIN", "1") == "0":
            ceilings = hearth(binary, "analyze", "--workload", w, *COMMON, "--ceiling", ",".join(SIZES), "--json")["ceiling"]
        for spec in sorted({"quickmine", *best.values()}) if os.environ.get("EXPLAIN", "1") != "0" else []:
            v = hearth(binary, "analyze", "--workload", w, *COMMON, "--ceiling", ",".join(SIZES),
                       "--device-latency", "100us", *PARTITION, "--explain", spec, "--json")
            ceilings = v["ceiling"]
            for size, e in zip(SIZES, v["explain"]):
                accounts.append((w, size, spec, best[size] == spec, e))
        for i, c in enumerate(cuts):
            if c[0] == w and len(c) == 4:
                cuts[i] = (*c, ceilings[SIZES.index(c[1])])

    print(f"Seed {SEED}. Misses; cut vs none in % and (in brackets) as a share of the in-context ceiling, "
          "then of the in-context ceiling within degree D (binaries that report it).\n")
    print("| workload | cache | in-ctx ceiling | within D | none | " + " | ".join(s for s in SCHEMES if s != "none")
          + " | best |")
    print("|---|---|--:|--:|--:|" + "--:|" * (len(SCHEMES) - 1) + "---|")
    for w, size, by_spec, best, ceiling in cuts:
        none = by_spec["none"]
        within = ceiling.get("in_context_within_degree")
        cells = []
        for s in SCHEMES:
            if s == "none":
                continue
            cut = none - by_spec[s]
            share = 100 * cut / ceiling["in_context"] if ceiling["in_context"] else 0
            of_within = f" / {100 * cut / within:.1f}" if within else ""
            cells.append(f"{by_spec[s]} {100 * cut / none:.1f} ({share:.1f}{of_within})")
        print(f"| {w} | {size} | {ceiling['in_context']} | {within if within is not None else '-'} | {none} | "
              + " | ".join(cells) + f" | {best} |")

    print("\nThe account (predictable misses left, and why; wasted prefetches, and why):\n")
    print("| workload | cache | scheme | ceiling in ctx | left | " + " | ".join(REASONS)
          + " | " + " | ".join(f"pollution: {p}" for p in POLLUTION)
          + " | wasted: dropped before use | wasted: mispredicted |")
    print("|---|---|---|--:|--:|" + "--:|" * (len(REASONS) + len(POLLUTION)) + "--:|--:|")
    for w, size, spec, is_best, e in accounts:
        a = e["account"]
        name = e["scheme"] + (" (best)" if is_best else "")
        cells = " | ".join(str(a["misses"][r]) for r in REASONS)
        cells += " | " + " | ".join(str(a["pollution"][p]) if "pollution" in a else "-" for p in POLLUTION)
        print(f"| {w} | {size} | {name} | {e['ceiling_in_context']} | {a['predictable_misses']} | {cells} | "
              f"{a['wasted']['dropped_before_use']} | {a['wasted']['mispredicted']} |")


if __name__ == "__main__":
    main()

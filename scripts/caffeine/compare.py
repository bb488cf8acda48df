#!/usr/bin/env python3
"""Hearth's wtinylfu next to a real Caffeine cache, on the same traces and sizes.

Run by scripts/bench-caffeine.sh (which fetches Caffeine, compiles Replay.java
and builds hearth); prints one Markdown table per trace. Caffeine's admission
has a random element (a candidate with a sketch frequency of 6 or more that
loses is still admitted 1 time in 128, against hash flooding), so each size
runs REPEATS times and the table gives the lowest and highest hit count.
"""
import argparse
import csv
import io
import os
import struct
import subprocess
import tempfile

RECORD = struct.Struct("<IQIq")  # oracleGeneral: time, id, size, next access


def unit_copy(src, dst):
    """The trace with every request's size set to 1: an entry count bound for Hearth."""
    with open(src, "rb") as f, open(dst, "wb") as out:
        data = f.read()
        for off in range(0, len(data) - len(data) % RECORD.size, RECORD.size):
            t, key, _, nxt = RECORD.unpack_from(data, off)
            out.write(RECORD.pack(t, key, 1, nxt))


def caffeine(args, trace, mode, sizes):
    """{size: (hits, requests, window share)} per run."""
    out = subprocess.run(
        ["java", "-cp", args.classpath, "Replay", trace, mode, ",".join(map(str, sizes))],
        check=True, capture_output=True, text=True).stdout
    runs = {}
    for line in out.split("\n"):
        if line.strip():
            size, requests, hits, window = line.split()
            runs[int(size)] = (int(hits), int(requests), float(window))
    return runs


def hearth(args, trace, policies, size):
    """{policy label: hits} at one size."""
    out = subprocess.run(
        [args.hearth, "sim", trace, "-q", "--csv", "--threads", "1", "-s", str(size), "-p", ",".join(policies)],
        check=True, capture_output=True, text=True).stdout
    return {row["policy"]: int(row["hits"]) for row in csv.DictReader(io.StringIO(out))}


def table(args, title, trace, mode, sizes, unit_label):
    print(f"\n### {title}\n")
    print(f"| cache ({unit_label}) | Caffeine {args.version} (min..max of {args.repeats}) | its window at the end"
          " | Hearth wtinylfu | diff | Hearth wtinylfu:window=(Caffeine's end) | Hearth lru |")
    print("|---|---|---|---|---|---|---|")
    runs = [caffeine(args, trace, mode, sizes) for _ in range(args.repeats)]
    for size in sizes:
        hits = [r[size][0] for r in runs]
        requests = runs[0][size][1]
        window = runs[0][size][2]
        ratio = lambda h: f"{h / requests:.4f}"
        default = hearth(args, trace, ["wtinylfu", "lru"], size)
        pinned = hearth(args, trace, [f"wtinylfu:window={window:.4f}"], size)
        ours = default["W-TinyLFU"]
        mid = (min(hits) + max(hits)) / 2
        shown = size if mode == "unit" else f"{size >> 20} MiB"
        print(f"| {shown} | {ratio(min(hits))}..{ratio(max(hits))} | {window:.2%} | {ratio(ours)}"
              f" | {(ours - mid) / requests:+.4f} | {ratio(next(iter(pinned.values())))}"
              f" | {ratio(default['LRU'])} |")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--hearth", required=True)
    p.add_argument("--classpath", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--cloudphysics", required=True)
    p.add_argument("--zipf", required=True, help="an oracleGeneral trace written by hearth trace convert synth:zipf:...")
    p.add_argument("--zipf-label", required=True, help="what the Zipf trace is, for its table's title")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    print("Hit ratios (hits / requests); diff is Hearth's minus the middle of Caffeine's range.")
    with tempfile.TemporaryDirectory() as tmp:
        cp_unit = os.path.join(tmp, "cloudPhysicsIO.unit.oracleGeneral.bin")
        unit_copy(args.cloudphysics, cp_unit)
        zipf_unit = os.path.join(tmp, "zipf.unit.oracleGeneral.bin")
        unit_copy(args.zipf, zipf_unit)
        table(args, "cloudPhysicsIO, entries (maximumSize; 48,974 distinct keys)", cp_unit, "unit",
              [500, 2500, 5000, 12500], "entries")
        table(args, "cloudPhysicsIO, bytes (maximumWeight = request sizes)", args.cloudphysics, "bytes",
              [m << 20 for m in (128, 256, 512, 1024)], "bytes")
        table(args, f"{args.zipf_label}, entries", zipf_unit, "unit",
              [1000, 5000, 10000, 25000], "entries")


if __name__ == "__main__":
    main()

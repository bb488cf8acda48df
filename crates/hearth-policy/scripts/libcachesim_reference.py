#!/usr/bin/env python3
"""Miss counts of libCacheSim's policies on an oracleGeneral trace, as JSON.

Usage: libcachesim_reference.py TRACE SIZES POLICIES
  TRACE     path to a .oracleGeneral.bin trace (24-byte records)
  SIZES     comma-separated cache sizes in bytes
  POLICIES  comma-separated Hearth policy specs (the keys of CLASSES)

Prints {"requests": N, "misses": {"lru": {"134217728": 93374, ...}, ...}}.
Exits with status 3 when the libcachesim package cannot be imported, so the
Rust test can tell "not installed" from a real failure.

Caches use libCacheSim's defaults (no object metadata, default parameters).
"""

import json
import sys

NOT_INSTALLED = 3

# Hearth policy spec -> libcachesim class name.
CLASSES = {
    "lru": "LRU",
    "fifo": "FIFO",
    "clock": "Clock",
    "lfu": "LFU",
    "arc": "ARC",
    "slru": "SLRU",
    "lirs": "LIRS",
    "opt": "Belady",
    "s3fifo": "S3FIFO",
    "sieve": "Sieve",
    "lruk": "LRUK",
    "gdsf": "GDSF",
    # libCacheSim's counting, which Hearth's default sketch does not follow.
    "wtinylfu:freq=exact": "WTinyLFU",
}


def main(argv):
    if len(argv) != 4:
        sys.exit(f"usage: {argv[0]} TRACE SIZES POLICIES")
    try:
        import libcachesim as lcs
    except ImportError as e:
        print(f"libcachesim not installed: {e}", file=sys.stderr)
        sys.exit(NOT_INSTALLED)

    trace, sizes, policies = argv[1], argv[2].split(","), argv[3].split(",")
    reader = lcs.TraceReader(trace, lcs.TraceType.ORACLE_GENERAL_TRACE)
    requests = reader.get_num_of_req()
    misses = {}
    for name in policies:
        if name not in CLASSES:
            sys.exit(f"no libcachesim counterpart for policy {name!r} (known: {', '.join(CLASSES)})")
        cls = getattr(lcs, CLASSES[name])
        misses[name] = {}
        for size in sizes:
            cache = cls(int(size))
            miss_ratio, _byte_miss_ratio = cache.process_trace(reader)
            # process_trace reports a ratio over all requests; recover the count.
            misses[name][size] = round(miss_ratio * requests)
    json.dump({"requests": requests, "misses": misses}, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env python3
"""The measurements behind hearth.memory_hint's constants (docs/python.md,
"Memory per task"): the peak RSS of one sweep task -- one policy, one thread,
in a fresh process with pandas loaded -- on synth:uniform:KEYS with three
requests a key, less that of the same task on a 1000-key trace, per key of the
trace, at cache sizes of 1%, 10%, 50% and 100% of the keys (given as blocks, so
no first pass runs), and the first pass's key map (an LRU task at "1%" against
the same size in blocks).

    python3 scripts/bench-task-memory.py [--keys 1000000] [--policies lru,mq,opt]

Prints one JSON line per policy: bytes per key of the trace at each share.
"""

import argparse
import json
import subprocess
import sys

CHILD = r"""
import resource, sys, pandas, hearth
keys, policy, sizes = int(sys.argv[1]), sys.argv[2], sys.argv[3]
hearth.sim(f"synth:uniform:{keys}", [policy], sizes, requests=3 * keys, threads=1)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""
SHARES = (0.01, 0.1, 0.5, 1.0)


def peak(keys: int, policy: str, sizes: str) -> int:
    p = subprocess.run([sys.executable, "-c", CHILD, str(keys), policy, sizes], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{policy} {sizes}: {p.stderr.strip().splitlines()[-1]}")
    return int(p.stdout.split()[-1])


def main() -> None:
    import hearth

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--policies", default=",".join(p for p in hearth.policies().name if not p.startswith("+")))
    args = ap.parse_args()
    n = args.keys
    idle = peak(1000, "lru", "256blocks")
    print(json.dumps({"idle_peak_bytes": idle}), flush=True)
    blocks = peak(n, "lru", f"{n // 100}blocks")
    print(json.dumps({"first_pass_bytes_per_key": round((peak(n, "lru", "1%") - blocks) / n, 1)}), flush=True)
    for policy in args.policies.split(","):
        per_key = {f"{s:.0%}": round((peak(n, policy, f"{int(n * s)}blocks") - idle) / n, 1) for s in SHARES}
        print(json.dumps({"policy": policy, "bytes_per_key": per_key}), flush=True)


if __name__ == "__main__":
    main()

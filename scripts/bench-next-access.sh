#!/usr/bin/env bash
# Peak memory of computing next uses (OPT on a trace without them, and
# `hearth trace convert`) against the bound: policy metadata + 512 MiB,
# whatever the number of requests and distinct keys. Prints peak RSS, wall,
# CPU time (user + sys) and requests per CPU second of
#
#   hearth sim SPEC --requests N -p opt -s SIZE     (next uses from the first pass)
#   hearth sim SPEC --requests N -p lru -s SIZE     (no first pass: the metadata
#                                                    of a cache of SIZE, for scale)
#   hearth trace convert SPEC --requests N -o OUT   (then deleted)
#
#   scripts/bench-next-access.sh                       # 200 M requests, 50 M keys
#   REQUESTS=1000000000 scripts/bench-next-access.sh   # the issue's 10^9 run
#
# Environment:
#   HEARTH    the binary (default target/release/hearth)
#   SPEC      workload (default synth:zipf:50000000:0.9: Zipf 0.9 over 50 M blocks)
#   REQUESTS  requests (default 200000000)
#   SIZE      cache size (default 8GiB: 2 M blocks of 4 KiB)
#   TMPDIR    where the next-use files go (29 bytes a request at the peak)
#             and the converted trace (24 bytes a request)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HEARTH="${HEARTH:-$ROOT/target/release/hearth}"
SPEC="${SPEC:-synth:zipf:50000000:0.9}"
REQUESTS="${REQUESTS:-200000000}"
SIZE="${SIZE:-8GiB}"
OUT="${TMPDIR:-/tmp}/hearth-bench-next-access.$$.bin"
trap 'rm -f "$OUT"' EXIT

measure() {
    local name="$1"
    shift
    local log
    log="$(mktemp)"
    /usr/bin/time -v "$@" >/dev/null 2>"$log"
    awk -v name="$name" -v n="$REQUESTS" -F': ' '
        /Maximum resident set size/ { rss = $2 / 1024 }
        /User time/ { cpu += $2 }
        /System time/ { cpu += $2 }
        /Elapsed \(wall clock\)/ { wall = $2 }
        END { printf "%-8s peak RSS %7.0f MiB  wall %9s  cpu %7.1f s  %5.2f M req/cpu-s\n", name, rss, wall, cpu, n / cpu / 1e6 }
    ' "$log"
    rm -f "$log"
}

echo "$SPEC, $REQUESTS requests, cache $SIZE, $HEARTH"
measure opt "$HEARTH" sim "$SPEC" --requests "$REQUESTS" -p opt -s "$SIZE" -q --threads 1
measure lru "$HEARTH" sim "$SPEC" --requests "$REQUESTS" -p lru -s "$SIZE" -q --threads 1
measure convert "$HEARTH" trace convert "$SPEC" --requests "$REQUESTS" -o "$OUT" -q

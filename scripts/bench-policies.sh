#!/usr/bin/env bash
# What every registered policy costs per request in `hearth sim`, next to
# LRU, flagging any above LIMIT x LRU (issue 47: no policy should make the
# README's all-policies run take minutes). Admission policies are timed
# behind LRU (lru+tinylfu, ...). Not a test: nothing here fails on a time.
#
#   scripts/bench-policies.sh            # the bundled trace
#   scripts/bench-policies.sh --synth    # and a generated 50 M-request Zipf trace
#
# Environment:
#   WORK      scratch directory for the generated trace
#             (default /tmp/hearth-bench-policies; kept between runs)
#   ROUNDS    runs per policy; the least CPU time counts (default 3)
#   POLICIES  specs to time (default: every one `hearth policies` lists)
#   SIZE      cache size, as `hearth sim -s` takes it (default 10%)
#   ZIPF      generated trace: synth spec and request count, as in
#             bench-sim.sh (default "synth:zipf:20000000:0.9 50000000")
#   LIMIT     ratio to LRU above which a policy is flagged (default 20)
#
# A policy's cost is the CPU time (user + sys, from getrusage: microseconds)
# of `hearth sim TRACE -p POLICY -s SIZE --threads 1` less the run's fixed
# cost (start-up and reading the trace), divided by the requests. The fixed
# cost is 2 x t(lru) - t(lru,lru): one run's time less LRU's share of it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${WORK:-/tmp/hearth-bench-policies}"
ROUNDS="${ROUNDS:-3}"
SIZE="${SIZE:-10%}"
ZIPF="${ZIPF:-synth:zipf:20000000:0.9 50000000}"
LIMIT="${LIMIT:-20}"
BUNDLED="$ROOT/data/cloudPhysicsIO.csv.zst" # the README's first command's trace
case "${1:-}" in
    "") synth=0 ;;
    --synth) synth=1 ;;
    *) echo "usage: $0 [--synth]" >&2; exit 2 ;;
esac
mkdir -p "$WORK"

(cd "$ROOT" && cargo build --release -q -p hearth)
hearth="${CARGO_TARGET_DIR:-$ROOT/target}/release/hearth"
if [[ -z "${POLICIES:-}" ]]; then
    POLICIES=$("$hearth" policies | awk '/^$/ {exit} {print ($1 ~ /^\+/ ? "lru" $1 : $1)}' | tr '\n' ' ')
fi

traces=("$BUNDLED")
if ((synth)); then
    read -r zipf_spec zipf_requests <<<"$ZIPF"
    zipf_trace="$WORK/$(echo "$zipf_spec" | tr ':' '_')-$zipf_requests.oracleGeneral.bin"
    if [[ ! -f "$zipf_trace" ]]; then
        echo "generating $zipf_trace ..." >&2
        "$hearth" trace convert "$zipf_spec" --requests "$zipf_requests" -o "$zipf_trace" -q
    fi
    traces+=("$zipf_trace")
fi

# cpu TRACE SPECS -> the least CPU seconds of ROUNDS runs of hearth sim.
cpu() {
    python3 - "$ROUNDS" "$hearth" sim "$1" -p "$2" -s "$SIZE" --threads 1 -q <<'PY'
import resource, subprocess, sys
best = float("inf")
for _ in range(int(sys.argv[1])):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(sys.argv[2:])}\n{out.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    best = min(best, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
print(f"{best:.4f}")
PY
}

for trace in "${traces[@]}"; do
    requests=$("$hearth" trace stats "$trace" --json -q | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])')
    lru=$(cpu "$trace" lru)
    fixed=$(python3 -c "print(max(0.0, 2 * $lru - $(cpu "$trace" lru,lru)))")
    lru_ns=$(python3 -c "print(($lru - $fixed) * 1e9 / $requests)")
    echo "$(basename "$trace"): $requests requests, cache $SIZE, fixed cost ${fixed}s, least CPU of $ROUNDS runs"
    printf '%-28s %10s %10s %9s\n' policy "cpu s" "ns/req" "x LRU"
    flagged=()
    for policy in $POLICIES; do
        t=$([[ $policy == lru ]] && echo "$lru" || cpu "$trace" "$policy")
        read -r ns ratio < <(python3 -c "ns = ($t - $fixed) * 1e9 / $requests; print(f'{ns:.1f} {ns / $lru_ns:.2f}')")
        flag=""
        if python3 -c "import sys; sys.exit(0 if $ratio > $LIMIT else 1)"; then
            flag="  > ${LIMIT}x"
            flagged+=("$policy")
        fi
        printf '%-28s %10s %10s %8sx%s\n' "$policy" "$t" "$ns" "$ratio" "$flag"
    done
    echo "above ${LIMIT}x LRU: ${flagged[*]:-none}"
    echo
done

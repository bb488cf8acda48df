#!/usr/bin/env bash
# Context-aware prefetching in the live server, against the same server with
# prefetching off, in one run: for each generated workload, two `hearth serve`
# instances (memory backend behind a slow-device latency, LRU cache of PCT% of
# the workload's footprint) are driven by `hearth prefetch replay` (one
# connection per concurrent context, contexts sent as hints), and the clients'
# read latency and the servers' miss/promote counters are compared.
# Usage: scripts/bench-prefetch.sh [PCT] [LATENCY] [SPEED] [WORKLOADS...]
#   defaults: 10 1ms 1 rubis tpcw dbt2 (a higher SPEED can saturate a small machine's CPUs,
#   which then dominates the latencies); PREFETCH="none quickmine qm-guarded" compares more
#   schemes (the first is the baseline of the cut columns; default "none quickmine");
#   SERVE_ARGS="--adaptive-partition" adds flags to every server
set -euo pipefail
cd "$(dirname "$0")/.."

PCT=${1:-10}
LATENCY=${2:-1ms}
SPEED=${3:-1}
shift $(($# < 3 ? $# : 3))
WORKLOADS=("$@")
[ ${#WORKLOADS[@]} -gt 0 ] || WORKLOADS=(rubis tpcw dbt2)
for tool in jq curl; do
    command -v "$tool" >/dev/null || { echo "bench-prefetch: $tool is not installed" >&2; exit 1; }
done

cargo build --release -q -p hearth
HEARTH="${CARGO_TARGET_DIR:-target}/release/hearth"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

metric() { # page name
    grep "^$2{export=\"disk\"}" "$1" | awk '{print $2}'
}

printf "%-10s %-10s %9s %9s %9s %9s %9s %10s %10s\n" \
    workload prefetch "read µs" "p99 µs" misses promotes issued "miss cut" "latency"
for w in "${WORKLOADS[@]}"; do
    footprint=$("$HEARTH" prefetch sim --workload "$w" --schemes none --json | jq .footprint_bytes)
    size_mib=$(((footprint >> 20) + 1))
    cache=$((footprint * PCT / 100))
    declare -A MISSES=() MEAN=()
    read -r -a SCHEMES <<<"${PREFETCH:-none quickmine}"
    for p in "${SCHEMES[@]}"; do
        echo "bench-prefetch: $w, prefetch $p: replaying (the row follows when done) ..." >&2
        "$HEARTH" serve --backend memory --size "${size_mib}MiB" --cache-size "$cache" --policy lru \
            --prefetch "$p" ${SERVE_ARGS:-} --latency "$LATENCY" --name disk --unix "$WORK/$w-$p.sock" --metrics 127.0.0.1:0 \
            --log warn >"$WORK/$w-$p.out" 2>"$WORK/$w-$p.log" &
        PIDS+=($!)
        for _ in $(seq 100); do grep -q '^ready' "$WORK/$w-$p.out" && break; sleep 0.1; done
        "$HEARTH" prefetch replay --workload "$w" --speed "$SPEED" --json \
            --server "nbd+unix:///disk?socket=$WORK/$w-$p.sock" >"$WORK/$w-$p.json"
        curl -s "$(sed -n 's/^metrics //p' "$WORK/$w-$p.out")" >"$WORK/$w-$p.metrics"
        MISSES[$p]=$(metric "$WORK/$w-$p.metrics" hearth_cache_misses_total)
        MEAN[$p]=$(jq .read_us.mean "$WORK/$w-$p.json")
        base=${SCHEMES[0]}
        cut=$(awk -v a="${MISSES[$base]}" -v b="${MISSES[$p]}" 'BEGIN { printf "%.1f%%", 100 * (a - b) / a }')
        ratio=$(awk -v a="${MEAN[$base]}" -v b="${MEAN[$p]}" 'BEGIN { printf "%.2fx", b / a }')
        printf "%-10s %-10s %9.0f %9d %9d %9d %9d %10s %10s\n" "$w" "$p" "${MEAN[$p]}" \
            "$(jq .read_us.p99 "$WORK/$w-$p.json")" "${MISSES[$p]}" \
            "$(metric "$WORK/$w-$p.metrics" hearth_prefetch_promotes_total)" \
            "$(metric "$WORK/$w-$p.metrics" hearth_prefetches_total)" "$cut" "$ratio"
    done
    unset MISSES MEAN
done
echo "(misses and promotes are the servers' counters over the whole run; read µs is what clients saw after a"
echo " 30% warm-up; miss cut and latency are against prefetching off on the same workload)"

#!/usr/bin/env bash
# Caching proxies in front of a slow NBD server, in one run: `hearth serve
# --backend nbd` against nbdkit's own nbd plugin with its cache filter
# (cache-on-read), both with the same cache size, in front of one upstream:
# `nbdkit memory` behind the delay filter (DELAY_MS per read and write).
#
# Workload (decided before measuring): fio's nbd engine, 4 KiB random reads,
# Zipf(1.1) over the export (a skewed working set), iodepth 16, SECONDS per
# round; the export is first filled through the upstream. Rounds alternate
# hearth, nbdkit; min/median IOPS and p99 are reported per proxy. A final
# hearth round kills the upstream a third of the way in and restarts it a
# second later: fio's error count shows whether clients noticed.
#
# Usage: scripts/bench-proxy.sh [SIZE_MIB] [CACHE_MIB] [SECONDS] [ROUNDS] [DELAY_MS]
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MIB=${1:-1024}
CACHE_MIB=${2:-256}
SECONDS_PER_ROUND=${3:-15}
ROUNDS=${4:-3}
DELAY_MS=${5:-1}
for tool in fio nbdkit jq; do
    command -v "$tool" >/dev/null || { echo "bench-proxy: $tool is not installed" >&2; exit 1; }
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "bench-proxy: this fio lacks the nbd engine" >&2; exit 1; }

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

wait_for_socket() {
    for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done
    echo "bench-proxy: no socket at $1" >&2
    exit 1
}

start_upstream() {
    nbdkit -f -U "$WORK/up.sock" --filter=delay memory "${SIZE_MIB}M" \
        delay-read="${DELAY_MS}ms" delay-write="${DELAY_MS}ms" 2>>"$WORK/upstream.log" &
    UPSTREAM=$!
    PIDS+=("$UPSTREAM")
    wait_for_socket "$WORK/up.sock"
}
start_upstream
UP_URI="nbd+unix:///?socket=$WORK/up.sock"

echo "filling ${SIZE_MIB} MiB upstream (a pattern, so reads return data)..."
fio --name=fill --ioengine=nbd --uri="$UP_URI" --rw=write --bs=1M --iodepth=16 --size="${SIZE_MIB}M" \
    --output="$WORK/fill.txt" >/dev/null

"$HEARTH" serve --backend nbd --upstream "$UP_URI" --cache-size "${CACHE_MIB}MiB" --name disk \
    --unix "$WORK/hearth.sock" --log warn >"$WORK/hearth.out" 2>"$WORK/hearth.log" &
PIDS+=($!)
nbdkit -f -U "$WORK/nbdkit.sock" --filter=cache nbd socket="$WORK/up.sock" \
    cache-on-read=true cache-max-size="${CACHE_MIB}M" 2>"$WORK/nbdkit.log" &
PIDS+=($!)
wait_for_socket "$WORK/hearth.sock"
wait_for_socket "$WORK/nbdkit.sock"
declare -A URI=(
    [hearth]="nbd+unix:///disk?socket=$WORK/hearth.sock"
    [nbdkit]="nbd+unix:///?socket=$WORK/nbdkit.sock"
)

run_fio() { # name uri output
    fio --name="$1" --ioengine=nbd --uri="$2" --rw=randread --bs=4k --iodepth=16 \
        --random_distribution=zipf:1.1 --size="${SIZE_MIB}M" --runtime="$SECONDS_PER_ROUND" --time_based \
        --group_reporting --output-format=json --output="$3" >/dev/null || true
}

for r in $(seq "$ROUNDS"); do
    for p in hearth nbdkit; do
        echo "round $r: $p"
        run_fio "$p" "${URI[$p]}" "$WORK/$p-$r.json"
    done
done

stats() { # proxy jq-expr -> "min median"
    for r in $(seq "$ROUNDS"); do jq "$2" "$WORK/$1-$r.json"; done | sort -g |
        awk '{v[NR]=$1} END {printf "%.0f %.0f", v[1], v[int((NR+1)/2)]}'
}
echo
printf "%-8s %22s %22s\n" proxy "IOPS min / median" "p99 us min / median"
for p in hearth nbdkit; do
    read -r imin imed <<<"$(stats "$p" '.jobs[0].read.iops')"
    read -r pmin pmed <<<"$(stats "$p" '.jobs[0].read.clat_ns.percentile["99.000000"] / 1000')"
    printf "%-8s %10s / %-10s %10s / %-10s\n" "$p" "$imin" "$imed" "$pmin" "$pmed"
done
read -r _ h <<<"$(stats hearth '.jobs[0].read.iops')"
read -r _ k <<<"$(stats nbdkit '.jobs[0].read.iops')"
echo "median IOPS ratio hearth/nbdkit: $(echo "$h $k" | awk '{printf "%.2f", $1 / $2}')"

echo
echo "upstream restart during a hearth round (killed at $((SECONDS_PER_ROUND / 3)) s, back 1 s later)..."
(
    sleep $((SECONDS_PER_ROUND / 3))
    kill -9 "$UPSTREAM"
    rm -f "$WORK/up.sock"
    sleep 1
    nbdkit -f -U "$WORK/up.sock" --filter=delay memory "${SIZE_MIB}M" \
        delay-read="${DELAY_MS}ms" delay-write="${DELAY_MS}ms" 2>>"$WORK/upstream.log" &
    echo $! >"$WORK/upstream2.pid"
    sleep "$SECONDS_PER_ROUND" # outlive the round: nbdkit may not outlive its parent
) &
RESTARTER=$!
run_fio restart "${URI[hearth]}" "$WORK/restart.json"
wait "$RESTARTER" 2>/dev/null || true
[ -f "$WORK/upstream2.pid" ] && PIDS+=("$(cat "$WORK/upstream2.pid")")
echo "fio errors: $(jq '.jobs[0].error' "$WORK/restart.json"), reads $(jq '.jobs[0].read.total_ios' "$WORK/restart.json"), IOPS $(jq '.jobs[0].read.iops | floor' "$WORK/restart.json")"
echo "hearth retries logged: $(grep -c 'upstream connection lost; retrying' "$WORK/hearth.log" || true)"

#!/usr/bin/env bash
# The persistent cache device across a restart: `hearth serve --backend nbd`
# with a RAM cache (RAM_MIB) and a cache device file (DEVICE_MIB) in front of
# `nbdkit memory` behind the delay filter (DELAY_MS per read and write).
#
# Workload (decided before measuring): fio's nbd engine, 4 KiB random reads,
# Zipf(1.1) over the whole export (EXPORT_MIB, a skewed working set larger
# than both caches), iodepth 16, SECONDS per phase, the same random sequence
# every phase (fio's randrepeat). One warm-up phase fills the caches; then
# ROUNDS times: a phase measured before a restart, a clean stop (SIGTERM) and
# restart of hearth on the same device file, a phase measured after it.
#
# Hit ratio of a phase = 1 - blocks read from the backend / blocks clients
# read, from /metrics (hearth_cache_device_misses_total over
# hearth_cache_hits_total + hearth_cache_misses_total, deltas over the
# phase). Reports min/median per side and the ratio of the medians
# after/before. The upstream is not pre-filled: its reads cost the same delay
# whether or not data was written.
#
# Each phase also reports clients' IOPS and hearth's CPU time per 1,000
# requests (user + system, from /proc), so two builds can be compared:
# HEARTH_BIN=PATH runs that binary instead of building this tree's, and
# WRITE_BACK=1 puts the device in write-back with a mixed workload (70%
# reads, 30% writes, a FLUSH every 64 writes), which exercises dirty
# eviction, cleaning and their ordering.
#
# Usage: [HEARTH_BIN=PATH] [WRITE_BACK=1] scripts/bench-cache-device.sh [RAM_MIB] [DEVICE_MIB] [EXPORT_MIB] [SECONDS] [ROUNDS] [DELAY_MS]
set -euo pipefail
cd "$(dirname "$0")/.."

RAM_MIB=${1:-1024}
DEVICE_MIB=${2:-8192}
EXPORT_MIB=${3:-16384}
SECONDS_PER_PHASE=${4:-60}
ROUNDS=${5:-3}
DELAY_MS=${6:-1}
for tool in fio nbdkit jq curl; do
    command -v "$tool" >/dev/null || { echo "bench-cache-device: $tool is not installed" >&2; exit 1; }
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "bench-cache-device: this fio lacks the nbd engine" >&2; exit 1; }

if [ -n "${HEARTH_BIN:-}" ]; then
    HEARTH=$HEARTH_BIN
else
    cargo build --release -q -p hearth
    HEARTH="${CARGO_TARGET_DIR:-target}/release/hearth"
fi
DEVICE_FLAGS=()
FIO_RW=(--rw=randread)
if [ "${WRITE_BACK:-0}" = 1 ]; then
    DEVICE_FLAGS=(--cache-device-write-back)
    FIO_RW=(--rw=randrw --rwmixread=70 --fsync=64)
fi
WORK=$(mktemp -d -p "${BENCH_DIR:-/tmp}")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

wait_for() { # path test
    for _ in $(seq 300); do [ "$2" "$1" ] && return 0; sleep 0.1; done
    echo "bench-cache-device: nothing at $1" >&2
    exit 1
}

nbdkit -f -U "$WORK/up.sock" --filter=delay memory "${EXPORT_MIB}M" \
    delay-read="${DELAY_MS}ms" delay-write="${DELAY_MS}ms" 2>"$WORK/upstream.log" &
PIDS+=($!)
wait_for "$WORK/up.sock" -S

start_hearth() {
    STARTED=$(date +%s.%N)
    rm -f "$WORK/hearth.out"
    "$HEARTH" serve --backend nbd --upstream "nbd+unix:///?socket=$WORK/up.sock" --name disk \
        --cache-size "${RAM_MIB}MiB" --cache-device "$WORK/cache.dev" --cache-device-size "${DEVICE_MIB}MiB" "${DEVICE_FLAGS[@]}" \
        --unix "$WORK/hearth.sock" --metrics 127.0.0.1:0 --log info >"$WORK/hearth.out" 2>>"$WORK/hearth.log" &
    HEARTH_PID=$!
    for _ in $(seq 600); do grep -q '^ready' "$WORK/hearth.out" 2>/dev/null && break; sleep 0.1; done
    METRICS=$(sed -n 's/^metrics //p' "$WORK/hearth.out")
    [ -n "$METRICS" ] || { echo "bench-cache-device: hearth did not start" >&2; cat "$WORK/hearth.log" >&2; exit 1; }
    START_S=$(echo "$STARTED $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
}

counter() { # name -> value for export disk
    curl -s "$METRICS" | awk -v n="$1{export=\"disk\"}" '$1 == n {print $2}'
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$HEARTH_PID/stat"; }

phase() { # name -> "hit-ratio iops cpu-ms-per-1k-requests" of the phase
    local reads0 misses0 reads1 misses1 ticks0 ticks1
    reads0=$(($(counter hearth_cache_hits_total) + $(counter hearth_cache_misses_total)))
    misses0=$(counter hearth_cache_device_misses_total)
    ticks0=$(cpu_ticks)
    fio --name="$1" --ioengine=nbd --uri="nbd+unix:///disk?socket=$WORK/hearth.sock" "${FIO_RW[@]}" --bs=4k \
        --iodepth=16 --random_distribution=zipf:1.1 --size="${EXPORT_MIB}M" --runtime="$SECONDS_PER_PHASE" \
        --time_based --output-format=json --output="$WORK/$1.json" >/dev/null
    ticks1=$(cpu_ticks)
    reads1=$(($(counter hearth_cache_hits_total) + $(counter hearth_cache_misses_total)))
    misses1=$(counter hearth_cache_device_misses_total)
    local iops ios
    iops=$(jq '.jobs[0].read.iops + .jobs[0].write.iops' "$WORK/$1.json")
    ios=$(jq '.jobs[0].read.total_ios + .jobs[0].write.total_ios' "$WORK/$1.json")
    echo "$reads0 $misses0 $reads1 $misses1 $iops $ticks0 $ticks1 $ios $(getconf CLK_TCK)" |
        awk '{printf "%.4f %.0f %.3f", 1 - ($4 - $2) / ($3 - $1), $5, ($7 - $6) * 1000 / $9 * 1000 / $8}'
}

start_hearth
read -r hit iops cpu <<<"$(phase warm)"
echo "warm-up (${SECONDS_PER_PHASE} s): hit ratio $hit, $iops IOPS, $cpu ms CPU per 1k requests"
BEFORE=()
AFTER=()
IOPS=()
CPU=()
for r in $(seq "$ROUNDS"); do
    read -r hit iops cpu <<<"$(phase "before-$r")"
    BEFORE+=("$hit") IOPS+=("$iops") CPU+=("$cpu")
    kill -TERM "$HEARTH_PID"
    wait "$HEARTH_PID"
    start_hearth
    read -r hit iops cpu <<<"$(phase "after-$r")"
    AFTER+=("$hit") IOPS+=("$iops") CPU+=("$cpu")
    echo "round $r: hit ratio before restart ${BEFORE[-1]}, after ${AFTER[-1]}," \
        "device blocks $(curl -s "$METRICS" | awk '$1 ~ /^hearth_cache_device_blocks.*resident/ {print $2}')," \
        "restart to ready ${START_S} s"
done
kill -TERM "$HEARTH_PID"
wait "$HEARTH_PID" || true

minmed() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {printf "%s %s", v[1], v[int((NR+1)/2)]}'; }
read -r bmin bmed <<<"$(minmed "${BEFORE[@]}")"
read -r amin amed <<<"$(minmed "${AFTER[@]}")"
echo
echo "RAM ${RAM_MIB} MiB, device ${DEVICE_MIB} MiB$([ "${WRITE_BACK:-0}" = 1 ] && echo " (write-back, mixed workload)"), export ${EXPORT_MIB} MiB, ${SECONDS_PER_PHASE} s phases, ${ROUNDS} rounds, ${DELAY_MS} ms upstream"
echo "hit ratio before restart min/median: $bmin / $bmed"
echo "hit ratio after restart  min/median: $amin / $amed"
echo "after/before (medians): $(echo "$amed $bmed" | awk '{printf "%.3f", $1 / $2}')"
read -r imin imed <<<"$(minmed "${IOPS[@]}")"
read -r cmin cmed <<<"$(minmed "${CPU[@]}")"
echo "IOPS (all measured phases) min/median: $imin / $imed"
echo "hearth CPU ms per 1k requests min/median: $cmin / $cmed"

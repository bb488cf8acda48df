#!/usr/bin/env bash
# Benchmark `hearth serve` against nbdkit (memory plugin) and qemu-nbd (raw
# file in /dev/shm), in one run, with fio's nbd engine over Unix sockets:
#   - 4 KiB random reads, iodepth 32, on a working set that fits Hearth's cache
#     (the export is filled and thus cached first): IOPS and p99 latency;
#   - 1 MiB sequential reads, iodepth 8: MB/s.
# Every server gets the same export size and the same fio jobs; ratios are
# against nbdkit. Usage: scripts/bench-serve.sh [SIZE_MIB] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MIB=${1:-256}
SECONDS_PER_JOB=${2:-10}
for tool in fio nbdkit qemu-nbd jq; do
    command -v "$tool" >/dev/null || { echo "bench-serve: $tool is not installed" >&2; exit 1; }
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "bench-serve: this fio lacks the nbd engine" >&2; exit 1; }

cargo build --release -q -p hearth
HEARTH="${CARGO_TARGET_DIR:-target}/release/hearth"

WORK=$(mktemp -d)
SHM=$(mktemp -p /dev/shm hearth-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT

wait_for_socket() {
    for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done
    echo "bench-serve: no socket at $1" >&2
    exit 1
}

# Hearth: memory backend, cache larger than the export.
"$HEARTH" serve --backend memory --size "${SIZE_MIB}MiB" --cache-size "$((SIZE_MIB + 64))MiB" \
    --name disk --unix "$WORK/hearth.sock" --metrics 127.0.0.1:0 --log warn >"$WORK/hearth.out" 2>"$WORK/hearth.log" &
PIDS+=($!)
nbdkit -f -U "$WORK/nbdkit.sock" memory "${SIZE_MIB}M" 2>"$WORK/nbdkit.log" &
PIDS+=($!)
truncate -s "${SIZE_MIB}M" "$SHM"
qemu-nbd -f raw -x disk -t --shared=16 --socket="$WORK/qemu.sock" "$SHM" 2>"$WORK/qemu.log" &
PIDS+=($!)
for s in hearth nbdkit qemu; do wait_for_socket "$WORK/$s.sock"; done

declare -A URI=(
    [hearth]="nbd+unix:///disk?socket=$WORK/hearth.sock"
    [nbdkit]="nbd+unix:///?socket=$WORK/nbdkit.sock"
    [qemu-nbd]="nbd+unix:///disk?socket=$WORK/qemu.sock"
)
ORDER=(hearth nbdkit qemu-nbd)

run_fio() { # name uri rw bs iodepth seconds -> json file
    fio --name="$1" --ioengine=nbd --uri="$2" --rw="$3" --bs="$4" --iodepth="$5" \
        --size="${SIZE_MIB}M" --runtime="$6" --time_based --group_reporting \
        --output-format=json --output="$WORK/$1-$3.json" >/dev/null
}

echo "filling ${SIZE_MIB} MiB on each server (this also warms Hearth's cache)..."
for s in "${ORDER[@]}"; do
    fio --name="fill-$s" --ioengine=nbd --uri="${URI[$s]}" --rw=write --bs=1M --iodepth=8 \
        --size="${SIZE_MIB}M" --output="$WORK/fill-$s.txt" >/dev/null
done

for s in "${ORDER[@]}"; do
    echo "$s: 4 KiB random reads, iodepth 32, ${SECONDS_PER_JOB}s"
    run_fio "$s" "${URI[$s]}" randread 4k 32 "$SECONDS_PER_JOB"
    echo "$s: 1 MiB sequential reads, iodepth 8, ${SECONDS_PER_JOB}s"
    run_fio "$s" "${URI[$s]}" read 1M 8 "$SECONDS_PER_JOB"
done

iops() { jq '.jobs[0].read.iops' "$WORK/$1-randread.json"; }
p99_us() { jq '.jobs[0].read.clat_ns.percentile["99.000000"] / 1000' "$WORK/$1-randread.json"; }
mbps() { jq '.jobs[0].read.bw_bytes / 1000000' "$WORK/$1-read.json"; }

BASE_IOPS=$(iops nbdkit)
BASE_MBPS=$(mbps nbdkit)
echo
printf "%-9s %12s %10s %12s %12s %10s\n" server "4k IOPS" "p99 us" "IOPS ratio" "1M seq MB/s" "MB/s ratio"
for s in "${ORDER[@]}"; do
    printf "%-9s %12.0f %10.0f %11.2fx %12.0f %9.2fx\n" "$s" "$(iops "$s")" "$(p99_us "$s")" \
        "$(jq -n "$(iops "$s") / $BASE_IOPS")" "$(mbps "$s")" "$(jq -n "$(mbps "$s") / $BASE_MBPS")"
done
# The cache's effect over a simulated slow device (1 ms per backend call,
# 200 MiB/s): Hearth without a cache against Hearth with a warmed one.
echo
echo "slow device (1 ms + 200 MiB/s per backend call), 4 KiB random reads, iodepth 32:"
for cache in 0 "$((SIZE_MIB + 64))MiB"; do
    sock="$WORK/slow-$cache.sock"
    "$HEARTH" serve --backend memory --size "${SIZE_MIB}MiB" --cache-size "$cache" --latency 1ms --bandwidth 200MiB \
        --name disk --unix "$sock" --log warn >/dev/null 2>>"$WORK/slow.log" &
    pid=$!
    PIDS+=("$pid")
    wait_for_socket "$sock"
    uri="nbd+unix:///disk?socket=$sock"
    fio --name=warm --ioengine=nbd --uri="$uri" --rw=read --bs=1M --iodepth=8 --size="${SIZE_MIB}M" >/dev/null
    run_fio "slow-$cache" "$uri" randread 4k 32 "$SECONDS_PER_JOB"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    printf "  cache %-8s %10.0f IOPS %10.0f us p99\n" "$cache" "$(iops "slow-$cache")" "$(p99_us "slow-$cache")"
done

METRICS=$(sed -n 's/^metrics //p' "$WORK/hearth.out")
curl -s "$METRICS" >"$WORK/metrics.txt"
hits=$(sed -n 's/^hearth_cache_hits_total{export="disk"} //p' "$WORK/metrics.txt")
misses=$(sed -n 's/^hearth_cache_misses_total{export="disk"} //p' "$WORK/metrics.txt")
echo "ratios are against nbdkit; Hearth cache: $hits block hits, $misses block misses over the whole run"

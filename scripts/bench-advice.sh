#!/usr/bin/env bash
# What the live advice costs in memory: `hearth serve` with and without it
# (--what-if none), each fed the same fio random reads (Zipf 0.9 over a 4 GiB
# sparse export, 256 MiB cache, 4 KiB, iodepth 32) for REQUESTS block reads
# (io_size: fio's number_ios alone stops at one pass over the 4 GiB, 2^20 reads);
# prints each server's peak RSS (VmHWM) and IOPS, and the advice's JSON size.
#
#   scripts/bench-advice.sh [REQUESTS]        # default 10000000
#
# JOBS=N splits the reads over N fio jobs (default 1), to replay long runs faster.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-10000000}
JOBS=${JOBS:-1}
command -v fio >/dev/null || { echo "bench-advice: fio is not installed" >&2; exit 1; }
cargo build --release -q -p hearth
HEARTH="${CARGO_TARGET_DIR:-target}/release/hearth"
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT

for variant in with-advice without; do
    extra=()
    [ "$variant" = without ] && extra=(--what-if none)
    sock="$WORK/$variant.sock"
    "$HEARTH" serve --backend sparse --path "$WORK/$variant.img" --size 4GiB --cache-size 256MiB \
        --unix "$sock" --metrics 127.0.0.1:0 --log warn "${extra[@]}" >"$WORK/$variant.out" 2>"$WORK/$variant.log" &
    pid=$!
    for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
    fio --name=advice --ioengine=nbd --uri="nbd+unix:///hearth?socket=$sock" --rw=randread \
        --random_distribution=zipf:0.9 --bs=4k --iodepth=32 --size=4G --io_size=$((REQUESTS / JOBS * 4096)) \
        --numjobs="$JOBS" --group_reporting \
        --output-format=json --output="$WORK/$variant.json" >/dev/null
    rss=$(awk '/VmHWM/ {print $2 / 1024}' "/proc/$pid/status")
    iops=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['jobs'][0]['read']['iops']))" "$WORK/$variant.json")
    metrics=$(sed -n 's/^metrics //p' "$WORK/$variant.out")
    advice_bytes=$(curl -s "${metrics%/metrics}/advice" | wc -c)
    ios=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][0]['read']['total_ios'])" "$WORK/$variant.json")
    printf "%-12s %11s reads   peak RSS %7.1f MiB   %8s IOPS   /advice %6s bytes\n" "$variant" "$ios" "$rss" "$iops" "$advice_bytes"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
done

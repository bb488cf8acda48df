#!/usr/bin/env bash
# Where `hearth serve` spends its time on one I/O pattern: fio's nbd engine
# drives a release build over a Unix socket while `perf record` samples the
# server (software cpu-clock, so it works where hardware counters do not),
# then prints the hottest frames, self time first, and keeps perf.data; it
# also prints the server's minor page faults and CPU time per operation.
#
#   scripts/profile-serve.sh [RW] [BS] [IODEPTH] [SECONDS] [SERVE_ARGS...]
#   scripts/profile-serve.sh randwrite 4k 32 10
#   scripts/profile-serve.sh read 1M 8 10 --write-back
#   TRANSPORT=tcp scripts/profile-serve.sh read 1M 8 10   # loopback TCP instead
#   HEARTH=old/hearth scripts/profile-serve.sh read 1M 8 10   # profile that binary (a "before")
#   NUMJOBS=4 scripts/profile-serve.sh randwrite 4k 32 10   # four connections
#
# Output directory: $OUT (default /tmp/hearth-profile): perf.data, report.txt
# (self time) and callers.txt (call graphs of the top frames). A flamegraph:
# `perf script -i $OUT/perf.data | stackcollapse-perf.pl | flamegraph.pl > f.svg`
# with Brendan Gregg's FlameGraph scripts, if installed.
set -euo pipefail
cd "$(dirname "$0")/.."

RW=${1:-randwrite}
BS=${2:-4k}
IODEPTH=${3:-32}
SECONDS_TO_RUN=${4:-10}
shift $(($# < 4 ? $# : 4))
OUT=${OUT:-/tmp/hearth-profile}
SIZE_MIB=256
TRANSPORT=${TRANSPORT:-unix}
NUMJOBS=${NUMJOBS:-1}
for tool in fio perf; do
    command -v "$tool" >/dev/null || { echo "profile-serve: $tool is not installed" >&2; exit 1; }
done

if [ -z "${HEARTH:-}" ]; then
    cargo build --release -q -p hearth
    HEARTH="${CARGO_TARGET_DIR:-target}/release/hearth"
fi
mkdir -p "$OUT"
SOCK="$OUT/hearth.sock"
rm -f "$SOCK"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$HEARTH" serve --backend memory --size "${SIZE_MIB}MiB" --cache-size "$((SIZE_MIB + 64))MiB" \
    --name disk --unix "$SOCK" --listen "127.0.0.1:$PORT" --log warn "$@" >"$OUT/hearth.out" 2>"$OUT/hearth.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
case $TRANSPORT in
unix) URI="nbd+unix:///disk?socket=$SOCK" ;;
tcp) URI="nbd://127.0.0.1:$PORT/disk" ;;
*) echo "profile-serve: TRANSPORT is unix or tcp" >&2; exit 1 ;;
esac

echo "filling ${SIZE_MIB} MiB (warms the cache) ..."
fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 --size="${SIZE_MIB}M" >/dev/null

echo "profiling $RW bs=$BS iodepth=$IODEPTH for ${SECONDS_TO_RUN}s ..."
# The server's minor page faults and CPU ticks (fields 10, 14, 15 of
# /proc/PID/stat; the name in field 2 has no spaces) around the run: a write
# that stores into freshly mapped memory shows as faults per operation. Also
# the voluntary context switches of its threads (waits: on locks, for work).
proc_counts() {
    echo "$(awk '{print $10, $14 + $15}' "/proc/$SERVER/stat")" \
        "$(cat /proc/"$SERVER"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt/ {n += $2} END {print n}')"
}
read -r FAULTS_BEFORE TICKS_BEFORE WAITS_BEFORE < <(proc_counts)
perf record -F 999 -e cpu-clock -g -p "$SERVER" -o "$OUT/perf.data" -- sleep "$SECONDS_TO_RUN" 2>"$OUT/perf.log" &
PERF=$!
fio --name=profile --ioengine=nbd --uri="$URI" --rw="$RW" --bs="$BS" --iodepth="$IODEPTH" \
    --numjobs="$NUMJOBS" --group_reporting \
    --size="${SIZE_MIB}M" --runtime="$SECONDS_TO_RUN" --time_based --output-format=json \
    --output="$OUT/fio.json" >/dev/null
wait $PERF || true
read -r FAULTS_AFTER TICKS_AFTER WAITS_AFTER < <(proc_counts)

perf report -i "$OUT/perf.data" --stdio --no-children --sort symbol --percent-limit 1 2>/dev/null |
    grep -v '^$' >"$OUT/report.txt" || true
perf report -i "$OUT/perf.data" --stdio --children --sort symbol --percent-limit 5 -G 2>/dev/null \
    >"$OUT/callers.txt" || true
python3 - "$OUT/fio.json" "$RW" "$((FAULTS_AFTER - FAULTS_BEFORE))" "$((TICKS_AFTER - TICKS_BEFORE))" \
    "$(getconf CLK_TCK)" "$((WAITS_AFTER - WAITS_BEFORE))" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
side = "write" if "write" in sys.argv[2] else "read"
faults, ticks, hz, waits = (int(a) for a in sys.argv[3:7])
ops = max(job[side]["total_ios"], 1)
print(f"fio {sys.argv[2]}: {job[side]['iops']:.0f} IOPS, {job[side]['bw_bytes'] / 1e6:.0f} MB/s")
print(f"server: {faults} minor page faults ({faults / ops:.2f} per op), "
      f"CPU {ticks / hz * 1e6 / ops:.1f} us per op ({ops} ops), {waits / ops:.2f} voluntary switches per op")
PY
echo "hottest frames (self time, >= 1%):"
grep -E '^ +[0-9.]+%' "$OUT/report.txt" | sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//' | head -25
echo "(full report: $OUT/report.txt; call graphs: $OUT/callers.txt)"

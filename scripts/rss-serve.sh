#!/usr/bin/env bash
# Resident memory of `hearth serve` with a memory backend before and after
# its export is written in full (fio, 1 MiB sequential writes over a Unix
# socket), with a cache larger than the export (as bench-serve.sh runs it):
# shows whether the export's bytes live in RAM once or twice.
#
#   scripts/rss-serve.sh [SIZE_MIB] [HEARTH_BINARY...]
#   BS=6k scripts/rss-serve.sh 256   # unaligned writes: half the blocks written in part
#   READBACK=1 BS=6k scripts/rss-serve.sh 256 old new   # then read it all back (1 MiB
#       reads): the blocks partial writes left uncached are read misses, filled into the cache
# Each binary (default: this tree's release build) is measured in turn.
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MIB=${1:-256}
BS=${BS:-1M}
shift $(($# > 0 ? 1 : 0))
command -v fio >/dev/null || { echo "rss-serve: fio is not installed" >&2; exit 1; }
if [ $# -eq 0 ]; then
    cargo build --release -q -p hearth
    set -- "${CARGO_TARGET_DIR:-target}/release/hearth"
fi
WORK=$(mktemp -d)
PID=
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
rss_mib() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

for hearth in "$@"; do
    rm -f "$WORK/s.sock"
    "$hearth" serve --backend memory --size "${SIZE_MIB}MiB" --cache-size "$((SIZE_MIB + 64))MiB" \
        --name disk --unix "$WORK/s.sock" --log warn >/dev/null 2>"$WORK/log" &
    PID=$!
    for _ in $(seq 100); do [ -S "$WORK/s.sock" ] && break; sleep 0.1; done
    [ -S "$WORK/s.sock" ] || { echo "rss-serve: $hearth did not start" >&2; cat "$WORK/log" >&2; exit 1; }
    idle=$(rss_mib "$PID")
    fio --name=fill --ioengine=nbd --uri="nbd+unix:///disk?socket=$WORK/s.sock" --rw=write --bs="$BS" \
        --iodepth=8 --size="${SIZE_MIB}M" --output=/dev/null
    full=$(rss_mib "$PID")
    echo "$hearth: RSS ${idle} MiB idle, ${full} MiB after writing the ${SIZE_MIB} MiB export in ${BS} writes"
    if [ -n "${READBACK:-}" ]; then
        fio --name=readback --ioengine=nbd --uri="nbd+unix:///disk?socket=$WORK/s.sock" --rw=read --bs=1M \
            --iodepth=8 --size="${SIZE_MIB}M" --output=/dev/null
        back=$(rss_mib "$PID")
        echo "$hearth: RSS ${back} MiB after reading it back ($(awk -v a="$back" -v b="$full" 'BEGIN {printf "%+.1f", a - b}') MiB)"
    fi
    kill "$PID"
    wait "$PID" 2>/dev/null || true
    PID=
done

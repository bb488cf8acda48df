#!/usr/bin/env bash
# Runs one fuzz target with the limits used for the results in README.md.
#
#   fuzz/run.sh TARGET [SECONDS]      (default 600 s)
#   RUNS=1000000 fuzz/run.sh TARGET   (also stop after this many executions)
#   fuzz/run.sh list                  (the targets)
#
# Stable Rust, cargo-fuzz (libFuzzer) without a sanitizer; one process, one
# thread, under `nice -n 10`. New inputs go to fuzz/work/TARGET (not kept);
# the kept seeds in fuzz/corpus/TARGET are read too (the crash reproducers
# in fuzz/regressions/TARGET are not: they would stop the run at once until
# fixed; replay them with fuzz/repro.sh). Crashes, OOMs and timeouts land in
# fuzz/artifacts/TARGET/, the log in fuzz/logs/TARGET.log.
#
# Environment: RUNS (execution cap), TARGET_DIR (cargo target dir, default
# fuzz/target), HEARTH_FUZZ_MALLOC_LIMIT_MB (largest single allocation, 256),
# RSS_LIMIT_MB (512), TIMEOUT (seconds per input, 10).
set -euo pipefail

FUZZ="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$FUZZ")"
TARGETS=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$FUZZ/Cargo.toml" | grep -v '^hearth-fuzz$')

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 TARGET [SECONDS] | $0 list" >&2
    exit 2
fi
if [[ "$1" == list ]]; then
    echo "$TARGETS"
    exit 0
fi
TARGET="$1"
SECONDS_LIMIT="${2:-600}"
if ! grep -qx "$TARGET" <<<"$TARGETS"; then
    echo "unknown target $TARGET; targets: $(echo $TARGETS)" >&2
    exit 2
fi

TARGET_DIR="${TARGET_DIR:-$FUZZ/target}"
export HEARTH_FUZZ_MALLOC_LIMIT_MB="${HEARTH_FUZZ_MALLOC_LIMIT_MB:-256}"
RSS_LIMIT_MB="${RSS_LIMIT_MB:-512}"
TIMEOUT="${TIMEOUT:-10}"

case "$TARGET" in
    server_config) DICT="$FUZZ/dicts/server_config.dict" ;;
    nbd_handshake) DICT="$FUZZ/dicts/nbd_handshake.dict" ;;
    trace_msr | trace_spc | trace_cpcsv | trace_csv_sniff | trace_buffered | trace_blkparse | trace_ctx)
        DICT="$FUZZ/dicts/trace_text_formats.dict" ;;
    *) DICT="" ;;
esac

mkdir -p "$FUZZ/work/$TARGET" "$FUZZ/artifacts/$TARGET" "$FUZZ/logs" "$FUZZ/corpus/$TARGET"

# Trace targets write each input to /dev/shm/hearth-fuzz-PID/: drop those
# of processes that are gone.
for d in /dev/shm/hearth-fuzz-* "${TMPDIR:-/tmp}"/hearth-fuzz-*; do
    [[ -d "$d" ]] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
done

cd "$ROOT"
nice -n 10 cargo fuzz build --sanitizer none --target-dir "$TARGET_DIR" "$TARGET"

ARGS=(
    -max_total_time="$SECONDS_LIMIT"
    -rss_limit_mb="$RSS_LIMIT_MB"
    -malloc_limit_mb="$HEARTH_FUZZ_MALLOC_LIMIT_MB"
    -timeout="$TIMEOUT"
    -print_final_stats=1
    -artifact_prefix="$FUZZ/artifacts/$TARGET/"
)
[[ -n "${RUNS:-}" ]] && ARGS+=(-runs="$RUNS")
[[ -n "$DICT" ]] && ARGS+=(-dict="$DICT")

# The binary directly (not `cargo fuzz run`, which would pass -jobs/-workers
# through unchanged but adds nothing here): one process, one thread.
BIN="$TARGET_DIR/x86_64-unknown-linux-gnu/release/$TARGET"
set -x
nice -n 10 "$BIN" "${ARGS[@]}" \
    "$FUZZ/work/$TARGET" "$FUZZ/corpus/$TARGET" \
    2>&1 | tee "$FUZZ/logs/$TARGET.log"

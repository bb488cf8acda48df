#!/usr/bin/env bash
# Replays saved inputs through a target (no fuzzing): the reproducers under
# fuzz/regressions/TARGET by default, or the files given.
#
#   fuzz/repro.sh TARGET [FILE...]
# Exit status 0 when no input crashes.
set -euo pipefail
FUZZ="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TARGET="${1:?usage: $0 TARGET [FILE...]}"
shift
TARGET_DIR="${TARGET_DIR:-$FUZZ/target}"
export HEARTH_FUZZ_MALLOC_LIMIT_MB="${HEARTH_FUZZ_MALLOC_LIMIT_MB:-256}"
cd "$(dirname "$FUZZ")"
cargo fuzz build --sanitizer none --target-dir "$TARGET_DIR" "$TARGET"
if [[ $# -eq 0 ]]; then
    shopt -s nullglob
    set -- "$FUZZ/regressions/$TARGET"/*
    [[ $# -gt 0 ]] || { echo "no reproducers in fuzz/regressions/$TARGET"; exit 0; }
fi
status=0
for f in "$@"; do
    echo "== $f"
    if out=$("$TARGET_DIR/x86_64-unknown-linux-gnu/release/$TARGET" -rss_limit_mb=512 -timeout=10 "$f" 2>&1); then
        echo "ok"
    else
        status=1
        grep -E -A1 "panicked at|==hearth-fuzz==|ERROR: libFuzzer" <<<"$out" || tail -5 <<<"$out"
    fi
done
exit $status

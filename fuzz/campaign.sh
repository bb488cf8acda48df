#!/usr/bin/env bash
# The campaign behind the results table in README.md: every target, one
# after the other (never two fuzzers at once), each until RUNS executions
# (default 1,000,000) or SECONDS seconds (default 600), whichever comes
# first. libFuzzer stops at the first crash; the target is then restarted
# with what is left of both budgets, at most MAX_CRASHES times, so a
# shallow bug does not hide the rest of the run.
#
#   fuzz/campaign.sh [TARGET...]      (default: all targets)
#
# Prints one summary line per target and appends it to fuzz/logs/summary.tsv:
# target, executions, exec/s, cov (edges), ft (features), corpus, crashes,
# seconds.
set -uo pipefail

FUZZ="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUNS_TOTAL="${RUNS:-1000000}"
SECONDS_TOTAL="${SECONDS_BUDGET:-600}"
MAX_CRASHES="${MAX_CRASHES:-3}"
[[ $# -gt 0 ]] || set -- $("$FUZZ/run.sh" list)
mkdir -p "$FUZZ/logs"

for t in "$@"; do
    execs=0
    crashes=0
    start=$(date +%s)
    attempt=0
    cov=0
    ft=0
    corp=0
    while :; do
        now=$(date +%s)
        left_s=$((SECONDS_TOTAL - (now - start)))
        left_r=$((RUNS_TOTAL - execs))
        ((left_s > 2 && left_r > 0)) || break
        attempt=$((attempt + 1))
        before=$(ls "$FUZZ/artifacts/$t" 2>/dev/null | wc -l)
        RUNS=$left_r "$FUZZ/run.sh" "$t" "$left_s" >/dev/null 2>&1
        log="$FUZZ/logs/$t.$attempt.log"
        mv "$FUZZ/logs/$t.log" "$log"
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        # A crash may end the log before the final stats: the last status line.
        [[ -n "$n" ]] || n=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed 's/^#\([0-9]*\).*/\1/')
        execs=$((execs + ${n:-0}))
        last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
        if [[ -n "$last" ]]; then
            cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
            ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
            corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
        fi
        after=$(ls "$FUZZ/artifacts/$t" 2>/dev/null | wc -l)
        if ((after > before)); then
            crashes=$((crashes + after - before))
            grep -m1 -E "panicked at|==hearth-fuzz==|ERROR: libFuzzer" "$log" | sed "s/^/$t: /"
            ((crashes < MAX_CRASHES)) || break
        elif [[ -z "$n" ]]; then
            echo "$t: run $attempt produced no stats; see $log" >&2
            break
        fi
    done
    secs=$(($(date +%s) - start))
    rate=$((secs > 0 ? execs / secs : execs))
    line="$t	$execs	$rate	$cov	$ft	$corp	$crashes	$secs"
    echo "$line"
    echo "$line" >>"$FUZZ/logs/summary.tsv"
done

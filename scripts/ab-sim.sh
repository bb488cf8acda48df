#!/usr/bin/env bash
# A/B CPU time of two hearth binaries replaying one trace, alternating, as
# docs/dev/sim-speed.md's acceptance rule asks: per policy, ROUNDS rounds,
# each running both binaries (the order flips every round so neither always
# runs on a warmer machine), then min and median CPU seconds (user + sys,
# getrusage of the child) of each, the change of the minimum, and whether
# the two `hearth sim --csv` outputs agree.
#
#   scripts/ab-sim.sh BEFORE AFTER TRACE ROUNDS POLICY...
#   scripts/ab-sim.sh /tmp/hb/hearth-before target/release/hearth \
#       /tmp/hb/zipf10m.oracleGeneral.bin 3 s3fifo qdlp
#
# Environment:
#   SIZE   cache size (default: 10% of the trace's footprint, from
#          `AFTER trace stats`, kept beside the trace as TRACE.footprint)
#   FORMAT trace format option for `hearth sim` (default: none, sniffed)
#
# Outputs are compared on the columns both binaries print, except
# train_seconds (wall clock): a binary that adds a column still compares
# with one that does not. Any difference is printed and the script exits 1
# after the remaining policies. Runs use object mode (oracleGeneral's),
# `--threads 1`.
set -euo pipefail

if [[ $# -lt 5 ]]; then
    echo "usage: $0 BEFORE AFTER TRACE ROUNDS POLICY..." >&2
    exit 2
fi
before=$1 after=$2 trace=$3 rounds=$4
shift 4
for bin in "$before" "$after"; do
    [[ -x "$bin" ]] || { echo "$bin: not an executable" >&2; exit 2; }
done
[[ -f "$trace" ]] || { echo "$trace: no such trace" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS: expected a positive count, got $rounds" >&2; exit 2; }

if [[ -z "${SIZE:-}" ]]; then
    cached="$trace.footprint"
    if [[ ! -s "$cached" || "$trace" -nt "$cached" ]]; then
        "$after" trace stats "$trace" --json -q |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["footprint_bytes"])' >"$cached"
    fi
    SIZE="$(python3 -c "print(max(1, round($(cat "$cached") * 0.1 / 2**20)))")MiB"
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# run OUT BIN POLICY: the CSV to OUT, the CPU seconds on stdout.
run() {
    python3 - "$1" "$2" sim "$trace" -p "$3" -s "$SIZE" --threads 1 -q --csv ${FORMAT:+--format "$FORMAT"} <<'PY'
import resource, subprocess, sys
out = sys.argv[1]
with open(out, "w") as f:
    done = subprocess.run(sys.argv[2:], stdout=f, stderr=subprocess.PIPE, text=True)
if done.returncode != 0:
    sys.exit(f"failed ({done.returncode}): {' '.join(sys.argv[2:])}: {done.stderr.strip()}")
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")
PY
}

# same A B: whether two CSVs agree on their shared columns but train_seconds.
same() {
    python3 - "$1" "$2" <<'PY'
import csv, sys
a, b = (list(csv.DictReader(open(p))) for p in sys.argv[1:])
shared = [c for c in (a[0].keys() if a else []) if b and c in b[0] and c != "train_seconds"]
if len(a) != len(b) or any([r[c] for c in shared] != [s[c] for c in shared] for r, s in zip(a, b)):
    sys.exit(f"CSV differs:\n{open(sys.argv[1]).read()}---\n{open(sys.argv[2]).read()}")
PY
}

stats() { sort -n | awk '{v[NR]=$1} END {printf "%s %s", v[1], v[int((NR+1)/2)]}'; }

echo "trace $trace, cache $SIZE, $rounds rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-36s %-17s %-17s %8s %s\n' policy "before min/med" "after min/med" "min" csv
status=0
for policy in "$@"; do
    : >"$scratch/before.t"
    : >"$scratch/after.t"
    for round in $(seq "$rounds"); do
        if ((round % 2)); then order="before after"; else order="after before"; fi
        for which in $order; do
            bin=$before
            [[ $which == after ]] && bin=$after
            run "$scratch/$which.csv" "$bin" "$policy" >>"$scratch/$which.t"
        done
    done
    read -r bmin bmed <<<"$(stats <"$scratch/before.t")"
    read -r amin amed <<<"$(stats <"$scratch/after.t")"
    verdict=identical
    same "$scratch/before.csv" "$scratch/after.csv" || { verdict=DIFFERENT; status=1; }
    printf '%-36s %7s / %-7s %7s / %-7s %+7.1f%% %s\n' "$policy" "$bmin" "$bmed" "$amin" "$amed" \
        "$(python3 -c "print(($amin - $bmin) / $bmin * 100)")" "$verdict"
done
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status

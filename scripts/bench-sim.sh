#!/usr/bin/env bash
# Simulator throughput and memory against libCacheSim's C `cachesim`, measured
# in the same run, alternating, on the same oracleGeneral traces, policies and
# sizes, one thread each. Reports CPU time (user + sys) and peak RSS, min and
# median of ROUNDS, the ratio of medians, both miss ratios, and metadata bytes
# per cached object.
#
#   scripts/bench-sim.sh                 # bundled trace + a generated Zipf trace
#   ROUNDS=5 POLICIES="lru arc" scripts/bench-sim.sh
#
# Environment:
#   WORK      scratch directory for cachesim's build and generated traces
#             (default /tmp/hearth-bench-sim; kept between runs)
#   ROUNDS    rounds per (trace, policy) (default 3)
#   POLICIES  policies both simulators have (default "lru fifo clock arc");
#             HEARTH=CACHESIM where the names differ ("fifomerge=fifo-merge")
#   ZIPF      generated trace: synth spec and request count
#             (default "synth:zipf:20000000:0.9 50000000": 50 M requests,
#             Zipf 0.9 over 20 M blocks of 4 KiB, >= 10 M distinct)
#   SIZE_SHARE cache size as a share of each trace's footprint (default 0.1)
#
# cachesim is built from the libcachesim 0.3.5 sdist by
# scripts/build-cachesim.sh (needs libglib2.0-dev libzstd-dev cmake
# build-essential). Its cache sizes are
# passed as `NMB`, which it reads as MiB. Its hash table starts at 2^24
# buckets (hashpower 24, libCacheSim's default; the CLI has no option).
#
# Metadata per object: peak RSS with a cache as large as the footprint
# (every object cached) minus peak RSS with a 1 MiB cache, divided by
# the distinct objects. The same method for both; cachesim's preallocated
# 2^24-bucket table is in both runs, so it cancels out of its figure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${WORK:-/tmp/hearth-bench-sim}"
ROUNDS="${ROUNDS:-3}"
POLICIES="${POLICIES:-lru fifo clock arc}"
ZIPF="${ZIPF:-synth:zipf:20000000:0.9 50000000}"
SIZE_SHARE="${SIZE_SHARE:-0.1}"
BUNDLED="$ROOT/../shared/data/cloudPhysicsIO.oracleGeneral.bin"
mkdir -p "$WORK"

cachesim="$("$ROOT/scripts/build-cachesim.sh" "$WORK")"
(cd "$ROOT" && cargo build --release -q -p hearth)
hearth="$ROOT/target/release/hearth"

read -r zipf_spec zipf_requests <<<"$ZIPF"
zipf_trace="$WORK/$(echo "$zipf_spec" | tr ':' '_')-$zipf_requests.oracleGeneral.bin"
if [[ ! -f "$zipf_trace" ]]; then
    echo "generating $zipf_trace ..." >&2
    "$hearth" trace convert "$zipf_spec" --requests "$zipf_requests" -o "$zipf_trace" -q
fi

# run CMD... -> the command's output, then "TIME cpu_seconds peak_rss_kib"
# (getrusage of the child: microsecond CPU time, unlike /usr/bin/time's 10 ms).
run() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
sys.stdout.write(out.stdout)
if out.returncode != 0:
    sys.exit(f"failed ({out.returncode}): {' '.join(sys.argv[1:])}")
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"TIME {r.ru_utime + r.ru_stime:.3f} {r.ru_maxrss}")
PY
}

# measure TOOL TRACE POLICY MIB -> "cpu_seconds rss_kib miss_ratio"
measure() {
    local tool=$1 trace=$2 policy=$3 mib=$4 out miss
    if [[ $tool == hearth ]]; then
        out=$(run "$hearth" sim "$trace" -p "${policy%%=*}" -s "${mib}MiB" --threads 1 -q --csv)
        miss=$(echo "$out" | awk -F, '$1 == "trace" {for (i = 1; i <= NF; i++) if ($i == "miss_ratio") c = i; next}
            c && $4 > 0 {printf "%.4f", $c}')
    else
        # cachesim writes a result/ directory into its working directory.
        out=$(cd "$WORK" && run "$cachesim" "$trace" oracleGeneralBin "${policy#*=}" "${mib}MB")
        miss=$(echo "$out" | sed -n 's/.* req, miss ratio \([0-9.]*\),.*/\1/p' | tail -1)
    fi
    echo "$out" | awk -v miss="$miss" '/^TIME/ {printf "%s %d %s\n", $2, $3, miss}'
}

stats() { sort -n | awk '{v[NR]=$1} END {printf "%s %s", v[1], v[int((NR+1)/2)]}'; }

printf '%-28s %-6s %7s | %-17s %-17s %6s | %-10s %-10s | %-8s %-8s\n' \
    trace policy cache "hearth cpu min/med" "cachesim min/med" ratio "hearth RSS" "cs RSS" "miss" "cs miss"
for trace in "$BUNDLED" "$zipf_trace"; do
    footprint=$("$hearth" trace stats "$trace" --json -q | python3 -c 'import json,sys; print(json.load(sys.stdin)["footprint_bytes"])')
    mib=$(python3 -c "print(max(1, round($footprint * $SIZE_SHARE / 2**20)))")
    for policy in $POLICIES; do
        : >"$WORK/h.txt"; : >"$WORK/c.txt"
        for _ in $(seq "$ROUNDS"); do
            measure hearth "$trace" "$policy" "$mib" >>"$WORK/h.txt"
            measure cachesim "$trace" "$policy" "$mib" >>"$WORK/c.txt"
        done
        read -r hmin hmed <<<"$(cut -d' ' -f1 "$WORK/h.txt" | stats)"
        read -r cmin cmed <<<"$(cut -d' ' -f1 "$WORK/c.txt" | stats)"
        hrss=$(cut -d' ' -f2 "$WORK/h.txt" | sort -n | tail -1)
        crss=$(cut -d' ' -f2 "$WORK/c.txt" | sort -n | tail -1)
        printf '%-28s %-6s %5sMiB | %7s / %-7s %7s / %-7s %5.2fx | %7d MiB %7d MiB | %-8s %-8s\n' \
            "$(basename "$trace" | cut -c1-28)" "${policy%%=*}" "$mib" "$hmin" "$hmed" "$cmin" "$cmed" \
            "$(python3 -c "print($cmed / $hmed)")" $((hrss / 1024)) $((crss / 1024)) \
            "$(head -1 "$WORK/h.txt" | cut -d' ' -f3)" "$(head -1 "$WORK/c.txt" | cut -d' ' -f3)"
    done
done

echo
echo "metadata per cached object (bytes), on $(basename "$zipf_trace"):"
stats_json=$("$hearth" trace stats "$zipf_trace" --json -q)
objects=$(echo "$stats_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["unique_keys"])')
all_mib=$(echo "$stats_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["footprint_bytes"] // 2**20 + 1)')
for policy in $POLICIES; do
    h_all=$(measure hearth "$zipf_trace" "$policy" "$all_mib" | cut -d' ' -f2)
    h_one=$(measure hearth "$zipf_trace" "$policy" 1 | cut -d' ' -f2)
    c_all=$(measure cachesim "$zipf_trace" "$policy" "$all_mib" | cut -d' ' -f2)
    c_one=$(measure cachesim "$zipf_trace" "$policy" 1 | cut -d' ' -f2)
    printf '  %-6s hearth %6.1f   libCacheSim %6.1f   (%d objects)\n' "${policy%%=*}" \
        "$(python3 -c "print(($h_all - $h_one) * 1024 / $objects)")" \
        "$(python3 -c "print(($c_all - $c_one) * 1024 / $objects)")" "$objects"
done

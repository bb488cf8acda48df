#!/usr/bin/env bash
# Simulator throughput and memory against libCacheSim's C `cachesim`, measured
# in the same run, alternating, on the same oracleGeneral traces, policies and
# sizes, one thread each. Reports CPU time (user + sys) and peak RSS, min and
# median of the rounds, the ratio of medians (cachesim / Hearth: above 1,
# Hearth is faster), both miss ratios, the geometric mean of the ratios per
# trace, and metadata bytes per cached object.
#
#   scripts/bench-sim.sh                      # every policy both tools have
#   TRACES=zipf scripts/bench-sim.sh          # only the 50 M-request trace
#   POLICIES="lru arc lfuda:formula=additive@lfuda" ROUNDS_REST=3 scripts/bench-sim.sh
#
# Environment:
#   WORK      scratch directory for generated traces and cachesim's result/
#             (default /tmp/hearth-bench-sim; kept between runs)
#   LIBCACHESIM_CACHESIM  cachesim to use; unset, scripts/build-cachesim.sh
#             builds one in $WORK
#   POLICIES  what to compare, each `HEARTH_SPEC[@CACHESIM_ALGO[@CACHESIM_PARAMS]]`
#             (cachesim's name defaults to the spec's; its params go to -e).
#             Default: every policy both tools have (see ALL below).
#   TOP       the ten most used policies, which get ROUNDS_TOP rounds
#             (default "lru fifo clock arc lfu s3fifo sieve 2q slru lirs",
#             matched against the policy's name before any ':'; empty: none)
#   ROUNDS_TOP  rounds for TOP policies (default 3)
#   ROUNDS_REST rounds for the others (default 1)
#   TRACES    which traces: "bundled", "zipf" or both (default "bundled zipf")
#   ZIPF      generated trace: synth spec and request count
#             (default "synth:zipf:20000000:0.9 50000000": 50 M requests,
#             Zipf 0.9 over 20 M blocks of 4 KiB, >= 10 M distinct)
#   SIZE_SHARE cache size as a share of each trace's footprint (default 0.1)
#   METADATA  policies whose metadata per object is measured (default
#             "lru fifo clock arc"; empty skips it: 4 runs each)
#
# cachesim is built from the libcachesim 0.3.5 sdist by
# scripts/build-cachesim.sh (needs libglib2.0-dev libzstd-dev cmake
# build-essential). Its cache sizes are passed as `NMB`, which it reads as
# MiB. Its hash table starts at 2^24 buckets (hashpower 24, libCacheSim's
# default; the CLI has no option).
#
# Metadata per object: peak RSS with a cache as large as the footprint
# (every object cached) minus peak RSS with a 1 MiB cache, divided by
# the distinct objects. The same method for both; cachesim's preallocated
# 2^24-bucket table is in both runs, so it cancels out of its figure.
set -euo pipefail

# Every policy both tools have, as Hearth spec @ cachesim algorithm. Where
# Hearth's default is another variant of the algorithm than libCacheSim's,
# the spec is its libCacheSim-compatible parameterisation (the ones
# crates/hearth-policy/tests/libcachesim.rs holds to libCacheSim's counts).
# clock2qplus keeps both defaults: libCacheSim measures the correlation
# window in items against a length in bytes (see clock2qplus.rs). Past 2 GiB
# (the 50 M trace's 3993 MiB) cachesim's wtinyLFU counts in 20 shared
# counters, its Bloom filter's size having overflowed an int, so its miss
# ratio there is not the exact counts' (docs/dev/sim-speed.md). Left out:
# Hearth's mru (cachesim's CLI does not register libCacheSim's MRU) and fbr
# (libCacheSim has none).
ALL="lru fifo clock arc lfu s3fifo sieve 2q:sizing=bytes@twoq slru lirs
     car:b2=unbounded@car lecar mq:lifetime=10000,history=bytes@mq
     lfuda:formula=additive@lfuda opt@belady qdlp clock2qplus random gdsf
     hyperbolic beladysize@beladySize lruk@lru-k wtinylfu:freq=exact@wtinyLFU
     lhd cacheus clockpro lruprob@lru-prob size randomtwo@randomTwo
     randomlru@RandomLRU fifomerge@fifo-merge s3fifod"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${WORK:-/tmp/hearth-bench-sim}"
POLICIES="${POLICIES:-$ALL}"
TOP="${TOP-lru fifo clock arc lfu s3fifo sieve 2q slru lirs}"
ROUNDS_TOP="${ROUNDS_TOP:-3}"
ROUNDS_REST="${ROUNDS_REST:-1}"
TRACES="${TRACES:-bundled zipf}"
ZIPF="${ZIPF:-synth:zipf:20000000:0.9 50000000}"
SIZE_SHARE="${SIZE_SHARE:-0.1}"
METADATA="${METADATA-lru fifo clock arc}"
BUNDLED="$ROOT/../shared/data/cloudPhysicsIO.oracleGeneral.bin"
mkdir -p "$WORK"

if [[ -n "${LIBCACHESIM_CACHESIM:-}" && -x "$LIBCACHESIM_CACHESIM" ]]; then
    cachesim="$LIBCACHESIM_CACHESIM"
else
    cachesim="$("$ROOT/scripts/build-cachesim.sh" "$WORK")"
fi
(cd "$ROOT" && cargo build --release -q -p hearth)
hearth="${CARGO_TARGET_DIR:-$ROOT/target}/release/hearth"

# Each Hearth spec must name a registered policy: a typo fails here, not
# after an hour of rounds.
registered=" $("$hearth" policies | awk 'NF == 0 {exit} {print $1}' | tr '\n' ' ') "
for entry in $POLICIES; do
    name="${entry%%@*}"
    name="${name%%[:+]*}"
    [[ "$registered" == *" $name "* ]] || { echo "POLICIES: $entry: hearth has no policy $name" >&2; exit 1; }
done

traces=()
for which in $TRACES; do
    case $which in
        bundled) traces+=("$BUNDLED") ;;
        zipf)
            read -r zipf_spec zipf_requests <<<"$ZIPF"
            zipf_trace="$WORK/$(echo "$zipf_spec" | tr ':' '_')-$zipf_requests.oracleGeneral.bin"
            if [[ ! -f "$zipf_trace" ]]; then
                echo "generating $zipf_trace ..." >&2
                "$hearth" trace convert "$zipf_spec" --requests "$zipf_requests" -o "$zipf_trace" -q
            fi
            traces+=("$zipf_trace")
            ;;
        *) echo "TRACES: unknown trace $which (bundled or zipf)" >&2; exit 1 ;;
    esac
done

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

# measure TOOL TRACE POLICY MIB [CACHESIM_PARAMS] -> "cpu_seconds rss_kib miss_ratio"
measure() {
    local tool=$1 trace=$2 policy=$3 mib=$4 params=${5:-} out miss
    if [[ $tool == hearth ]]; then
        out=$(run "$hearth" sim "$trace" -p "$policy" -s "${mib}MiB" --threads 1 -q --csv)
        # A spec's label may hold commas (quoted): read it as CSV.
        miss=$(echo "$out" | grep -v '^TIME' | python3 -c 'import csv, sys
row = list(csv.DictReader(sys.stdin))[-1]
print("%.4f" % float(row["miss_ratio"]))')
    else
        # cachesim writes a result/ directory into its working directory.
        out=$(cd "$WORK" && run "$cachesim" "$trace" oracleGeneralBin "$policy" "${mib}MB" ${params:+-e "$params"})
        miss=$(echo "$out" | sed -n 's/.* req, miss ratio \([0-9.]*\),.*/\1/p' | tail -1)
    fi
    echo "$out" | awk -v miss="$miss" '/^TIME/ {printf "%s %d %s\n", $2, $3, miss}'
}

stats() { sort -n | awk '{v[NR]=$1} END {printf "%s %s", v[1], v[int((NR+1)/2)]}'; }

printf '%-28s %-32s %7s %2s | %-17s %-17s %6s | %-10s %-10s | %-8s %-8s\n' \
    trace "policy (hearth @ cachesim)" cache n "hearth cpu min/med" "cachesim cpu min/med" ratio \
    "hearth RSS" "cs RSS" "miss" "cs miss"
for trace in "${traces[@]}"; do
    # A 50 M-request trace's stats pass takes minutes: its footprint is kept in $WORK.
    cached="$WORK/$(basename "$trace").footprint"
    if [[ ! -s "$cached" || "$trace" -nt "$cached" ]]; then
        "$hearth" trace stats "$trace" --json -q |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["footprint_bytes"])' >"$cached"
    fi
    footprint=$(cat "$cached")
    mib=$(python3 -c "print(max(1, round($footprint * $SIZE_SHARE / 2**20)))")
    : >"$WORK/ratios.txt"
    for entry in $POLICIES; do
        IFS=@ read -r spec theirs params <<<"$entry"
        theirs="${theirs:-$spec}"
        rounds=$ROUNDS_REST
        [[ " $TOP " == *" ${spec%%:*} "* ]] && rounds=$ROUNDS_TOP
        : >"$WORK/h.txt"; : >"$WORK/c.txt"
        for _ in $(seq "$rounds"); do
            measure hearth "$trace" "$spec" "$mib" >>"$WORK/h.txt"
            measure cachesim "$trace" "$theirs" "$mib" "$params" >>"$WORK/c.txt"
        done
        read -r hmin hmed <<<"$(cut -d' ' -f1 "$WORK/h.txt" | stats)"
        read -r cmin cmed <<<"$(cut -d' ' -f1 "$WORK/c.txt" | stats)"
        hrss=$(cut -d' ' -f2 "$WORK/h.txt" | sort -n | tail -1)
        crss=$(cut -d' ' -f2 "$WORK/c.txt" | sort -n | tail -1)
        ratio=$(python3 -c "print($cmed / $hmed)")
        echo "$ratio" >>"$WORK/ratios.txt"
        printf '%-28s %-32s %5sMiB %2s | %7s / %-7s %7s / %-7s %5.2fx | %7d MiB %7d MiB | %-8s %-8s\n' \
            "$(basename "$trace" | cut -c1-28)" "$spec @ $theirs" "$mib" "$rounds" "$hmin" "$hmed" "$cmin" "$cmed" \
            "$ratio" $((hrss / 1024)) $((crss / 1024)) \
            "$(head -1 "$WORK/h.txt" | cut -d' ' -f3)" "$(head -1 "$WORK/c.txt" | cut -d' ' -f3)"
    done
    python3 - "$WORK/ratios.txt" "$(basename "$trace")" <<'PY'
import math, sys
ratios = [float(line) for line in open(sys.argv[1]) if line.strip()]
mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
print(f"{sys.argv[2]}: geometric mean of {len(ratios)} ratios {mean:.2f}x, lowest {min(ratios):.2f}x")
PY
done

[[ -n "$METADATA" ]] || exit 0
metadata_trace="${traces[-1]}"
echo
echo "metadata per cached object (bytes), on $(basename "$metadata_trace"):"
stats_json=$("$hearth" trace stats "$metadata_trace" --json -q)
objects=$(echo "$stats_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["unique_keys"])')
all_mib=$(echo "$stats_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["footprint_bytes"] // 2**20 + 1)')
for entry in $METADATA; do
    IFS=@ read -r spec theirs params <<<"$entry"
    theirs="${theirs:-$spec}"
    h_all=$(measure hearth "$metadata_trace" "$spec" "$all_mib" | cut -d' ' -f2)
    h_one=$(measure hearth "$metadata_trace" "$spec" 1 | cut -d' ' -f2)
    c_all=$(measure cachesim "$metadata_trace" "$theirs" "$all_mib" "$params" | cut -d' ' -f2)
    c_one=$(measure cachesim "$metadata_trace" "$theirs" 1 "$params" | cut -d' ' -f2)
    printf '  %-6s hearth %6.1f   libCacheSim %6.1f   (%d objects)\n' "$spec" \
        "$(python3 -c "print(($h_all - $h_one) * 1024 / $objects)")" \
        "$(python3 -c "print(($c_all - $c_one) * 1024 / $objects)")" "$objects"
done

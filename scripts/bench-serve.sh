#!/usr/bin/env bash
# Benchmark `hearth serve` against nbdkit (memory plugin), qemu-nbd (raw file
# in /dev/shm) and fio on that /dev/shm file directly (the local limit), in
# one run, with two clients: fio's nbd engine, and `hearth bench serve` (a
# pipelined Rust load generator whose own cost per request is a fraction of
# fio's, so the servers' costs show where fio's hides them):
#   patterns    4 KiB random read and write at iodepth 32 (IOPS, p99),
#               1 MiB sequential read and write at iodepth 8 (MB/s);
#   numjobs     1 and 4 (each fio job is its own NBD connection);
#   transports  Unix socket and TCP on loopback.
# Each cell runs every server once per round and client, servers alternating (in
# reverse order on even rounds), for ROUNDS rounds; the table shows each
# server's median (min..max) and its ratio to nbdkit (median of the
# per-round ratios, min..max). Every export is filled first, which also makes
# Hearth's cache (larger than the export) hold all of it. The machine is
# shared and noisy: read ratios, not rates, and the servers' CPU time per
# operation (utime+stime from /proc around each run, in clock ticks: coarse,
# but not skewed by other load the way rates are), and fio's own CPU time
# per operation (the client's). From the client's cost it prints each
# transport's client-bound ceiling: the rate Hearth's cell would reach if
# the server cost nothing (min(numjobs, cores) / fio's CPU per op measured
# with Hearth), and that ceiling over nbdkit's rate, the highest ratio any
# server could show there without making the client's own work cheaper.
#
#   scripts/bench-serve.sh [SIZE_MIB] [SECONDS] [ROUNDS]
# Environment, to run part of the matrix or compare builds:
#   PATTERNS="randread randwrite read write"  JOBS="1 4"  TRANSPORTS="unix tcp"
#   CLIENTS="fio hearth-bench"   the clients, each a table of its own
#   HEARTH_ARGS="--write-back"   extra `hearth serve` flags
#   BASELINE=path/to/older/hearth   also run that binary, as "before"
#   BASELINE_ARGS="--what-if none"  flags for "before" instead of HEARTH_ARGS, even none (the
#                                   same binary with other flags measures their cost)
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE_MIB=${1:-256}
SECONDS_PER_JOB=${2:-5}
ROUNDS=${3:-3}
PATTERNS=${PATTERNS:-randread randwrite read write}
JOBS=${JOBS:-1 4}
TRANSPORTS=${TRANSPORTS:-unix tcp}
CLIENTS=${CLIENTS:-fio hearth-bench}
read -r -a HEARTH_ARGS <<<"${HEARTH_ARGS:-}"
read -r -a BASELINE_ARGS <<<"${BASELINE_ARGS-${HEARTH_ARGS:-}}"
for tool in fio nbdkit qemu-nbd python3; do
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
wait_for_port() {
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
    echo "bench-serve: nothing listening on port $1" >&2
    exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

declare -A URI
declare -A PID_OF # server-transport -> the process serving it, for its CPU time
SERVERS=()
start_hearth() { # name binary flags...
    local name=$1 binary=$2 port
    shift 2
    port=$(free_port)
    "$binary" serve --backend memory --size "${SIZE_MIB}MiB" --cache-size "$((SIZE_MIB + 64))MiB" \
        --name disk --unix "$WORK/$name.sock" --listen "127.0.0.1:$port" --metrics 127.0.0.1:0 --log warn \
        "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
    PIDS+=($!)
    PID_OF[$name-unix]=$! PID_OF[$name-tcp]=$!
    wait_for_socket "$WORK/$name.sock"
    URI[$name-unix]="nbd+unix:///disk?socket=$WORK/$name.sock"
    URI[$name-tcp]="nbd://127.0.0.1:$port/disk"
    SERVERS+=("$name")
}
start_hearth hearth "$HEARTH" "${HEARTH_ARGS[@]}"
if [ -n "${BASELINE:-}" ]; then start_hearth before "$BASELINE" "${BASELINE_ARGS[@]}"; fi

port=$(free_port)
nbdkit -f -U "$WORK/nbdkit.sock" memory "${SIZE_MIB}M" 2>"$WORK/nbdkit-unix.log" &
PIDS+=($!)
PID_OF[nbdkit-unix]=$!
nbdkit -f -i 127.0.0.1 -p "$port" memory "${SIZE_MIB}M" 2>"$WORK/nbdkit-tcp.log" &
PIDS+=($!)
PID_OF[nbdkit-tcp]=$!
URI[nbdkit-unix]="nbd+unix:///?socket=$WORK/nbdkit.sock"
URI[nbdkit-tcp]="nbd://127.0.0.1:$port/"
SERVERS+=(nbdkit)

truncate -s "${SIZE_MIB}M" "$SHM"
port=$(free_port)
qemu-nbd -f raw -x disk -t --shared=16 --socket="$WORK/qemu.sock" "$SHM" 2>"$WORK/qemu-unix.log" &
PIDS+=($!)
PID_OF[qemu-nbd-unix]=$!
qemu-nbd -f raw -x disk -t --shared=16 -b 127.0.0.1 -p "$port" "$SHM" 2>"$WORK/qemu-tcp.log" &
PIDS+=($!)
PID_OF[qemu-nbd-tcp]=$!
URI[qemu-nbd-unix]="nbd+unix:///disk?socket=$WORK/qemu.sock"
URI[qemu-nbd-tcp]="nbd://127.0.0.1:$port/disk"
SERVERS+=(qemu-nbd)
wait_for_socket "$WORK/nbdkit.sock"
wait_for_socket "$WORK/qemu.sock"
wait_for_port "$port"

echo "filling ${SIZE_MIB} MiB on each export (this also fills Hearth's cache) ..."
for s in "${SERVERS[@]}"; do
    for t in unix tcp; do
        # The two nbdkit exports are separate memories; the others share one export per server.
        [ "$t" = tcp ] && [ "$s" != nbdkit ] && continue
        fio --name=fill --ioengine=nbd --uri="${URI[$s-$t]}" --rw=write --bs=1M --iodepth=8 \
            --size="${SIZE_MIB}M" --output="$WORK/fill-$s-$t.txt" >/dev/null
    done
done
dd if=/dev/urandom of="$SHM" bs=1M count="$SIZE_MIB" conv=notrunc status=none

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime of a process
TICKS_PER_SECOND=$(getconf CLK_TCK)

run_bench() { # out-file rw bs iodepth numjobs uri: `hearth bench serve`, pipelined like fio's nbd engine
    "$HEARTH" bench serve "$6" --rw="$2" --bs="$3" --iodepth="$4" --jobs="$5" \
        --duration="${SECONDS_PER_JOB}s" --json >"$1"
}

run_fio() { # out-file rw bs iodepth numjobs [fio engine options...]
    local out=$1 rw=$2 bs=$3 depth=$4 jobs=$5
    shift 5
    fio --name=bench "$@" --rw="$rw" --bs="$bs" --iodepth="$depth" --numjobs="$jobs" \
        --size="${SIZE_MIB}M" --runtime="$SECONDS_PER_JOB" --time_based --group_reporting \
        --output-format=json --output="$out" >/dev/null
}

for pattern in $PATTERNS; do
    case $pattern in
    randread | randwrite) bs=4k depth=32 ;;
    read | write) bs=1M depth=8 ;;
    *) echo "bench-serve: unknown pattern $pattern" >&2; exit 1 ;;
    esac
    for jobs in $JOBS; do
        for round in $(seq "$ROUNDS"); do
            # Even rounds run the servers in reverse order: whoever runs first
            # after the local fio run (which churns memory) is not always the same.
            order=("${SERVERS[@]}")
            if [ $((round % 2)) = 0 ]; then
                order=()
                for ((i = ${#SERVERS[@]} - 1; i >= 0; i--)); do order+=("${SERVERS[i]}"); done
            fi
            for t in $TRANSPORTS; do
                for s in "${order[@]}"; do
                    for client in $CLIENTS; do
                        echo "round $round: $s $t $pattern $bs numjobs $jobs ($client)"
                        run="$WORK/r-$client-$pattern-$jobs-$t-$s-$round"
                        ticks=$(cpu_ticks "${PID_OF[$s-$t]}")
                        case $client in
                        fio) run_fio "$run.json" "$pattern" "$bs" "$depth" "$jobs" --ioengine=nbd --uri="${URI[$s-$t]}" ;;
                        hearth-bench) run_bench "$run.json" "$pattern" "$bs" "$depth" "$jobs" "${URI[$s-$t]}" ;;
                        *) echo "bench-serve: unknown client $client (fio, hearth-bench)" >&2; exit 1 ;;
                        esac
                        echo $(($(cpu_ticks "${PID_OF[$s-$t]}") - ticks)) >"$run.cpu"
                    done
                done
            done
            # The local limit: the same jobs on the /dev/shm file, no NBD in between.
            run_fio "$WORK/r-$pattern-$jobs-local-fio-$round.json" "$pattern" "$bs" "$depth" "$jobs" \
                --ioengine=psync --filename="$SHM"
        done
    done
done

python3 - "$WORK" "$ROUNDS" "${SERVERS[*]}" "$PATTERNS" "$JOBS" "$TRANSPORTS" "$TICKS_PER_SECOND" "$(nproc)" "$CLIENTS" <<'PY'
import json, statistics, sys
work, rounds, servers, patterns, jobs, transports, ticks_per_second, cores, clients = sys.argv[1:]
rounds, servers, ticks_per_second, cores = int(rounds), servers.split(), int(ticks_per_second), int(cores)

def fio_job(path):
    return json.load(open(path))["jobs"][0]

def is_fio(path):
    return "/r-hearth-bench-" not in path

def rate(path, pattern):
    """IOPS for random patterns, MB/s (10^6 bytes) for sequential ones."""
    if not is_fio(path):
        r = json.load(open(path))
        return r["ops_per_sec"] if pattern.startswith("rand") else r["mib_per_sec"] * 1048576 / 1e6
    side = fio_job(path)["write" if "write" in pattern else "read"]
    return side["iops"] if pattern.startswith("rand") else side["bw_bytes"] / 1e6

def ops(run):
    """The operations one run completed (at least 1)."""
    if not is_fio(f"{run}.json"):
        return max(json.load(open(f"{run}.json"))["ops"], 1)
    job = fio_job(f"{run}.json")
    return max(job["read"]["total_ios"] + job["write"]["total_ios"], 1)

def cpu_per_op_us(run):
    """The server's CPU time per operation of one run, in microseconds."""
    return int(open(f"{run}.cpu").read()) / ticks_per_second * 1e6 / ops(run)

def client_cpu_per_op_us(run):
    """The client's own CPU time per operation of one run (all jobs), in
    microseconds: fio's usr/sys shares are of job_runtime, which sums the
    jobs' runtimes; `hearth bench serve` reports its getrusage per op."""
    if not is_fio(f"{run}.json"):
        return json.load(open(f"{run}.json"))["client_cpu_us_per_op"]
    job = fio_job(f"{run}.json")
    return (job["usr_cpu"] + job["sys_cpu"]) / 100 * job["job_runtime"] * 1e3 / ops(run)

def summary(xs):
    return f"{statistics.median(xs):9.0f} ({min(xs):.0f}..{max(xs):.0f})"

for tool, pattern in ((c, p) for c in clients.split() for p in patterns.split()):
    unit = "IOPS" if pattern.startswith("rand") else "MB/s"
    bs = "4 KiB" if pattern.startswith("rand") else "1 MiB"
    for nj in jobs.split():
        local = [rate(f"{work}/r-{pattern}-{nj}-local-fio-{r}.json", pattern) for r in range(1, rounds + 1)]
        print(f"\n[{tool}] {pattern} {bs}, numjobs {nj} ({unit}; ratio = per-round server/nbdkit, median (min..max))")
        for t in transports.split():
            base = [rate(f"{work}/r-{tool}-{pattern}-{nj}-{t}-nbdkit-{r}.json", pattern) for r in range(1, rounds + 1)]
            for s in servers:
                runs = [f"{work}/r-{tool}-{pattern}-{nj}-{t}-{s}-{r}" for r in range(1, rounds + 1)]
                xs = [rate(f"{run}.json", pattern) for run in runs]
                cpu = [cpu_per_op_us(run) for run in runs]
                client = [client_cpu_per_op_us(run) for run in runs]
                ratios = [x / b for x, b in zip(xs, base)]
                print(f"  {t:4} {s:9} {summary(xs)}   ratio {statistics.median(ratios):5.2f}x "
                      f"({min(ratios):.2f}..{max(ratios):.2f})   local fio / server {statistics.median(local) / statistics.median(xs):5.2f}x"
                      f"   server CPU/op {statistics.median(cpu):7.1f} us ({min(cpu):.1f}..{max(cpu):.1f})"
                      f"   client CPU/op {statistics.median(client):7.1f} us")
                if s == "hearth":
                    # Operations per second if the server took no CPU; MB/s for 1 MiB patterns.
                    per_op = 1.0 if pattern.startswith("rand") else 1024 * 1024 / 1e6
                    ceiling = [min(int(nj), cores) / (c / 1e6) * per_op for c in client]
                    over = [c / b for c, b in zip(ceiling, base)]
                    print(f"  {t:4} client-bound ceiling {summary(ceiling)}   {statistics.median(over):5.2f}x nbdkit "
                          f"({min(over):.2f}..{max(over):.2f})   local fio / ceiling "
                          f"{statistics.median(local) / statistics.median(ceiling):5.2f}x")
        print(f"  local fio on /dev/shm {summary(local)}")
PY

for s in "${SERVERS[@]}"; do
    [ "$s" = nbdkit ] || [ "$s" = qemu-nbd ] && continue
    metrics=$(sed -n 's/^metrics //p' "$WORK/$s.out")
    [ -n "$metrics" ] || continue
    curl -s "$metrics" >"$WORK/$s-metrics.txt" || continue
    hits=$(sed -n 's/^hearth_cache_hits_total{export="disk"} //p' "$WORK/$s-metrics.txt")
    misses=$(sed -n 's/^hearth_cache_misses_total{export="disk"} //p' "$WORK/$s-metrics.txt")
    echo "$s cache over the whole run: $hits block hits, $misses block misses"
done

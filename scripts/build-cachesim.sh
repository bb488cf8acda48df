#!/usr/bin/env bash
# Builds libCacheSim's C `cachesim` and `traceConv` (which writes lcs traces)
# from the pinned libcachesim 0.3.5 sdist (pip download --no-binary), its
# bundled src/libCacheSim with cmake, and prints cachesim's path (traceConv is
# beside it). Kept between runs: a second call only prints it.
# Needs libglib2.0-dev libzstd-dev cmake build-essential.
#
#   scripts/build-cachesim.sh [DIR]     # DIR default /tmp/hearth-cachesim
#
# Used by .ci/run (crates/hearth-policy/tests/libcachesim.rs compares
# policies the Python package lacks against it, and Cacheus' experts
# against the library it links, _build/liblibCacheSim.a; crates/hearth/tests/
# cli_libcachesim_formats.rs every trace format) and scripts/bench-sim.sh.
set -euo pipefail

dir="${1:-/tmp/hearth-cachesim}"
cachesim="$dir/libcachesim-0.3.5/src/libCacheSim/_build/bin/cachesim"
if [[ ! -x "$cachesim" || ! -x "$(dirname "$cachesim")/traceConv" ]]; then
    echo "building cachesim from the libcachesim 0.3.5 sdist in $dir ..." >&2
    mkdir -p "$dir"
    (cd "$dir" && { [[ -f libcachesim-0.3.5.tar.gz ]] ||
        python3 -m pip download -q --no-deps --no-binary :all: libcachesim==0.3.5 -d .; } &&
        tar xzf libcachesim-0.3.5.tar.gz &&
        cd libcachesim-0.3.5/src/libCacheSim && mkdir -p _build && cd _build &&
        cmake -DCMAKE_BUILD_TYPE=Release .. >/dev/null && make -j"$(nproc)" cachesim traceConv >/dev/null) ||
        { echo "cachesim did not build (see above)" >&2; exit 1; }
fi
echo "$cachesim"

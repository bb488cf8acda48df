#!/usr/bin/env bash
# Builds libCacheSim's C `cachesim` from the pinned libcachesim 0.3.5 sdist
# (pip download --no-binary), its bundled src/libCacheSim with cmake, and
# prints the binary's path. Kept between runs: a second call only prints it.
# Needs libglib2.0-dev libzstd-dev cmake build-essential.
#
#   scripts/build-cachesim.sh [DIR]     # DIR default /tmp/hearth-cachesim
#
# Used by .ci/run (crates/hearth-policy/tests/libcachesim.rs compares
# policies the Python package lacks against it) and scripts/bench-sim.sh.
set -euo pipefail

dir="${1:-/tmp/hearth-cachesim}"
cachesim="$dir/libcachesim-0.3.5/src/libCacheSim/_build/bin/cachesim"
if [[ ! -x "$cachesim" ]]; then
    echo "building cachesim from the libcachesim 0.3.5 sdist in $dir ..." >&2
    mkdir -p "$dir"
    (cd "$dir" && python3 -m pip download -q --no-deps --no-binary :all: libcachesim==0.3.5 -d . &&
        tar xzf libcachesim-0.3.5.tar.gz &&
        cd libcachesim-0.3.5/src/libCacheSim && mkdir -p _build && cd _build &&
        cmake -DCMAKE_BUILD_TYPE=Release .. >/dev/null && make -j"$(nproc)" cachesim >/dev/null) ||
        { echo "cachesim did not build (see above)" >&2; exit 1; }
fi
echo "$cachesim"

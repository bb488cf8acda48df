#!/usr/bin/env bash
# Hearth's W-TinyLFU next to a real Caffeine cache (not in CI: it needs Maven
# Central and a JDK 17+). Fetches Caffeine with mvn, compiles
# scripts/caffeine/Replay.java, builds hearth (release) and prints the tables
# of scripts/caffeine/compare.py.
#
#   scripts/bench-caffeine.sh [--repeats N]
#
# CAFFEINE_VERSION (3.3.1), TRACE (../shared/data/cloudPhysicsIO.oracleGeneral.bin),
# ZIPF (synth:zipf:100000:0.9), ZIPF_REQUESTS (2000000) and WORK
# ($CARGO_TARGET_DIR or target, /caffeine) can be set.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${CAFFEINE_VERSION:-3.3.1}
trace=${TRACE:-../shared/data/cloudPhysicsIO.oracleGeneral.bin}
zipf=${ZIPF:-synth:zipf:100000:0.9}
target=${CARGO_TARGET_DIR:-target}
work=${WORK:-$target/caffeine}
mkdir -p "$work/classes"

jar="$work/caffeine-$version.jar"
if [ ! -f "$jar" ]; then
  mvn -q -B dependency:copy -Dartifact="com.github.ben-manes.caffeine:caffeine:$version" \
    -DoutputDirectory="$work" >&2
fi
javac -d "$work/classes" -cp "$jar" scripts/caffeine/Replay.java
cargo build --release -q -p hearth
hearth="$target/release/hearth"

zipf_file="$work/$(echo "$zipf" | tr ':' '_')-${ZIPF_REQUESTS:-2000000}.oracleGeneral.bin"
if [ ! -f "$zipf_file" ]; then
  "$hearth" trace convert "$zipf" --requests "${ZIPF_REQUESTS:-2000000}" -q -o "$zipf_file" >&2
fi
python3 scripts/caffeine/compare.py --hearth "$hearth" --classpath "$work/classes:$jar" --version "$version" \
  --cloudphysics "$trace" --zipf "$zipf_file" --zipf-label "$zipf, ${ZIPF_REQUESTS:-2000000} requests" "$@"

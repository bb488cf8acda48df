#!/usr/bin/env bash
# Validates docs/grafana/hearth.json against Grafana's own dashboard schema:
# the `Dashboard` type that Grafana publishes in @grafana/schema (generated
# from its CUE schema), checked by the TypeScript compiler in strict mode, so
# a wrong type, a missing required field or an unknown property fails.
# Needs node and npm (Debian: nodejs, npm); fetches the two packages from the
# npm registry into a temporary directory.
#
#   scripts/check-grafana-dashboard.sh [DASHBOARD.json]
set -euo pipefail
cd "$(dirname "$0")/.."

DASHBOARD=$(realpath "${1:-docs/grafana/hearth.json}")
for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "check-grafana-dashboard: $tool is not installed (Debian: nodejs, npm)" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
echo '{"name": "check-grafana-dashboard", "private": true}' >package.json
npm install --silent --no-audit --no-fund @grafana/schema@13.2.3 typescript@5.9.3 >/dev/null
{
    echo "import type { Dashboard } from '@grafana/schema';"
    printf 'export const dashboard: Dashboard = '
    cat "$DASHBOARD"
    echo ';'
} >dashboard.ts
if node_modules/.bin/tsc --noEmit --strict --skipLibCheck --target es2022 --module esnext \
    --moduleResolution bundler dashboard.ts; then
    echo "check-grafana-dashboard: $DASHBOARD is a valid Grafana dashboard (@grafana/schema 13.2.3)"
else
    echo "check-grafana-dashboard: $DASHBOARD does not match Grafana's dashboard schema (errors above; positions are in dashboard.ts, line 2 = the JSON)" >&2
    exit 1
fi

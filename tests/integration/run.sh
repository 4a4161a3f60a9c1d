#!/usr/bin/env bash
# run.sh - the integration suite (pytest on Debian's python3) against the
# binaries in $BUILD (default build/). Arguments go to pytest (default: all
# tests in this directory).
set -euo pipefail
cd "$(dirname "$0")"
export BUILD=${BUILD:-build}
[ $# -gt 0 ] || set -- .
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"

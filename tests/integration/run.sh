#!/usr/bin/env bash
# run.sh - the integration suite (pytest on Debian's python3) against the
# binaries in $BUILD (default build/). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
export BUILD=${BUILD:-build}
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@" .

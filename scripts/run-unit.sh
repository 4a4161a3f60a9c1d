#!/usr/bin/env bash
# run-unit.sh - runs each cmocka unit test binary given, prints one summary
# line "N passed, N failed" and exits non-zero if any failed.
set -u
# Under `make TSAN=1` the binaries read these (others ignore them): third-
# party suppressions only (tests/tsan.supp), and a non-zero exit on a report.
root=$(cd "$(dirname "$0")/.." && pwd)
export TSAN_OPTIONS=${TSAN_OPTIONS:-"suppressions=$root/tests/tsan.supp halt_on_error=0 exitcode=66 second_deadlock_stack=1"}
pass=0 fail=0 failed=()
for t in "$@"; do
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$t"); fi
done
echo "unit test binaries: ${#@}; failed: ${failed[*]:-none}"
echo "unit: $pass passed, $fail failed"
[ "$fail" = 0 ]

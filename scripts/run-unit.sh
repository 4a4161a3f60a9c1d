#!/usr/bin/env bash
# run-unit.sh - runs each cmocka unit test binary given, prints one summary
# line "N passed, N failed" and exits non-zero if any failed.
set -u
pass=0 fail=0 failed=()
for t in "$@"; do
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$t"); fi
done
echo "unit test binaries: ${#@}; failed: ${failed[*]:-none}"
echo "unit: $pass passed, $fail failed"
[ "$fail" = 0 ]

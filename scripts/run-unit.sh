#!/usr/bin/env bash
# run-unit.sh - runs each cmocka unit test binary given, prints the ten
# slowest with their times (CI has a time budget), then one summary line
# "N passed, N failed" and exits non-zero if any failed.
set -u
# Under `make TSAN=1` the binaries read these (others ignore them): third-
# party suppressions only (tests/tsan.supp), and a non-zero exit on a report.
root=$(cd "$(dirname "$0")/.." && pwd)
export TSAN_OPTIONS=${TSAN_OPTIONS:-"suppressions=$root/tests/tsan.supp halt_on_error=0 exitcode=66 second_deadlock_stack=1"}
pass=0 fail=0 failed=() times=()
t_all=$(date +%s%N)
for t in "$@"; do
	s=$(date +%s%N)
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$t"); fi
	times+=("$((($(date +%s%N) - s) / 1000000)) $t")
done
echo "unit: the slowest test binaries (of ${#@}, $((($(date +%s%N) - t_all) / 1000000)) ms in all):"
printf '%s\n' "${times[@]}" | sort -rn | head -n 10 | awk '{ printf "unit: %9.2fs %s\n", $1 / 1000, $2 }'
echo "unit test binaries: ${#@}; failed: ${failed[*]:-none}"
echo "unit: $pass passed, $fail failed"
[ "$fail" = 0 ]

#!/usr/bin/env bash
# run-unit.sh - runs each cmocka unit test binary given, GAZ_UNIT_JOBS at a
# time (default: the machine's cores; each binary's output is printed
# whole once it ends, so outputs never interleave), prints the ten slowest
# with their times (CI has a time budget), then one summary line
# "N passed, N failed" and exits non-zero if any failed.
set -u
# Under `make TSAN=1` the binaries read these (others ignore them): third-
# party suppressions only (tests/tsan.supp), and a non-zero exit on a report.
root=$(cd "$(dirname "$0")/.." && pwd)
export TSAN_OPTIONS=${TSAN_OPTIONS:-"suppressions=$root/tests/tsan.supp halt_on_error=0 exitcode=66 second_deadlock_stack=1"}
jobs=${GAZ_UNIT_JOBS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
t_all=$(date +%s%N)

# run_one I BINARY: its output into $out/I.log, then "RC MS" into $out/I.rc.
run_one() {
	local s rc=0
	s=$(date +%s%N)
	"$2" >"$out/$1.log" 2>&1 || rc=$?
	echo "$rc $((($(date +%s%N) - s) / 1000000))" >"$out/$1.rc"
}

# The pool: a slot frees when any binary ends; each ended binary's output is
# printed in the order they end.
printed=() running=0 i=0
flush() {
	local j
	for j in $(seq 0 $((i - 1))); do
		[ -z "${printed[$j]:-}" ] && [ -f "$out/$j.rc" ] || continue
		cat "$out/$j.log"
		printed[$j]=1
	done
}
bins=("$@")
for t in "${bins[@]}"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n || true
		running=$((running - 1))
		flush
	fi
	run_one "$i" "$t" &
	running=$((running + 1))
	i=$((i + 1))
done
wait
flush

pass=0 fail=0 failed=() times=()
for j in "${!bins[@]}"; do
	read -r rc ms <"$out/$j.rc"
	if [ "$rc" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("${bins[$j]}"); fi
	times+=("$ms ${bins[$j]}")
done
echo "unit: the slowest test binaries (of ${#bins[@]}, $jobs at a time, $((($(date +%s%N) - t_all) / 1000000)) ms in all):"
printf '%s\n' "${times[@]}" | sort -rn | head -n 10 | awk '{ printf "unit: %9.2fs %s\n", $1 / 1000, $2 }'
echo "unit test binaries: ${#bins[@]}; failed: ${failed[*]:-none}"
echo "unit: $pass passed, $fail failed"
[ "$fail" = 0 ]

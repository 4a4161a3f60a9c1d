#!/usr/bin/env bash
# fuzz.sh SECONDS TARGET... - runs each libFuzzer target $BUILD/fuzz/TARGET
# (default BUILD=build-fuzz) for SECONDS over tests/fuzz/corpus/TARGET/,
# FUZZ_JOBS at a time (default 1; each target is one process on one core),
# and prints a table, in the order given, of executions and
# coverage (libFuzzer's cov: edges, ft: features) per target. New inputs
# go to $BUILD/fuzz-out/TARGET/new/ (kept between runs, never the committed
# corpus); a crash, leak or sanitizer report leaves its input in
# $BUILD/fuzz-out/TARGET/ and the log beside it, and fails the run.
# tests/fuzz/TARGET.dict is passed as the dictionary when present.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD:-build-fuzz}
secs=${1:?usage: fuzz.sh SECONDS TARGET...}
shift
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
jobs=${FUZZ_JOBS:-1}
# run_target T: runs T, then writes its row and its result (ok or FAILED)
# into $build/fuzz-out/T/{row,result}; the log line goes to stdout.
run_target() {
	local t=$1 bin out corpus dict=() s rc took execs last cov ft corp result
	bin=$build/fuzz/$t out=$build/fuzz-out/$t corpus=tests/fuzz/corpus/$t
	mkdir -p "$out/new" "$corpus"
	rm -f "$out/row" "$out/result"
	[ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
	s=$(date +%s)
	"$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048 \
		-artifact_prefix="$out/" "${dict[@]}" "$out/new" "$corpus" >"$out/log" 2>&1
	rc=$?
	took=$(($(date +%s) - s))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/log" | tail -1)
	last=$(grep -E '^#[0-9]+.*cov: ' "$out/log" | tail -1)
	cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
	result=ok
	if [ $rc != 0 ] || grep -qE '^==[0-9]+==ERROR|runtime error:|^SUMMARY: ' "$out/log"; then
		result="FAILED (rc $rc, see $out/log)"
		grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$out/log" | head -5 >&2
	fi
	printf '%-22s %6s %12s %8s %8s %7s  %s\n' "$t" "$took" "${execs:-?}" "${cov:-?}" \
		"${ft:-?}" "${corp:-?}" "$result" >"$out/row"
	echo "${result%% *}" >"$out/result"
	echo "fuzz: $t ${took}s execs ${execs:-?} cov ${cov:-?} ft ${ft:-?}: $result"
}
running=0
for t in "$@"; do
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_target "$t" &
	running=$((running + 1))
done
wait
rows=() failed=()
for t in "$@"; do
	out=$build/fuzz-out/$t
	rows+=("$(cat "$out/row" 2>/dev/null || echo "$t (no result)")")
	[ "$(cat "$out/result" 2>/dev/null)" = ok ] || failed+=("$t")
done
printf '%-22s %6s %12s %8s %8s %7s  %s\n' target secs execs cov ft corpus result
printf '%s\n' "${rows[@]}"
echo "fuzz: ${#@} targets, ${secs}s each; failed: ${failed[*]:-none}"
[ ${#failed[@]} = 0 ]

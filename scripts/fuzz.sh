#!/usr/bin/env bash
# fuzz.sh SECONDS TARGET... - runs each libFuzzer target $BUILD/fuzz/TARGET
# (default BUILD=build-fuzz) for SECONDS over tests/fuzz/corpus/TARGET/,
# one after the other on one core, and prints a table of executions and
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
rows=() failed=()
for t in "$@"; do
	bin=$build/fuzz/$t out=$build/fuzz-out/$t corpus=tests/fuzz/corpus/$t
	mkdir -p "$out/new" "$corpus"
	dict=()
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
		failed+=("$t")
		grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$out/log" | head -5 >&2
	fi
	rows+=("$(printf '%-22s %6s %12s %8s %8s %7s  %s' "$t" "$took" "${execs:-?}" "${cov:-?}" \
		"${ft:-?}" "${corp:-?}" "$result")")
	echo "fuzz: $t ${took}s execs ${execs:-?} cov ${cov:-?} ft ${ft:-?}: $result"
done
printf '%-22s %6s %12s %8s %8s %7s  %s\n' target secs execs cov ft corpus result
printf '%s\n' "${rows[@]}"
echo "fuzz: ${#@} targets, ${secs}s each; failed: ${failed[*]:-none}"
[ ${#failed[@]} = 0 ]

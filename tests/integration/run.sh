#!/usr/bin/env bash
# run.sh - the integration suite (pytest on Debian's python3) against the
# binaries in $BUILD (default build/). Arguments go to pytest as they are
# (one file, one test: `run.sh test_broker.py -k append`).
#
# Without arguments, or with two or more test file names only, it runs
# every test file (or those named) in two phases:
#   1. the files below SERIAL aside, several files at once
#      (GAZ_TEST_JOBS pytest-xdist workers; by default sized to the cores
#      and the build, see below; a file stays on one worker). Most tests
#      spend their time waiting on brokers, etcd leases and timeouts
#      rather than computing;
#   2. the SERIAL files one after another, alone on the machine: they
#      measure gaps, stalls and how soon a restarted peer is used, which
#      load from other tests would stretch. A test that compacts or
#      restarts an etcd uses one of its own (test_cases' BR-17 takes
#      conftest's private_cluster) or the kube-apiserver's, which only the
#      operator's watches resume from (test_operator's BR-25), so those
#      files run in phase 1 (test_operator_faults restarts only a private
#      API server, etcd and S3 of its own).
# GAZ_TEST_SKIP names files to leave out of both phases (CI's sanitizer
# pass skips the files that spend their time waiting rather than in our
# code's memory paths). GAZ_TEST_JOBS=1 runs everything one after another.
# The slowest tests
# are listed at the end of each phase (CI has a time budget).
# GAZ_TEST_SERIAL_MARK names a file touched when phase 2 starts: CI
# builds the sanitizer passes' binaries then, at nice 19, in the CPU the
# serial files leave idle (they wait on signals, leases and timeouts).
# GAZ_TEST_LOG_LEVEL sets every test broker's --log.level (default info;
# debug when chasing a flaky test: the logs stay under pytest's basetemp).
# A failed test's report carries its live brokers' thread stacks (gdb).
set -euo pipefail
cd "$(dirname "$0")"
export BUILD=${BUILD:-build}
PYTEST=(/usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=10)
# Two or more arguments that are all test files are the set the two phases
# run (CI's ThreadSanitizer pass names its files); anything else goes to
# pytest as it is.
files=(test_*.py)
[ $# -ne 1 ] || exec "${PYTEST[@]}" "$@"
if [ $# -gt 0 ]; then
	for a in "$@"; do
		[[ "$a" == test_*.py && -f "$a" ]] || exec "${PYTEST[@]}" "$@"
	done
	files=("$@")
fi

SERIAL=(test_membership.py test_faults.py test_replication.py)
# The longest files first (their times in CI's plain pass, slowest first):
# a worker that draws a long file late would run on alone at the end.
LONGEST=(test_s3_cases.py test_s3.py test_operator_faults.py test_stream_sum_c.py test_stream_sum.py test_operator.py
	test_consumer.py test_consumer_chain.py test_exit.py test_tls.py test_deploy.py)
skip=" ${GAZ_TEST_SKIP:-} "
for f in $skip; do
	[ -f "$f" ] || { echo "integration: GAZ_TEST_SKIP names $f, which does not exist" >&2; exit 2; }
done
# runs F: F is among the files asked for and not skipped.
runs() { [[ " ${files[*]} " == *" $1 "* && "$skip" != *" $1 "* ]]; }
parallel=() serial=()
for f in "${LONGEST[@]}" "${files[@]}"; do # the longest first, each once
	if runs "$f" && [[ " ${SERIAL[*]} ${parallel[*]-} " != *" $f "* ]]; then parallel+=("$f"); fi
done
for f in "${SERIAL[@]}"; do # in this order
	if runs "$f"; then serial+=("$f"); fi
done
[ -z "${GAZ_TEST_SKIP:-}" ] || echo "integration: skipping $GAZ_TEST_SKIP"
# Workers per core: the plain pass's files leave two cores about 60% idle
# at three workers (vmstat, 2026-12-06), so it runs more; a sanitizer
# multiplies what each file computes (ASan about 2x, ThreadSanitizer 5-15x).
cores=$(nproc)
case "$BUILD" in
*tsan*) jobs=$((cores + 1)) ;;
*san*) jobs=$((cores * 2)) ;;
*) jobs=$((cores * 2 + 1)) ;;
esac
jobs=${GAZ_TEST_JOBS:-$jobs}
if [ "$jobs" -le 1 ] || ! /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
	exec "${PYTEST[@]}" "${parallel[@]}" "${serial[@]}"
fi
rc=0
if [ ${#parallel[@]} -gt 0 ]; then
	echo "integration: ${#parallel[@]} files on $jobs workers"
	"${PYTEST[@]}" -n "$jobs" --dist loadfile "${parallel[@]}" || rc=$?
fi
if [ ${#serial[@]} -gt 0 ]; then
	echo "integration: ${#serial[@]} files one after another: ${serial[*]}"
	[ -z "${GAZ_TEST_SERIAL_MARK:-}" ] || touch "$GAZ_TEST_SERIAL_MARK"
	"${PYTEST[@]}" "${serial[@]}" || rc=$?
fi
exit $rc

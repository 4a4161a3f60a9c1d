#!/usr/bin/env bash
# run.sh - the integration suite (pytest on Debian's python3) against the
# binaries in $BUILD (default build/). Arguments go to pytest as they are
# (one file, one test: `run.sh test_broker.py -k append`).
#
# Without arguments it runs every test file in two phases:
#   1. the files below SERIAL aside, several files at once
#      (GAZ_TEST_JOBS pytest-xdist workers, default 3; a file stays on one
#      worker). Most tests spend their time waiting on brokers, etcd
#      leases and timeouts rather than computing, so on two cores three
#      files at once take about half the time of one after another;
#   2. the SERIAL files one after another, alone on the machine: they
#      measure gaps, stalls and throughput, or compact the shared etcd and
#      kube-apiserver that every other test uses (test_operator_faults
#      restarts only a private API server, etcd and S3 of its own).
# GAZ_TEST_SKIP names files to leave out of both phases (CI's sanitizer
# pass skips the files that spend their time waiting rather than in our
# code's memory paths). GAZ_TEST_JOBS=1 runs everything one after another.
# The slowest tests
# are listed at the end of each phase (CI has a time budget).
# GAZ_TEST_LOG_LEVEL sets every test broker's --log.level (default info;
# debug when chasing a flaky test: the logs stay under pytest's basetemp).
# A failed test's report carries its live brokers' thread stacks (gdb).
set -euo pipefail
cd "$(dirname "$0")"
export BUILD=${BUILD:-build}
PYTEST=(/usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=10)
[ $# -eq 0 ] || exec "${PYTEST[@]}" "$@"

SERIAL=(test_membership.py test_faults.py test_cases.py test_replication.py test_cluster.py
	test_operator.py)
skip=" ${GAZ_TEST_SKIP:-} "
for f in $skip; do
	[ -f "$f" ] || { echo "integration: GAZ_TEST_SKIP names $f, which does not exist" >&2; exit 2; }
done
parallel=() serial=()
for f in test_*.py; do
	[[ "$skip" == *" $f "* ]] || [[ " ${SERIAL[*]} " == *" $f "* ]] || parallel+=("$f")
done
for f in "${SERIAL[@]}"; do # in this order
	[[ "$skip" == *" $f "* ]] || serial+=("$f")
done
[ -z "${GAZ_TEST_SKIP:-}" ] || echo "integration: skipping $GAZ_TEST_SKIP"
jobs=${GAZ_TEST_JOBS:-3}
if [ "$jobs" -le 1 ] || ! /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
	exec "${PYTEST[@]}" "${parallel[@]}" "${serial[@]}"
fi
rc=0
echo "integration: ${#parallel[@]} files on $jobs workers"
"${PYTEST[@]}" -n "$jobs" --dist loadfile "${parallel[@]}" || rc=$?
if [ ${#serial[@]} -gt 0 ]; then
	echo "integration: ${#serial[@]} files one after another: ${serial[*]}"
	"${PYTEST[@]}" "${serial[@]}" || rc=$?
fi
exit $rc

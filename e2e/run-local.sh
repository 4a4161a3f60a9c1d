#!/usr/bin/env bash
# run-local.sh - the e2e scenarios of run-kind.sh on local processes, as
# the test suite runs them (no Docker, no kubelet): a real kube-apiserver
# with its own etcd (scripts/kube-test.sh), the brokers' etcd
# (scripts/etcd-test.sh), gazette-c brokers and gazette-operator from
# $BUILD (default build/):
#
#   tests/integration/test_drain.py    a terminating pod's broker is marked
#                                      exiting, hands off, is reported
#                                      Drained and released; the PDB follows
#                                      under-replication and drains
#   tests/integration/test_deploy.py   helm lint / helm template of the
#                                      chart, server-side dry run of what it
#                                      renders, the RBAC manifest's grants
#   tests/integration/test_operator.py JournalSpec sync, deletion, leader
#                                      election fail-over
#
# Uses GAZ_TEST_ETCD / GAZ_TEST_KUBECONFIG when set (as .ci/run exports
# them); otherwise starts and stops its own.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build}
scripts/deps.sh --check
make -j2 --no-print-directory BUILD="$BUILD" all >/dev/null

etcd_dir= kube_dir=
cleanup() {
	[ -z "$kube_dir" ] || scripts/kube-test.sh stop "$kube_dir" >/dev/null 2>&1 || true
	[ -z "$etcd_dir" ] || scripts/etcd-test.sh stop "$etcd_dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
export ETCD=${ETCD:-$(scripts/deps.sh --etcd-dir)/etcd}
if [ -z "${GAZ_TEST_ETCD:-}" ]; then
	out=$(scripts/etcd-test.sh start)
	GAZ_TEST_ETCD=$(echo "$out" | sed -n 1p)
	etcd_dir=$(echo "$out" | sed -n 2p)
	export GAZ_TEST_ETCD
fi
if [ -z "${GAZ_TEST_KUBECONFIG:-}" ]; then
	out=$(scripts/kube-test.sh start)
	GAZ_TEST_KUBECONFIG=$(echo "$out" | sed -n 1p)
	GAZ_TEST_KUBE_ETCD=$(echo "$out" | sed -n 2p)
	kube_dir=$(echo "$out" | sed -n 3p)
	export GAZ_TEST_KUBECONFIG GAZ_TEST_KUBE_ETCD
fi
tests/integration/run.sh test_drain.py test_deploy.py test_operator.py "$@"

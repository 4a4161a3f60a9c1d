#!/bin/sh
# etcd-test.sh - a throwaway single-node etcd on free loopback ports, for
# tests (test-rig.md §1.1). Never touches the default ports 2379/2380 nor
# any etcd it did not start: it stops only the pid recorded in its dir.
#
#   scripts/etcd-test.sh start [DIR]  start etcd with its data, log, pid and
#                                     ports under DIR (default: a new dir
#                                     under /dev/shm, else $TMPDIR); wait for
#                                     /health; print the endpoint, then DIR
#   scripts/etcd-test.sh stop DIR     stop it (TERM, then KILL after 20 s)
#                                     and remove DIR
#   scripts/etcd-test.sh restart DIR  stop and start again on the same data
#                                     and ports (a restart test)
#   scripts/etcd-test.sh halt DIR     stop it, keeping its data and ports
#   scripts/etcd-test.sh resume DIR   start a halted one again (as restart);
#                                     print the endpoint
#   scripts/etcd-test.sh run CMD...   start, run CMD with GAZ_TEST_ETCD set
#                                     to the endpoint, stop; CMD's status
#
# The binary is $ETCD, else the etcd 3.6 scripts/deps.sh builds into the
# cache (the version the tests and Gazette's broker expect), else the
# etcd on PATH.
#
# Exit status: 0, or 1 with the tail of the etcd log on stderr.
set -eu

if [ -z "${ETCD:-}" ]; then
	ETCD=etcd
	cached=$("$(dirname "$0")/deps.sh" --etcd-dir 2>/dev/null)/etcd || true
	[ -x "$cached" ] && ETCD=$cached
fi

# shellcheck source=scripts/rig-lib.sh
. "$(dirname "$0")/rig-lib.sh"

healthy() {
	curl -fsS --max-time 1 "$1/health" 2>/dev/null | grep -q '"health":"true"'
}

# launch DIR: start etcd on the ports recorded in DIR; wait up to 30 s.
launch() {
	d=$1 cport=$(cat "$1/cport") pport=$(cat "$1/pport")
	url=http://127.0.0.1:$cport peer=http://127.0.0.1:$pport
	# ETCD_* variables are read as flags; ETCD_NAME next to --name is fatal.
	env $(env | sed -n 's/^\(ETCD_[A-Za-z0-9_]*\)=.*/-u \1/p') "$ETCD" --name test \
		--data-dir "$d/data" \
		--listen-client-urls "$url" --advertise-client-urls "$url" \
		--listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
		--initial-cluster "test=$peer" --initial-cluster-state new \
		--logger zap --log-outputs stderr --log-level warn \
		>>"$d/etcd.log" 2>&1 </dev/null &
	echo $! >"$d/pid"
	i=0
	while [ $i -lt 300 ]; do
		healthy "$url" && return 0
		kill -0 "$(cat "$d/pid")" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	echo "etcd-test: etcd at $url not healthy; log tail:" >&2
	tail -n 20 "$d/etcd.log" >&2
	halt "$d"
	return 1
}

# halt DIR: stop the etcd whose pid DIR records, by that pid only.
halt() { halt_pidfile "$1/pid"; }

start() {
	d=${1:-}
	if [ -z "$d" ]; then
		d=$(mktemp -d -p /dev/shm gaz-etcd.XXXXXX 2>/dev/null || mktemp -d -t gaz-etcd.XXXXXX)
	fi
	mkdir -p "$d"
	# A port taken between probe and bind: retry once (test-rig.md §0).
	for try in 1 2; do
		freeport >"$d/cport"
		freeport >"$d/pport"
		if launch "$d"; then
			echo "http://127.0.0.1:$(cat "$d/cport")"
			echo "$d"
			return 0
		fi
		rm -rf "$d/data"
	done
	return 1
}

stop() {
	[ -n "${1:-}" ] && [ -d "$1" ] || { echo "etcd-test: stop needs the DIR" >&2; return 1; }
	halt "$1"
	rm -rf "$1"
}

case ${1:-} in
start)
	start "${2:-}"
	;;
stop)
	stop "${2:-}"
	;;
restart)
	rig_dir etcd-test restart "${2:-}" cport
	halt "$2"
	launch "$2"
	echo "http://127.0.0.1:$(cat "$2/cport")"
	;;
halt)
	rig_dir etcd-test halt "${2:-}" cport
	halt "$2"
	;;
resume)
	rig_dir etcd-test resume "${2:-}" cport
	rig_not_running etcd-test "$2/pid"
	launch "$2"
	echo "http://127.0.0.1:$(cat "$2/cport")"
	;;
run)
	shift
	out=$(start) || exit 1
	ep=$(echo "$out" | sed -n 1p) dir=$(echo "$out" | sed -n 2p)
	trap 'stop "$dir"' EXIT INT TERM
	rc=0
	GAZ_TEST_ETCD=$ep "$@" || rc=$?
	exit $rc
	;;
*)
	sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac

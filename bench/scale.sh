#!/usr/bin/env bash
# scale.sh - `make bench-scale`: the allocator of a real broker (ours, then
# Gazette's) against a real etcd holding many journals and simulated
# members (bench/scale/gazscale.c says what is simulated and what each
# phase measures). For each kind, on an etcd of its own:
#  1. gazscale puts the journals' specs;
#  2. one broker of the kind starts with --broker.limit 0: the oldest
#     member, so the allocator's leader, holding no journal itself;
#  3. gazscale registers the members, pulses their routes, and measures
#     three phases: from empty, after one member leaves, after more join.
#
# Environment:
#   BUILD=build               build dir holding bin/gazette and bin/gazscale
#   SCALE_JOURNALS=100000     journals (replication SCALE_REPLICATION=3)
#   SCALE_MEMBERS=100         simulated members joining the empty cluster
#   SCALE_JOIN=10             members joining in the last phase
#   SCALE_ZONES=3             zones the members are spread over
#   SCALE_KINDS="ours gazette"  which leaders to run, in this order
#   SCALE_TIMEOUT=900         seconds a phase may take to converge
#   SCALE_DIR=/path           etcd data, logs and results (default: a new
#                             dir under /dev/shm, else $TMPDIR)
# Results: $BUILD/bench/scale-<kind>.txt ("phase.key value" lines) and the
# summary lines on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
JOURNALS=${SCALE_JOURNALS:-100000}
RF=${SCALE_REPLICATION:-3}
MEMBERS=${SCALE_MEMBERS:-100}
JOIN=${SCALE_JOIN:-10}
ZONES=${SCALE_ZONES:-3}
KINDS=${SCALE_KINDS:-ours gazette}
TIMEOUT=${SCALE_TIMEOUT:-900}

ETCD_DIR=$(scripts/deps.sh --etcd-dir)
GAZSCALE=$PWD/$BUILD/bin/gazscale
declare -A EXE=([ours]=$PWD/$BUILD/bin/gazette [gazette]=$(scripts/deps.sh --gazette-dir)/gazette)
for f in "$GAZSCALE" "$ETCD_DIR/etcd" "$ETCD_DIR/etcdctl"; do
	[ -x "$f" ] || { echo "bench-scale: missing $f" >&2; exit 1; }
done
for k in $KINDS; do
	[ -x "${EXE[$k]:-}" ] || { echo "bench-scale: no broker of kind '$k' (${EXE[$k]:-})" >&2; exit 1; }
done

if [ -n "${SCALE_DIR:-}" ]; then
	work=$SCALE_DIR
	mkdir -p "$work"
elif [ -d /dev/shm ] && [ -w /dev/shm ]; then
	work=$(mktemp -d /dev/shm/gazscale.XXXXXX)
else
	work=$(mktemp -d)
fi
mkdir -p "$BUILD/bench"
echo "bench-scale: $JOURNALS journals at replication $RF, $MEMBERS members + $JOIN, $ZONES zones; work dir $work"

etcd_pid= broker_pid=
cleanup() {
	[ -n "$broker_pid" ] && kill -9 "$broker_pid" 2>/dev/null || true
	[ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null || true
	broker_pid= etcd_pid=
}
trap cleanup EXIT
trap 'exit 130' INT TERM

freeport() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

rc=0
for kind in $KINDS; do
	d=$work/$kind
	rm -rf "$d"
	mkdir -p "$d/fragments" "$d/spool"
	cport=$(freeport) pport=$(freeport) bport=$(freeport)
	etcd=http://127.0.0.1:$cport
	"$ETCD_DIR/etcd" --data-dir "$d/etcd" --listen-client-urls "$etcd" --advertise-client-urls "$etcd" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "default=http://127.0.0.1:$pport" --quota-backend-bytes $((8 << 30)) \
		--log-level error >"$d/etcd.log" 2>&1 &
	etcd_pid=$!
	for _ in $(seq 100); do
		ETCDCTL_API=3 "$ETCD_DIR/etcdctl" --endpoints "$etcd" endpoint health >/dev/null 2>&1 && break
		sleep 0.1
	done
	root=/gazscale/$kind
	echo
	echo "=== $kind"
	"$GAZSCALE" specs --etcd "$etcd" --root "$root" --journals "$JOURNALS" --replication "$RF"
	env -u BROKER_ADDRESS TMPDIR="$d/spool" "${EXE[$kind]}" serve \
		--broker.port "$bport" --broker.host 127.0.0.1 --broker.id "leader-$kind" \
		--broker.zone zone-a --broker.limit 0 --broker.file-root "$d/fragments" \
		--etcd.address "$etcd" --etcd.prefix "$root" --log.level warn >"$d/broker.log" 2>&1 </dev/null &
	broker_pid=$!
	up=0
	for _ in $(seq 1200); do
		if ETCDCTL_API=3 "$ETCD_DIR/etcdctl" --endpoints "$etcd" get --keys-only \
			"$root/members/zone-a#leader-$kind" 2>/dev/null | grep -q .; then
			up=1
			break
		fi
		kill -0 "$broker_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ $up = 0 ]; then
		echo "bench-scale: the $kind broker did not start; log tail:" >&2
		tail -n 20 "$d/broker.log" >&2
		rc=1
		cleanup
		continue
	fi
	"$GAZSCALE" run --etcd "$etcd" --root "$root" --leader-pid "$broker_pid" --journals "$JOURNALS" \
		--replication "$RF" --members "$MEMBERS" --join "$JOIN" --zones "$ZONES" \
		--timeout "$TIMEOUT" --out "$PWD/$BUILD/bench/scale-$kind.txt" || rc=1
	kill -0 "$broker_pid" 2>/dev/null || { echo "bench-scale: the $kind broker died; log tail:" >&2; tail -n 20 "$d/broker.log" >&2; rc=1; }
	cleanup
done
exit $rc

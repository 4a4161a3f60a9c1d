#!/bin/sh
# pg-test.sh - a throwaway PostgreSQL 15 cluster on a free loopback port,
# for the consumer stores' tests. Never touches the machine's own clusters
# (no pg_ctlcluster, no default port 5432): it drives only the data dir it
# made, with Debian's initdb and pg_ctl.
#
#   scripts/pg-test.sh start [DIR]  initdb a cluster under DIR (default: a
#                                   new dir under /dev/shm, else $TMPDIR),
#                                   start it on 127.0.0.1 with trust auth
#                                   and wait until it accepts connections;
#                                   print a libpq conninfo, then DIR
#   scripts/pg-test.sh stop DIR     stop it (fast shutdown, then SIGKILL
#                                   after 20 s) and remove DIR
#   scripts/pg-test.sh crash DIR    kill it as a crash would (immediate
#                                   shutdown: every backend gone at once, no
#                                   checkpoint), keeping its data and port
#   scripts/pg-test.sh resume DIR   start a crashed one again on the same
#                                   data and port (it recovers from its
#                                   WAL); print the conninfo
#   scripts/pg-test.sh run CMD...   start, run CMD with GAZ_TEST_PG set to
#                                   the conninfo, stop; CMD's status
#
# PostgreSQL refuses to run as root: as root the cluster runs as the
# `postgres` user (runuser; DIR is given to it), else as the caller. The
# binaries are $PG_BIN, else pg_config's bindir, else Debian's
# /usr/lib/postgresql/15/bin. fsync is off: the tests kill servers, not
# machines. The conninfo is "host=127.0.0.1 port=P user=postgres
# dbname=postgres".
#
# Exit status: 0, or 1 with the tail of the server log on stderr.
set -eu

# shellcheck source=scripts/rig-lib.sh
. "$(dirname "$0")/rig-lib.sh"

if [ -z "${PG_BIN:-}" ]; then
	PG_BIN=$(pg_config --bindir 2>/dev/null || true)
	[ -x "$PG_BIN/initdb" ] || PG_BIN=/usr/lib/postgresql/15/bin
fi

# as_pg CMD...: CMD as the cluster's user, from DIR (a root's cwd may be
# unreadable to postgres).
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		(cd "$d" && runuser -u postgres -- "$@")
	else
		(cd "$d" && "$@")
	fi
}

conninfo() { echo "host=127.0.0.1 port=$(cat "$1/port") user=postgres dbname=postgres"; }

# launch DIR: start the cluster on the port recorded in DIR; wait up to 60 s.
launch() {
	d=$1
	if as_pg "$PG_BIN/pg_ctl" -D "$d/data" -l "$d/pg.log" -w -t 60 -s \
		-o "-c listen_addresses=127.0.0.1 -p $(cat "$d/port") -c unix_socket_directories='$d' -c fsync=off" \
		start >/dev/null 2>&1; then
		return 0
	fi
	echo "pg-test: postgres on 127.0.0.1:$(cat "$d/port") did not start; log tail:" >&2
	tail -n 20 "$d/pg.log" >&2 2>/dev/null || true
	halt "$d" immediate
	return 1
}

# halt DIR MODE: pg_ctl stop in MODE (fast, immediate) on DIR's cluster;
# then, if its postmaster is still there, SIGTERM/SIGKILL by its recorded pid.
halt() {
	d=$1
	[ -f "$d/data/postmaster.pid" ] || return 0
	as_pg "$PG_BIN/pg_ctl" -D "$d/data" -m "$2" -w -t 20 -s stop >/dev/null 2>&1 || true
	if [ -f "$d/data/postmaster.pid" ]; then
		head -n 1 "$d/data/postmaster.pid" >"$d/pid"
		halt_pidfile "$d/pid"
	fi
}

start() {
	d=${1:-}
	if [ -z "$d" ]; then
		d=$(mktemp -d -p /dev/shm gaz-pg.XXXXXX 2>/dev/null || mktemp -d -t gaz-pg.XXXXXX)
	fi
	mkdir -p "$d"
	[ -x "$PG_BIN/initdb" ] || { echo "pg-test: no initdb in $PG_BIN (install postgresql-15)" >&2; return 1; }
	[ "$(id -u)" != 0 ] || chown postgres "$d"
	if ! as_pg "$PG_BIN/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 --no-sync \
		--no-instructions >"$d/initdb.log" 2>&1; then
		echo "pg-test: initdb failed:" >&2
		tail -n 20 "$d/initdb.log" >&2
		return 1
	fi
	# A port taken between probe and bind: retry once (test-rig.md §0).
	for try in 1 2; do
		freeport >"$d/port"
		if launch "$d"; then
			conninfo "$d"
			echo "$d"
			return 0
		fi
	done
	return 1
}

stop() {
	[ -n "${1:-}" ] && [ -f "$1/port" ] || { echo "pg-test: stop needs the DIR" >&2; return 1; }
	halt "$1" fast
	rm -rf "$1"
}

case ${1:-} in
start)
	start "${2:-}"
	;;
stop)
	stop "${2:-}"
	;;
crash)
	rig_dir pg-test crash "${2:-}" port
	halt "$2" immediate
	;;
resume)
	rig_dir pg-test resume "${2:-}" port
	[ ! -f "$2/data/postmaster.pid" ] || { echo "pg-test: already running" >&2; exit 1; }
	launch "$2"
	conninfo "$2"
	;;
run)
	shift
	out=$(start) || exit 1
	ci=$(echo "$out" | sed -n 1p) dir=$(echo "$out" | sed -n 2p)
	trap 'stop "$dir"' EXIT INT TERM
	rc=0
	GAZ_TEST_PG=$ci "$@" || rc=$?
	exit $rc
	;;
*)
	sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac

# rig-lib.sh - shell helpers shared by the test-rig scripts (etcd-test.sh,
# s3-test.sh, kube-test.sh); sourced, not run.

# freeport: print a TCP port on 127.0.0.1 that was free a moment ago (a
# race with other binders remains; callers retry a failed start).
freeport() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# halt_pidfile FILE: stop the process whose pid FILE records, by that pid
# only: SIGTERM, up to 20 s for it to exit, then SIGKILL; FILE is removed.
halt_pidfile() {
	[ -f "$1" ] || return 0
	local pid i=0
	pid=$(cat "$1")
	if kill -TERM "$pid" 2>/dev/null; then
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 200 ]; do
			sleep 0.1
			i=$((i + 1))
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

# rig_dir WHO VERB DIR MARKER: exit 1 (naming WHO and VERB) unless DIR is a
# rig's dir, one holding the file MARKER that its start wrote.
rig_dir() {
	[ -n "$3" ] && [ -f "$3/$4" ] || { echo "$1: $2 needs the DIR" >&2; exit 1; }
}

# rig_not_running WHO PIDFILE: exit 1 if the process PIDFILE records is alive.
rig_not_running() {
	[ ! -f "$2" ] || ! kill -0 "$(cat "$2")" 2>/dev/null || { echo "$1: already running" >&2; exit 1; }
}

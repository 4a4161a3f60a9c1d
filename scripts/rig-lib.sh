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

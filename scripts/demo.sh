#!/usr/bin/env bash
# demo.sh - the embedded default, end to end on this machine: etcd, one
# gazette-c broker and a file:// fragment store, driven by our gazctl.
#
#  1. start etcd and a broker (fragments under a temp dir);
#  2. apply two journals (Gazette's YAML hierarchy);
#  3. append a real data file nobody here wrote (the 3.5 MB word list of
#     Debian's wamerican-huge package) and read it back from the live head;
#  4. stop the broker (SIGTERM: spools persisted), start a fresh one with an
#     empty scratch dir, and read the journal back again, now from the store;
#  5. append once more: the new broker continues at the old write head.
# Every read is compared byte for byte (SHA-256) with the input.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
GAZETTE=$PWD/$BUILD/bin/gazette
GAZCTL=$PWD/$BUILD/bin/gazctl
DATA=${DEMO_DATA:-/usr/share/dict/american-english-huge}

work=$(mktemp -d -t gazette-demo.XXXXXX)
broker_pid=
cleanup() {
	[ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null || true
	[ -n "${etcd_dir:-}" ] && scripts/etcd-test.sh stop "$etcd_dir" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
sha() { sha256sum | cut -c1-64; }

# The tests' etcd 3.6 when scripts/deps.sh built it, else Debian's
# (`make demo` installs only Debian packages).
ETCD="$(scripts/deps.sh --etcd-dir)/etcd"
[ -x "$ETCD" ] || ETCD=$(command -v etcd) || { echo "demo: no etcd (apt-get install etcd-server)" >&2; exit 1; }
export ETCD
step "starting etcd ($("$ETCD" --version | sed -n 's/^etcd Version: //p'))"
out=$(scripts/etcd-test.sh start)
etcd=$(echo "$out" | sed -n 1p)
etcd_dir=$(echo "$out" | sed -n 2p)
echo "etcd at $etcd"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/fragments"
export BROKER_ADDRESS=http://127.0.0.1:$port

# The broker is alone, so its exit has nobody to hand its journals to: it
# would serve them for the whole --broker.exit-timeout (2m by default)
# waiting for a member to join before it persists and releases them. The
# demo restarts it on purpose, so it waits 2 s instead.
start_broker() {
	local scratch=$work/scratch-$1
	mkdir -p "$scratch"
	TMPDIR=$scratch "$GAZETTE" serve --broker.port "$port" --broker.host 127.0.0.1 \
		--broker.id "demo-$1" --broker.file-root "$work/fragments" \
		--etcd.address "$etcd" --etcd.prefix /gazette/demo --etcd.lease 5s --broker.exit-timeout 2s \
		--log.level info >>"$work/broker.log" 2>&1 &
	broker_pid=$!
	for _ in $(seq 300); do
		curl -fsS "$BROKER_ADDRESS/debug/ready" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	tail -20 "$work/broker.log"
	echo "demo: broker did not become ready" >&2
	return 1
}

stop_broker() {
	kill -TERM "$broker_pid"
	wait "$broker_pid" || { echo "demo: broker exited non-zero" >&2; return 1; }
	broker_pid=
}

step "starting a broker on $BROKER_ADDRESS (scratch dir 1)"
start_broker 1

step "applying journals"
cat >"$work/journals.yaml" <<YAML
name: demo/
replication: 1
labels:
  - name: app.gazette.dev/tag
    value: demo
fragment:
  length: 1048576
  compression_codec: GZIP
  stores:
    - file:///
  refresh_interval: 30s
  flush_interval: 1m0s
children:
  - name: demo/other
  - name: demo/words
    labels:
      - name: content-type
        value: text/plain
YAML
"$GAZCTL" journals apply --specs "$work/journals.yaml"
"$GAZCTL" journals list --primary

want=$(sha <"$DATA")
step "appending $DATA ($(stat -c %s "$DATA") bytes)"
"$GAZCTL" journals append -l name=demo/words --input "$DATA"

step "reading it back from the live head"
got=$("$GAZCTL" journals read -l name=demo/words | sha)
[ "$got" = "$want" ] || { echo "demo: MISMATCH reading from the live head" >&2; exit 1; }
echo "byte-identical (sha256 $got)"

step "restarting the broker with an empty scratch dir"
stop_broker
start_broker 2
"$GAZCTL" journals fragments -l name=demo/words

step "reading it back again, now from the fragment store"
got=$("$GAZCTL" journals read -l name=demo/words | sha)
[ "$got" = "$want" ] || { echo "demo: MISMATCH reading from the store" >&2; exit 1; }
echo "byte-identical (sha256 $got)"

step "appending once more: the new broker continues at the old write head"
printf 'one more line\n' | "$GAZCTL" journals append -l name=demo/words
got=$("$GAZCTL" journals read -l name=demo/words | sha)
want2=$( (cat "$DATA"; printf 'one more line\n') | sha)
[ "$got" = "$want2" ] || { echo "demo: MISMATCH after the second append" >&2; exit 1; }
echo "byte-identical (sha256 $got)"

stop_broker
step "demo passed"

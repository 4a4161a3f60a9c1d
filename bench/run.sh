#!/usr/bin/env bash
# run.sh - `make bench`: gazette-c's broker and Gazette's Go broker side by
# side on this machine, same workloads, same load generator (gazbench).
#
#  1. check the binaries (ours, gazbench, Gazette's gazette, etcd 3.6);
#  2. start ONE etcd and both brokers, each on its own etcd prefix, with its
#     own file:// fragment root and spool dir ($TMPDIR), replication 1; or,
#     with BENCH_REPLICATION=3, three brokers of each kind (one prefix and
#     fragment root per kind) and journals at replication 3;
#  3. run gazbench against each broker in turn, ROUNDS times, alternating
#     which goes first (ours first in odd rounds) so that neither always
#     runs on a warmer or a more fragmented machine;
#  4. with TLS (BENCH_TLS=1, the default at replication 1): one more
#     broker of each kind serving TLS on its one port (a server certificate
#     of a CA made here with openssl; no client certificates), and the
#     append throughput and latency workloads through https:// ROUNDS times;
#  5. stop everything (Gazette's lone broker never exits on SIGTERM by
#     design: SIGKILL after 5 s) and print the side-by-side tables: ours
#     against Gazette's, plain; then under TLS; then each broker's TLS
#     against its own plain runs (the cost of TLS, as ratios).
#
# Environment:
#   BUILD=build           build dir holding bin/gazette and bin/gazbench
#   BENCH_ROUNDS=2        runs per broker (>= 2 to see run-to-run noise)
#   BENCH_SECS=4          measured seconds per throughput/read workload
#   BENCH_WARMUP=1        warm-up seconds before each measured window
#   BENCH_ONLY=k1,k2      only these gazbench workloads (see gazbench.c)
#   BENCH_LOOP_THREADS=2  threads driving the closed-loop appenders (0: a
#                         blocked thread per appender, the older way)
#   BENCH_TLS=1           0: no TLS pass (only at replication 1)
#   BENCH_TLS_ONLY=k1,k2  the workloads of the TLS pass (default: the
#                         append throughput and latency ones)
#   BENCH_REPLICATION=1   1: the RF=1 workloads, one broker of each kind;
#                         3: the rf3_* workloads (1 MiB, 64 KiB, 1 KiB
#                         appends at a fixed rate), three brokers of each
#   BENCH_DIR=/path       where fragments, spools, etcd data and results go
#                         (default: a new dir under /dev/shm, else $TMPDIR)
#   BENCH_BACKFILL_MB=1024  history of the backfill workload (gazbench
#                         backfill, S3 store on a SeaweedFS server started
#                         here); 0 skips it; BENCH_ONLY=backfill runs only it
#   BENCH_BACKFILL_PAR=1  parallel readers of the backfill
#   BENCH_BACKFILL_RATE=500  appends/s offered while measuring backfill p99
#   BENCH_BACKFILL_CODEC=SNAPPY  compression of the backfill journal
#   BENCH_STORE_READ_NICE=N  gazette-c's --broker.store-read-nice
#   BENCH_BACKFILL_NICE=0  niceness of the S3 server and of gazbench's
#                         backfill reader threads (19: they stand in for
#                         other machines; see bench/README.md "Backfill")
#   BENCH_BACKFILL_SCHED=idle  also SCHED_IDLE for both (chrt --idle 0)
#   BENCH_BACKFILL_ISOLATE=1  while measuring append latency, the S3 server
#                         and the backfill readers on the last CPU, the
#                         brokers, etcd and the appenders on the others,
#                         and a control window with that CPU only spinning
#                         (default with 2+ CPUs; 0: all share every CPU)
#   BENCH_BACKFILL_LAT_ROUNDS=3  latency windows of each condition
# The full table also lands in $BUILD/bench/last.txt, and each run's raw
# metrics in $BUILD/bench/result-<broker>-<round>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${BENCH_ROUNDS:-2}
SECS=${BENCH_SECS:-4}
WARMUP=${BENCH_WARMUP:-1}
ONLY=${BENCH_ONLY:-}
RF=${BENCH_REPLICATION:-1}
BF_MB=${BENCH_BACKFILL_MB:-1024}
[ "$RF" = 1 ] || BF_MB=0
case ",$ONLY," in
,, | *,backfill,*) ;;
*) BF_MB=0 ;;
esac
# BENCH_ONLY naming only backfill: no gazbench run rounds.
RUN_ONLY=$(echo ",$ONLY," | sed 's/,backfill,/,/; s/^,//; s/,$//')
TLS=${BENCH_TLS:-1}
[ "$RF" = 1 ] || TLS=0
[ "$ONLY" = backfill ] && TLS=0
TLS_ONLY=${BENCH_TLS_ONLY:-append_1m_j1,append_64k_j1,append_1k_j1,lat_1k_500,lat_1k_1000}
S3_KEY=gazbench S3_SECRET=gazbench-secret
case $RF in
1) NB=1 ;;
3) NB=3 ;;
*) echo "bench: BENCH_REPLICATION must be 1 or 3" >&2; exit 2 ;;
esac

OURS=$PWD/$BUILD/bin/gazette
GAZBENCH=$PWD/$BUILD/bin/gazbench
GO_GAZETTE=$(scripts/deps.sh --gazette-dir)/gazette
ETCD_DIR=$(scripts/deps.sh --etcd-dir)
export ETCD=$ETCD_DIR/etcd

missing=0
for f in "$OURS" "$GAZBENCH" "$GO_GAZETTE" "$ETCD" "$ETCD_DIR/etcdctl"; do
	[ -x "$f" ] || { echo "bench: missing $f" >&2; missing=1; }
done
if [ $missing = 1 ]; then
	echo "bench: run 'make deps' (Gazette's binaries, etcd) and 'make' first" >&2
	exit 1
fi

if [ -n "${BENCH_DIR:-}" ]; then
	work=$BENCH_DIR
	mkdir -p "$work"
else
	work=$(mktemp -d -p /dev/shm gazbench.XXXXXX 2>/dev/null || mktemp -d -t gazbench.XXXXXX)
fi
etcd_dir=
s3_dir=
declare -A pid port ours_args tls_flags
# Flags of gazette-c's broker only.
ours_args[gazette-c]=${BENCH_STORE_READ_NICE:+--broker.store-read-nice $BENCH_STORE_READ_NICE}
ours_args[gazette-c-tls]=${ours_args[gazette-c]}
tls_dir=$work/tls

# stop_broker KEY: SIGTERM broker KEY (<kind>.<n>), then SIGKILL after a
# grace (5 s for Gazette's, whose last broker waits forever for a hand-off
# by design; 30 s for ours, which exits once its spools are persisted).
stop_broker() {
	local p=${pid[$1]:-} grace=300 i=0
	[ -n "$p" ] || return 0
	case $1 in gazette.* | gazette-tls.*) grace=50 ;; esac
	kill -TERM "$p" 2>/dev/null || true
	while kill -0 "$p" 2>/dev/null && [ $i -lt $grace ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$p" 2>/dev/null; then
		case $1 in gazette.* | gazette-tls.*) ;; *) echo "bench: $1 did not exit on SIGTERM; killing it" >&2 ;; esac
		kill -KILL "$p" 2>/dev/null || true
	fi
	wait "$p" 2>/dev/null || true
	pid[$1]=
}

# stop_kind KIND: stop every broker of KIND: all are signalled at once
# (so a kind's brokers do not hand journals to each other one by one),
# then each is waited for.
stop_kind() {
	local k
	for k in $(seq "$NB"); do
		[ -n "${pid[$1.$k]:-}" ] && kill -TERM "${pid[$1.$k]}" 2>/dev/null || true
	done
	for k in $(seq "$NB"); do stop_broker "$1.$k"; done
}

cleanup() {
	local k
	for k in $(seq "$NB"); do
		stop_broker "gazette-c.$k"
		stop_broker "gazette.$k"
	done
	stop_broker gazette-c-tls.1
	stop_broker gazette-tls.1
	[ -n "$etcd_dir" ] && scripts/etcd-test.sh stop "$etcd_dir" >/dev/null 2>&1 || true
	[ -n "$s3_dir" ] && scripts/s3-test.sh stop "$s3_dir" >/dev/null 2>&1 || true
	if [ -z "${BENCH_DIR:-}" ]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

freeport() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_broker KIND EXE N: start broker N of KIND on a free port under the
# kind's etcd prefix and fragment root, with its own spool dir; wait until
# it has announced itself.
start_broker() {
	local kind=$1 exe=$2 n=$3 d=$work/$1 key=$1.$3
	mkdir -p "$d/fragments" "$d/spool$n"
	port[$key]=$(freeport)
	env -u BROKER_ADDRESS TMPDIR="$d/spool$n" \
		AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET \
		AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent "$exe" serve \
		--broker.port "${port[$key]}" --broker.host 127.0.0.1 \
		--broker.id "bench-$kind-$n" --broker.zone local \
		--broker.file-root "$d/fragments" \
		--etcd.address "$etcd" --etcd.prefix "/gazbench/$kind" \
		--broker.limit 40000 \
		--log.level warn ${ours_args[$kind]:-} ${tls_flags[$kind]:-} >"$d/broker$n.log" 2>&1 </dev/null &
	pid[$key]=$!
	for _ in $(seq 300); do
		if ETCDCTL_API=3 "$ETCD_DIR/etcdctl" --endpoints "$etcd" get --keys-only \
			"/gazbench/$kind/members/local#bench-$kind-$n" 2>/dev/null | grep -q .; then
			return 0
		fi
		kill -0 "${pid[$key]}" 2>/dev/null || break
		sleep 0.1
	done
	echo "bench: $key broker did not start; log tail:" >&2
	tail -n 20 "$d/broker$n.log" >&2
	return 1
}

start_kind() {
	local k
	for k in $(seq "$NB"); do start_broker "$1" "$2" "$k"; done
}

# pids_of KIND: the kind's broker pids, comma-separated.
pids_of() {
	local k out=
	for k in $(seq "$NB"); do out=${out:+$out,}${pid[$1.$k]}; done
	echo "$out"
}

# bench_one NAME ROUND [ONLY]: one gazbench run against broker NAME (a
# *-tls kind over https://), of the workloads ONLY (default $RUN_ONLY);
# its result file is kept in $BUILD/bench/.
bench_one() {
	local name=$1 round=$2 only=${3:-$RUN_ONLY} out=$PWD/$BUILD/bench/result-$1-$2.txt
	local url=http://127.0.0.1:${port[$1.1]} tls=
	case $name in *-tls) url=https://127.0.0.1:${port[$1.1]} tls="--tls-ca $tls_dir/ca.crt" ;; esac
	echo
	echo "=== round $round: $name (pids $(pids_of "$name"), port ${port[$name.1]})"
	if ! "$GAZBENCH" run --broker "$url" $tls \
		--prefix "bench/r$round" --out "$out" --broker-pid "$(pids_of "$name")" \
		--replication "$RF" --secs "$SECS" --warmup "$WARMUP" ${only:+--only "$only"} \
		${BENCH_LOOP_THREADS:+--loop-threads "$BENCH_LOOP_THREADS"}; then
		echo "bench: gazbench against $name failed in round $round" >&2
	fi
	# The run deleted its journals: drop their persisted fragments too, so
	# that memory (under /dev/shm) stays bounded across rounds.
	rm -rf "$work/$name/fragments/bench"
	files[$name]=${files[$name]:+${files[$name]},}$out
}

machine() {
	echo "machine: $(nproc) cpu ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1))," \
		"$(free -g | awk '/^Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
	echo "work dir: $work ($(df -h --output=fstype "$work" | tail -1 | tr -d ' '))"
	echo "loadavg: $(cut -d' ' -f1-3 /proc/loadavg)"
}

mkdir -p "$BUILD/bench"
rm -f "$BUILD"/bench/result-*.txt
{
	echo "gazbench: gazette-c ($OURS) vs Gazette $(basename "$(dirname "$GO_GAZETTE")")"
	machine
	if [ "$RF" = 1 ]; then
		echo "rounds: $ROUNDS, ${SECS} s measured + ${WARMUP} s warm-up per workload," \
			"fragment.length 128 MiB, compression NONE, replication 1"
	else
		echo "rounds: $ROUNDS, 6 s schedule + ${WARMUP} s warm-up per workload," \
			"fragment.length 128 MiB, compression NONE, replication $RF ($NB brokers of each kind)"
	fi
} | tee "$BUILD/bench/last.txt"

out=$(scripts/etcd-test.sh start)
etcd=$(echo "$out" | sed -n 1p)
etcd_dir=$(echo "$out" | sed -n 2p)
s3_sched= bf_sched=
if [ "${BENCH_BACKFILL_SCHED:-}" = idle ]; then
	s3_sched="chrt --idle 0"
	bf_sched=--sched-idle
fi
if [ "$BF_MB" != 0 ]; then
	# The backfill's S3 server, and the bucket both brokers' stores use.
	out=$(GAZ_TEST_S3_ACCESS_KEY=$S3_KEY GAZ_TEST_S3_SECRET_KEY=$S3_SECRET \
		$s3_sched nice -n "${BENCH_BACKFILL_NICE:-0}" scripts/s3-test.sh start "$work/s3")
	s3=$(echo "$out" | sed -n 1p)
	s3_dir=$(echo "$out" | sed -n 2p)
	/usr/bin/python3 - "$s3" "$S3_KEY" "$S3_SECRET" <<'PY'
import sys, boto3
from botocore.config import Config
boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id=sys.argv[2],
             aws_secret_access_key=sys.argv[3],
             config=Config(s3={"addressing_style": "path"})).create_bucket(Bucket="gazbench")
PY
fi
bf_isolate=
if [ "$BF_MB" != 0 ] && [ "${BENCH_BACKFILL_ISOLATE:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then
	bf_isolate="--isolate --s3-pid $(cat "$s3_dir/pid") --etcd-pid $(cat "$etcd_dir/pid")"
fi
start_kind gazette-c "$OURS"
start_kind gazette "$GO_GAZETTE"
echo "etcd $etcd; gazette-c on :${port[gazette-c.1]}, gazette on :${port[gazette.1]}" \
	"(and $((NB - 1)) more of each)"

# bench_backfill NAME: gazbench backfill against broker NAME, its store a
# prefix of its own in the bucket.
bench_backfill() {
	local name=$1 out=$PWD/$BUILD/bench/backfill-$1.txt enc
	enc=$(/usr/bin/python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$s3")
	echo
	echo "=== backfill: $name (pids $(pids_of "$name"), port ${port[$name.1]})"
	if ! "$GAZBENCH" backfill --broker "http://127.0.0.1:${port[$name.1]}" \
		--prefix "bench/bf" --out "$out" --broker-pid "$(pids_of "$name")" \
		--store "s3://gazbench/$name/?endpoint=$enc&region=us-east-1" --mb "$BF_MB" \
		--par "${BENCH_BACKFILL_PAR:-1}" --rate "${BENCH_BACKFILL_RATE:-500}" \
		--codec "${BENCH_BACKFILL_CODEC:-SNAPPY}" --nice "${BENCH_BACKFILL_NICE:-0}" $bf_sched \
		--lat-rounds "${BENCH_BACKFILL_LAT_ROUNDS:-3}" $bf_isolate; then
		echo "bench: gazbench backfill against $name failed" >&2
	fi
	rm -rf "$work/$name/fragments/bench"
	bf_files[$name]=$out
}

declare -A files bf_files
[ "$ONLY" = backfill ] && ROUNDS=0
for round in $(seq "$ROUNDS"); do
	if [ $((round % 2)) = 1 ]; then
		bench_one gazette-c "$round"
		bench_one gazette "$round"
	else
		bench_one gazette "$round"
		bench_one gazette-c "$round"
	fi
done

if [ "$BF_MB" != 0 ]; then
	rm -f "$BUILD"/bench/backfill-*.txt
	bench_backfill gazette-c
	bench_backfill gazette
fi

# make_tls_certs: a CA and a server certificate for 127.0.0.1 (P-256)
# under $tls_dir; the TLS kinds' flags.
make_tls_certs() {
	mkdir -p "$tls_dir"
	(
		cd "$tls_dir"
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
			-out ca.crt -days 2 -subj /CN=gazbench-ca
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key \
			-out server.csr -subj /CN=127.0.0.1
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
		openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
			-days 2 -extfile server.ext
	) >/dev/null 2>&1
	local f="--broker.server-cert-file $tls_dir/server.crt --broker.server-cert-key-file $tls_dir/server.key"
	f="$f --broker.peer-ca-file $tls_dir/ca.crt"
	tls_flags[gazette-c-tls]=$f
	tls_flags[gazette-tls]=$f
}

# The TLS pass: NB is 1 here (replication 1).
if [ "$TLS" = 1 ]; then
	make_tls_certs
	start_broker gazette-c-tls "$OURS" 1
	start_broker gazette-tls "$GO_GAZETTE" 1
	echo
	echo "TLS: gazette-c on :${port[gazette-c-tls.1]}, gazette on :${port[gazette-tls.1]} (https://)"
	for round in $(seq "$ROUNDS"); do
		if [ $((round % 2)) = 1 ]; then
			bench_one gazette-c-tls "$round" "$TLS_ONLY"
			bench_one gazette-tls "$round" "$TLS_ONLY"
		else
			bench_one gazette-tls "$round" "$TLS_ONLY"
			bench_one gazette-c-tls "$round" "$TLS_ONLY"
		fi
	done
	stop_broker gazette-c-tls.1
	stop_broker gazette-tls.1
fi

stop_kind gazette-c
stop_kind gazette
{
	[ "$ROUNDS" = 0 ] || "$GAZBENCH" report gazette-c "${files[gazette-c]}" gazette "${files[gazette]}"
	if [ "$BF_MB" != 0 ] && [ -f "${bf_files[gazette-c]:-}" ] && [ -f "${bf_files[gazette]:-}" ]; then
		echo
		echo "Backfill: $BF_MB MiB of history on S3 (SeaweedFS), codec ${BENCH_BACKFILL_CODEC:-SNAPPY}," \
			"${BENCH_BACKFILL_PAR:-1} reader(s), appends at ${BENCH_BACKFILL_RATE:-500}/s," \
			"backfill readers and S3 server at niceness ${BENCH_BACKFILL_NICE:-0}" \
			"${BENCH_BACKFILL_SCHED:+(SCHED_IDLE)}"
		"$GAZBENCH" report gazette-c "${bf_files[gazette-c]}" gazette "${bf_files[gazette]}"
	fi
	if [ "$TLS" = 1 ] && [ -n "${files[gazette-c-tls]:-}" ] && [ -n "${files[gazette-tls]:-}" ]; then
		echo
		echo "TLS: both brokers serving TLS on their one port (server certificate, P-256;" \
			"no client certificates), gazbench over https://"
		"$GAZBENCH" report gazette-c-tls "${files[gazette-c-tls]}" gazette-tls "${files[gazette-tls]}"
		if [ "$ROUNDS" != 0 ]; then
			echo
			echo "Cost of TLS, gazette-c: with TLS (A) against without (B), same workloads"
			"$GAZBENCH" report gazette-c-tls "${files[gazette-c-tls]}" gazette-c "${files[gazette-c]}" \
				--no-goals
			echo
			echo "Cost of TLS, Gazette: with TLS (A) against without (B), same workloads"
			"$GAZBENCH" report gazette-tls "${files[gazette-tls]}" gazette "${files[gazette]}" --no-goals
		fi
	fi
	echo "loadavg after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$BUILD/bench/last.txt"

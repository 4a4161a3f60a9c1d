#!/bin/sh
# kube-test.sh - a throwaway kube-apiserver with its own etcd, on loopback,
# for the operator's tests: the envtest recipe (test-rig.md §2) with plain
# openssl certificates and flags. Nothing else of Kubernetes runs (no
# controller-manager, no scheduler): CRDs, custom resources, leases and
# events work; pods never start and namespaces never finish deleting.
#
#   scripts/kube-test.sh start [DIR]  make a CA, a serving and an admin client
#                                     certificate, start etcd and
#                                     kube-apiserver on free loopback ports,
#                                     wait until /readyz and the `default`
#                                     namespace answer, write DIR/kubeconfig;
#                                     print three lines: the kubeconfig path,
#                                     the API server's etcd endpoint, DIR
#   scripts/kube-test.sh stop DIR     stop kube-apiserver (TERM, then KILL
#                                     after 20 s), then its etcd; remove DIR
#   scripts/kube-test.sh halt DIR     stop kube-apiserver only (its etcd,
#                                     port and certificates stay)
#   scripts/kube-test.sh resume DIR   start it again on the same port and
#                                     etcd, wait until it is ready
#
# The API server runs with --watch-cache=false: watches are served from
# etcd directly, so compacting that etcd makes a resumed watch fail with
# 410 Gone at once (case BR-25). Extra flags: $KUBE_APISERVER_FLAGS.
# Binaries: kube-apiserver and kubectl from `scripts/deps.sh --kube-dir`
# (or $KUBE_DIR), etcd from `scripts/deps.sh --etcd-dir` (or $ETCD).
# It stops only the pids recorded in DIR, never by name.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
KUBE_DIR=${KUBE_DIR:-$("$here/deps.sh" --kube-dir)}
ETCD=${ETCD:-$("$here/deps.sh" --etcd-dir)/etcd}
export ETCD

# shellcheck source=scripts/rig-lib.sh
. "$(dirname "$0")/rig-lib.sh"

# pki DIR: one CA signs the serving certificate and the admin's client
# certificate (O=system:masters, always authorized); an RSA key pair signs
# service-account tokens. Valid 7 days.
pki() {
	p=$1
	mkdir -p "$p"
	ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
	# shellcheck disable=SC2086
	(
		cd "$p"
		openssl req -x509 $ec -keyout ca.key -out ca.crt -days 7 -subj "/O=gazette-c-test/CN=test-ca" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
		openssl req -new $ec -keyout apiserver.key -subj "/CN=localhost" \
			-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "extendedKeyUsage=serverAuth" |
			openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 -copy_extensions copyall \
				-out apiserver.crt
		openssl req -new $ec -keyout admin.key -subj "/O=system:masters/CN=admin" \
			-addext "extendedKeyUsage=clientAuth" |
			openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 -copy_extensions copyall \
				-out admin.crt
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key
		openssl pkey -in sa.key -pubout -out sa.pub
	) >"$p/openssl.log" 2>&1 || { cat "$p/openssl.log" >&2; return 1; }
}

# launch DIR ETCD_ENDPOINT: start kube-apiserver on the port in DIR/kport.
launch() {
	d=$1 ep=$2 port=$(cat "$1/kport") p=$1/pki
	mkdir -p "$d/cert"
	# shellcheck disable=SC2086
	"$KUBE_DIR/kube-apiserver" \
		--etcd-servers="$ep" --etcd-prefix=/registry \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
		--cert-dir="$d/cert" --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
		--client-ca-file="$p/ca.crt" \
		--service-account-issuer="https://127.0.0.1:$port/" \
		--service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
		--authorization-mode=RBAC --disable-admission-plugins=ServiceAccount \
		--endpoint-reconciler-type=none --watch-cache=false \
		${KUBE_APISERVER_FLAGS:-} \
		>"$d/kube-apiserver.log" 2>&1 </dev/null &
	echo $! >"$d/kpid"
}

# ready DIR: /readyz answers "ok" and the default namespace exists (as
# envtest waits), within 90 s on a busy 2-core machine.
ready() {
	d=$1 port=$(cat "$1/kport") p=$1/pki
	i=0
	while [ $i -lt 900 ]; do
		kill -0 "$(cat "$d/kpid")" 2>/dev/null || return 1
		if curl -fsS --max-time 2 --cacert "$p/ca.crt" --cert "$p/admin.crt" --key "$p/admin.key" \
			"https://127.0.0.1:$port/readyz" 2>/dev/null | grep -qx ok &&
			"$KUBE_DIR/kubectl" --kubeconfig "$d/kubeconfig" get namespace default >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

kubeconfig() {
	d=$1 port=$(cat "$1/kport") p=$1/pki kc=$1/kubeconfig
	k() { "$KUBE_DIR/kubectl" --kubeconfig="$kc" "$@" >/dev/null; }
	k config set-cluster test --server="https://127.0.0.1:$port" --certificate-authority="$p/ca.crt" \
		--embed-certs=true
	k config set-credentials admin --client-certificate="$p/admin.crt" --client-key="$p/admin.key" \
		--embed-certs=true
	k config set-context test --cluster=test --user=admin --namespace=default
	k config use-context test
}

# halt_apiserver DIR: stop the kube-apiserver whose pid DIR records, by that pid only.
halt_apiserver() { halt_pidfile "$1/kpid"; }

start() {
	d=${1:-}
	[ -n "$d" ] || d=$(mktemp -d -p /dev/shm gaz-kube.XXXXXX 2>/dev/null || mktemp -d -t gaz-kube.XXXXXX)
	mkdir -p "$d"
	[ -x "$KUBE_DIR/kube-apiserver" ] || { echo "kube-test: no $KUBE_DIR/kube-apiserver (scripts/deps.sh)" >&2; return 1; }
	pki "$d/pki"
	out=$("$here/etcd-test.sh" start "$d/etcd") || return 1
	ep=$(echo "$out" | sed -n 1p)
	echo "$ep" >"$d/etcd-endpoint"
	# A port taken between probe and bind: retry once (test-rig.md §0).
	for try in 1 2; do
		freeport >"$d/kport"
		kubeconfig "$d"
		launch "$d" "$ep"
		if ready "$d"; then
			echo "$d/kubeconfig"
			echo "$ep"
			echo "$d"
			return 0
		fi
		halt_apiserver "$d"
	done
	echo "kube-test: kube-apiserver not ready; log tail:" >&2
	tail -n 30 "$d/kube-apiserver.log" >&2
	"$here/etcd-test.sh" stop "$d/etcd" >/dev/null 2>&1 || true
	return 1
}

stop() {
	[ -n "${1:-}" ] && [ -d "$1" ] || { echo "kube-test: stop needs the DIR" >&2; return 1; }
	halt_apiserver "$1"
	[ ! -d "$1/etcd" ] || "$here/etcd-test.sh" stop "$1/etcd"
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
	rig_dir kube-test halt "${2:-}" kport
	halt_apiserver "$2"
	;;
resume)
	rig_dir kube-test resume "${2:-}" kport
	rig_not_running kube-test "$2/kpid"
	launch "$2" "$(cat "$2/etcd-endpoint")"
	ready "$2" || {
		echo "kube-test: kube-apiserver not ready; log tail:" >&2
		tail -n 30 "$2/kube-apiserver.log" >&2
		halt_apiserver "$2"
		exit 1
	}
	;;
*)
	sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac

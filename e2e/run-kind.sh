#!/usr/bin/env bash
# run-kind.sh - the e2e scenarios on a kind cluster with an S3 server:
#
#   install       the S3 server (+ bucket), the chart with its 3-member etcd
#                 (3 brokers over 3 zones, 2 operator replicas with leader
#                 election); every pod Ready, JournalSpecs Ready with route,
#                 write head and persisted offsets in status
#   auth          (E2E_AUTH=1) a signed call served, an unsigned one refused;
#                 every later client signs with the release's keys
#   tls           (E2E_TLS=1) brokers advertise https:// pod DNS names; a
#                 client without a certificate and a plaintext one are
#                 refused; every later client presents the certificate;
#                 etcd's clients and peers on https, a client without a
#                 certificate refused
#   data          append from a pod, read back from another; from the host
#                 through a port-forward, the same bytes
#   backfill      a reader with a route cache reads history straight from
#                 the bucket by signed URLs (brokers serve none of it from
#                 the store) and walks onto the tail in the spools
#   rolling-upgrade  helm upgrade to a rebuilt image under continuous
#                 appends at replication 3 over 10 journals (gazload):
#                 attempted, acknowledged, failed 0, verified, lost 0, each
#                 broker's drain time, the rollout's time; 3 Drained Events
#   budget        the PDB: 1, 0 while a broker drains, a second eviction
#                 refused (429), 1 again
#   node-drain    kubectl drain of a worker under load; a second eviction
#                 refused meanwhile; 0 failed, 0 lost
#   broker-killed a broker pod deleted with --grace-period=0 under load
#   scale-3-5-3   brokers scaled 3 -> 5 -> 3 under load; journals spread
#                 over the new brokers; 0 lost
#   operator      the leader's pod deleted hands the Lease over; deletion
#                 with Retain and Delete; a retention read back from the
#                 bucket as a lifecycle rule
#   uninstall     helm uninstall (its hook drains the brokers first) and the
#                 namespace's deletion complete with no finalizer patched,
#                 Retain journals stay in etcd until then, and a reinstall
#                 into a fresh namespace serves appends: of the previous
#                 chart (0.1.0, brokers as a StatefulSet, external etcd)
#   chart-upgrade helm upgrade of that release to this chart (brokers as a
#                 Deployment) under load at replication 3: the StatefulSet
#                 goes, its brokers drain at once; failed 0, lost 0
# Each prints one "e2e: <name>: ..." line; all of them again at the end.
#
# Needs docker, kind, kubectl, helm, envsubst and jq on PATH, and:
#   ETCD_IMAGE       an etcd 3.5+ image, repository:tag (the chart's etcd)
#   MINIO_IMAGE      the S3 server's image, for MINIO_MANIFEST
#   MINIO_MANIFEST   the S3 server: e2e/manifests/seaweedfs.yaml (default;
#                    SeaweedFS) or e2e/manifests/minio.yaml (MinIO, where
#                    its image can be pulled); both keep MinIO's names
#   E2E_AUTH         1 (default): the release runs with authorization
#                    tokens (values-kind-secure.yaml: Secret gazette-keys,
#                    made here with two random keys) and every client of
#                    the scenarios signs; 0: without. The previous chart's
#                    release (uninstall, chart-upgrade) runs without.
#   E2E_TLS          1 (default): the release serves mutual TLS
#                    (values-kind-tls.yaml: Secret gazette-tls, made here
#                    with openssl: a CA and one certificate for the pods'
#                    DNS names, the Service, localhost and 127.0.0.1) and
#                    every client presents the certificate; the chart's
#                    etcd serves clients and peers mutual TLS too (Secret
#                    gazette-etcd-tls, from the same CA); 0: plaintext.
#                    The previous chart's release runs without.
#   KIND_NODE_IMAGE  the node image for `kind create cluster --image`
#                    (default: kind's own, which is pulled)
#   EXTRA_IMAGES     local images to `kind load` into the nodes (space
#                    separated), e.g. the S3 server's
# An image is named by digest where it is pulled, or by a tag present in
# Docker or in the node image. On machines without a registry,
# scripts/images.sh builds all of them (and kind, kubectl, helm):
#   scripts/images.sh && eval "$(scripts/images.sh --print-env)" && e2e/run-kind.sh
# When no Docker engine answers, this script starts one through
# `scripts/images.sh --docker` (as root). KEEP=1 leaves the cluster up.
# The same scenarios run on local processes in e2e/run-local.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-gazette-c-e2e}
NS=gazette
REL=gz
GAZCTL=${GAZCTL:-build/bin/gazctl}
BROKERS_DEPLOY=$REL-gazette-c-broker
E2E_AUTH=${E2E_AUTH:-1}
AUTH_SECRET=gazette-keys
# The chart's values of the main release (install and rolling upgrade).
VALUES=(-f e2e/values-kind.yaml)
if [ "$E2E_AUTH" = 1 ]; then
	VALUES+=(-f e2e/values-kind-secure.yaml)
	# The keys (the first signs); gazctl on the host reads them from here.
	BROKER_AUTH_KEYS="$(head -c 32 /dev/urandom | base64 -w0),$(head -c 32 /dev/urandom | base64 -w0)"
	export BROKER_AUTH_KEYS
fi
E2E_TLS=${E2E_TLS:-1}
TLS_SECRET=gazette-tls ETCD_TLS_SECRET=gazette-etcd-tls
[ "$E2E_TLS" = 1 ] && VALUES+=(-f e2e/values-kind-tls.yaml)
PDB=$REL-gazette-c-broker
[ -x "$GAZCTL" ] || { echo "run-kind: no $GAZCTL (make first)" >&2; exit 2; }
: "${ETCD_IMAGE:?set ETCD_IMAGE to an etcd image (by digest, or a tag present locally)}"
: "${MINIO_IMAGE:?set MINIO_IMAGE to the S3 server image (by digest, or a tag present locally)}"
MINIO_MANIFEST=${MINIO_MANIFEST:-e2e/manifests/seaweedfs.yaml}
[ -f "$MINIO_MANIFEST" ] || { echo "run-kind: no manifest $MINIO_MANIFEST" >&2; exit 2; }
for t in docker kind kubectl helm envsubst jq; do
	command -v "$t" >/dev/null || { echo "run-kind: $t is needed" >&2; exit 2; }
done
if ! docker info >/dev/null 2>&1; then
	scripts/images.sh --docker >&2 || true
	docker info >/dev/null 2>&1 || { echo "run-kind: no Docker engine answers" >&2; exit 2; }
fi
# A command that fails outside a check says where (functions too: -E).
set -E
trap 'echo "e2e: FAIL: line $LINENO: $BASH_COMMAND (exit $?)" >&2' ERR
k() { kubectl -n "$NS" "$@"; }
log() { echo "e2e: $*" >&2; }
fail() { echo "e2e: FAIL: $*" >&2; exit 1; }
# wait_until SECONDS WHAT CMD...: polls CMD every 2 s.
wait_until() {
	local t=$1 what=$2
	shift 2
	for _ in $(seq 1 $((t / 2))); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 2
	done
	fail "timed out waiting for $what"
}
cleanup() { [ "${KEEP:-}" = 1 ] || kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true; }
trap cleanup EXIT

tmp=$(mktemp -d)
SUMMARY=$tmp/summary
: >"$SUMMARY"
# make_tls DIR: a CA (DIR/ca.*) and two certificates it signs, as
# cert-manager writes a Secret (ca.crt, tls.crt, tls.key), each for server
# and client use: the release's brokers' (DIR/brokers: every broker's
# advertised name *.$NS.pod.cluster.local, the broker Service as the
# operator and client pods dial it, localhost and 127.0.0.1 for gazctl in
# broker pods and the host through a port-forward) and its etcd's
# (DIR/etcd: the client Service; the members' names, which etcd checks a
# peer's address against by reverse lookup; brokers and operator present
# it as etcd clients).
make_tls() {
	local d=$1 svc=$REL-gazette-c-broker etcd=$REL-gazette-c-etcd
	mkdir -p "$d"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
		-subj /CN=gazette-e2e-ca -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
	issue_cert "$d" brokers "$svc" "DNS:*.$NS.pod.cluster.local,DNS:$svc,DNS:$svc.$NS,DNS:$svc.$NS.svc,DNS:$svc.$NS.svc.cluster.local,DNS:localhost,IP:127.0.0.1"
	issue_cert "$d" etcd "$etcd" "DNS:$etcd,DNS:$etcd.$NS,DNS:$etcd.$NS.svc,DNS:$etcd.$NS.svc.cluster.local,DNS:*.$etcd-headless.$NS.svc,DNS:*.$etcd-headless.$NS.svc.cluster.local,DNS:localhost,IP:127.0.0.1"
}
# issue_cert DIR NAME CN SANS: DIR/NAME/{tls.crt,tls.key,ca.crt} signed by DIR/ca.
issue_cert() {
	local d=$1 o=$1/$2
	mkdir -p "$o"
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$3" \
		-keyout "$o/tls.key" -out "$o/tls.csr" 2>/dev/null
	printf '%s\n' "subjectAltName=$4" "extendedKeyUsage=serverAuth,clientAuth" >"$o/ext"
	openssl x509 -req -in "$o/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
		-days 2 -extfile "$o/ext" -out "$o/tls.crt" 2>/dev/null
	cp "$d/ca.crt" "$o/ca.crt"
}
if [ "$E2E_TLS" = 1 ]; then
	make_tls "$tmp/tls"
	# gazctl on the host presents the brokers' certificate.
	export BROKER_TRUSTED_CA_FILE=$tmp/tls/brokers/ca.crt BROKER_CERT_FILE=$tmp/tls/brokers/tls.crt \
		BROKER_CERT_KEY_FILE=$tmp/tls/brokers/tls.key
fi
. e2e/scenarios.sh

# install_s3: into $NS, the S3 server and its bucket.
install_s3() {
	envsubst '${MINIO_IMAGE}' <"$MINIO_MANIFEST" | k apply -f - >/dev/null
	k rollout status deploy/minio --timeout=180s >/dev/null
	k wait --for=condition=complete job/minio-bucket --timeout=180s >/dev/null
}

# install_release: into $NS, the S3 server and its bucket, then the chart
# with its own etcd.
install_release() {
	install_s3
	if [ "$E2E_AUTH" = 1 ]; then
		k create secret generic "$AUTH_SECRET" --from-literal=auth-keys="$BROKER_AUTH_KEYS" >/dev/null
	fi
	if [ "$E2E_TLS" = 1 ]; then
		for c in "$TLS_SECRET:brokers" "$ETCD_TLS_SECRET:etcd"; do
			k create secret generic "${c%%:*}" --from-file="$tmp/tls/${c#*:}/tls.crt" \
				--from-file="$tmp/tls/${c#*:}/tls.key" --from-file="$tmp/tls/${c#*:}/ca.crt" >/dev/null
		done
	fi
	helm install "$REL" charts/gazette-c -n "$NS" "${VALUES[@]}" \
		--set "etcd.deploy.image.repository=${ETCD_IMAGE%:*}" --set "etcd.deploy.image.tag=${ETCD_IMAGE##*:}" \
		--wait --timeout 8m >/dev/null
}

evict() {
	kubectl create --raw "/api/v1/namespaces/$NS/pods/$1/eviction" -f - <<JSON
{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "$1", "namespace": "$NS"}}
JSON
}

# ---- install ----------------------------------------------------------------------
log "cluster"
t_start=$(date +%s)
kind create cluster --name "$CLUSTER" --config kind-config.yaml \
	${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 120s
# --wait covers the control plane only.
kubectl wait --for=condition=Ready node --all --timeout=180s
for i in ${EXTRA_IMAGES:-}; do
	kind load docker-image "$i" --name "$CLUSTER"
done
DOCKER_BUILDKIT=0 docker build -q -t gazette-c:e2e . >/dev/null
kind load docker-image gazette-c:e2e --name "$CLUSTER"
kubectl create namespace "$NS"
export ETCD_IMAGE MINIO_IMAGE
log "chart"
install_release
k apply -f e2e/journals.yaml >/dev/null
load_specs | k apply -f - >/dev/null
scenario_install_checks
# Brokers announced the zones of their nodes (pod label, downward API), and
# the allocator spread each journal's replicas over at least two of them.
wait_until 60 "replicas in two zones" sh -c "
	kubectl -n $NS exec $(a_broker) -- gazctl journals list -o json $(pod_flags) |
	jq -e '[.journals[] | [.route.members[].zone] | unique | length >= 2] | all'"

# Tokens are checked: in a broker pod, gazctl signs with the pod's
# BROKER_AUTH_KEYS; without them the same call is refused.
if [ "$E2E_AUTH" = 1 ]; then
	k exec "$(a_broker)" -- gazctl journals list $(pod_flags) >/dev/null ||
		fail "a signed list failed"
	if out=$(k exec "$(a_broker)" -- env -u BROKER_AUTH_KEYS gazctl journals list \
		$(pod_flags) 2>&1); then
		fail "an unsigned list was served: $out"
	fi
	echo "$out" | grep -q Authorization || fail "an unsigned list failed for another reason: $out"
	summary "auth: keys_from_secret=$AUTH_SECRET signed_list=ok unsigned_list=refused"
fi

# Mutual TLS: every route endpoint is an https:// pod DNS name (the
# brokers dialled each other by them to replicate); without a client
# certificate, or in plaintext, the same call is refused.
if [ "$E2E_TLS" = 1 ]; then
	eps=$(k exec "$(a_broker)" -- gazctl journals list -o json $(pod_flags) |
		jq -r '[.journals[].route.endpoints[]] | unique | .[]')
	[ -n "$eps" ] || fail "no route endpoints"
	for ep in $eps; do
		[[ $ep =~ ^https://[0-9]+-[0-9]+-[0-9]+-[0-9]+\.$NS\.pod\.cluster\.local:8080$ ]] ||
			fail "a broker advertises $ep, not its pod's https:// DNS name"
	done
	if out=$(k exec "$(a_broker)" -- timeout 30 gazctl journals list --broker.address https://localhost:8080 \
		--broker.trusted-ca-file "$TLS_DIR/ca.crt" 2>&1); then
		fail "a client without a certificate was served: $out"
	fi
	if out=$(k exec "$(a_broker)" -- timeout 30 gazctl journals list --broker.address http://localhost:8080 2>&1); then
		fail "a plaintext client was served: $out"
	fi
	summary "tls: secret=$TLS_SECRET endpoints=$(echo "$eps" | wc -l)x$(echo "$eps" | sed -n '1s|https://[^.]*|https://<pod>|p') no_client_cert=refused plaintext=refused"
	# The chart's etcd: brokers and operator reach it over https (they
	# run: the calls above went through their keyspaces); its members
	# replicate over peer TLS (all three are members); a client without
	# the certificate is refused.
	etcd_addr=$(k get "deploy/$BROKERS_DEPLOY" -o json |
		jq -r '.spec.template.spec.containers[0].env[] | select(.name == "ETCD_ADDRESS") | .value')
	[[ $etcd_addr == https://* ]] || fail "brokers dial etcd at $etcd_addr, not over TLS"
	etcd_pod=$REL-gazette-c-etcd-0 ed=/etc/gazette/etcd-tls
	members=$(k exec "$etcd_pod" -- etcdctl --endpoints https://127.0.0.1:2379 --cacert $ed/ca.crt --cert $ed/tls.crt \
		--key $ed/tls.key member list -w json | jq '[.members[] | select(.peerURLs[0] | startswith("https://"))] | length')
	[ "$members" = 3 ] || fail "etcd has $members members with https:// peer URLs, not 3"
	if out=$(k exec "$etcd_pod" -- etcdctl --endpoints https://127.0.0.1:2379 --cacert $ed/ca.crt \
		--command-timeout 10s member list 2>&1); then
		fail "etcd served a client without a certificate: $out"
	fi
	summary "etcd-tls: secret=$ETCD_TLS_SECRET brokers_dial=$etcd_addr https_peers=$members no_client_cert=refused"
fi

# ---- data ----------------------------------------------------------------------------
log "append"
for j in a b c; do
	seq 1 200000 | sed "s/^/e2e-$j /" >"$tmp/$j"
	k exec -i "$(a_broker)" -- gazctl journals append -l "name=e2e/$j" \
		$(pod_flags) <"$tmp/$j"
done
check_data() {
	local j
	for j in a c; do
		k exec "$(brokers | sed -n 2p | sed 's|pod/||')" -- gazctl journals read -l "name=e2e/$j" \
			$(pod_flags) >"$tmp/$j.read"
		cmp -s "$tmp/$j" "$tmp/$j.read" || fail "journal e2e/$j differs after $1"
	done
}
check_data "append"
summary "data: journals=3 bytes=$(cat "$tmp/a" "$tmp/b" "$tmp/c" | wc -c) read_back=identical"
scenario_status_offsets
scenario_host_port_forward
scenario_backfill

# ---- rolling upgrade ------------------------------------------------------------------
before=$(k get events --field-selector reason=Drained -o name | wc -l)
scenario_rolling_upgrade
after=$(k get events --field-selector reason=Drained -o name | wc -l)
[ $((after - before)) -ge 3 ] || fail "expected 3 Drained events, saw $((after - before))"
check_data "the rolling upgrade"

# ---- disruption budget ------------------------------------------------------------------
log "disruption budget"
wait_until 120 "PDB maxUnavailable 1" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.spec.maxUnavailable}')\" = 1 ]"
wait_until 60 "disruptionsAllowed 1" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.status.disruptionsAllowed}')\" = 1 ]"
# Evict one broker through the eviction API, then at once a second one:
# refused with 429 (Too Many Requests), as the first is still draining.
# (With a Deployment the replacement is up within seconds and a drain
# takes about as long, so the second try must not wait.)
first=$(a_broker)
second=$(brokers | sed 's|pod/||' | grep -v "^$first\$" | sed -n 1p)
evict "$first" >/dev/null
if out=$(evict "$second" 2>&1); then
	fail "a second eviction was allowed during a drain"
fi
echo "$out" | grep -q -i 'disruption budget\|429' || fail "second eviction failed for another reason: $out"
# The operator holds the budget at 0 while the drain runs.
seen0=no
for _ in $(seq 1 60); do
	[ "$(k get pdb "$PDB" -o jsonpath='{.spec.maxUnavailable}')" = 0 ] && { seen0=yes; break; }
	sleep 0.5
done
[ "$seen0" = yes ] || fail "the operator never held the budget at 0 during the drain"
k rollout status "deploy/$BROKERS_DEPLOY" --timeout=10m >/dev/null
wait_until 180 "PDB back to 1" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.spec.maxUnavailable}')\" = 1 ]"
check_data "an eviction"
summary "budget: maxUnavailable 1 -> 0 during a drain -> 1, second_eviction=refused"

# ---- under load: node drain, a killed broker, scaling ------------------------------------
scenario_node_drain
wait_until 180 "PDB back to 1" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.spec.maxUnavailable}')\" = 1 ]"
scenario_broker_killed
scenario_scale
check_data "the load scenarios"

# ---- operator ------------------------------------------------------------------------------
log "operator fail-over"
leader=$(k get lease "$REL-gazette-c-operator" -o jsonpath='{.spec.holderIdentity}')
k delete pod "$leader" --wait=false >/dev/null
wait_until 60 "a new Lease holder" \
	sh -c "h=\$(kubectl -n $NS get lease $REL-gazette-c-operator -o jsonpath='{.spec.holderIdentity}'); [ -n \"\$h\" ] && [ \"\$h\" != $leader ]"
summary "operator-failover: lease $leader -> $(k get lease "$REL-gazette-c-operator" -o jsonpath='{.spec.holderIdentity}')"
scenario_operator_policies
scenario_uninstall_reinstall
NS=$NS-again scenario_chart_upgrade

echo "e2e: summary ($(($(date +%s) - t_start)) s):" >&2
cat "$SUMMARY" >&2
rm -rf "$tmp"
log "PASS"

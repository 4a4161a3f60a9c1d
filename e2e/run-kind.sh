#!/usr/bin/env bash
# run-kind.sh - the e2e scenarios on a kind cluster with an S3 server:
#
#   1. install: etcd, the S3 server (+ bucket), the chart (3 brokers over
#      3 zones, 2 operator replicas with leader election); JournalSpecs
#      become Ready;
#   2. data: append to every journal, remember each journal's bytes;
#   3. rolling restart of the brokers: every old pod is drained (Events
#      DrainStarted/Drained, annotation gazette-c.dev/drain), the rollout
#      finishes, and every byte reads back the same;
#   4. disruption budget: maxUnavailable 1 and disruptionsAllowed 1 when
#      whole; 0 while a broker pod is draining; evicting a second broker
#      meanwhile is refused (429);
#   5. operator fail-over: deleting the leader hands the Lease over.
#
# Needs docker, kind, kubectl, helm, envsubst and jq on PATH, and:
#   ETCD_IMAGE       an etcd 3.5+ image
#   MINIO_IMAGE      the S3 server's image, for MINIO_MANIFEST
#   MINIO_MANIFEST   the S3 server: e2e/manifests/seaweedfs.yaml (default;
#                    SeaweedFS) or e2e/manifests/minio.yaml (MinIO, where
#                    its image can be pulled); both keep MinIO's names
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

# ---- 1. install ---------------------------------------------------------------
log "cluster"
kind create cluster --name "$CLUSTER" --config e2e/kind-config.yaml \
	${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 120s
# --wait covers the control plane only.
kubectl wait --for=condition=Ready node --all --timeout=180s
for i in ${EXTRA_IMAGES:-}; do
	kind load docker-image "$i" --name "$CLUSTER"
done
DOCKER_BUILDKIT=0 docker build -t gazette-c:e2e .
kind load docker-image gazette-c:e2e --name "$CLUSTER"
kubectl create namespace "$NS"
export ETCD_IMAGE MINIO_IMAGE
envsubst '${ETCD_IMAGE}' <e2e/manifests/etcd.yaml | k apply -f -
envsubst '${MINIO_IMAGE}' <"$MINIO_MANIFEST" | k apply -f -
k rollout status deploy/etcd --timeout=180s
k rollout status deploy/minio --timeout=180s
k wait --for=condition=complete job/minio-bucket --timeout=180s

log "chart"
helm install "$REL" charts/gazette-c -n "$NS" -f e2e/values-kind.yaml --wait --timeout 5m
BROKERS=$(k get sts -l app.kubernetes.io/component=broker -o jsonpath='{.items[0].metadata.name}')
PDB=$REL-gazette-c-broker
k apply -f e2e/journals.yaml
for j in e2e-a e2e-b e2e-c; do
	k wait --for=condition=Ready "journalspec/$j" --timeout=120s
done
# Brokers announced the zones of their nodes (pod label, downward API), and
# the allocator spread each journal's replicas over at least two of them.
wait_until 60 "replicas in two zones" sh -c "
	kubectl -n $NS exec $BROKERS-0 -- gazctl journals list -o json --broker.address http://localhost:8080 |
	jq -e '[.journals[] | [.route.members[].zone] | unique | length >= 2] | all'"

# ---- 2. data --------------------------------------------------------------------
log "append"
tmp=$(mktemp -d)
for j in a b c; do
	seq 1 200000 | sed "s/^/e2e-$j /" >"$tmp/$j"
	k exec -i "$BROKERS-0" -- gazctl journals append -l "name=e2e/$j" \
		--broker.address http://localhost:8080 <"$tmp/$j"
done
check_data() {
	local j
	for j in a b c; do
		k exec "$BROKERS-1" -- gazctl journals read -l "name=e2e/$j" \
			--broker.address http://localhost:8080 >"$tmp/$j.read"
		cmp -s "$tmp/$j" "$tmp/$j.read" || fail "journal e2e/$j differs after $1"
	done
}
check_data "append"

# ---- 3. rolling restart: each broker drains ------------------------------------
log "rolling restart"
before=$(k get events --field-selector reason=Drained -o name | wc -l)
k rollout restart "sts/$BROKERS"
k rollout status "sts/$BROKERS" --timeout=15m
after=$(k get events --field-selector reason=Drained -o name | wc -l)
[ $((after - before)) -ge 3 ] || fail "expected 3 Drained events, saw $((after - before))"
[ "$(k get events --field-selector reason=DrainStarted -o name | wc -l)" -ge 3 ] ||
	fail "expected DrainStarted events"
check_data "the rolling restart"

# ---- 4. disruption budget ----------------------------------------------------------
log "disruption budget"
wait_until 60 "PDB maxUnavailable 1" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.spec.maxUnavailable}')\" = 1 ]"
wait_until 60 "disruptionsAllowed 1" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.status.disruptionsAllowed}')\" = 1 ]"
# Evict one broker through the eviction API, then try a second one while
# the first drains: refused with 429 (Too Many Requests).
evict() {
	kubectl create --raw "/api/v1/namespaces/$NS/pods/$1/eviction" -f - <<JSON
{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "$1", "namespace": "$NS"}}
JSON
}
evict "$BROKERS-0"
wait_until 30 "PDB maxUnavailable 0 during the drain" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.spec.maxUnavailable}')\" = 0 ]"
wait_until 30 "disruptionsAllowed 0" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.status.disruptionsAllowed}')\" = 0 ]"
if out=$(evict "$BROKERS-1" 2>&1); then
	fail "a second eviction was allowed during a drain"
fi
echo "$out" | grep -q -i 'disruption budget\|429' || fail "second eviction failed for another reason: $out"
k rollout status "sts/$BROKERS" --timeout=10m
wait_until 120 "PDB back to 1" \
	sh -c "[ \"\$(kubectl -n $NS get pdb $PDB -o jsonpath='{.spec.maxUnavailable}')\" = 1 ]"
check_data "an eviction"

# ---- 5. operator fail-over -------------------------------------------------------------
log "operator fail-over"
leader=$(k get lease "$REL-gazette-c-operator" -o jsonpath='{.spec.holderIdentity}')
k delete pod "$leader" --wait=false
wait_until 60 "a new Lease holder" \
	sh -c "h=\$(kubectl -n $NS get lease $REL-gazette-c-operator -o jsonpath='{.spec.holderIdentity}'); [ -n \"\$h\" ] && [ \"\$h\" != $leader ]"
k apply -f - <<'YAML'
apiVersion: gazette-c.dev/v1alpha1
kind: JournalSpec
metadata: {name: e2e-d}
spec:
  name: e2e/d
  replication: 2
  fragment:
    stores: ["s3://fragments/e2e/?endpoint=http%3A%2F%2Fminio%3A9000&region=us-east-1"]
    refreshInterval: 10s
YAML
k wait --for=condition=Ready journalspec/e2e-d --timeout=120s
rm -rf "$tmp"
log "PASS"

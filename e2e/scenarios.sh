# scenarios.sh - the e2e scenarios under load, sourced by e2e/run-kind.sh
# once the chart is installed. Each prints one summary line "e2e: <name>:
# ..." (collected at the end by run-kind.sh) and fails the run with what
# went wrong.
#
# The load is gazload (client/gazload) in a pod on the control-plane node
# (never drained or deleted here): it appends to LOAD_JOURNALS at
# replication 3 through the broker Service, and when told to stop reads
# every journal back and checks each acknowledged record at its offsets.
#
# Expects from run-kind.sh: NS, REL, k (kubectl -n $NS), log, fail,
# wait_until, SUMMARY (a file the summary lines are appended to),
# BROKERS_DEPLOY (the broker Deployment's name), GAZCTL (gazctl on the
# host), VALUES (the chart's -f options of the main release), AUTH_SECRET
# (the Secret of the keys, where the release in $NS verifies tokens; gazctl
# on the host takes them from BROKER_AUTH_KEYS, gazctl in broker pods
# from the pods' own BROKER_AUTH_KEYS), TLS_SECRET (the Secret of the
# certificates, where the release in $NS serves mutual TLS; gazctl on the
# host takes its files from BROKER_TRUSTED_CA_FILE, BROKER_CERT_FILE and
# BROKER_CERT_KEY_FILE, client pods mount the Secret).

LOAD_JOURNALS=$(seq -f 'e2e/load-%02g' 0 9 | paste -sd, -)
# Where the release's Secret mounts in pods (the chart's tlsDir).
TLS_DIR=/etc/gazette/tls
STORE='s3://fragments/e2e/?endpoint=http%3A%2F%2Fminio%3A9000&region=us-east-1'
S3_AUTH='--aws-sigv4 aws:amz:us-east-1:s3 --user gazette-e2e:gazette-e2e-secret' # e2e/manifests

summary() { # summary LINE: print it and keep it for the end of the run
	echo "e2e: $*" >&2
	echo "e2e: $*" >>"$SUMMARY"
}

# kv FIELD LINE: the value of FIELD=value in a gazload summary line.
kv() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# journal_spec CR JOURNAL REPLICATION [SPEC_FIELDS [FRAGMENT_FIELDS]]: a
# JournalSpec on the e2e bucket; the optional arguments are flow-style
# fields ("deletionPolicy: Delete", "retention: 72h, length: 1048576").
journal_spec() {
	cat <<YAML
apiVersion: gazette-c.dev/v1alpha1
kind: JournalSpec
metadata: {name: $1}
spec: {name: $2, replication: $3${4:+, $4},
       fragment: {stores: ["$STORE"], refreshInterval: 10s${5:+, $5}}}
---
YAML
}

load_specs() {
	local j i=0
	for j in ${LOAD_JOURNALS//,/ }; do
		journal_spec "e2e-load-$i" "$j" 3 "" "length: 262144, flushInterval: 1m"
		i=$((i + 1))
	done
}

# tls_on: whether the release in $NS serves TLS (its Secret is there).
tls_on() { k get secret "$TLS_SECRET" >/dev/null 2>&1; }

# broker_url: the broker Service, as client pods dial it.
broker_url() {
	if tls_on; then echo "https://$REL-gazette-c-broker:8080"; else echo "http://$REL-gazette-c-broker:8080"; fi
}

# tls_flags: a client's TLS files in a pod that mounts the Secret at
# TLS_DIR (broker pods do), or nothing without TLS.
tls_flags() {
	! tls_on || echo "--broker.trusted-ca-file $TLS_DIR/ca.crt --broker.cert-file $TLS_DIR/tls.crt" \
		"--broker.cert-key-file $TLS_DIR/tls.key"
}

# pod_flags: gazctl's flags in a broker pod for the broker it runs beside.
pod_flags() {
	if tls_on; then echo "--broker.address https://localhost:8080 $(tls_flags)"; else echo "--broker.address http://localhost:8080"; fi
}

# pod_curl: curl's options and the base URL of the broker beside it.
pod_curl() {
	if tls_on; then
		echo "--cacert $TLS_DIR/ca.crt --cert $TLS_DIR/tls.crt --key $TLS_DIR/tls.key https://localhost:8080"
	else
		echo "http://localhost:8080"
	fi
}

# client_env_json: the env entries giving a client pod the release's keys
# (BROKER_AUTH_KEYS from AUTH_SECRET) and TLS files (BROKER_TRUSTED_CA_FILE,
# BROKER_CERT_FILE and BROKER_CERT_KEY_FILE under TLS_DIR, see
# client_tls_json), as a JSON list; [] where the release in $NS has neither.
client_env_json() {
	local env=()
	if k get secret "$AUTH_SECRET" >/dev/null 2>&1; then
		env+=("{\"name\": \"BROKER_AUTH_KEYS\", \"valueFrom\": {\"secretKeyRef\": {\"name\": \"$AUTH_SECRET\", \"key\": \"auth-keys\"}}}")
	fi
	if tls_on; then
		env+=("{\"name\": \"BROKER_TRUSTED_CA_FILE\", \"value\": \"$TLS_DIR/ca.crt\"}"
			"{\"name\": \"BROKER_CERT_FILE\", \"value\": \"$TLS_DIR/tls.crt\"}"
			"{\"name\": \"BROKER_CERT_KEY_FILE\", \"value\": \"$TLS_DIR/tls.key\"}")
	fi
	(IFS=,; echo "[${env[*]}]")
}

# client_tls_json FIELD: a client pod's volume ("volumes") or mount
# ("volumeMounts") of TLS_SECRET at TLS_DIR, as a JSON list; [] without TLS.
client_tls_json() {
	if ! tls_on; then
		echo "[]"
	elif [ "$1" = volumes ]; then
		echo "[{\"name\": \"tls\", \"secret\": {\"secretName\": \"$TLS_SECRET\"}}]"
	else
		echo "[{\"name\": \"tls\", \"mountPath\": \"$TLS_DIR\", \"readOnly\": true}]"
	fi
}

# load_start NAME: a gazload pod appending to LOAD_JOURNALS (signing with
# the release's keys where it has them).
load_start() {
	k apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: gazload-$1
  labels: {app.kubernetes.io/name: gazload}
spec:
  restartPolicy: Never
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  tolerations: [{operator: Exists}]
  containers:
    - name: gazload
      image: gazette-c:e2e
      imagePullPolicy: Never
      command: [gazload, --broker.address, "$(broker_url)", --journals, "$LOAD_JOURNALS",
                --size, "256", --pause, 10ms, --until-file, /work/stop, --stop-grace, 120s]
      env: $(client_env_json | jq -c '[{name: "LOG_LEVEL", value: "warn"}] + .')
      volumeMounts: $(client_tls_json volumeMounts | jq -c '[{name: "work", mountPath: "/work"}] + .')
  volumes: $(client_tls_json volumes | jq -c '[{name: "work", emptyDir: {}}] + .')
YAML
	k wait --for=condition=Ready "pod/gazload-$1" --timeout=120s >/dev/null
}

# load_stop NAME: stops the pod's appends, waits for its read-back and
# prints its summary line (it must show failed, unfinished and lost 0).
load_stop() {
	local line phase
	k exec "gazload-$1" -- sh -c 'touch /work/stop'
	wait_until 600 "gazload-$1 to verify" sh -c "
		p=\$(kubectl -n $NS get pod gazload-$1 -o jsonpath='{.status.phase}');
		[ \"\$p\" = Succeeded ] || [ \"\$p\" = Failed ]"
	phase=$(k get pod "gazload-$1" -o jsonpath='{.status.phase}')
	line=$(k logs "gazload-$1" | grep '^gazload: ' || true)
	[ -n "$line" ] || fail "gazload-$1 printed no summary: $(k logs "gazload-$1" | tail -20)"
	k delete pod "gazload-$1" --wait=false >/dev/null
	LOAD_LINE=${line#gazload: }
	[ "$phase" = Succeeded ] && [ "$(kv failed "$line")" = 0 ] && [ "$(kv lost "$line")" = 0 ] &&
		[ "$(kv unfinished "$line")" = 0 ] || fail "load during $1: $line ($(k logs "gazload-$1" | grep -v '^gazload: ' | tail -5))"
}

# The appends' part of a summary line.
load_fields() {
	echo "appends attempted=$(kv attempted "$LOAD_LINE") acknowledged=$(kv acknowledged "$LOAD_LINE")" \
		"failed=$(kv failed "$LOAD_LINE") bytes_verified=$(kv verified_bytes "$LOAD_LINE")" \
		"lost=$(kv lost "$LOAD_LINE") longest_append_ms=$(kv max_append_ms "$LOAD_LINE")"
}

brokers() { k get pods -l app.kubernetes.io/component=broker --field-selector=status.phase=Running -o name; }
# (sed -n, not head: a reader that stops early fails the pipe under pipefail)
a_broker() { brokers | sed -n '1s|pod/||p'; }

# drain_seconds SINCE: per broker pod, DrainStarted to Drained (operator
# Events) after SINCE (RFC 3339), as "pod:s,pod:s".
drain_seconds() {
	k get events -o json | jq -r --arg since "$1" '
		[.items[] | select(.reason == "DrainStarted" or .reason == "Drained")
		 | select((.lastTimestamp // .eventTime) >= $since)
		 | {pod: .involvedObject.name, reason, t: ((.lastTimestamp // .eventTime) | sub("\\.[0-9]+"; "") | fromdate)}]
		| group_by(.pod)
		| map({pod: .[0].pod, s: ((map(select(.reason == "Drained")) | .[0].t) - (map(select(.reason == "DrainStarted")) | .[0].t))})
		| map(select(.s != null) | "\(.pod | sub(".*-"; "")):\(.s)s") | join(",")'
}

now_rfc3339() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# ---- rolling upgrade ----------------------------------------------------------------

scenario_rolling_upgrade() {
	local since t0 rollout_s
	log "rolling upgrade under load"
	DOCKER_BUILDKIT=0 docker build -q --label "gazette-c.e2e.build=$(date +%s)" -t gazette-c:e2e-upgrade . >/dev/null
	kind load docker-image gazette-c:e2e-upgrade --name "$CLUSTER" >/dev/null
	load_start upgrade
	sleep 10
	since=$(now_rfc3339)
	t0=$(date +%s)
	helm upgrade "$REL" charts/gazette-c -n "$NS" "${VALUES[@]}" --set image.tag=e2e-upgrade \
		--wait --timeout 15m >/dev/null
	k rollout status "deploy/$BROKERS_DEPLOY" --timeout=15m >/dev/null
	rollout_s=$(($(date +%s) - t0))
	[ "$(k get deploy "$BROKERS_DEPLOY" -o jsonpath='{.spec.template.spec.containers[0].image}')" = gazette-c:e2e-upgrade ] ||
		fail "the brokers did not move to the rebuilt image"
	sleep 10
	load_stop upgrade
	summary "rolling-upgrade: $(load_fields) drain=$(drain_seconds "$since") rollout_s=$rollout_s"
}

# ---- node drain -----------------------------------------------------------------------

scenario_node_drain() {
	local node victim other out p
	log "kubectl drain of a worker under load"
	victim=$(a_broker)
	node=$(k get pod "$victim" -o jsonpath='{.spec.nodeName}')
	load_start drain
	sleep 5
	other=
	for p in $(brokers | sed 's|pod/||'); do
		[ -z "$other" ] && [ "$(k get pod "$p" -o jsonpath='{.spec.nodeName}')" != "$node" ] && other=$p
	done
	kubectl drain "$node" --ignore-daemonsets --delete-emptydir-data --timeout=10m >"$tmp/drain.log" 2>&1 &
	local dpid=$!
	# As soon as the drain has evicted its broker, a second broker may not
	# be evicted.
	local i
	for i in $(seq 1 600); do
		[ -n "$(k get pod "$victim" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null)" ] && break
		sleep 0.2
	done
	[ "$i" -lt 600 ] || fail "kubectl drain did not evict $victim"
	if out=$(evict "$other" 2>&1); then
		fail "a second eviction was allowed while a broker drained"
	fi
	echo "$out" | grep -q -i 'disruption budget\|429' || fail "second eviction failed otherwise: $out"
	wait "$dpid" || fail "kubectl drain failed: $(tail -5 "$tmp/drain.log")"
	kubectl uncordon "$node" >/dev/null
	k rollout status "deploy/$BROKERS_DEPLOY" --timeout=10m >/dev/null
	sleep 5
	load_stop drain
	summary "node-drain: $(load_fields) node=$node second_eviction=refused"
}

# ---- a broker killed -------------------------------------------------------------------

scenario_broker_killed() {
	local victim
	log "broker pod deleted with --grace-period=0 under load"
	load_start kill
	sleep 5
	victim=$(a_broker)
	k delete pod "$victim" --grace-period=0 --force >/dev/null 2>&1
	k rollout status "deploy/$BROKERS_DEPLOY" --timeout=10m >/dev/null
	sleep 15
	load_stop kill
	summary "broker-killed: $(load_fields) pod=$victim"
}

# ---- scale 3 -> 5 -> 3 -------------------------------------------------------------------

# replicas_per_broker: "n,n,n..." journal replicas each running broker holds.
replicas_per_broker() {
	k exec "$(a_broker)" -- gazctl journals list -o json $(pod_flags) |
		jq -r '[.journals[] | .route.members[] | .suffix] | group_by(.) | map(length) | sort | map(tostring) | join(",")'
}

scenario_scale() {
	local spread
	log "brokers scaled 3 -> 5 -> 3 under load"
	load_start scale
	sleep 5
	k scale "deploy/$BROKERS_DEPLOY" --replicas=5 >/dev/null
	k rollout status "deploy/$BROKERS_DEPLOY" --timeout=10m >/dev/null
	wait_until 180 "journals spread over five brokers" sh -c "
		[ \"\$(kubectl -n $NS exec $(a_broker) -- gazctl journals list -o json $(pod_flags) |
		      jq '[.journals[] | .route.members[] | .suffix] | unique | length')\" = 5 ]"
	spread=$(replicas_per_broker)
	k scale "deploy/$BROKERS_DEPLOY" --replicas=3 >/dev/null
	wait_until 600 "three brokers again" sh -c "
		[ \"\$(kubectl -n $NS get pods -l app.kubernetes.io/component=broker -o name | wc -l)\" = 3 ]"
	k rollout status "deploy/$BROKERS_DEPLOY" --timeout=10m >/dev/null
	sleep 10
	load_stop scale
	summary "scale-3-5-3: $(load_fields) replicas_on_5=$spread replicas_on_3=$(replicas_per_broker)"
}

# ---- install ----------------------------------------------------------------------------

# journal_status NAME FIELD: a JournalSpec's status field.
journal_status() { k get journalspec "$1" -o jsonpath="{.status.$2}"; }

scenario_install_checks() {
	local pods specs j
	log "install: pods and JournalSpecs"
	k wait --for=condition=Ready pod -l "app.kubernetes.io/instance=$REL" --timeout=300s >/dev/null
	pods=$(k get pods -l "app.kubernetes.io/instance=$REL" -o name | wc -l)
	specs=$(k get journalspec -o name | wc -l)
	for j in $(k get journalspec -o jsonpath='{.items[*].metadata.name}'); do
		k wait --for=condition=Ready "journalspec/$j" --timeout=120s >/dev/null
		# Ready means synced into etcd; the route follows once the
		# allocator has assigned it (the operator reports it at its next
		# look, on the assignment's change or the resync).
		wait_until 120 "a primary and replicas in the status of $j" sh -c "
			[ -n \"\$(kubectl -n $NS get journalspec $j -o jsonpath='{.status.primary}')\" ] &&
			[ \"\$(kubectl -n $NS get journalspec $j -o jsonpath='{.status.replicas}' | jq length)\" -ge 1 ]"
	done
	summary "install: pods_ready=$pods journalspecs_ready=$specs etcd_members=$(k get pods -l app.kubernetes.io/component=etcd -o name | wc -l)"
}

# After appends: write head and persisted offsets show in status.
scenario_status_offsets() {
	local j=e2e-a head
	wait_until 120 "writeHead and persistedThrough of $j" sh -c "
		h=\$(kubectl -n $NS get journalspec $j -o jsonpath='{.status.writeHead}');
		p=\$(kubectl -n $NS get journalspec $j -o jsonpath='{.status.persistedThrough}');
		[ -n \"\$h\" ] && [ \"\$h\" -gt 0 ] && [ -n \"\$p\" ] && [ \"\$p\" -gt 0 ]"
	head=$(journal_status $j writeHead)
	summary "status: $j writeHead=$head persistedThrough=$(journal_status $j persistedThrough) primary=$(journal_status $j primary)"
}

# ---- append and read from the host through a port-forward -------------------------------

scenario_host_port_forward() {
	local pf port=18080 in="$tmp/host.in" out="$tmp/host.out" pod_out="$tmp/host.pod" url curl_tls=()
	log "append and read from the host through a port-forward"
	k port-forward "svc/$REL-gazette-c-broker" "$port:8080" >"$tmp/pf.log" 2>&1 &
	pf=$!
	# Under TLS the host's gazctl takes its files from BROKER_TRUSTED_CA_FILE,
	# BROKER_CERT_FILE and BROKER_CERT_KEY_FILE (run-kind.sh's); the
	# certificate names 127.0.0.1.
	url="http://127.0.0.1:$port"
	if tls_on; then
		url="https://127.0.0.1:$port"
		curl_tls=(--cacert "$BROKER_TRUSTED_CA_FILE" --cert "$BROKER_CERT_FILE" --key "$BROKER_CERT_KEY_FILE")
	fi
	wait_until 30 "the port-forward" curl -sf "${curl_tls[@]}" "$url/debug/ready"
	seq 1 50000 | sed 's/^/host /' >"$in"
	"$GAZCTL" journals append -l name=e2e/b --broker.address "$url" <"$in" ||
		fail "append through the port-forward failed"
	"$GAZCTL" journals read -l name=e2e/b --broker.address "$url" >"$out" ||
		fail "read through the port-forward failed"
	k exec "$(a_broker)" -- gazctl journals read -l name=e2e/b $(pod_flags) >"$pod_out"
	kill "$pf" 2>/dev/null || true
	# e2e/b held earlier appends too: the host's bytes are its tail.
	[ "$(tail -c "$(wc -c <"$in")" "$out" | sha256sum)" = "$(sha256sum <"$in")" ] ||
		fail "bytes read on the host differ from those appended"
	cmp -s "$out" "$pod_out" || fail "the host and a pod read e2e/b differently"
	summary "host-port-forward: appended_bytes=$(wc -c <"$in") read_on_host_bytes=$(wc -c <"$out") identical_in_pod=yes"
}

# ---- backfill straight from the bucket ------------------------------------------------------

# store_bytes_served: the brokers' gazette_read_served_bytes_total{source="store"}, summed.
store_bytes_served() {
	local p n=0 v
	for p in $(brokers | sed 's|pod/||'); do
		v=$(k exec "$p" -- curl -sf $(pod_curl)/debug/metrics |
			sed -n 's/^gazette_read_served_bytes_total{source="store"} \([0-9.e+]*\)$/\1/p')
		n=$(awk -v a="$n" -v b="${v:-0}" 'BEGIN { printf "%d", a + b }')
	done
	echo "$n"
}

scenario_backfill() {
	local hist="$tmp/backfill.hist" tail_="$tmp/backfill.tail" before after got f
	log "backfill from the bucket onto the live tail"
	journal_spec e2e-backfill e2e/backfill 3 "" "length: 1048576" | k apply -f - >/dev/null
	k wait --for=condition=Ready journalspec/e2e-backfill --timeout=120s >/dev/null
	seq 1 900000 | sed 's/^/history /' >"$hist"  # about 12 MB: a dozen fragments
	split -b 1000000 "$hist" "$tmp/backfill.part."
	for f in "$tmp"/backfill.part.*; do
		k exec -i "$(a_broker)" -- gazctl journals append -l name=e2e/backfill \
			$(pod_flags) <"$f" >/dev/null
	done
	wait_until 180 "the history persisted" sh -c "
		[ \"\$(kubectl -n $NS get journalspec e2e-backfill -o jsonpath='{.status.persistedThrough}')\" -ge $(($(wc -c <"$hist") - 1000000)) ]"
	seq 1 2000 | sed 's/^/tail /' >"$tail_"  # stays in the spools
	k exec -i "$(a_broker)" -- gazctl journals append -l name=e2e/backfill \
		$(pod_flags) <"$tail_" >/dev/null
	before=$(store_bytes_served)
	# gazctl reads directly (signed URLs) with a route cache, as Gazette's.
	k run e2e-backfill-reader --restart=Never --image=gazette-c:e2e --image-pull-policy=Never --override-type=strategic \
		--overrides="{\"spec\": {\"nodeSelector\": {\"node-role.kubernetes.io/control-plane\": \"\"}, \"tolerations\": [{\"operator\": \"Exists\"}],
			\"volumes\": $(client_tls_json volumes),
			\"containers\": [{\"name\": \"e2e-backfill-reader\", \"env\": $(client_env_json),
				\"volumeMounts\": $(client_tls_json volumeMounts)}]}}" \
		--command -- sh -c "gazctl journals read -l name=e2e/backfill --broker.cache.size 64 \
			--broker.address $(broker_url) | sha256sum" >/dev/null
	wait_until 300 "the backfill reader" sh -c "
		[ \"\$(kubectl -n $NS get pod e2e-backfill-reader -o jsonpath='{.status.phase}')\" = Succeeded ]"
	got=$(k logs e2e-backfill-reader | awk '{print $1}')
	k delete pod e2e-backfill-reader --wait=false >/dev/null
	after=$(store_bytes_served)
	[ "$got" = "$(cat "$hist" "$tail_" | sha256sum | awk '{print $1}')" ] ||
		fail "the backfill read other bytes than appended"
	# The brokers served the tail from their spools; the history came
	# from the bucket, not through them.
	[ $((after - before)) -lt 1000000 ] || fail "brokers proxied $((after - before)) bytes of history"
	summary "backfill: bytes=$(($(wc -c <"$hist") + $(wc -c <"$tail_"))) history_bytes=$(wc -c <"$hist") tail_bytes=$(wc -c <"$tail_") brokers_store_bytes=$((after - before)) identical=yes"
}

# ---- operator: deletion policies and retention -------------------------------------------

# curl's SigV4 signs the query as written: a prefix must be percent-encoded
# and a bare subresource written "?lifecycle=" for the server's signature
# to match.
bucket_list() { # bucket_list PREFIX: object keys under it, one per line
	k exec "$(a_broker)" -- sh -c "curl -sf $S3_AUTH 'http://minio:9000/fragments?list-type=2&prefix=${1//\//%2F}'" |
		{ grep -o '<Key>[^<]*</Key>' || true; } | sed 's/<[^>]*>//g'
}

scenario_operator_policies() {
	local keys rules j
	log "operator: deletion policies and retention"
	{
		journal_spec e2e-retain e2e/retain 2
		journal_spec e2e-delete e2e/delete 2 "deletionPolicy: Delete"
		journal_spec e2e-retention e2e/retention 2 "" "retention: 72h"
	} | k apply -f - >/dev/null
	for j in e2e-retain e2e-delete e2e-retention; do
		k wait --for=condition=Ready "journalspec/$j" --timeout=120s >/dev/null
	done
	for j in retain delete; do
		seq 1 20000 | sed "s/^/$j /" | k exec -i "$(a_broker)" -- gazctl journals append \
			-l "name=e2e/$j" $(pod_flags) >/dev/null
	done
	k delete journalspec e2e-retain e2e-delete --timeout=180s >/dev/null
	k exec "$(a_broker)" -- gazctl journals list -l name=e2e/retain $(pod_flags) |
		grep e2e/retain >/dev/null || fail "a Retain journal left etcd"
	if k exec "$(a_broker)" -- gazctl journals list -l name=e2e/delete $(pod_flags) |
		grep e2e/delete >/dev/null; then
		fail "a Delete journal stayed in etcd"
	fi
	# The store is s3://fragments/e2e/: fragments under e2e/<journal>/.
	keys=$(bucket_list e2e/e2e/delete/ | wc -l)
	[ "$keys" -ge 1 ] || fail "the Delete journal's bytes were not persisted before it went"
	# Retention 72h -> a lifecycle rule on the bucket, read back from it.
	wait_until 120 "the lifecycle rule" sh -c "kubectl -n $NS exec $(a_broker) -- sh -c \
		\"curl -sf $S3_AUTH 'http://minio:9000/fragments?lifecycle='\" | grep e2e/retention/ >/dev/null"
	rules=$(k exec "$(a_broker)" -- sh -c "curl -sf $S3_AUTH 'http://minio:9000/fragments?lifecycle='" |
		{ grep -o '<Days>[0-9]*</Days>' || true; } | sed -n '1s/<[^>]*>//gp')
	[ "$rules" = 3 ] || fail "lifecycle rule expires after ${rules:-?} days, not 3"
	summary "operator-policies: retain=kept_in_etcd delete=removed_after_persisting(${keys} fragments) retention_72h=lifecycle_rule_days_$rules"
}

# ---- uninstall and reinstall ----------------------------------------------------------------

scenario_uninstall_reinstall() {
	local t0 ns2="$NS-again"
	log "uninstall and reinstall"
	# Retain (the default) keeps the journals in etcd when their CRs go.
	k delete journalspec --all --timeout=300s >/dev/null
	k exec "$(a_broker)" -- gazctl journals list -l name=e2e/a $(pod_flags) |
		grep e2e/a >/dev/null || fail "Retain journals left etcd with their CRs"
	t0=$(date +%s)
	# The chart's pre-delete hook drains the brokers while the operator
	# still runs; then everything goes, and so does the namespace, with
	# nothing left under a finalizer.
	helm uninstall "$REL" -n "$NS" --wait --timeout 15m >/dev/null || fail "helm uninstall failed"
	local uninstall_s=$(($(date +%s) - t0))
	[ -z "$(k get pods -l app.kubernetes.io/component=broker -o name)" ] || fail "broker pods left after uninstall"
	kubectl delete namespace "$NS" --timeout=10m >/dev/null || fail "the namespace did not go"
	local gone_s=$(($(date +%s) - t0))
	kubectl create namespace "$ns2" >/dev/null
	# The reinstall is of the previous chart, which chart-upgrade then
	# upgrades to this one.
	NS=$ns2 install_previous_release
	NS=$ns2 k apply -f e2e/journals.yaml >/dev/null
	NS=$ns2 k wait --for=condition=Ready journalspec/e2e-a --timeout=180s >/dev/null
	# (The previous chart's release: plain HTTP, no tokens.)
	echo reinstalled | NS=$ns2 k exec -i "$(NS=$ns2 a_broker)" -- gazctl journals append -l name=e2e/a \
		--broker.address http://localhost:8080 >/dev/null
	summary "uninstall: helm_uninstall_s=$uninstall_s namespace_gone_s=$gone_s finalizers_patched=0 retain_kept=yes reinstall_in=$ns2 chart=$PREV_CHART_VERSION appended=ok"
}

# ---- upgrade from the previous chart ----------------------------------------------------

# The previous chart as released: 0.1.0, brokers as a StatefulSet (pods
# <release>-gazette-c-broker-<n>), etcd outside the chart.
PREV_CHART=e2e/charts/gazette-c-0.1.0.tgz
PREV_CHART_VERSION=0.1.0

# install_previous_release: into $NS, the S3 server, a 3-member etcd (this
# chart's etcd StatefulSet rendered as release "ext" and applied, so it
# belongs to neither release) and the previous chart on it.
install_previous_release() {
	install_s3
	helm template ext charts/gazette-c -n "$NS" -f e2e/values-kind.yaml \
		--set "etcd.deploy.image.repository=${ETCD_IMAGE%:*}" --set "etcd.deploy.image.tag=${ETCD_IMAGE##*:}" \
		--show-only templates/etcd-statefulset.yaml | k apply -f - >/dev/null
	k rollout status statefulset/ext-gazette-c-etcd --timeout=300s >/dev/null
	helm install "$REL" "$PREV_CHART" -n "$NS" -f e2e/values-kind-0.1.yaml --wait --timeout 8m >/dev/null
	[ "$(helm get metadata "$REL" -n "$NS" -o json | jq -r .version)" = "$PREV_CHART_VERSION" ] ||
		fail "the release in $NS is not chart $PREV_CHART_VERSION"
	k get statefulset "$REL-gazette-c-broker" >/dev/null || fail "chart $PREV_CHART_VERSION made no broker StatefulSet"
}

# scenario_chart_upgrade: in $NS (install_previous_release's), helm upgrade
# to this chart under load at replication 3. Helm creates the broker
# Deployment and deletes the StatefulSet in the one step, so its three
# brokers get SIGTERM together while the new ones start: they hand their
# journals over and exit (README, "Upgrading from chart 0.1").
scenario_chart_upgrade() {
	local since t0 upgrade_s old version
	log "upgrade from chart $PREV_CHART_VERSION under load"
	load_specs | k apply -f - >/dev/null
	for i in $(seq 0 9); do
		k wait --for=condition=Ready "journalspec/e2e-load-$i" --timeout=180s >/dev/null
	done
	old=$(k get pods -l app.kubernetes.io/component=broker -o name | sed 's|pod/||' | sort | paste -sd, -)
	load_start chart-upgrade
	sleep 10
	since=$(now_rfc3339)
	t0=$(date +%s)
	helm upgrade "$REL" charts/gazette-c -n "$NS" -f e2e/values-kind.yaml \
		--set etcd.deploy.enabled=false --set etcd.address=http://ext-gazette-c-etcd:2379 \
		--wait --timeout 15m >/dev/null
	k rollout status "deploy/$BROKERS_DEPLOY" --timeout=15m >/dev/null
	wait_until 600 "the StatefulSet's brokers to exit" \
		sh -c "[ -z \"\$(kubectl -n $NS get pods -o name | grep -E '/$REL-gazette-c-broker-[0-9]+\$')\" ]"
	upgrade_s=$(($(date +%s) - t0))
	! k get statefulset "$REL-gazette-c-broker" >/dev/null 2>&1 || fail "the broker StatefulSet is still there"
	version=$(helm get metadata "$REL" -n "$NS" -o json | jq -r .version)
	sleep 10
	load_stop chart-upgrade
	# What the reinstall appended under the previous chart reads back.
	[ "$(k exec "$(a_broker)" -- gazctl journals read -l name=e2e/a $(pod_flags))" = reinstalled ] ||
		fail "e2e/a does not read back after the chart upgrade"
	summary "chart-upgrade: from=$PREV_CHART_VERSION to=$version $(load_fields) statefulset_brokers=$old drain=$(drain_seconds "$since") upgrade_s=$upgrade_s"
}

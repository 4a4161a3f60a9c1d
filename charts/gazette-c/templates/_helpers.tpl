{{/* Names and labels shared by every template. */}}

{{- define "gazette-c.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gazette-c.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gazette-c.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gazette-c.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gazette-c.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Broker pods: the operator's --brokers.selector and the PDB's matchLabels. */}}
{{- define "gazette-c.brokerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "gazette-c.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: broker
{{- end -}}

{{- define "gazette-c.brokerSelector" -}}
{{- printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s,app.kubernetes.io/component=broker" (include "gazette-c.name" .) .Release.Name -}}
{{- end -}}

{{- define "gazette-c.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "gazette-c.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "gazette-c.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "gazette-c.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gazette-c.pdbName" -}}
{{- printf "%s-broker" (include "gazette-c.fullname" .) -}}
{{- end -}}

{{/* Whether the operator keeps the brokers' PodDisruptionBudget. */}}
{{- define "gazette-c.operatorManagesPdb" -}}
{{- if and .Values.operator.enabled .Values.operator.drains.enabled .Values.operator.drains.managePdb -}}true{{- end -}}
{{- end -}}

{{/* A Go duration ("2m", "1h30m", "90s", "1.5h") in whole seconds, rounded
up: the broker's flags take Go durations, Kubernetes fields seconds. */}}
{{- define "gazette-c.durationSeconds" -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" . -1 -}}
{{- $n := float64 (regexFind "^[0-9]+(\\.[0-9]+)?" .) -}}
{{- $unit := regexReplaceAll "^[0-9]+(\\.[0-9]+)?" . "" -}}
{{- $scale := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 -}}
{{- $total = addf $total (mulf $n (get $scale $unit)) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}

{{/* The brokers' terminationGracePeriodSeconds: as set, or derived from
the exit timeout: the preStop sleep, then the hand-off (at most
--broker.exit-timeout), then the persist of what is left. */}}
{{- define "gazette-c.brokerGraceSeconds" -}}
{{- if .Values.broker.terminationGracePeriodSeconds -}}
{{- .Values.broker.terminationGracePeriodSeconds -}}
{{- else -}}
{{- add .Values.broker.preStopSleepSeconds (include "gazette-c.durationSeconds" .Values.broker.exitTimeout) .Values.broker.persistGraceSeconds -}}
{{- end -}}
{{- end -}}

{{- define "gazette-c.etcdSelectorLabels" -}}
app.kubernetes.io/name: {{ include "gazette-c.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: etcd
{{- end -}}

{{/* The chart's etcd's scheme: https under etcd.tls. */}}
{{- define "gazette-c.etcdScheme" -}}
{{- if .Values.etcd.tls.existingSecret -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* Where broker and operator pods (and the chart's etcd) mount
etcd.tls.existingSecret. */}}
{{- define "gazette-c.etcdTlsDir" -}}/etc/gazette/etcd-tls{{- end -}}

{{/* The etcd client's TLS files under etcd.tls, as env entries. */}}
{{- define "gazette-c.etcdTlsEnv" -}}
{{- if .Values.etcd.tls.existingSecret -}}
{{- $dir := include "gazette-c.etcdTlsDir" . -}}
- {name: ETCD_CERT_FILE, value: {{ $dir }}/tls.crt}
- {name: ETCD_CERT_KEY_FILE, value: {{ $dir }}/tls.key}
- {name: ETCD_TRUSTED_CA_FILE, value: {{ $dir }}/ca.crt}
{{- end -}}
{{- end -}}

{{/* The volume of etcd.tls.existingSecret (see gazette-c.tlsVolume). */}}
{{- define "gazette-c.etcdTlsVolume" -}}
- name: etcd-tls
  projected:
    defaultMode: 0440
    sources:
      - secret:
          name: {{ .Values.etcd.tls.existingSecret | quote }}
          items:
            - {key: tls.crt, path: tls.crt}
            - {key: tls.key, path: tls.key}
            - {key: ca.crt, path: ca.crt}
{{- end -}}

{{/* The etcd brokers and operator use: the chart's own when it deploys
one, else etcd.address. */}}
{{- define "gazette-c.etcdAddress" -}}
{{- if .Values.etcd.deploy.enabled -}}
{{- printf "%s://%s-etcd:2379" (include "gazette-c.etcdScheme" .) (include "gazette-c.fullname" .) -}}
{{- else -}}
{{- .Values.etcd.address -}}
{{- end -}}
{{- end -}}

{{/* sha256 of the data of every Secret and ConfigMap an envFrom list and
an env list refer to, as they are in the cluster at install or upgrade
(lookup; "helm template" sees none, so it hashes names only). Called with
(list $ envFrom env). Secret data enters only hashed. */}}
{{- define "gazette-c.envSourcesChecksum" -}}
{{- $root := index . 0 -}}
{{- $ns := $root.Release.Namespace -}}
{{- $parts := list -}}
{{- range (index . 1) -}}
{{- if .secretRef -}}
{{- $o := lookup "v1" "Secret" $ns .secretRef.name -}}
{{- $parts = append $parts (printf "secret/%s=%s" .secretRef.name (toJson ($o.data | default dict) | sha256sum)) -}}
{{- else if .configMapRef -}}
{{- $o := lookup "v1" "ConfigMap" $ns .configMapRef.name -}}
{{- $parts = append $parts (printf "configmap/%s=%s" .configMapRef.name (toJson ($o.data | default dict) | sha256sum)) -}}
{{- end -}}
{{- end -}}
{{- range (index . 2) -}}
{{- with .valueFrom -}}
{{- if .secretKeyRef -}}
{{- $o := lookup "v1" "Secret" $ns .secretKeyRef.name -}}
{{- $parts = append $parts (printf "secret/%s/%s=%s" .secretKeyRef.name .secretKeyRef.key (toJson (get ($o.data | default dict) .secretKeyRef.key) | sha256sum)) -}}
{{- else if .configMapKeyRef -}}
{{- $o := lookup "v1" "ConfigMap" $ns .configMapKeyRef.name -}}
{{- $parts = append $parts (printf "configmap/%s/%s=%s" .configMapKeyRef.name .configMapKeyRef.key (toJson (get ($o.data | default dict) .configMapKeyRef.key) | sha256sum)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $parts | sortAlpha | join "\n" | sha256sum -}}
{{- end -}}

{{/* "https" when the brokers serve TLS (tls.enabled), else "http": the
scheme of their address and the name of their port. */}}
{{- define "gazette-c.brokerScheme" -}}
{{- if .Values.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* What brokers advertise as their host (broker.advertise): "podDNS" or
"podIP"; "" picks podDNS under TLS (a certificate can name one wildcard
for every pod, not IPs it cannot know), else podIP. */}}
{{- define "gazette-c.brokerAdvertise" -}}
{{- $a := .Values.broker.advertise | default (ternary "podDNS" "podIP" .Values.tls.enabled) -}}
{{- if not (has $a (list "podDNS" "podIP")) -}}
{{- fail (printf "broker.advertise must be podDNS, podIP or empty, not %q" $a) -}}
{{- end -}}
{{- $a -}}
{{- end -}}

{{/* Where broker and operator pods mount tls.existingSecret (a projected
volume, not subPath mounts: a rotated Secret updates the files in place). */}}
{{- define "gazette-c.tlsDir" -}}/etc/gazette/tls{{- end -}}

{{/* The Secret name of tls.existingSecret; rendering fails without it. */}}
{{- define "gazette-c.tlsSecret" -}}
{{- required "tls.enabled needs tls.existingSecret (a Secret with tls.crt, tls.key and ca.crt, as cert-manager writes them)" .Values.tls.existingSecret -}}
{{- end -}}

{{/* BROKER_AUTH_KEYS from auth.existingSecret, as a YAML list of env
entries (empty without it). Brokers verify tokens with the keys (and
sign proxied and replicated calls with the first); the operator signs
its own broker calls with them. */}}
{{- define "gazette-c.authEnv" -}}
{{- with .Values.auth.existingSecret }}
- name: BROKER_AUTH_KEYS
  valueFrom:
    secretKeyRef: {name: {{ . | quote }}, key: {{ $.Values.auth.existingSecretKey | quote }}}
{{- end }}
{{- end -}}

{{/* The TLS volume of broker and operator pods: the Secret's three files,
read-only, group-readable by the pods' fsGroup. */}}
{{- define "gazette-c.tlsVolume" -}}
- name: tls
  projected:
    defaultMode: 0440
    sources:
      - secret:
          name: {{ include "gazette-c.tlsSecret" . | quote }}
          items:
            - {key: tls.crt, path: tls.crt}
            - {key: tls.key, path: tls.key}
            - {key: ca.crt, path: ca.crt}
{{- end -}}

{{/* The brokers' startup and readiness check of GET /debug/ready: HTTP,
HTTPS once they serve TLS, and, when they require client certificates
(which the kubelet's probes cannot present), curl in the container with
the pod's own certificate. curl skips verifying the server there (-k):
it dials its own process on loopback, under a name the certificate need
not carry. */}}
{{- define "gazette-c.brokerReadyProbe" -}}
{{- if and .Values.tls.enabled .Values.tls.requireClientCerts -}}
{{- $dir := include "gazette-c.tlsDir" . -}}
exec:
  command: [curl, -fsS, -o, /dev/null, --max-time, "4", -k, --cert, {{ $dir }}/tls.crt, --key, {{ $dir }}/tls.key, "https://127.0.0.1:{{ .Values.broker.port }}/debug/ready"]
timeoutSeconds: 5
{{- else -}}
httpGet: {path: /debug/ready, port: {{ include "gazette-c.brokerScheme" . }}{{ if .Values.tls.enabled }}, scheme: HTTPS{{ end }}}
{{- end -}}
{{- end -}}

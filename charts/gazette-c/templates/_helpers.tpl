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

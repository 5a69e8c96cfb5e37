{{/* The name of the release's objects. */}}
{{- define "fanout-eventer.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "fanout-eventer.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "fanout-eventer.labels" -}}
{{ include "fanout-eventer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "fanout-eventer.serviceAccountName" -}}
{{- default (include "fanout-eventer.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "fanout-eventer.checkpointName" -}}
{{- default (printf "%s-checkpoint" (include "fanout-eventer.fullname" .)) .Values.checkpoint.configMapName -}}
{{- end -}}

{{/* The exporter's configuration: the config value with api and checkpoint set. */}}
{{- define "fanout-eventer.config" -}}
{{- $c := deepCopy .Values.config -}}
{{- $_ := set $c "api" .Values.eventsApi -}}
{{- if .Values.watchNamespace }}{{ $_ := set $c "namespace" .Values.watchNamespace }}{{ end -}}
{{- $_ := set $c "checkpoint" (dict "configMap" (dict "namespace" .Release.Namespace "name" (include "fanout-eventer.checkpointName" .)) "interval" .Values.checkpoint.interval) -}}
{{- toYaml $c -}}
{{- end -}}

{{/* Whether the exporter leads on a Lease: the value, or the configuration's own leaderElection.enabled. */}}
{{- define "fanout-eventer.leaderElection" -}}
{{- if or .Values.leaderElection.enabled (dig "leaderElection" "enabled" false (.Values.config | default dict)) -}}true{{- end -}}
{{- end -}}

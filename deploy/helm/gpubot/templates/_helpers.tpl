{{/* Names and labels shared by every template. */}}

{{- define "gpubot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpubot.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpubot.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpubot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpubot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpubot.labels" -}}
helm.sh/chart: {{ include "gpubot.chart" . }}
{{ include "gpubot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpubot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpubot.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the Slack tokens: the user's, or the one this chart creates. */}}
{{- define "gpubot.slackSecretName" -}}
{{- default (printf "%s-slack" (include "gpubot.fullname" .)) .Values.slack.existingSecret }}
{{- end }}

{{- define "gpubot.alertSecretName" -}}
{{- default (printf "%s-alerts" (include "gpubot.fullname" .)) .Values.alerts.existingSecret }}
{{- end }}

{{- define "gpubot.redisName" -}}
{{- printf "%s-redis" (include "gpubot.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Checks that stop a release that could not work, with one line saying why. */}}
{{- define "gpubot.validate" -}}
{{- if not (has .Values.role (list "all" "gateway" "agent")) }}
{{- fail (printf "role must be all, gateway or agent, got %q" .Values.role) }}
{{- end }}
{{- if and (eq .Values.role "agent") (not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" .Values.clusterName)) }}
{{- fail "role=agent needs clusterName: lowercase letters, digits and '-', at most 63" }}
{{- end }}
{{- if and (ne .Values.role "all") (not (or .Values.redis.enabled .Values.redis.url .Values.redis.existingSecret.name (eq .Values.redis.mode "sentinel"))) }}
{{- fail (printf "role=%s needs the Redis the gateway and agents share: set redis.url or redis.existingSecret.name" .Values.role) }}
{{- end }}
{{- if and (ne .Values.role "all") (not .Values.requestKey.existingSecret.name) }}
{{- fail (printf "role=%s needs requestKey.existingSecret.name: a Secret with GPUBOT_REQUEST_KEY (32+ random characters), the same for the gateway and every agent" .Values.role) }}
{{- end }}
{{- if not (has .Values.redis.mode (list "single" "cluster" "sentinel")) }}
{{- fail (printf "redis.mode must be single, cluster or sentinel, got %q" .Values.redis.mode) }}
{{- end }}
{{- if and (eq .Values.redis.mode "sentinel") (not (and .Values.redis.sentinels .Values.redis.sentinelMaster)) }}
{{- fail "redis.mode=sentinel needs redis.sentinels (host:port, …) and redis.sentinelMaster" }}
{{- end }}
{{- if and (eq .Values.role "agent") .Values.ingress.enabled }}
{{- fail "ingress.enabled with role=agent: an agent hears nothing from Slack" }}
{{- end }}
{{- if not (has .Values.slack.mode (list "socket" "http")) }}
{{- fail (printf "slack.mode must be socket or http, got %q" .Values.slack.mode) }}
{{- end }}
{{- $shared := or .Values.redis.enabled .Values.redis.url .Values.redis.existingSecret.name }}
{{- if and (gt (int .Values.replicaCount) 1) (not $shared) }}
{{- fail "replicaCount > 1 needs a shared state store: set redis.enabled=true, redis.url or redis.existingSecret.name" }}
{{- end }}
{{- if and .Values.redis.enabled (or .Values.redis.url .Values.redis.existingSecret.name) }}
{{- fail "redis.enabled runs Redis in the release: leave redis.url and redis.existingSecret.name empty, or turn it off" }}
{{- end }}
{{- if and .Values.alerts.enabled (not .Values.alerts.channel) }}
{{- fail "alerts.enabled needs alerts.channel: the channel id (C…) or name incident threads go to" }}
{{- end }}
{{- if and .Values.alerts.enabled (not .Values.alerts.existingSecret) (lt (len .Values.alerts.token) 16) }}
{{- fail "alerts.enabled needs alerts.existingSecret (a Secret with the bearer token) or an alerts.token of 16+ characters" }}
{{- end }}
{{- if and .Values.ingress.enabled (ne .Values.slack.mode "http") }}
{{- fail "ingress.enabled only makes sense with slack.mode=http (Socket Mode needs no inbound traffic)" }}
{{- end }}
{{- /* The bot's own bounds (bot/ops/config.py): refused here rather than by a pod that will not start. */}}
{{- range $key, $bounds := dict "timeoutSeconds" (list 1 300) "maxConnections" (list 8 65536) }}
{{- $v := index $.Values.http $key }}
{{- $whole := and (or (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v)) (eq (float64 $v) (float64 (int $v))) }}
{{- if or (not $whole) (lt (int $v) (index $bounds 0)) (gt (int $v) (index $bounds 1)) }}
{{- fail (printf "http.%s must be a whole number from %d to %d, got %v" $key (index $bounds 0) (index $bounds 1) $v) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The bot's own pods (the in-chart Redis has component=redis: selectors must not overlap). */}}
{{- define "gpubot.botSelectorLabels" -}}
{{ include "gpubot.selectorLabels" . }}
app.kubernetes.io/component: bot
{{- end }}

{{/* Whether this release reads the cluster (all, agent) or only Slack and Redis (gateway). */}}
{{- define "gpubot.readsCluster" -}}
{{- if ne .Values.role "gateway" }}true{{- end }}
{{- end }}

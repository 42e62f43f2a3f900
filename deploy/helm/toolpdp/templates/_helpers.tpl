{{- define "toolpdp.name" -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "toolpdp.selectorLabels" -}}
app.kubernetes.io/name: toolpdp
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "toolpdp.labels" -}}
{{ include "toolpdp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: toolpdp
{{- end -}}

{{/* GOMEMLIMIT: goMemLimitPercent of the memory limit, in MiB. */}}
{{- define "toolpdp.goMemLimit" -}}
{{- $limit := required "resources.limits.memory is required: GOMEMLIMIT is derived from it" .Values.resources.limits.memory | toString -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Gi" $limit -}}
{{- $mib = mul (trimSuffix "Gi" $limit | atoi) 1024 -}}
{{- else if hasSuffix "Mi" $limit -}}
{{- $mib = trimSuffix "Mi" $limit | atoi -}}
{{- else -}}
{{- fail (printf "resources.limits.memory %q: give it in Mi or Gi, so GOMEMLIMIT can be derived" $limit) -}}
{{- end -}}
{{- printf "%dMiB" (div (mul $mib .Values.goMemLimitPercent) 100) -}}
{{- end -}}

{{/* The state store's URL: state.url, else this chart's Redis. */}}
{{- define "toolpdp.stateURL" -}}
{{- if .Values.state.url -}}
{{- .Values.state.url -}}
{{- else if .Values.redis.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "toolpdp.name" .) -}}
{{- else -}}
{{- fail "state.url is empty and redis.enabled is false: replicas need a shared state store" -}}
{{- end -}}
{{- end -}}

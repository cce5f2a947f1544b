{{/* The chart's name, cut to Kubernetes' 63 characters. */}}
{{- define "skipq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release alone when it already says skipq. */}}
{{- define "skipq.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "skipq.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "skipq.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "skipq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "skipq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "skipq.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "skipq.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "skipq.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret with the database URLs and the node's secrets. */}}
{{- define "skipq.secretName" -}}
{{- .Values.secrets.existingSecret | default (include "skipq.fullname" .) }}
{{- end }}

{{- define "skipq.pgbouncerName" -}}
{{- printf "%s-pgbouncer" (include "skipq.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "skipq.pgbouncerSecretName" -}}
{{- .Values.pgbouncer.existingSecret | default (include "skipq.pgbouncerName" .) }}
{{- end }}

{{/* The security context of every container: non-root, nothing to gain. */}}
{{- define "skipq.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end }}

{{/* The pod security context of skipq's pods: the image's user 65532. */}}
{{- define "skipq.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The variables that come from the Secret. */}}
{{- define "skipq.secretEnv" -}}
{{- $secret := include "skipq.secretName" . -}}
{{- if .Values.pgbouncer.enabled }}
- name: SKIPQ_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: pooled-database-url}}
- name: SKIPQ_LISTENER_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: database-url}}
{{- else }}
- name: SKIPQ_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: database-url}}
{{- end }}
- name: SKIPQ_SIGV4_MASTER_KEY
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: sigv4-master-key, optional: true}}
- name: SKIPQ_CONSOLE_SECRET
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: console-secret, optional: true}}
- name: SKIPQ_METRICS_TOKEN
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: metrics-token, optional: true}}
{{- end }}

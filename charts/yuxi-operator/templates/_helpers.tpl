{{/* The prefix of every object's name: the release name. */}}
{{- define "yuxi.name" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Common labels. */}}
{{- define "yuxi.labels" -}}
app.kubernetes.io/name: yuxi-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{/* Selector labels of one component. */}}
{{- define "yuxi.selector" -}}
app.kubernetes.io/name: yuxi-operator
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The control-plane image: the release's pods and the sandbox pods' runner container. */}}
{{- define "yuxi.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The sandbox image: the sandbox pods' sandbox container, with the shell and tools `execute` needs. */}}
{{- define "yuxi.sandboxImage" -}}
{{ .Values.sandboxImage.repository | default (printf "%s-sandbox" .Values.image.repository) }}:{{ .Values.sandboxImage.tag | default .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The namespaces served: watchNamespaces, or the release namespace. */}}
{{- define "yuxi.namespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- join "," .Values.watchNamespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The Secret and key holding the Redis URL. */}}
{{- define "yuxi.redisSecret" -}}
{{- if .Values.redis.existingSecret -}}{{ .Values.redis.existingSecret }}{{- else -}}{{ include "yuxi.name" . }}-redis{{- end -}}
{{- end -}}
{{- define "yuxi.redisKey" -}}
{{- if .Values.redis.existingSecret -}}{{ .Values.redis.existingSecretKey }}{{- else -}}url{{- end -}}
{{- end -}}

{{/* The data and skills library claims. */}}
{{- define "yuxi.dataClaim" -}}
{{- .Values.storage.data.existingClaim | default (printf "%s-data" (include "yuxi.name" .)) -}}
{{- end -}}
{{- define "yuxi.skillsClaim" -}}
{{- .Values.storage.skillsLibrary.existingClaim | default (printf "%s-skills-library" (include "yuxi.name" .)) -}}
{{- end -}}

{{/* Restricted Pod Security for the chart's pods. */}}
{{- define "yuxi.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "yuxi.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The webhook's Service name and its certificate's DNS name. */}}
{{- define "yuxi.webhookService" -}}
{{ include "yuxi.name" . }}-webhook
{{- end -}}

{{- /* The OTLP export variables of a role (`traces.*`; nothing when no endpoint is set). */}}
{{- define "yuxi.traceEnv" -}}
{{- $root := index . 0 }}{{- $role := index . 1 }}
{{- with $root.Values.traces.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ printf "yuxi-operator-%s" $role | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $root.Values.traces.samplerRatio | toString | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $root.Values.traces.protocol | quote }}
{{- if $root.Values.traces.captureContent }}
- name: YUXI_TRACES_CAPTURE_CONTENT
  value: "true"
{{- end }}
{{- with $root.Values.traces.headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $root.Values.traces.headersSecret.key }}
{{- end }}
{{- end }}
{{- end }}

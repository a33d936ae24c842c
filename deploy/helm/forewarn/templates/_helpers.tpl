{{/* Names and labels shared by every template. */}}

{{- define "forewarn.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "forewarn.fullname" -}}
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

{{- define "forewarn.selectorLabels" -}}
app.kubernetes.io/name: {{ include "forewarn.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "forewarn.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "forewarn.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "forewarn.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "forewarn.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the pod reads: the user's, or the chart's (when it has keys). */}}
{{- define "forewarn.secretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else }}
{{- include "forewarn.fullname" . }}
{{- end }}
{{- end }}

{{/* The chart's own Secret's data: the tokens and the extra keys. */}}
{{- define "forewarn.secretData" -}}
{{- $data := dict }}
{{- with .Values.secrets.apiToken }}{{ $_ := set $data "FOREWARN_API_TOKEN" . }}{{ end }}
{{- with .Values.secrets.readToken }}{{ $_ := set $data "FOREWARN_API_READ_TOKEN" . }}{{ end }}
{{- range $k, $v := .Values.secrets.extra }}{{ $_ := set $data $k $v }}{{ end }}
{{- toYaml $data }}
{{- end }}

{{/* Whether the pod has a Secret to read at all. */}}
{{- define "forewarn.hasSecret" -}}
{{- if or .Values.secrets.existingSecret .Values.secrets.apiToken .Values.secrets.readToken .Values.secrets.extra }}true{{ end }}
{{- end }}

{{/* forewarn is one process (issue #31): refuse anything else. */}}
{{- define "forewarn.checkReplicas" -}}
{{- if ne (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount is %v: forewarn runs as one process per fleet (its state is not shared between pods); only 1 is supported (scale-out is issue #31)" .Values.replicaCount) }}
{{- end }}
{{- end }}

{{/* The chart's name, and the release's full name (at most 63 characters, a DNS label). */}}
{{- define "hangar.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hangar.fullname" -}}
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

{{- define "hangar.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "hangar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The hangar pods' labels: the sandbox NetworkPolicy lets these in. */}}
{{- define "hangar.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hangar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hangar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hangar.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hangar.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The sandbox namespace: kubernetes.namespace, else "<release namespace>-sandboxes". */}}
{{- define "hangar.sandboxNamespace" -}}
{{- default (printf "%s-sandboxes" .Release.Namespace | trunc 63 | trimSuffix "-") .Values.kubernetes.namespace }}
{{- end }}

{{- define "hangar.secretName" -}}
{{- default (include "hangar.fullname" .) .Values.secret.existingSecret }}
{{- end }}

{{/* The key of each secret value in the Secret in use, "" when that value is not given. */}}
{{- define "hangar.secretKey" -}}
{{- $ctx := index . 0 }}{{- $which := index . 1 }}
{{- if $ctx.Values.secret.existingSecret }}
{{- index $ctx.Values.secret.existingSecretKeys $which }}
{{- else }}
{{- $keys := dict "hangarSecret" "hangar-secret" "tokens" "tokens" "databaseUrl" "database-url" "e2bApiKey" "e2b-api-key" }}
{{- $given := dict "hangarSecret" "always" "tokens" $ctx.Values.secret.adminToken "databaseUrl" $ctx.Values.secret.databaseUrl "e2bApiKey" $ctx.Values.secret.e2bApiKey }}
{{- if index $given $which }}{{ index $keys $which }}{{ end }}
{{- end }}
{{- end }}

{{/* Refuses value sets that cannot work, with a sentence saying why. */}}
{{- define "hangar.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "hangar.secretKey" (list . "databaseUrl"))) }}
{{- fail "replicaCount > 1 needs PostgreSQL: set secret.databaseUrl (or secret.existingSecretKeys.databaseUrl); SQLite serves one replica only" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) .Values.persistence.enabled (not .Values.persistence.existingClaim) (has "ReadWriteOnce" .Values.persistence.accessModes) }}
{{- fail "replicaCount > 1 with persistence.enabled: one ReadWriteOnce claim cannot be mounted by several pods; with PostgreSQL the data volume can be an emptyDir (persistence.enabled: false)" }}
{{- end }}
{{- if and .Values.secret.hangarSecret (lt (len .Values.secret.hangarSecret) 32) }}
{{- fail "secret.hangarSecret must be at least 32 characters" }}
{{- end }}
{{- if and .Values.secret.adminToken (lt (len .Values.secret.adminToken) 32) }}
{{- fail "secret.adminToken must be at least 32 characters" }}
{{- end }}
{{- if and (not .Values.kubernetes.enabled) (not (hasKey .Values.config "default-provider")) }}
{{- fail "kubernetes.enabled is false: set config.default-provider (e2b, with secret.e2bApiKey)" }}
{{- end }}
{{- if and .Values.kubernetes.enabled (eq (include "hangar.sandboxNamespace" .) .Release.Namespace) }}
{{- fail (printf "kubernetes.namespace is the release's namespace (%s): the Role there would let hangar's ServiceAccount read hangar's own Secret; give sandboxes a namespace of their own (leave kubernetes.namespace empty for %s-sandboxes)" .Release.Namespace .Release.Namespace) }}
{{- end }}
{{- if and .Values.gateway.enabled (not .Values.gateway.parentRefs) }}
{{- fail "gateway.enabled needs gateway.parentRefs: the Gateway(s) the HTTPRoute attaches to" }}
{{- end }}
{{- if and .Values.secret.existingSecret (not .Values.secret.existingSecretKeys.hangarSecret) }}
{{- fail "secret.existingSecretKeys.hangarSecret must name the existing Secret's HANGAR_SECRET key: every replica and restart needs the same secret" }}
{{- end }}
{{- end }}

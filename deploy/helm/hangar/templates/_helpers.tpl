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

{{/* HANGAR_SECRET for the chart's Secret: secret.hangarSecret; else the one the chart's Secret
holds already (read from the cluster by helm install and upgrade); else 48 random characters.
Worked out once per render (kept in .Values.__hangarSecret), so that the Secret and the pods'
checksum of it agree. */}}
{{- define "hangar.hangarSecret" -}}
{{- if not (hasKey .Values "__hangarSecret") }}
{{- $v := .Values.secret.hangarSecret }}
{{- if not $v }}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "hangar.fullname" .) }}
{{- if and $old (hasKey ($old.data | default dict) "hangar-secret") }}
{{- $v = index $old.data "hangar-secret" | b64dec }}
{{- else }}
{{- $v = randAlphaNum 48 }}
{{- end }}
{{- end }}
{{- $_ := set .Values "__hangarSecret" $v }}
{{- end }}
{{- index .Values "__hangarSecret" }}
{{- end }}

{{/* The data of the chart's Secret (key: base64 value). */}}
{{- define "hangar.secretData" -}}
hangar-secret: {{ include "hangar.hangarSecret" . | b64enc | quote }}
{{- with .Values.secret.adminToken }}
tokens: {{ printf "%s admin admin\n" . | b64enc | quote }}
{{- end }}
{{- with .Values.secret.databaseUrl }}
database-url: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.secret.e2bApiKey }}
e2b-api-key: {{ . | b64enc | quote }}
{{- end }}
{{- end }}

{{/* A digest of what the pods read from their Secret: the chart's Secret's data, or the
existing Secret's as the cluster holds it (helm install and upgrade read it; a render without
the cluster sees none, so there a change of that Secret does not roll the pods). */}}
{{- define "hangar.secretChecksum" -}}
{{- if .Values.secret.existingSecret }}
{{- $s := lookup "v1" "Secret" .Release.Namespace .Values.secret.existingSecret }}
{{- toJson (list .Values.secret ($s.data | default dict)) | sha256sum }}
{{- else }}
{{- include "hangar.secretData" . | sha256sum }}
{{- end }}
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

{{/* More than one hangar pod, now or once the autoscaler adds some. */}}
{{- define "hangar.replicated" -}}
{{- if or (gt (int .Values.replicaCount) 1) .Values.autoscaling.enabled }}true{{ end }}
{{- end }}

{{/* config.shutdown-grace in whole seconds, rounded up (a Go duration: "30s", "1m30s", "500ms";
a bare number is milliseconds, as hangar reads it); 30 when not set. */}}
{{- define "hangar.shutdownGraceSeconds" -}}
{{- $d := toString (index .Values.config "shutdown-grace" | default "30s") }}
{{- if regexMatch "^[0-9]+$" $d }}{{ $d = printf "%sms" $d }}{{ end }}
{{- $units := dict "h" 3600.0 "m" 60.0 "s" 1.0 "ms" 0.001 "us" 0.000001 "µs" 0.000001 "ns" 0.000000001 }}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9.]+(ms|us|µs|ns|h|m|s)" $d -1 }}
{{- $n := regexFind "^[0-9.]+" . }}
{{- $total = addf $total (mulf (float64 $n) (get $units (trimPrefix $n .))) }}
{{- end }}
{{- ceil $total | int }}
{{- end }}

{{/* The pod's terminationGracePeriodSeconds: the preStop sleep, then hangar's shutdown-grace
after SIGTERM, and 15 s for the handover of its sandboxes and the store's close. */}}
{{- define "hangar.terminationGrace" -}}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add (int .Values.lifecycle.preStopSleepSeconds) (int (include "hangar.shutdownGraceSeconds" .)) 15 }}
{{- else }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* Refuses value sets that cannot work, with a sentence saying why. */}}
{{- define "hangar.validate" -}}
{{- if and (include "hangar.replicated" .) (not (include "hangar.secretKey" (list . "databaseUrl"))) }}
{{- fail (printf "%s needs PostgreSQL: set secret.databaseUrl (or secret.existingSecretKeys.databaseUrl); SQLite serves one replica only" (ternary "autoscaling.enabled" "replicaCount > 1" .Values.autoscaling.enabled)) }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail (printf "autoscaling.maxReplicas (%d) is below autoscaling.minReplicas (%d)" (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- end }}
{{- $least := add (int .Values.lifecycle.preStopSleepSeconds) (int (include "hangar.shutdownGraceSeconds" .)) }}
{{- if lt (int (include "hangar.terminationGrace" .)) $least }}
{{- fail (printf "terminationGracePeriodSeconds (%d) is shorter than lifecycle.preStopSleepSeconds (%d) plus config.shutdown-grace (%ds): Kubernetes would kill hangar before it handed its sandboxes over and its requests finished; raise it, or leave it empty to have it computed" (int .Values.terminationGracePeriodSeconds) (int .Values.lifecycle.preStopSleepSeconds) (int (include "hangar.shutdownGraceSeconds" .))) }}
{{- end }}
{{- if and .Values.metrics.port (eq (int .Values.metrics.port) (int .Values.containerPort)) }}
{{- fail "metrics.port is containerPort: leave metrics.port empty to serve /metrics on the API's port, or give it a port of its own" }}
{{- end }}
{{- if and (include "hangar.replicated" .) .Values.persistence.enabled (not .Values.persistence.existingClaim) (has "ReadWriteOnce" .Values.persistence.accessModes) }}
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

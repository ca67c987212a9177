{{/*
Names are fixed, not derived from the release name: the controller serves Kueue's API
group cluster-wide (one install per cluster), and the alerts and the dashboard select
the metrics Service's job label, dra-quota-reconciler-metrics.
*/}}
{{- define "dra-quota-reconciler.name" -}}
dra-quota-reconciler
{{- end }}

{{/* The namespace of every namespaced object. */}}
{{- define "dra-quota-reconciler.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace }}
{{- end }}

{{/* Labels on every object (the kustomization's two, plus Helm's). */}}
{{- define "dra-quota-reconciler.labels" -}}
app.kubernetes.io/name: {{ include "dra-quota-reconciler.name" . }}
app.kubernetes.io/part-of: {{ include "dra-quota-reconciler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The controller's pods (the Deployment's selector: the same as kustomize's, immutable). */}}
{{- define "dra-quota-reconciler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dra-quota-reconciler.name" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "dra-quota-reconciler.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
The configuration (YAML text), checked for its apiVersion and kind; the controller
validates the rest when it starts (and exits naming the field).
*/}}
{{- define "dra-quota-reconciler.configuration" -}}
{{- $text := .Values.configuration }}
{{- $parsed := fromYaml $text }}
{{- if hasKey $parsed "Error" }}
{{- fail (printf "configuration: not a YAML map: %s" (get $parsed "Error")) }}
{{- end }}
{{- $versions := list "config.kueue.x-k8s.io/v1beta1" "config.kueue.x-k8s.io/v1beta2" }}
{{- if not (has (get $parsed "apiVersion") $versions) }}
{{- fail (printf "configuration.apiVersion: %q is not config.kueue.x-k8s.io/v1beta1 or v1beta2" (get $parsed "apiVersion")) }}
{{- end }}
{{- if ne (get $parsed "kind") "Configuration" }}
{{- fail (printf "configuration.kind: %q is not Configuration" (get $parsed "kind")) }}
{{- end }}
{{- $text }}
{{- end }}

{{/*
Whether the configuration enables one of the frameworks listed after the context: the chart
grants a kind's RBAC rules only then (`include "dra-quota-reconciler.enables" (list . "pod")`
is "true" or empty). A configuration that names no framework enables batch/job, as Kueue's.
*/}}
{{- define "dra-quota-reconciler.enables" -}}
{{- $config := fromYaml (include "dra-quota-reconciler.configuration" (index . 0)) }}
{{- $enabled := list "batch/job" }}
{{- with $config.integrations }}{{ with .frameworks }}{{ $enabled = . }}{{ end }}{{ end }}
{{- range (rest .) }}{{ if has . $enabled }}true{{ end }}{{ end }}
{{- end }}

{{/*
Combinations that cannot work, refused with the value to change. Included by the
Deployment, so `helm template`, `helm lint` and `helm install` all see them.
*/}}
{{- define "dra-quota-reconciler.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas: %d replicas without leaderElection.enabled would all admit and write; set leaderElection.enabled=true or replicas=1" (int .Values.replicas)) }}
{{- end }}
{{- if and .Values.namespace.create (not .Values.namespace.name) }}
{{- fail "namespace.create: true needs namespace.name (the Namespace to create); set namespace.name, or namespace.create=false to use the release's namespace" }}
{{- end }}
{{- if and .Values.namespace.create (eq .Values.namespace.name .Release.Namespace) }}
{{- fail (printf "namespace.create: the chart would create the Namespace %s, but Helm keeps its release record there and needs it to exist first; install with --namespace default, or set namespace.create=false (and label %s pod-security.kubernetes.io/enforce=restricted yourself)" .Values.namespace.name .Values.namespace.name) }}
{{- end }}
{{- if .Values.webhook.certManager.enabled }}
{{- fail "webhook.certManager.enabled: the chart does not render cert-manager objects yet; leave it false (the controller's internal certificate management is on), or install with kustomize and cert-manager as docs/webhooks.md describes" }}
{{- end }}
{{- end }}

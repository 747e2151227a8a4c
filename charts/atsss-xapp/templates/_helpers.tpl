{{/* The xApp's name: nameOverride, else the chart's name. */}}
{{- define "atsss.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Service names as the O-RAN SC onboarder builds them: service-<namespace>-<name>-<kind>. */}}
{{- define "atsss.serviceName" -}}
{{- printf "service-%s-%s-%s" .root.Release.Namespace (include "atsss.name" .root) .kind | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "atsss.labels" -}}
app.kubernetes.io/name: {{ include "atsss.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "atsss.selector" -}}
app.kubernetes.io/name: {{ include "atsss.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "atsss.secretName" -}}
{{- default (printf "%s-secrets" (include "atsss.name" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The controls with what the chart knows filled in. */}}
{{- define "atsss.controls" -}}
{{- $controls := deepCopy .Values.controls -}}
{{- $e2 := default (dict) $controls.e2 -}}
{{- $_ := set $e2 "client_host" (printf "%s.%s" (include "atsss.serviceName" (dict "root" . "kind" "http")) .Release.Namespace) -}}
{{- $_ := set $e2 "http_port" (int .Values.ports.http) -}}
{{- $_ := set $e2 "rmr_port" (int .Values.ports.rmrData) -}}
{{- $_ := set $e2 "submgr_url" .Values.platform.submgr -}}
{{- $_ := set $e2 "appmgr_url" .Values.platform.appmgr -}}
{{- $_ := set $controls "e2" $e2 -}}
{{- $agents := default (dict) $controls.agents -}}
{{- $_ := set $agents "token_file" "/etc/atsss/secrets/agent-token" -}}
{{- $_ := set $controls "agents" $agents -}}
{{- $_ := set $controls "operator_api" (dict "tokens_file" "/etc/atsss/secrets/operator-tokens.yaml") -}}
{{- toJson $controls -}}
{{- end -}}

{{/* The xApp descriptor as the xApp and the platform read it (config-file.json). */}}
{{- define "atsss.descriptor" -}}
{{- $descriptor := dict "name" (include "atsss.name" .) "version" .Chart.AppVersion -}}
{{- $image := dict "registry" (regexReplaceAll "/.*$" .Values.image.repository "") "name" (regexReplaceAll "^[^/]*/" .Values.image.repository "") "tag" (default .Chart.AppVersion .Values.image.tag) -}}
{{- $_ := set $descriptor "containers" (list (dict "name" (include "atsss.name" .) "image" $image)) -}}
{{- $http := dict "name" "http" "container" (include "atsss.name" .) "port" (int .Values.ports.http) "description" "health, operator API, metrics" -}}
{{- $rmr := dict "name" "rmrdata" "container" (include "atsss.name" .) "port" (int .Values.ports.rmrData) "rxMessages" (list "RIC_INDICATION" "RIC_SUB_RESP" "RIC_SUB_FAILURE" "RIC_SUB_DEL_RESP" "RIC_SUB_DEL_REQUIRED" "RIC_HEALTH_CHECK_REQ") "txMessages" (list "RIC_HEALTH_CHECK_RESP") "policies" (list) "description" "E2 subscriptions and E2SM-KPM indications" -}}
{{- $route := dict "name" "rmrroute" "container" (include "atsss.name" .) "port" (int .Values.ports.rmrRoute) "description" "RMR route table updates" -}}
{{- $_ := set $descriptor "messaging" (dict "ports" (list $http $rmr $route)) -}}
{{- $_ := set $descriptor "controls" (include "atsss.controls" . | fromJson) -}}
{{- toPrettyJson $descriptor -}}
{{- end -}}

{{/* The release's base name: the release, or release-chart. */}}
{{- define "shoal.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "shoal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "gateway"). */}}
{{- define "shoal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: shoal
{{ include "shoal.selector" . }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component. */}}
{{- define "shoal.selector" -}}
app.kubernetes.io/name: {{ include "shoal.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Non-empty when the Kafka data bridge runs: bridge.mappings has a mapping. */}}
{{- define "shoal.bridgeEnabled" -}}
{{- if or .Values.bridge.mappings.out .Values.bridge.mappings.in -}}
true
{{- end -}}
{{- end -}}

{{/* The components of Shoal that use Kafka, as a list: its roles, and the bridge when it runs. */}}
{{- define "shoal.kafkaClients" -}}
{{- $out := list "gateway" "router" "session" -}}
{{- if include "shoal.bridgeEnabled" . -}}
{{- $out = append $out "bridge" -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- define "shoal.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Kafka's bootstrap addresses, as a list. */}}
{{- define "shoal.kafkaBrokers" -}}
{{- $f := include "shoal.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- if eq .Values.kafka.mode "external" -}}
{{- if not .Values.kafka.external.brokers -}}
{{- fail "kafka.external.brokers: required with kafka.mode external" -}}
{{- end -}}
{{- toJson .Values.kafka.external.brokers -}}
{{- else if eq .Values.kafka.mode "kraft" -}}
{{- $out := list -}}
{{- range $i := until (int .Values.kafka.kraft.replicas) -}}
{{- $out = append $out (printf "%s-kafka-%d.%s-kafka.%s.svc:9092" $f $i $f $ns) -}}
{{- end -}}
{{- toJson $out -}}
{{- else -}}
{{- toJson (list (printf "%s-kafka-bootstrap.%s.svc:9092" $f $ns)) -}}
{{- end -}}
{{- end -}}

{{/* The CQL hosts, as a list. */}}
{{- define "shoal.cqlHosts" -}}
{{- $f := include "shoal.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- if eq .Values.cql.mode "external" -}}
{{- if not .Values.cql.external.hosts -}}
{{- fail "cql.external.hosts: required with cql.mode external" -}}
{{- end -}}
{{- toJson .Values.cql.external.hosts -}}
{{- else if eq .Values.cql.mode "scylla" -}}
{{- $out := list -}}
{{- range $i := until (int .Values.cql.scylla.replicas) -}}
{{- $out = append $out (printf "%s-scylla-%d.%s-scylla.%s.svc:9042" $f $i $f $ns) -}}
{{- end -}}
{{- toJson $out -}}
{{- else -}}
{{- toJson (list (printf "%s-scylla-client.%s.svc:9042" $f $ns)) -}}
{{- end -}}
{{- end -}}

{{/* Pod anti-affinity of a component: (dict "ctx" $ "component" "x" "mode" "soft"). */}}
{{- define "shoal.antiAffinity" -}}
{{- if eq .mode "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "shoal.selector" . | nindent 12 }}
{{- else if eq .mode "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "shoal.selector" . | nindent 14 }}
{{- end }}
{{- end -}}

{{/* The volumes every Shoal role mounts. */}}
{{- define "shoal.volumes" -}}
- name: config
  configMap:
    name: {{ include "shoal.fullname" . }}-config
- name: data
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- with include "shoal.passwordSecretName" . }}
- name: passwords
  secret:
    secretName: {{ . }}
    items: [{key: {{ include "shoal.passwordSecretKey" $ }}, path: passwords}]
{{- end }}
{{- if .Values.auth.aclSecret.name }}
- name: acl
  secret:
    secretName: {{ .Values.auth.aclSecret.name }}
    items: [{key: {{ .Values.auth.aclSecret.key }}, path: acl}]
{{- end }}
{{- if .Values.auth.jwt.secretName }}
- name: jwt
  secret:
    secretName: {{ .Values.auth.jwt.secretName }}
{{- end }}
{{- if .Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "shoal.tlsSecret" . }}
{{- end }}
{{- with .Values.kafka.external }}
{{- if and (eq $.Values.kafka.mode "external") .sasl.mechanism }}
- name: kafka-sasl
  secret:
    secretName: {{ .sasl.passwordSecret.name }}
    items: [{key: {{ .sasl.passwordSecret.key }}, path: password}]
{{- end }}
{{- if and (eq $.Values.kafka.mode "external") .tls.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ .tls.caSecret }}
{{- end }}
{{- if and (eq $.Values.kafka.mode "external") .tls.clientCertSecret }}
- name: kafka-client
  secret:
    secretName: {{ .tls.clientCertSecret }}
{{- end }}
{{- end }}
{{- if and (eq .Values.cql.mode "external") .Values.cql.external.passwordSecret.name }}
- name: cql-password
  secret:
    secretName: {{ .Values.cql.external.passwordSecret.name }}
    items: [{key: {{ .Values.cql.external.passwordSecret.key }}, path: password}]
{{- end }}
{{- if .Values.console.enabled }}
- name: admin-token
  secret:
    secretName: {{ include "shoal.adminTokenSecret" . }}
    items: [{key: {{ .Values.console.adminTokenSecret.key }}, path: token}]
{{- with .Values.console.tenantTokensSecret }}
{{- if .name }}
- name: console-tokens
  secret:
    secretName: {{ .name }}
    items: [{key: {{ .key }}, path: tokens}]
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "shoal.volumeMounts" -}}
- {name: config, mountPath: /etc/shoal/config, readOnly: true}
- {name: data, mountPath: /var/lib/shoal}
- {name: tmp, mountPath: /tmp}
{{- if include "shoal.passwordSecretName" . }}
- {name: passwords, mountPath: /etc/shoal/passwords, readOnly: true}
{{- end }}
{{- if .Values.auth.aclSecret.name }}
- {name: acl, mountPath: /etc/shoal/acl, readOnly: true}
{{- end }}
{{- if .Values.auth.jwt.secretName }}
- {name: jwt, mountPath: /etc/shoal/jwt, readOnly: true}
{{- end }}
{{- if .Values.tls.enabled }}
- {name: tls, mountPath: /etc/shoal/tls, readOnly: true}
{{- end }}
{{- if eq .Values.kafka.mode "external" }}
{{- if .Values.kafka.external.sasl.mechanism }}
- {name: kafka-sasl, mountPath: /etc/shoal/kafka-sasl, readOnly: true}
{{- end }}
{{- if .Values.kafka.external.tls.caSecret }}
- {name: kafka-ca, mountPath: /etc/shoal/kafka-ca, readOnly: true}
{{- end }}
{{- if .Values.kafka.external.tls.clientCertSecret }}
- {name: kafka-client, mountPath: /etc/shoal/kafka-client, readOnly: true}
{{- end }}
{{- end }}
{{- if and (eq .Values.cql.mode "external") .Values.cql.external.passwordSecret.name }}
- {name: cql-password, mountPath: /etc/shoal/cql, readOnly: true}
{{- end }}
{{- if .Values.console.enabled }}
- {name: admin-token, mountPath: /etc/shoal/admin, readOnly: true}
{{- if .Values.console.tenantTokensSecret.name }}
- {name: console-tokens, mountPath: /etc/shoal/console, readOnly: true}
{{- end }}
{{- end }}
{{- end -}}

{{/* The Secret of the admin token: console.adminTokenSecret's, or the one the chart makes. */}}
{{- define "shoal.adminTokenSecret" -}}
{{- .Values.console.adminTokenSecret.name | default (printf "%s-admin-token" (include "shoal.fullname" .)) -}}
{{- end -}}

{{- define "shoal.tlsSecret" -}}
{{- if .Values.tls.secretName -}}
{{- .Values.tls.secretName -}}
{{- else if .Values.tls.certManager.enabled -}}
{{- include "shoal.fullname" . }}-tls
{{- else -}}
{{- fail "tls.secretName: required with tls.enabled (or tls.certManager.enabled)" -}}
{{- end -}}
{{- end -}}

{{/* The container of a Shoal role: (dict "ctx" $ "role" "router" "values" .Values.router). */}}
{{- define "shoal.container" -}}
{{- $ := .ctx -}}
- name: shoal
  image: {{ include "shoal.image" $ }}
  imagePullPolicy: {{ $.Values.image.pullPolicy }}
  args: [{{ .role | quote }}, "--config", "/etc/shoal/config/shoal.yaml"]
  env:
    - name: GOMEMLIMIT
      valueFrom:
        resourceFieldRef: {resource: limits.memory, divisor: "1"}
    {{- with .env }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    {{- with .ports }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    - {name: http, containerPort: 9090, protocol: TCP}
    {{- if $.Values.console.enabled }}
    - {name: admin, containerPort: 9091, protocol: TCP}
    {{- end }}
  startupProbe:
    httpGet: {path: /healthz, port: http}
    periodSeconds: 2
    failureThreshold: 60
  livenessProbe:
    httpGet: {path: /healthz, port: http}
    periodSeconds: 10
    failureThreshold: 3
  readinessProbe:
    httpGet: {path: /readyz, port: http}
    periodSeconds: 2
    failureThreshold: 2
  resources:
    {{- toYaml .values.resources | nindent 4 }}
  securityContext:
    {{- toYaml $.Values.containerSecurityContext | nindent 4 }}
  volumeMounts:
    {{- include "shoal.volumeMounts" $ | nindent 4 }}
{{- end -}}

{{/* The pod spec fields every Shoal role shares: (dict "ctx" $ "values" .Values.router "component" "router"). */}}
{{- define "shoal.podCommon" -}}
{{- $ := .ctx -}}
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $.Values.podSecurityContext | nindent 2 }}
enableServiceLinks: false
{{- include "shoal.antiAffinity" (dict "ctx" $ "component" .component "mode" .values.antiAffinity) }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  {{- include "shoal.volumes" $ | nindent 2 }}
{{- end -}}

{{/*
The password file's Secret: auth.passwordSecret, or, when no
authentication is configured and anonymous clients are not allowed, the
Secret the chart generates (secure by default). Empty: none.
*/}}
{{- define "shoal.passwordSecretName" -}}
{{- if .Values.auth.passwordSecret.name -}}
{{- .Values.auth.passwordSecret.name -}}
{{- else if include "shoal.generatedAuth" . -}}
{{- include "shoal.fullname" . }}-auth
{{- end -}}
{{- end -}}

{{- define "shoal.passwordSecretKey" -}}
{{- if .Values.auth.passwordSecret.name -}}
{{- .Values.auth.passwordSecret.key -}}
{{- else -}}
passwords
{{- end -}}
{{- end -}}

{{/* Non-empty when the chart generates the password file. */}}
{{- define "shoal.generatedAuth" -}}
{{- if not (or .Values.auth.passwordSecret.name .Values.auth.jwt.secretName .Values.auth.allowAnonymous) -}}
true
{{- end -}}
{{- end -}}

{{/* Names, labels and the pod parts every tenantdb role shares. */}}

{{- define "tenantdb.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tenantdb.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "tenantdb.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tenantdb.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tenantdb.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tenantdb.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tenantdb
{{- end -}}

{{/* Selector labels of one role; call with (dict "ctx" $ "component" "worker"). */}}
{{- define "tenantdb.componentSelector" -}}
{{ include "tenantdb.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- with .pool }}
tenantdb.c5c3.io/pool: {{ . }}
{{- end }}
{{- end -}}

{{/* The worker pools as YAML {pools: [...]}: each of worker.pools with what it leaves out taken
from worker (a map, such as resources or podDisruptionBudget, field by field at its top level;
set one by one rather than merged, so a pool's false or 0 holds), or, when there is none, one
unnamed pool of worker's values (the Deployment <fullname>-worker). Every queue must have a
pool, or its orders would wait for ever. */}}
{{- define "tenantdb.workerPools" -}}
{{- $worker := .Values.worker }}
{{- $shared := pick $worker "replicas" "concurrency" "extraArgs" "resources" "terminationGracePeriodSeconds" "nodeSelector" "tolerations" "affinity" "podDisruptionBudget" }}
{{- $pools := list }}
{{- if $worker.pools }}
{{- $names := dict }}
{{- $served := dict }}
{{- range $worker.pools }}
{{- if hasKey $names .name }}
{{- fail (printf "worker.pools: two pools are named %q" .name) }}
{{- end }}
{{- $_ := set $names .name true }}
{{- range .queues }}{{ $_ := set $served . true }}{{ end }}
{{- $pool := deepCopy $shared }}
{{- range $key, $value := . }}
{{- if and (kindIs "map" $value) (kindIs "map" (get $pool $key)) }}
{{- $merged := get $pool $key }}
{{- range $field, $set := $value }}{{ $_ := set $merged $field $set }}{{ end }}
{{- else }}
{{- $_ := set $pool $key $value }}
{{- end }}
{{- end }}
{{- $pools = append $pools $pool }}
{{- end }}
{{- range list "reconcile" "provision" "delivery" "teardown" }}
{{- if not (hasKey $served .) }}
{{- fail (printf "worker.pools: no pool consumes the %s queue; every queue needs one" .) }}
{{- end }}
{{- end }}
{{- else }}
{{- $pools = list (set (set (deepCopy $shared) "name" "") "queues" $worker.queues) }}
{{- end }}
{{- toYaml (dict "pools" $pools) }}
{{- end -}}

{{/* The Deployment (and PDB, ScaledObject) name of a worker pool; call with (dict "ctx" $
"pool" name). */}}
{{- define "tenantdb.workerName" -}}
{{- $base := printf "%s-worker" (include "tenantdb.fullname" .ctx) }}
{{- if .pool }}{{ printf "%s-%s" $base .pool | trunc 63 | trimSuffix "-" }}{{ else }}{{ $base }}{{ end }}
{{- end -}}

{{/* The ServiceAccount of a target cluster, and the stem of each role's account on management. */}}
{{- define "tenantdb.serviceAccountName" -}}
{{- default (include "tenantdb.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* One role's ServiceAccount on management; call with (dict "ctx" $ "component" "worker"). */}}
{{- define "tenantdb.roleServiceAccountName" -}}
{{- printf "%s-%s" (include "tenantdb.serviceAccountName" .ctx) .component | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tenantdb.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "tenantdb.kubeconfigDir" -}}/etc/tenantdb/kubeconfig{{- end -}}
{{- define "tenantdb.openbaoTokenDir" -}}/var/run/secrets/tenantdb/openbao{{- end -}}

{{/* The environment every role reads: the ConfigMap, and the Redis URL from a value or Secret. */}}
{{- define "tenantdb.env" -}}
- name: TENANTDB_REDIS_URL
{{- if .Values.redis.existingSecret }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.existingSecret }}
      key: {{ .Values.redis.existingSecretKey }}
{{- else }}
  value: {{ .Values.redis.url | quote }}
{{- end }}
{{- with .Values.redis.auth.username }}
- name: TENANTDB_REDIS_USERNAME
  value: {{ . | quote }}
{{- end }}
{{- if .Values.redis.auth.passwordSecret }}
- name: TENANTDB_REDIS_PASSWORD_FILE
  value: {{ include "tenantdb.redisDir" . }}/password/password
{{- end }}
{{- if .Values.redis.tls.caSecret }}
- name: TENANTDB_REDIS_TLS_CA_FILE
  value: {{ include "tenantdb.redisDir" . }}/ca/ca.crt
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tenantdb.redisDir" -}}/etc/tenantdb/redis{{- end -}}

{{/* Refuse a release whose Redis takes no credentials, unless told that nothing else reaches it. */}}
{{- define "tenantdb.requireRedisAuth" -}}
{{- $redis := .Values.redis -}}
{{- $inUrl := and (not $redis.existingSecret) (contains "@" $redis.url) -}}
{{- if and $redis.auth.required (not $redis.existingSecret) (not $redis.auth.passwordSecret) (not $inUrl) -}}
{{- fail "redis: tenantdb's Redis needs credentials: set redis.auth.passwordSecret (a Secret with the password; redis.auth.username for an ACL user) or redis.existingSecret (a Secret with a URL that carries them); set redis.auth.required=false only where nothing but tenantdb reaches Redis" -}}
{{- end -}}
{{- end -}}

{{- define "tenantdb.envFrom" -}}
- configMapRef:
    name: {{ include "tenantdb.fullname" . }}
{{- end -}}

{{/* Volumes every role mounts; call with (dict "ctx" $ "kube" true) for the roles that talk to
clusters, and "openbao" true for the one that logs in to OpenBao (the worker). */}}
{{- define "tenantdb.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .ctx.Values.tmpSizeLimit }}
{{- if and .kube .ctx.Values.kubeconfig.existingSecret }}
- name: kubeconfig
  secret:
    secretName: {{ .ctx.Values.kubeconfig.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .ctx.Values.kubeconfig.key }}
        path: kubeconfig
{{- end }}
{{- if .openbao }}
- name: openbao-token
  projected:
    defaultMode: 0440
    sources:
      - serviceAccountToken:
          audience: {{ .ctx.Values.openbao.tokenAudience }}
          expirationSeconds: {{ .ctx.Values.openbao.tokenExpirationSeconds }}
          path: token
{{- end }}
{{- with .ctx.Values.redis.auth.passwordSecret }}
- name: redis-password
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: {{ $.ctx.Values.redis.auth.passwordSecretKey }}
        path: password
{{- end }}
{{- with .ctx.Values.redis.tls.caSecret }}
- name: redis-ca
  secret:
    secretName: {{ . }}
    defaultMode: 0444
    items:
      - key: {{ $.ctx.Values.redis.tls.caSecretKey }}
        path: ca.crt
{{- end }}
{{- with .ctx.Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tenantdb.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .kube .ctx.Values.kubeconfig.existingSecret }}
- name: kubeconfig
  mountPath: {{ include "tenantdb.kubeconfigDir" .ctx }}
  readOnly: true
{{- end }}
{{- if .openbao }}
- name: openbao-token
  mountPath: {{ include "tenantdb.openbaoTokenDir" .ctx }}
  readOnly: true
{{- end }}
{{- if .ctx.Values.redis.auth.passwordSecret }}
- name: redis-password
  mountPath: {{ include "tenantdb.redisDir" .ctx }}/password
  readOnly: true
{{- end }}
{{- if .ctx.Values.redis.tls.caSecret }}
- name: redis-ca
  mountPath: {{ include "tenantdb.redisDir" .ctx }}/ca
  readOnly: true
{{- end }}
{{- with .ctx.Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tenantdb.metricsPort" -}}
{{- if .Values.metrics.enabled -}}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end -}}
{{- end -}}

{{/* A liveness probe on /metrics: the process serves it for as long as it runs. */}}
{{/* The liveness and readiness probes on the metrics port's /livez, which each role answers from
what it is there for: the watcher's watch loops and lease campaign, beat's sweeps, a worker's
consumer loop (not only the metrics thread). Ready means alive; a failing liveness restarts. */}}
{{- define "tenantdb.livenessProbe" -}}
{{- if .Values.metrics.enabled -}}
livenessProbe:
  httpGet:
    path: /livez
    port: metrics
  initialDelaySeconds: 10
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /livez
    port: metrics
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 2
{{- end -}}
{{- end -}}

{{/* Pod-level fields every role shares; call with (dict "ctx" $ "role" .Values.worker
"component" "worker" "kube" true). Only the roles that talk to API servers get an API token. */}}
{{- define "tenantdb.podSpec" -}}
serviceAccountName: {{ include "tenantdb.roleServiceAccountName" . }}
automountServiceAccountToken: {{ .kube }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .ctx.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- if .ctx.Values.topologySpreadConstraints }}
topologySpreadConstraints:
{{- $selector := include "tenantdb.componentSelector" (dict "ctx" .ctx "component" .component "pool" .pool) | fromYaml }}
{{- range .ctx.Values.topologySpreadConstraints }}
  - {{- toYaml (merge (dict) . (dict "labelSelector" (dict "matchLabels" $selector))) | nindent 4 }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "tenantdb.podMetadata" -}}
labels:
  {{- include "tenantdb.componentSelector" (dict "ctx" .ctx "component" .component "pool" .pool) | nindent 2 }}
  {{- with .ctx.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- if .metrics }}
  tenantdb.c5c3.io/metrics: "true"
  {{- end }}
annotations:
  checksum/config: {{ include (print .ctx.Template.BasePath "/configmap.yaml") .ctx | sha256sum }}
  {{- with .ctx.Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

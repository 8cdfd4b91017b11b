{{- define "rsvc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rsvc.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rsvc.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* The watcher's pods: not the service's (its Service must never route to them). */ -}}
{{- define "rsvc.watchSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-watch
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* Pods of jobs and syncs (the indexer, sync-ldap): not the service's either. */ -}}
{{- define "rsvc.taskSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-task
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rsvc.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "rsvc.secretName" -}}{{ include "rsvc.fullname" . }}-secrets{{- end -}}

{{- define "rsvc.esEnv" -}}
- name: RSVC_ES_URL
  value: {{ .Values.elasticsearch.url | quote }}
- name: RSVC_INDEX_ALIAS
  value: {{ .Values.elasticsearch.indexAlias | quote }}
- name: RSVC_INSTALLATION_ID
  value: {{ .Values.elasticsearch.installationId | default (printf "%s/%s" .Release.Namespace .Release.Name) | quote }}
{{- $secret := .Values.elasticsearch.existingSecret | default (include "rsvc.secretName" .) }}
{{- if or .Values.elasticsearch.existingSecret .Values.elasticsearch.username }}
- name: RSVC_ES_USERNAME
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: username, optional: true}}
- name: RSVC_ES_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: password, optional: true}}
{{- end }}
{{- if or .Values.elasticsearch.existingSecret .Values.elasticsearch.apiKey }}
- name: RSVC_ES_API_KEY
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: apiKey, optional: true}}
{{- end }}
{{- if .Values.elasticsearch.caSecret }}
- name: RSVC_ES_CA_CERTS
  value: /etc/rsvc/es-ca/ca.crt
{{- end }}
{{- end -}}

{{/* Worker processes: .Values.workers, else one per core of the CPU limit (rounded up). */}}
{{- define "rsvc.workers" -}}
{{- $cpu := toString (default "" (dig "limits" "cpu" "" .Values.resources)) -}}
{{- if .Values.workers -}}
{{- .Values.workers -}}
{{- else if not $cpu -}}
1
{{- else if hasSuffix "m" $cpu -}}
{{- max 1 (div (add (atoi (trimSuffix "m" $cpu)) 999) 1000) -}}
{{- else -}}
{{- max 1 (int (ceil (float64 $cpu))) -}}
{{- end -}}
{{- end -}}

{{/* The indexer's Job spec (a CronJob's jobTemplate.spec, or a Job's spec): with
indexer.shards > 1, a Job in Indexed completion mode, one pod per shard. */}}
{{- define "rsvc.indexerJobSpec" -}}
{{- $shards := int (.Values.indexer.shards | default 1) }}
{{- if gt $shards 1 }}
completionMode: Indexed
completions: {{ $shards }}
parallelism: {{ .Values.indexer.parallelism | default $shards }}
backoffLimitPerIndex: {{ .Values.indexer.backoffLimitPerIndex | default 2 }}
maxFailedIndexes: {{ $shards }}
{{- else }}
backoffLimit: 2
{{- end }}
template:
  metadata:
    labels: {{- include "rsvc.taskSelectorLabels" . | nindent 6 }}
  spec:
    restartPolicy: Never
    automountServiceAccountToken: false
    securityContext: {{- toYaml .Values.podSecurityContext | nindent 6 }}
    containers:
      - name: indexer
        image: {{ include "rsvc.image" . }}
        imagePullPolicy: {{ .Values.image.pullPolicy }}
        command: ["retrieval-indexer"]
        args:
          - index
          - {{ required "indexer.source is required when the indexer is enabled" .Values.indexer.source | quote }}
          - --knowledge-id
          - {{ required "indexer.knowledgeId is required when the indexer is enabled" .Values.indexer.knowledgeId | quote }}
          - --tenant
          - {{ .Values.indexer.tenant | default "default" | quote }}
          {{- with .Values.indexer.datasetName }}
          - --dataset-name
          - {{ . | quote }}
          {{- end }}
          {{- range .Values.indexer.extraArgs }}
          - {{ . | quote }}
          {{- end }}
        env:
          {{- include "rsvc.esEnv" . | nindent 10 }}
          {{- if gt $shards 1 }}
          - name: RSVC_INDEXER_SHARDS  # (Kubernetes sets JOB_COMPLETION_INDEX in each pod)
            value: {{ $shards | quote }}
          {{- end }}
          {{- with .Values.indexer.pushgatewayUrl }}
          - name: RSVC_PUSHGATEWAY_URL
            value: {{ . | quote }}
          {{- end }}
        {{- with .Values.indexer.credentialsSecret }}
        envFrom:
          - secretRef:
              name: {{ . }}
        {{- end }}
        resources: {{- toYaml .Values.indexer.resources | nindent 10 }}
        securityContext: {{- toYaml .Values.securityContext | nindent 10 }}
        volumeMounts:
          - {name: tmp, mountPath: /tmp}
          {{- if .Values.elasticsearch.caSecret }}
          - {name: es-ca, mountPath: /etc/rsvc/es-ca, readOnly: true}
          {{- end }}
    volumes:
      - name: tmp
        emptyDir: {sizeLimit: 256Mi}
      {{- if .Values.elasticsearch.caSecret }}
      - name: es-ca
        secret:
          secretName: {{ .Values.elasticsearch.caSecret }}
      {{- end }}
{{- end }}

{{- define "memplane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "memplane.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "memplane.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "memplane.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "memplane.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "memplane.fullname" .)) -}}
{{- end -}}

{{/* Whether the pods require MEMPLANE_METRICS_TOKEN and the scrapes send it. */}}
{{- define "memplane.metricsToken" -}}
{{- if or (not .Values.secrets.existingSecret) .Values.metricsToken.required -}}true{{- end -}}
{{- end -}}

{{- define "memplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "memplane.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Environment shared by every memplane container. */}}
{{- define "memplane.env" -}}
{{- $secret := include "memplane.secretName" . }}
- name: MEMPLANE_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: MEMPLANE_DATABASE_URL}}
- name: MEMPLANE_SERVER_KEY
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: MEMPLANE_SERVER_KEY}}
- name: MEMPLANE_RECEIPT_SIGNING_KEY
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: MEMPLANE_RECEIPT_SIGNING_KEY}}
- name: MEMPLANE_ADMIN_KEY
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: MEMPLANE_ADMIN_KEY, optional: true}}
- name: MEMPLANE_METRICS_TOKEN
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: MEMPLANE_METRICS_TOKEN, optional: {{ not (include "memplane.metricsToken" .) }}}}
# An admin key the server has to generate (an existing Secret without MEMPLANE_ADMIN_KEY)
# goes into this file on the pod's data volume, never into its log.
- name: MEMPLANE_BOOTSTRAP_KEY_FILE
  value: /var/lib/memplane/bootstrap-admin.key
- name: MEMPLANE_DATA_DIR
  value: /var/lib/memplane
- name: MEMPLANE_RUN_JOBS
  value: "false"
- name: MEMPLANE_DEFAULT_BUCKET_URL
  value: {{ include "memplane.bucketUrl" . | quote }}
{{- with .Values.publicUrl }}
- name: MEMPLANE_PUBLIC_URL
  value: {{ . | quote }}
{{- end }}
- name: MEMPLANE_KEK_PROVIDER
  value: {{ .Values.kek.provider | quote }}
{{- if eq .Values.kek.provider "aws-kms" }}
- name: MEMPLANE_KEK_AWS_KEY_ID
  value: {{ required "kek.awsKeyId is required with kek.provider aws-kms" .Values.kek.awsKeyId | quote }}
{{- with .Values.kek.awsRegion }}
- name: MEMPLANE_KEK_AWS_REGION
  value: {{ . | quote }}
{{- end }}
{{- else }}
- name: MEMPLANE_KEK_KEYRING_PATH
  value: /var/lib/memplane/keys/keyring.json
{{- end }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "memplane.volumeMounts" -}}
- name: data
  mountPath: /var/lib/memplane
- name: tmp
  mountPath: /tmp
{{- if ne .Values.kek.provider "aws-kms" }}
- name: keyring
  mountPath: /var/lib/memplane/keys
{{- end }}
{{- end -}}

{{- define "memplane.volumes" -}}
- name: data
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- if ne .Values.kek.provider "aws-kms" }}
- name: keyring
  persistentVolumeClaim:
    claimName: {{ required "kek.keyringClaim (a ReadWriteMany claim) is required with kek.provider local" .Values.kek.keyringClaim }}
{{- end }}
{{- end -}}

{{/* The pods' account; the migrations hook runs before the chart's account exists, so it
keeps the namespace's default unless an existing account is named. */}}
{{- define "memplane.serviceAccount" -}}
{{- with include "memplane.serviceAccountName" . }}
serviceAccountName: {{ . }}
{{- end }}
{{- end -}}

{{- define "memplane.podSpecCommon" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The default bucket, required: without one, memory would go to each pod's emptyDir and be
lost when the pod goes. A directory or memory:// bucket inside a pod is refused alike. */}}
{{- define "memplane.bucketUrl" -}}
{{- $url := required "defaultBucketUrl is required: name the bucket memory goes to (e.g. s3://my-bucket/memplane, gs://…, azure://…); without one each pod would keep memory in its own emptyDir, lost on restart" .Values.defaultBucketUrl -}}
{{- if not (regexMatch "^[a-z][a-z0-9+.-]*://" $url) -}}
{{- fail (printf "defaultBucketUrl %q has no scheme: name an object storage bucket (s3://my-bucket/memplane, gs://…, azure://…)" (regexReplaceAll "\\?.*$" $url "")) -}}
{{- end -}}
{{- if regexMatch "^(file|memory)://" $url -}}
{{- fail (printf "defaultBucketUrl %q is inside each pod (an emptyDir, lost on restart): name an object storage bucket (s3://, gs://, azure://)" (regexReplaceAll "\\?.*$" $url "")) -}}
{{- end -}}
{{- $url -}}
{{- end -}}

{{/* Names and labels shared by every object of the chart. */}}

{{/* outboxd.name is the application's name: the chart's. */}}
{{- define "outboxd.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* outboxd.fullname names the release's objects: the release name, with
the chart's appended unless it already contains it. */}}
{{- define "outboxd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* outboxd.instanceLabels name the application and the release. */}}
{{- define "outboxd.instanceLabels" -}}
app.kubernetes.io/name: {{ include "outboxd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* outboxd.selectorLabels select the release's relay pods (not the
migration Job's); they never change across upgrades (a Deployment's
selector is immutable). */}}
{{- define "outboxd.selectorLabels" -}}
{{ include "outboxd.instanceLabels" . }}
app.kubernetes.io/component: relay
{{- end -}}

{{/* outboxd.labels are the recommended app.kubernetes.io labels of every
object but app.kubernetes.io/component, which each object adds. */}}
{{- define "outboxd.labels" -}}
{{ include "outboxd.instanceLabels" . }}
app.kubernetes.io/version: {{ include "outboxd.imageTag" . | quote }}
app.kubernetes.io/part-of: outboxd
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* outboxd.imageTag is image.tag, else the chart's appVersion; "latest"
is refused. */}}
{{- define "outboxd.imageTag" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: \"latest\" names no one build; give a version (the chart's appVersion is the default)" -}}
{{- end -}}
{{- $tag -}}
{{- end -}}

{{- define "outboxd.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "outboxd.imageTag" .) -}}
{{- end -}}

{{/* outboxd.secret is the existing Secret holding the environment. */}}
{{- define "outboxd.secret" -}}
{{- required "existingSecret: name the Secret that holds DATABASE_URL, OUTBOXD_HTTP_TOKEN and the ${VAR}s of config" .Values.existingSecret -}}
{{- end -}}

{{/* outboxd.pluginsYAML is plugins.yaml, from config. */}}
{{- define "outboxd.pluginsYAML" -}}
{{- toYaml .Values.config -}}
{{- end -}}

{{/* outboxd.container is what the relay and the migration containers
share: image, the config file, the Secret's environment, hardening. */}}
{{- define "outboxd.container" -}}
image: {{ include "outboxd.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
env:
  # So that `kubectl exec ... -- outboxd stats` (any operator command)
  # reads the pod's configuration without --config.
  - name: OUTBOXD_CONFIG
    value: /etc/outboxd/plugins.yaml
  # The keyring of destinations and portal links, from its own Secret when
  # secretsKey names one (it outranks a key of the same name in envFrom's).
  - name: OUTBOXD_SECRETS_KEY
    valueFrom:
      secretKeyRef:
        name: {{ .Values.secretsKey.existingSecret | default (include "outboxd.secret" .) }}
        key: {{ required "secretsKey.key: name the key of the Secret that holds OUTBOXD_SECRETS_KEY" .Values.secretsKey.key }}
        optional: {{ .Values.secretsKey.optional }}
envFrom:
  - secretRef:
      name: {{ include "outboxd.secret" . }}
volumeMounts:
  - name: config
    mountPath: /etc/outboxd
    readOnly: true
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
{{- end -}}

{{/* outboxd.podSpec is what the relay and migration pods share. */}}
{{- define "outboxd.podSpec" -}}
serviceAccountName: {{ include "outboxd.serviceAccountName" . }}
automountServiceAccountToken: {{ .Values.serviceAccount.automount }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* outboxd.serviceAccountName is the pods' service account: serviceAccount.name,
else the release's objects' name when the chart creates it, else "default". */}}
{{- define "outboxd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "outboxd.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

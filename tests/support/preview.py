"""A small atlas fleet in a real git repo for the preview tests: clusters `g/c1` and `g/c2`,
each running template `web` (a chart that carries every default noise field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.atlas import make_fleet, one_app
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo

# A chart whose labels, annotations and webhook carry the default noise fields, and which
# fails on purpose when `.Values.broken` is set.
WEB_CHART: dict[str, str] = {
    "Chart.yaml": "apiVersion: v2\nname: web\nversion: 1.0.0\nappVersion: '1.0'\n",
    "values.yaml": "replicas: 1\ngreeting: hello\ncaBundle: Q0EtMQ==\nbuild: '1'\n",
    "templates/_labels.tpl": """{{- define "web.labels" -}}
app.kubernetes.io/name: web
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
""",
    "templates/configmap.yaml": """{{- if .Values.broken -}}
{{ fail "web: broken on purpose" }}
{{- end -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  labels:
    {{- include "web.labels" . | nindent 4 }}
data:
  greeting: {{ .Values.greeting | quote }}
""",
    "templates/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    {{- include "web.labels" . | nindent 4 }}
  annotations:
    example.com/build: {{ .Values.build | quote }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: web
  template:
    metadata:
      labels:
        {{- include "web.labels" . | nindent 8 }}
      annotations:
        checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    spec:
      containers:
        - name: web
          image: registry.example.com/web:{{ .Chart.AppVersion }}
""",
    "templates/webhook.yaml": """apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: web
webhooks:
  - name: web.example.com
    clientConfig:
      caBundle: {{ .Values.caBundle }}
      service:
        name: web
        namespace: default
    admissionReviewVersions: [v1]
    sideEffects: None
""",
}

ROOTS = ["g/c1", "g/c2"]
CHART = "templates/web/chart"
CONFIGMAP = "web/web/default/ConfigMap_web.yaml"
DEPLOYMENT = "web/web/default/Deployment.apps_web.yaml"
WEBHOOK = "web/web/_cluster/MutatingWebhookConfiguration.admissionregistration.k8s.io_web.yaml"


def web_fleet_files(clusters: list[str] = ROOTS) -> dict[str, Any]:
    files: dict[str, Any] = {f"{CHART}/{name}": text for name, text in WEB_CHART.items()}
    files["templates/web/helmfile.yaml.gotmpl"] = (
        "releases:\n  - name: web\n    chart: ./chart\n    namespace: default\n"
    )
    files["deployments/apps/web/deployment.yaml"] = one_app("web")
    files["deployments/global.values.yaml"] = {"greeting": "hello"}
    for cluster in clusters:
        files[f"deployments/{cluster}/cluster.values.yaml"] = {"cluster": cluster}
        files[f"deployments/{cluster}/apps/.gitkeep"] = ""
    return files


def web_repo(path: Path, extra: dict[str, Any] | None = None) -> Path:
    """The web fleet committed as the first commit of a new repo on `main`."""
    repo = init_repo(path)
    make_fleet(repo, {**web_fleet_files(), **(extra or {})}, echo=False)
    commit_all(repo, "base")
    return repo


def commit(
    repo: Path, files: dict[str, Any], delete: tuple[str, ...] = (), message: str = "change"
) -> str:
    write_files(repo, files)
    for path in delete:
        git(repo, "rm", "-r", "-q", path)
    return commit_all(repo, message)


def chart_version(repo: Path, version: str, app_version: str | None = None) -> dict[str, str]:
    """Chart.yaml with another version (and appVersion), as a `commit` file."""
    text = (repo / CHART / "Chart.yaml").read_text()
    lines = []
    for line in text.splitlines():
        if line.startswith("version:"):
            line = f"version: {version}"
        elif line.startswith("appVersion:") and app_version is not None:
            line = f"appVersion: '{app_version}'"
        lines.append(line)
    return {f"{CHART}/Chart.yaml": "\n".join(lines) + "\n"}

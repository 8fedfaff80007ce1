"""Synthetic atlas fleets for the benchmarks: N roots × M releases of a small local chart."""

from __future__ import annotations

from pathlib import Path

CHART_YAML = """apiVersion: v2
name: svc
version: 1.0.0
"""

CHART_VALUES = """replicas: 1
image:
  repository: registry.example.com/svc
  tag: "1.0"
port: 8080
resources:
  requests: {cpu: 10m, memory: 32Mi}
env: {}
"""

DEPLOYMENT_TEMPLATE = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels:
    app.kubernetes.io/name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .Release.Name }}
    spec:
      containers:
        - name: app
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          ports:
            - containerPort: {{ .Values.port }}
          env:
            {{- range $k, $v := .Values.env }}
            - name: {{ $k }}
              value: {{ $v | quote }}
            {{- end }}
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
"""

SERVICE_TEMPLATE = """apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector:
    app.kubernetes.io/name: {{ .Release.Name }}
  ports:
    - port: 80
      targetPort: {{ .Values.port }}
"""

HELMFILE = """releases:
  - name: svc
    chart: ./chart
    namespace: {{ .atlas.instance.name }}
    values:
      - values.yaml
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def generate(base: Path, *, groups: int, clusters_per_group: int, releases: int) -> int:
    """Write an atlas fleet; returns the number of roots.

    Each root gets `releases` deployments (global apps, one instance each) and four values
    levels: chart defaults, template values, global, group and cluster values.
    """
    write(base / "templates/svc/chart/Chart.yaml", CHART_YAML)
    write(base / "templates/svc/chart/values.yaml", CHART_VALUES)
    write(base / "templates/svc/chart/templates/deployment.yaml", DEPLOYMENT_TEMPLATE)
    write(base / "templates/svc/chart/templates/service.yaml", SERVICE_TEMPLATE)
    write(base / "templates/svc/helmfile.yaml.gotmpl", HELMFILE)
    write(base / "templates/svc/values.yaml", "env:\n  LOG_LEVEL: info\n")
    write(base / "deployments/global.values.yaml", "env:\n  REGION_DOMAIN: example.com\n")
    for r in range(releases):
        write(
            base / f"deployments/apps/app{r:02d}/deployment.yaml",
            f"apps:\n  - name: app{r:02d}\n    template: svc\n",
        )
    roots = 0
    for g in range(groups):
        group = base / f"deployments/g{g:03d}"
        write(group / "group.values.yaml", f"env:\n  GROUP: g{g:03d}\n")
        for c in range(clusters_per_group):
            cluster = group / f"c{g:03d}-{c:03d}"
            # A value of its own: every cluster's Deployments differ from every other's, as
            # in real fleets (names, domains, regions), so caches of identical documents
            # only help where a real fleet would let them (here: the Services).
            write(
                cluster / "cluster.values.yaml",
                f"replicas: {1 + c % 3}\nenv:\n  CLUSTER: {cluster.name}\n",
            )
            write(cluster / "apps/.keep", "")
            roots += 1
    return roots

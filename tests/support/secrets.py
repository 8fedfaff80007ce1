"""Shared pieces of the secrets tests: the variables that name an age key (the `age_key`
fixture of tests/conftest.py clears them), and a chart that puts a secret everywhere a chart
can (ConfigMap, env var, annotations, a Secret)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import Any

from shared.engine.secrets.origin import perturb_string

KEY_VARIABLES = (
    "SOPS_AGE_KEY_FILE",
    "SOPS_AGE_KEY",
    "SOPS_AGE_KEY_CMD",
    "SOPS_AGE_SSH_PRIVATE_KEY_FILE",
)


# A chart that uses `.Values.password` in every way the requirements name, plus a weak word and
# plain text that must stay visible.
APP_CHART: dict[str, str] = {
    "Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
    "values.yaml": "password: ''\nuser: app\ndsn: ''\nmode: ''\n",
    "templates/configmap.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  annotations:
    encoded: {{ .Values.password | b64enc }}
    checksum/password: {{ .Values.password | sha256sum }}
data:
  url: "postgres://{{ .Values.user }}:{{ .Values.password }}@db.internal:5432/app"
  dsn: {{ .Values.dsn | quote }}
  mode: {{ .Values.mode | quote }}
  plain: "db default true"
""",
    "templates/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  selector:
    matchLabels:
      app: app
  template:
    metadata:
      labels:
        app: app
    spec:
      containers:
        - name: app
          image: registry.example.com/app:1.0
          env:
            - name: PASSWORD
              value: {{ .Values.password | quote }}
            - name: MODE
              value: default
""",
    "templates/secret.yaml": """apiVersion: v1
kind: Secret
metadata:
  name: app
stringData:
  password: {{ .Values.password | quote }}
data:
  token: {{ .Values.password | b64enc }}
""",
}


def app_chart_files(prefix: str) -> dict[str, str]:
    return {f"{prefix}/{name}": text for name, text in APP_CHART.items()}


def forms(secret: str) -> set[str]:
    """What must never appear for `secret`: itself, base64, hex sha256 (a confirmable
    digest), and its perturbed form (an easily reversed mapping of it)."""
    return {
        secret,
        base64.b64encode(secret.encode()).decode(),
        perturb_string(secret),
    }


def assert_hidden(blobs: Iterable[tuple[str, str | bytes]], secrets: Iterable[str]) -> None:
    """No form of any secret in any blob; names the blob and the secret's position only."""
    wanted = {form for s in secrets for form in forms(s)}
    for name, blob in blobs:
        text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
        for form in wanted:
            assert form not in text, f"{name}: a secret (or its encoding) leaked"


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def values_at(tree: Any, *keys: str | int) -> Any:
    for key in keys:
        tree = tree[key]
    return tree


# Every YAML type a secrets file can hold, and the strings among them that must never leak.
TYPED: dict[str, Any] = {
    "text": "a-long-secret-string",
    "multi": "first secret line\nsecond secret line\n",
    "smallInt": 42,
    "bigInt": 9876543,
    "pi": 3.14159,
    "flag": True,
    "nothing": None,
    "items": ["alpha-item-secret", 23456, False],
    "nested": {"deep": "deep-secret-value", "port": 5432},
}
TYPED_STRINGS = [
    "a-long-secret-string",
    "first secret line",
    "second secret line",
    "alpha-item-secret",
    "deep-secret-value",
]

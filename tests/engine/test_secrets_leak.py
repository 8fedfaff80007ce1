"""THE leak test: fleets (both layouts) whose secrets are random 32-character strings, and
every byte rollwright can emit — CLI stdout/stderr of roots, values, render and validate,
every rendered file, logs at DEBUG, exception text of templates that fail with a secret in
their message — searched for each secret, its base64 and its perturbed form."""

from __future__ import annotations

import logging
import secrets
import string
import traceback
from pathlib import Path
from typing import Any

import pytest

from shared.cli.main import main
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import make_fleet
from tests.support.dimensions import app_values, base_files, patch_doc
from tests.support.files import write_files
from tests.support.secrets import app_chart_files, assert_hidden


def random_secret() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(32))


class Emitted:
    """Everything collected from one fleet, by name."""

    def __init__(self) -> None:
        self.blobs: list[tuple[str, str | bytes]] = []

    def add(self, name: str, blob: str | bytes) -> None:
        self.blobs.append((name, blob))


def run_cli(
    emitted: Emitted, capsys: pytest.CaptureFixture[str], name: str, argv: list[str]
) -> int:
    code = main(argv)
    captured = capsys.readouterr()
    emitted.add(f"{name} stdout", captured.out)
    emitted.add(f"{name} stderr", captured.err)
    return code


def collect_fleet(
    emitted: Emitted, fleet: Fleet, repo: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, int]:
    """Run every command and engine call on `fleet`; returns the CLI exit codes."""
    codes = {
        "roots": run_cli(emitted, capsys, "roots", ["roots", "--repo", str(repo)]),
        "validate": run_cli(emitted, capsys, "validate", ["validate", "--repo", str(repo)]),
    }
    for root in fleet.roots():
        codes[f"values {root}"] = run_cli(
            emitted, capsys, f"values {root}", ["values", root, "--repo", str(repo)]
        )
        try:
            releases = fleet.releases(root)
        except FleetError as err:
            add_error(emitted, f"releases {root}", err)
            releases = []
        for info in releases:
            argv = ["values", root, "--repo", str(repo), "--release", info.id]
            run_cli(emitted, capsys, f"values {root} {info.id}", argv)
        argv = ["render", "--repo", str(repo), "--out", str(out), "--root", root]
        codes[f"render {root}"] = run_cli(emitted, capsys, f"render {root}", argv)
        try:
            render = fleet.render(root)
        except FleetError as err:
            add_error(emitted, f"render {root}", err)
            continue
        emitted.add(f"repr {root}", repr(render) + str(render))
        for path, data in render.files.items():
            emitted.add(f"{root}:{path}", path.encode() + b"\n" + data)
        emitted.add(f"leaf digests {root}", repr(render.leaf_digests()))
    for problem in fleet.validate():
        emitted.add("validate problem", str(problem))
    for file in sorted(out.rglob("*")):
        if file.is_file():
            emitted.add(f"out {file}", str(file).encode() + b"\n" + file.read_bytes())
    return codes


def add_error(emitted: Emitted, name: str, err: BaseException) -> None:
    emitted.add(name, str(err) + repr(err) + "".join(traceback.format_exception(err)))


def test_atlas_fleet_leaks_nothing(
    tmp_path: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    keys = [
        "password",
        "templateSecret",
        "groupSecret",
        "clusterSecret",
        "instanceSecret",
        "deploymentSecret",
        "listSecret",
        "nestedSecret",
    ]
    values = {k: random_secret() for k in keys}
    rcpt = [age_key.recipient]

    def enc(data: dict[str, Any]) -> str:
        return encrypt_yaml(data, rcpt)

    flow_chart = """apiVersion: v1
kind: ConfigMap
metadata:
  name: flow
data:
  password: {{ .Values.password | quote }}
{{- if eq .Values.mode "db" }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: flow-db
data:
  combo: {{ printf "%s-%s" .Values.groupSecret .Values.clusterSecret | quote }}
{{- end }}
"""
    files: dict[str, Any] = {
        **app_chart_files("templates/app/chart"),
        "templates/app/helmfile.yaml.gotmpl": (
            "releases:\n  - name: app\n    chart: ./chart\n"
            "    values: [values.yaml.gotmpl]\n    secrets: [secrets.sops.yaml]\n"
        ),
        "templates/app/values.yaml.gotmpl": 'fromTemplate: "t-{{ .Values.groupSecret }}"\n',
        "templates/app/secrets.sops.yaml": enc({"templateSecret": values["templateSecret"]}),
        "templates/echo/helmfile.yaml.gotmpl": (
            "releases:\n  - name: echo\n    chart: ./chart\n"
            '    values: [{fromEnv: "{{ .Values.groupSecret }}"}]\n'
        ),
        "templates/flow/chart/Chart.yaml": "apiVersion: v2\nname: flow\nversion: 0.1.0\n",
        "templates/flow/chart/templates/cm.yaml": flow_chart,
        "templates/flow/helmfile.yaml.gotmpl": "releases:\n  - name: flow\n    chart: ./chart\n",
        "templates/badchart/chart/Chart.yaml": "apiVersion: v2\nname: bad\nversion: 0.1.0\n",
        "templates/badchart/chart/templates/x.yaml": (
            '{{ required (printf "need more than %s" .Values.password) .Values.missing }}\n'
        ),
        "templates/badchart/helmfile.yaml.gotmpl": "releases:\n  - name: bad\n    chart: ./chart\n",
        "deployments/global.values.sops.yaml": enc(
            {
                "password": values["password"],
                "mode": "db",
                "list": ["x", values["listSecret"]],
                "nested": {"deeper": {"value": values["nestedSecret"]}},
            }
        ),
        "deployments/g/group.values.sops.yaml": enc({"groupSecret": values["groupSecret"]}),
        "deployments/g/c/cluster.values.sops.yaml": enc({"clusterSecret": values["clusterSecret"]}),
        "deployments/g/c/cluster.values.yaml.gotmpl": (
            'dsn: "host=db password={{ .Values.password }}"\n'
            'shout: "{{ .Values.clusterSecret | upper }}"\n'
        ),
        "deployments/g/c/apps/app/deployment.yaml": {
            "apps": [
                {"template": "app", "secrets": ["secrets.sops.yaml"]},
                {"template": "echo"},
                {"template": "flow"},
            ]
        },
        "deployments/g/c/apps/app/secrets.sops.yaml": enc(
            {
                "instanceSecret": values["instanceSecret"],
                "user": f"u-{values['templateSecret']}-{values['instanceSecret']}",
            }
        ),
        # a deployment gotmpl sees the hierarchy's secrets before it (as in ATLAS)
        "deployments/g/c/apps/app/values.yaml.gotmpl": (
            'note: "n-{{ .Values.deploymentSecret }}-{{ .Values.clusterSecret }}"\n'
        ),
        "deployments/g/c/apps/app/values.sops.yaml": enc(
            {"deploymentSecret": values["deploymentSecret"]}
        ),
        # a values template that fails with a secret in its message
        "deployments/g/broken/apps/app/deployment.yaml": {"apps": [{"template": "echo"}]},
        "deployments/g/broken/cluster.values.yaml.gotmpl": (
            '{{ fail (printf "refusing %s" .Values.password) }}\n'
        ),
        # a chart template that does
        "deployments/g/badchart/apps/app/deployment.yaml": {"apps": [{"template": "badchart"}]},
    }
    repo = make_fleet(tmp_path / "fleet", files)  # with the echo chart as template echo

    emitted = Emitted()
    fleet = Fleet.open(WorkTree(repo))
    codes = collect_fleet(emitted, fleet, repo, tmp_path / "out", capsys)

    # the fleet really was rendered and really failed where it should
    assert codes["render g/c"] == 0 and codes["values g/c"] == 1  # several releases
    assert codes["render g/broken"] == 1 and codes["render g/badchart"] == 1
    assert codes["validate"] == 1
    joined = "\n".join(str(b) for _, b in emitted.blobs)
    assert "refusing REDACTED" in joined and "need more than REDACTED" in joined
    assert "redacting by value" in caplog.text  # the flow release took the fallback path
    plain = Fleet.open(WorkTree(repo)).render("g/c").reveal()
    plain_blob = b"".join(plain.values())
    for key in ("password", "templateSecret", "groupSecret", "instanceSecret"):
        assert values[key].encode() in plain_blob, key  # the secrets did reach the output

    emitted.add("log records", caplog.text)
    emitted.add("log messages", "\n".join(r.getMessage() for r in caplog.records))
    assert_hidden(emitted.blobs, values.values())


def test_dimensions_fleet_leaks_nothing(
    tmp_path: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    values = {k: random_secret() for k in ("base", "env", "sector", "region", "dep", "b")}
    rcpt = [age_key.recipient]

    def vo(data: dict[str, Any]) -> dict[str, Any]:
        return {"source": {"helm": {"valuesObject": data}}}

    files = base_files()
    secret_at = {
        "config/mc/a/values.sops.yaml": {"baseSecret": values["base"], "tier": values["dep"]},
        "config/mc/a/e1/values.sops.yaml": {"envSecret": values["env"]},
        "config/mc/a/e1/s1/values.sops.yaml": {"sectorSecret": values["sector"]},
        "config/mc/a/e1/s1/r1/values.sops.yaml": {"regionSecret": values["region"]},
    }
    for path, data in secret_at.items():
        files[path] = encrypt_yaml(app_values("a", vo(data)), rcpt)
    files["config/mc/b/values.sops.yaml"] = encrypt_yaml(
        app_values("b", {"additionalAnnotations": {"token": values["b"]}}), rcpt
    )
    files["config/mc/a/values.yaml"]["applications"]["a"]["additionalAnnotations"] = {
        "dsn": "postgres://app:{{ .Values.applications.a.source.helm.valuesObject.baseSecret }}@db",
        "encoded": "{{ .Values.applications.b.additionalAnnotations.token | b64enc }}",
    }
    # a template that fails quoting a secret, on one root
    files["config/mc/b/e2/s3/r3/values.yaml"] = app_values(
        "b",
        {
            "additionalLabels": {
                "bad": '{{ fail (printf "no %s" '
                ".Values.applications.b.additionalAnnotations.token) }}"
            }
        },
    )
    # a patch whose dependency looks at a secret
    doc = patch_doc(
        "needs-tier", "a", {"project": "patched"}, deps=[{"/a/source/helm/valuesObject/tier": "x"}]
    )
    files["config/mc/a/patches/p.yaml"] = doc
    files["config/mc/a/e1/s2/patches/p.yaml"] = doc  # unmet there: that render refuses
    repo = tmp_path / "fleet"
    write_files(repo, files)

    emitted = Emitted()
    fleet = Fleet.open(WorkTree(repo))
    codes = collect_fleet(emitted, fleet, repo, tmp_path / "out", capsys)
    assert codes["render mc/e1/s1/r1"] == 0 and codes["render mc/e2/s3/r3"] == 1
    assert codes["render mc/e1/s2/r1"] == 1
    assert codes["validate"] == 1
    joined = "\n".join(str(b) for _, b in emitted.blobs)
    assert "no REDACTED" in joined
    assert "found a value that comes from an encrypted file (not shown)" in joined
    plain_blob = b"".join(Fleet.open(WorkTree(repo)).render("mc/e1/s1/r1").reveal().values())
    for key in ("base", "env", "sector", "region", "b"):
        assert values[key].encode() in plain_blob, key

    emitted.add("log records", caplog.text)
    assert_hidden(emitted.blobs, values.values())

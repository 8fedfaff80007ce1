"""Secrets in the atlas layout, end to end with real sops and a throwaway age key: every type
at every level, precedence, derived values, weak words, Secret hashing and rotation, the
Render's two trees, and error messages."""

from __future__ import annotations

import base64
import json
import logging
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.secrets.redact import redact_string, redact_value, secret_hash
from shared.engine.tree import WorkTree
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import make_fleet, one_app
from tests.support.files import echo_values
from tests.support.secrets import TYPED, TYPED_STRINGS, app_chart_files, assert_hidden

ROOT = "g/c"
DEP = "deployments/g/c/apps/d"


# level → (file that sets it, extra deployment/helmfile settings)
LEVEL_FILES = {
    "template-secrets": "templates/echo/secrets.sops.yaml",
    "instance-secrets": f"{DEP}/secrets.sops.yaml",
    "global": "deployments/global.values.sops.yaml",
    "group": "deployments/g/group.values.sops.yaml",
    "cluster": "deployments/g/c/cluster.values.sops.yaml",
    "deployment": f"{DEP}/values.sops.yaml",
}


def fleet_with(level: str, key: AgeKey, base: Path, content: dict[str, Any]) -> Fleet:
    files: dict[str, Any] = {f"{DEP}/deployment.yaml": one_app()}
    if level == "template-secrets":
        files["templates/echo/helmfile.yaml.gotmpl"] = (
            "releases:\n  - name: echo\n    chart: ./chart\n    secrets: [secrets.sops.yaml]\n"
        )
    if level == "instance-secrets":
        files[f"{DEP}/deployment.yaml"] = one_app(secrets=["secrets.sops.yaml"])
    files[LEVEL_FILES[level]] = encrypt_yaml(content, [key.recipient])
    make_fleet(base, files)
    return Fleet.open(WorkTree(base))


@pytest.mark.parametrize("level", list(LEVEL_FILES))
def test_every_type_at_every_level(tmp_path: Path, age_key: AgeKey, level: str) -> None:
    fleet = fleet_with(level, age_key, tmp_path, TYPED)
    plain = fleet.values(ROOT, reveal=True)
    for key, value in TYPED.items():
        assert plain[key] == value, key
        assert type(plain[key]) is type(value), key
    shown = fleet.values(ROOT)
    for key, value in TYPED.items():
        assert shown[key] == redact_value(value), key
    assert shown["bigInt"] == 1234567 and shown["pi"] == 1.23456
    assert shown["smallInt"] == 42 and shown["flag"] is True and shown["nothing"] is None
    assert shown["items"] == ["REDAC-REDA-REDACT", 12345, False]
    assert shown["chartDefault"] == "from-chart"  # plain values untouched

    render = fleet.render(ROOT)
    assert echo_values(render.reveal())["text"] == "a-long-secret-string"
    assert_hidden(render.files.items(), TYPED_STRINGS)
    assert b"9876543" not in b"".join(render.files.values())
    assert b"from-chart" in b"".join(render.files.values())


def test_precedence_secrets_after_values_instance_over_template_hierarchy_over_both(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    recipients = [age_key.recipient]
    files: dict[str, Any] = {
        "templates/echo/helmfile.yaml.gotmpl": (
            "releases:\n  - name: echo\n    chart: ./chart\n"
            "    values: [{a: plain-template-aaaa, b: plain-template-bbbb}]\n"
            "    secrets: [secrets.sops.yaml]\n"
        ),
        "templates/echo/secrets.sops.yaml": encrypt_yaml(
            {"a": "tmpl-secret-aaaa", "b": "tmpl-secret-bbbb", "c": "tmpl-secret-cccc"},
            recipients,
        ),
        f"{DEP}/deployment.yaml": one_app(
            values={"a": "plain-instance-aaaa"}, secrets=["secrets.sops.yaml"]
        ),
        f"{DEP}/secrets.sops.yaml": encrypt_yaml({"b": "inst-secret-bbbb"}, recipients),
        "deployments/global.values.yaml": {"c": "plain-global-cccc"},
        "deployments/g/c/cluster.values.sops.yaml": encrypt_yaml(
            {"d": "cluster-secret-dddd", "e": "cluster-secret-eeee"}, recipients
        ),
        "deployments/g/c/cluster.values.yaml": {"e": "plain-cluster-eeee"},
    }
    fleet = Fleet.open(WorkTree(make_fleet(tmp_path, files)))
    plain = fleet.values(ROOT, reveal=True)
    assert {k: plain[k] for k in "abcde"} == {
        "a": "tmpl-secret-aaaa",  # template secrets over template and instance values
        "b": "inst-secret-bbbb",  # instance secrets over template secrets
        "c": "plain-global-cccc",  # the hierarchy over both
        "d": "cluster-secret-dddd",
        "e": "plain-cluster-eeee",  # within a level, the plain file over the sops file
    }
    shown = fleet.values(ROOT)
    assert {k: shown[k] for k in "abcde"} == {
        "a": "REDA-REDACT-REDA",
        "b": "REDA-REDACT-REDA",
        "c": "plain-global-cccc",  # a secret overridden by a plain value is not secret
        "d": "REDACTE-REDACT-REDA",
        "e": "plain-cluster-eeee",
    }
    render = fleet.render(ROOT)
    blob = b"".join(render.files.values())
    assert b"plain-global-cccc" in blob and b"plain-cluster-eeee" in blob
    assert_hidden(
        render.files.items(), ["tmpl-secret-aaaa", "inst-secret-bbbb", "cluster-secret-dddd"]
    )
    # overridden secrets never reach the output at all
    assert b"tmpl-secret-cccc" not in b"".join(render.reveal().values())


PASSWORD = "Zq7pWx3mK9vB-2f"


def app_fleet(base: Path, key: AgeKey, secrets: dict[str, Any], **extra: Any) -> Fleet:
    files: dict[str, Any] = {
        **app_chart_files("templates/app/chart"),
        "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
        f"{DEP}/deployment.yaml": one_app("app"),
        "deployments/global.values.sops.yaml": encrypt_yaml(secrets, [key.recipient]),
        **extra,
    }
    return Fleet.open(WorkTree(make_fleet(base, files, echo=False)))


def docs(render_files: dict[str, bytes], kind: str) -> dict[str, Any]:
    hits = [p for p in render_files if re.search(rf"/{kind}(\.[^/_]+)?_[^/]+$", p)]
    assert len(hits) == 1, hits
    doc: dict[str, Any] = yaml.safe_load(render_files[hits[0]])
    return doc


def test_derived_values_are_redacted_by_origin(tmp_path: Path, age_key: AgeKey) -> None:
    gotmpl = 'dsn: "host=db.internal password={{ .Values.password }} sslmode=require"\n'
    fleet = app_fleet(
        tmp_path,
        age_key,
        {"password": PASSWORD, "mode": "production"},
        **{"deployments/g/c/cluster.values.yaml.gotmpl": gotmpl},
    )
    shown = fleet.values(ROOT)
    # a gotmpl value built from a secret: the secret part redacted, the rest kept
    assert shown["dsn"] == "host=db.internal password=REDACTED-RE sslmode=require"
    assert shown["password"] == "REDACTED-RE" and shown["user"] == "app"

    render = fleet.render(ROOT)
    config = docs(render.files, "ConfigMap")
    assert config["data"]["url"] == "postgres://app:REDACTED-RE@db.internal:5432/app"
    assert config["data"]["dsn"] == "host=db.internal password=REDACTED-RE sslmode=require"
    assert config["data"]["mode"] == "REDACTED"
    assert config["data"]["plain"] == "db default true"
    # transformed values (b64enc, sha256sum) are redacted as whole tokens
    annotations = config["metadata"]["annotations"]
    assert re.fullmatch(r"[REDACT+/=]+", annotations["encoded"]), annotations["encoded"]
    assert annotations["checksum/password"] == "REDACTED"
    env = docs(render.files, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [
        {"name": "PASSWORD", "value": "REDACTED-RE"},
        {"name": "MODE", "value": "default"},
    ]
    secret = docs(render.files, "Secret")
    assert secret["stringData"] == {"password": secret_hash(PASSWORD)}
    assert secret["data"] == {"token": secret_hash(base64.b64encode(PASSWORD.encode()).decode())}
    assert_hidden(render.files.items(), [PASSWORD, "production"])

    plain = render.reveal()
    assert (
        docs(plain, "ConfigMap")["data"]["url"] == f"postgres://app:{PASSWORD}@db.internal:5432/app"
    )
    assert docs(plain, "Secret")["stringData"] == {"password": PASSWORD}


def test_helmfile_rendered_from_a_secret_environment(tmp_path: Path, age_key: AgeKey) -> None:
    helmfile = (
        "releases:\n  - name: echo\n    chart: ./chart\n"
        '    values: [{fromHelmfile: "key={{ .Values.apiKey }}"}]\n'
    )
    files = {
        "templates/echo/helmfile.yaml.gotmpl": helmfile,
        f"{DEP}/deployment.yaml": one_app(),
        "deployments/global.values.sops.yaml": encrypt_yaml(
            {"apiKey": "hf-api-key-9137"}, [age_key.recipient]
        ),
    }
    fleet = Fleet.open(WorkTree(make_fleet(tmp_path, files)))
    assert fleet.values(ROOT)["fromHelmfile"] == "key=RE-RED-RED-REDA"
    render = fleet.render(ROOT)
    assert_hidden(render.files.items(), ["hf-api-key-9137"])
    assert echo_values(render.reveal())["fromHelmfile"] == "key=hf-api-key-9137"


def test_weak_secrets_are_redacted_by_origin_only(tmp_path: Path, age_key: AgeKey) -> None:
    chart = {
        "templates/weak/chart/Chart.yaml": "apiVersion: v2\nname: weak\nversion: 0.1.0\n",
        "templates/weak/chart/templates/cm.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: weak
  namespace: default
data:
  flag: {{ .Values.flag | quote }}
  profile: {{ .Values.profile | quote }}
  url: "postgres://{{ .Values.host }}:5432/db"
  plain: "db default true"
  enabled: "true"
""",
        "templates/weak/helmfile.yaml.gotmpl": "releases:\n  - name: weak\n    chart: ./chart\n",
        f"{DEP}/deployment.yaml": one_app("weak"),
        "deployments/global.values.sops.yaml": encrypt_yaml(
            {"flag": "true", "profile": "default", "host": "db"}, [age_key.recipient]
        ),
        "deployments/global.values.yaml": {"other": "default", "note": "db true"},
    }
    fleet = Fleet.open(WorkTree(make_fleet(tmp_path, chart, echo=False)))
    shown = fleet.values(ROOT)
    assert (shown["flag"], shown["profile"], shown["host"]) == ("REDA", "REDACTE", "RE")
    assert (shown["other"], shown["note"]) == ("default", "db true")  # same words, plain files
    data = docs(fleet.render(ROOT).files, "ConfigMap")["data"]
    assert data == {
        "flag": "REDA",
        "profile": "REDACTE",
        "url": "postgres://RE:5432/db",  # the host came from the secret, the database did not
        "plain": "db default true",
        "enabled": "true",
    }


def test_secret_objects_are_hashed_and_rotation_shows(tmp_path: Path, age_key: AgeKey) -> None:
    fleet = app_fleet(tmp_path / "one", age_key, {"password": PASSWORD})
    first = fleet.render(ROOT)
    rotated_password = "Yw4nRt8cJ2xL-7h"  # same length and shape as PASSWORD
    assert len(rotated_password) == len(PASSWORD)
    rotated = app_fleet(tmp_path / "two", age_key, {"password": rotated_password}).render(ROOT)

    assert docs(first.files, "Secret")["stringData"]["password"] == secret_hash(PASSWORD)
    assert docs(rotated.files, "Secret")["stringData"]["password"] == secret_hash(rotated_password)
    assert first.digest != rotated.digest
    # The ConfigMap's redacted text cannot tell the two apart; its plaintext digests can.
    cm = next(p for p in first.files if "/ConfigMap_" in p)
    assert first.files[cm] == rotated.files[cm]
    assert first.file_digests[cm] != rotated.file_digests[cm]
    first_leaves, rotated_leaves = first.leaf_digests()[cm], rotated.leaf_digests()[cm]
    assert set(first_leaves) == {
        "/0/data/url",
        "/0/metadata/annotations/encoded",
        "/0/metadata/annotations/checksum~1password",
    }
    assert first_leaves["/0/data/url"] != rotated_leaves["/0/data/url"]
    # a re-render of the same input gives the same digests
    again = app_fleet(tmp_path / "three", age_key, {"password": PASSWORD}).render(ROOT)
    assert (again.digest, again.files) == (first.digest, first.files)


def test_render_keeps_plaintext_behind_reveal(tmp_path: Path, age_key: AgeKey) -> None:
    render = app_fleet(tmp_path, age_key, {"password": PASSWORD}).render(ROOT)
    assert PASSWORD not in repr(render) and PASSWORD not in str(render)
    assert_hidden(render.files.items(), [PASSWORD])
    plain = render.reveal()
    assert any(PASSWORD.encode() in data for data in plain.values())
    plain.clear()  # a copy: the render keeps its plaintext
    assert render.reveal()
    assert render.redacted
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(render)
    assert not hasattr(render, "__dict__")  # no vars(render) route to the plaintext


def test_structural_difference_falls_back_to_value_redaction(
    tmp_path: Path,
    age_key: AgeKey,
    caplog: pytest.LogCaptureFixture,
) -> None:
    chart = {
        "templates/flow/chart/Chart.yaml": "apiVersion: v2\nname: flow\nversion: 0.1.0\n",
        "templates/flow/chart/templates/cm.yaml": """apiVersion: v1
kind: ConfigMap
metadata:
  name: flow
  namespace: default
data:
  token: {{ .Values.token | quote }}
  color: {{ .Values.color | quote }}
{{- if eq .Values.color "blue" }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: blue-only
  namespace: default
data:
  token: {{ .Values.token | quote }}
{{- end }}
""",
        "templates/flow/helmfile.yaml.gotmpl": "releases:\n  - name: flow\n    chart: ./chart\n",
        f"{DEP}/deployment.yaml": one_app("flow"),
        "deployments/global.values.sops.yaml": encrypt_yaml(
            {"token": "tok-7f3a9c1e5b", "color": "blue"}, [age_key.recipient]
        ),
    }
    fleet = Fleet.open(WorkTree(make_fleet(tmp_path, chart, echo=False)))
    with caplog.at_level(logging.DEBUG, logger="shared"):
        render = fleet.render(ROOT)
    assert "d/flow: the perturbed render has other files; redacting by value" in caplog.text
    assert len(render.files) == 2
    assert_hidden(render.files.items(), ["tok-7f3a9c1e5b"])
    for data in render.files.values():
        assert yaml.safe_load(data)["data"]["token"] == redact_string("tok-7f3a9c1e5b")
    assert_hidden([("log", caplog.text)], ["tok-7f3a9c1e5b"])


def test_error_messages_never_carry_secrets(tmp_path: Path, age_key: AgeKey) -> None:
    secret = "err-secret-4f9d2b7c"
    fleet = app_fleet(
        tmp_path / "gotmpl",
        age_key,
        {"password": secret},
        **{
            "deployments/g/c/cluster.values.yaml.gotmpl": (
                '{{ fail (printf "cannot use %s" .Values.password) }}\n'
            )
        },
    )
    for call in (lambda: fleet.render(ROOT), lambda: fleet.values(ROOT)):
        with pytest.raises(FleetError) as caught:
            call()
        text = str(caught.value)
        assert "cannot use RED-REDACT-REDACTED" in text, text
        assert secret not in text and caught.value.__cause__ is None
        assert caught.value.__context__ is None

    broken_chart = {
        "templates/app/chart/templates/broken.yaml": (
            '{{ required (printf "need extra, have %s" .Values.password) .Values.extra }}\n'
        )
    }
    fleet = app_fleet(tmp_path / "chart", age_key, {"password": secret}, **broken_chart)
    with pytest.raises(FleetError) as caught:
        fleet.render(ROOT)
    assert "need extra, have RED-REDACT-REDACTED" in str(caught.value)
    assert secret not in str(caught.value)
    problems = [str(p) for p in fleet.validate()]
    assert all(secret not in p for p in problems)


def test_values_json_of_echo_is_redacted_but_reveal_is_exact(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    fleet = fleet_with("cluster", age_key, tmp_path, {"token": "echo-token-55aa"})
    render = fleet.render(ROOT)
    cm = next(p for p in render.files if "ConfigMap_" in p)
    shown = yaml.safe_load(render.files[cm])["data"]["values.json"]
    assert '"token":"REDA-REDAC-REDA"' in shown
    assert json.loads(yaml.safe_load(render.reveal()[cm])["data"]["values.json"])["token"] == (
        "echo-token-55aa"
    )

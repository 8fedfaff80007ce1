"""Secrets in the dimensions layout with real sops and a throwaway age key: values.sops.yaml
at every level, precedence (plain files, deeper levels, patches), derived values in the
rendered Applications, and dependency messages that never print a secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.engine.fleet import Fleet
from shared.engine.secrets.redact import redact_value
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.dimensions import app_values, base_files, patch_doc
from tests.support.files import write_files
from tests.support.secrets import TYPED, TYPED_STRINGS, assert_hidden

ROOT = "mc/e1/s1/r1"
LEVELS = {"base": "", "environment": "e1/", "sector": "e1/s1/", "region": "e1/s1/r1/"}


def vo(value: dict[str, Any]) -> dict[str, Any]:
    return {"source": {"helm": {"valuesObject": value}}}


def encrypted(fields: dict[str, Any], key: AgeKey, app: str = "a") -> str:
    return encrypt_yaml(app_values(app, fields), [key.recipient])


def fleet_of(base: Path, files: dict[str, Any]) -> Fleet:
    write_files(base, files)
    return Fleet.open(WorkTree(base))


def valuesobject(values: dict[str, Any], app: str = "a") -> dict[str, Any]:
    result: dict[str, Any] = values["applications"][app]["source"]["helm"]["valuesObject"]
    return result


def application(files: dict[str, bytes], app: str = "a") -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(files[f"templates/{app}.yaml"])
    return doc


@pytest.mark.parametrize("level", list(LEVELS))
def test_every_type_at_every_level(tmp_path: Path, age_key: AgeKey, level: str) -> None:
    files = base_files()
    files[f"config/mc/a/{LEVELS[level]}values.sops.yaml"] = encrypted(vo(TYPED), age_key)
    fleet = fleet_of(tmp_path, files)
    plain = valuesobject(fleet.values(ROOT, reveal=True))
    for key, value in TYPED.items():
        assert plain[key] == value and type(plain[key]) is type(value), key
    shown = fleet.values(ROOT)
    assert valuesobject(shown) == {k: redact_value(v) for k, v in TYPED.items()}
    assert shown["applications"]["a"]["source"]["chart"] == "a"  # plain leaves untouched
    assert fleet.values(ROOT, "a") == {
        "cluster": shown["cluster"],
        "applications": {"a": shown["applications"]["a"]},
    }

    render = fleet.render(ROOT)
    assert_hidden(render.files.items(), TYPED_STRINGS)
    chart_values = yaml.safe_load(render.files["values.yaml"])
    assert valuesobject(chart_values) == valuesobject(shown)
    published = application(render.files)["spec"]["source"]["helm"]["valuesObject"]
    assert published == valuesobject(shown)
    assert application(render.reveal())["spec"]["source"]["helm"]["valuesObject"] == plain
    other = fleet.render("mc/e2/s3/r3")  # outside e1: only base values reach it
    if level == "base":
        assert_hidden(other.files.items(), TYPED_STRINGS)
    else:
        assert other.files == other.reveal()


def test_precedence_plain_files_deeper_levels_and_patches(tmp_path: Path, age_key: AgeKey) -> None:
    files = base_files()
    files["config/mc/a/e1/values.sops.yaml"] = encrypted(
        vo({"password": "env-secret-pw", "token": "env-secret-token", "kept": "env-secret-kept"}),
        age_key,
    )
    # within one level the plain file wins
    files["config/mc/a/e1/values.yaml"] = app_values("a", vo({"kept": "plain-env-kept"}))
    # a deeper plain level overrides a secret; a deeper secret overrides a plain value
    files["config/mc/a/e1/s1/r1/values.yaml"] = app_values("a", vo({"password": "plain-region-pw"}))
    files["config/mc/a/values.yaml"]["applications"]["a"].update(vo({"user": "plain-base-user"}))
    files["config/mc/a/e1/s1/values.sops.yaml"] = encrypted(
        vo({"user": "sector-secret-user"}), age_key
    )
    # an active patch overrides a secret with a plain value
    doc = patch_doc("plain-token", "a", vo({"token": "patched-plain-token"}))
    files["config/mc/a/patches/plain-token.yaml"] = doc
    files["config/mc/a/e1/s1/r1/patches/plain-token.yaml"] = doc
    fleet = fleet_of(tmp_path, files)

    assert valuesobject(fleet.values(ROOT, reveal=True)) == {
        "user": "sector-secret-user",
        "password": "plain-region-pw",
        "token": "patched-plain-token",
        "kept": "plain-env-kept",
    }
    assert valuesobject(fleet.values(ROOT)) == {
        "user": "REDACT-REDACT-REDA",
        "password": "plain-region-pw",
        "token": "patched-plain-token",
        "kept": "plain-env-kept",
    }
    render = fleet.render(ROOT)
    blob = b"".join(render.files.values())
    assert b"plain-region-pw" in blob and b"patched-plain-token" in blob
    assert_hidden(render.files.items(), ["sector-secret-user"])
    # elsewhere the environment's secrets are in force and redacted
    other = valuesobject(fleet.values("mc/e1/s2/r1"))
    assert other == {
        "user": "plain-base-user",
        "password": "RED-REDACT-RE",
        "token": "RED-REDACT-REDAC",
        "kept": "plain-env-kept",
    }


def test_values_derived_in_the_application_template_are_redacted(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    files = base_files()
    password = "Zq7pWx3mK9vB-2f"
    files["config/mc/a/e1/values.sops.yaml"] = encrypted(vo({"password": password}), age_key)
    files["config/mc/a/values.yaml"]["applications"]["a"]["additionalAnnotations"] = {
        "dsn": "postgres://app:{{ .Values.applications.a.source.helm.valuesObject.password }}@db",
        "checksum": "{{ .Values.applications.a.source.helm.valuesObject.password | sha256sum }}",
        "region": "{{`{{ .Values.cluster.region }}`}}",
    }
    fleet = fleet_of(tmp_path, files)
    render = fleet.render(ROOT)
    annotations = application(render.files)["metadata"]["annotations"]
    assert annotations == {
        "dsn": "postgres://app:REDACTED-RE@db",
        "checksum": "REDACTED",
        "region": "{{ .Values.cluster.region }}",  # escaped templating survives one level
    }
    assert_hidden(render.files.items(), [password])
    plain = application(render.reveal())["metadata"]["annotations"]
    assert plain["dsn"] == f"postgres://app:{password}@db"
    # the values still show the template text (it is not a secret)
    shown = fleet.values(ROOT)["applications"]["a"]["additionalAnnotations"]
    assert shown["dsn"].startswith("postgres://app:{{ .Values.applications")


def test_unmet_dependency_on_a_secret_does_not_print_it(tmp_path: Path, age_key: AgeKey) -> None:
    files = base_files()
    files["config/mc/a/e1/values.sops.yaml"] = encrypted(vo({"tier": "db"}), age_key)
    doc = patch_doc(
        "needs-tier",
        "a",
        {"project": "patched"},
        deps=[{"/a/source/helm/valuesObject/tier": "gold"}],
    )
    files["config/mc/a/patches/p.yaml"] = doc
    files["config/mc/a/e1/patches/p.yaml"] = doc
    write_files(tmp_path, files)
    problems = [str(p) for p in validate_fleet(WorkTree(tmp_path))]
    assert problems == [
        "config/mc/a/e1/patches/p.yaml:5: dependency /a/source/helm/valuesObject/tier 'gold' "
        "of patch 'needs-tier' is not met (found a value that comes from an encrypted file "
        "(not shown)), so the patch is not applied at mc/e1/s1/r1, mc/e1/s1/r2, mc/e1/s2/r1"
    ]

"""Shortcuts on the render path give the same results as the long way round."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.engine import yamldoc
from shared.engine.atlas import secrets as atlas_secrets
from shared.engine.errors import FleetError
from shared.engine.helm.engine import charts_unchanged, render_chart
from shared.engine.manifests import documents
from shared.engine.manifests.documents import Resource
from shared.engine.secrets import origin
from tests.support.paths import ECHO_CHART, EXAMPLES


def render_value(chart: Path) -> str:
    out = render_chart(chart, {"x": 1}, release="r", namespace="n", source="chart")
    return "".join(out.templates.values())


def test_charts_unchanged_fingerprints_once_per_block(tmp_path: Path) -> None:
    chart = tmp_path / "echo"
    shutil.copytree(ECHO_CHART, chart)
    template = next((chart / "templates").glob("*.yaml"))
    first = render_value(chart)
    template.write_text(template.read_text() + "# edited-1\n")
    # Outside a block every render sees the chart as it is on disk.
    assert "edited-1" in render_value(chart)
    with charts_unchanged():
        inside = render_value(chart)
        template.write_text(template.read_text() + "# edited-2\n")
        # Inside, the chart is taken as unchanged: the fingerprint was computed once.
        assert render_value(chart) == inside
        with charts_unchanged():  # nested blocks share the outer one
            assert render_value(chart) == inside
    assert "edited-2" in render_value(chart)
    assert "edited" not in first


def test_crds_are_the_same_from_the_cache() -> None:
    chart = EXAMPLES / "atlas-fleet/templates/cert-operator/chart"
    first = render_chart(chart, {}, release="r", namespace="n", source="c")
    again = render_chart(chart, {}, release="r", namespace="n", source="c")
    assert list(first.crds) == ["cert-operator/crds/certificates.yaml"] and first.crds == again.crds
    assert "CustomResourceDefinition" in first.crds["cert-operator/crds/certificates.yaml"]


def test_releases_without_secrets_skip_the_second_parse_only_when_nothing_changes() -> None:
    docs = {
        "a/ConfigMap_x.yaml": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "x"},
            "data": {"note": "a secret word in lower case", "kind": "Secrets"},
        },
        "a/Secret_s.yaml": {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s"},
            "stringData": {"password": "hunter2"},
        },
        "a/Deployment.apps_d.yaml": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"volumes": [{"secret": {"secretName": "s"}}]}}},
        },
    }
    files = {path: yamldoc.dumps(doc).encode() for path, doc in docs.items()}
    for subset in ({"a/ConfigMap_x.yaml"}, {"a/Deployment.apps_d.yaml"}, set(files)):
        out = {p: d for p, d in files.items() if p in subset}
        assert atlas_secrets.redacted_files(out, None, "a/r") == origin.hash_secret_objects(out)
    shown = atlas_secrets.redacted_files(files, None, "a/r")
    assert b"hunter2" not in shown["a/Secret_s.yaml"]
    assert shown["a/ConfigMap_x.yaml"] == files["a/ConfigMap_x.yaml"]


def test_parse_cache_hands_out_private_copies() -> None:
    documents.clear_caches()
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: '1'\n"
    first = documents.parse(text, "t.yaml")
    first[0].doc["data"]["a"] = "changed"
    documents.apply_namespace(first[0], "ns", frozenset())
    again = documents.parse(text, "t.yaml")  # from the cache
    assert again[0].doc == yamldoc.loads_all(text, "t.yaml")[0]
    assert again[0].doc["data"] is not first[0].doc["data"]
    again[0].doc["metadata"]["name"] = "y"
    assert documents.parse(text, "t.yaml")[0].name == "x"


def test_dump_cache_tells_equal_looking_documents_apart() -> None:
    documents.clear_caches()
    base = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    variants: list[object] = [1, True, 1.0, "1", None, "", [], {}, -0.0, 0.0, [1], {"1": 1}]
    seen = set()
    for _ in range(2):
        for value in variants:
            doc = {**base, "data": {"v": value}}
            text = documents.dump(Resource(doc, "t"))
            assert text == yamldoc.reference_dumps(doc)
            seen.add(text)
    assert len(seen) == len(variants)
    shared = {"k": "v"}
    aliased = {**base, "a": shared, "b": shared}
    copied = {**base, "a": {"k": "v"}, "b": {"k": "v"}}
    assert documents.dump(Resource(aliased, "t")) == yamldoc.reference_dumps(aliased)
    assert documents.dump(Resource(copied, "t")) == yamldoc.reference_dumps(copied)
    assert "&id001" in documents.dump(Resource(aliased, "t"))


def test_parse_errors_are_not_cached() -> None:
    for _ in range(2):
        with pytest.raises(FleetError, match=r"^bad\.yaml:2: YAML syntax error"):
            documents.parse("a: [1\n", "bad.yaml")

"""kube-renderer's `state-values` case, beyond its expected tree: the namespace its chart
writes comes from a helmfile state value through `{{ .Values.target }}` in helmfile.yaml (the
chart has no values.yaml), so the render follows the state value, and a missing chart fails
the render rather than rendering the case's tree some other way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.engine.errors import FleetError
from tests.support.helmfile import build, expected_tree, rendered_tree, sources

CASE = "state-values"


def test_the_chart_has_no_default_for_the_value_the_state_sets(tmp_path: Path) -> None:
    repo = build(CASE, tmp_path)
    assert sources(CASE) == [("storefront-bare-ns", "source/shop")]
    assert not (repo / "source/shop/values.yaml").exists()
    assert "{{ .Values.namespace }}" in (repo / "source/shop/templates/first.yaml").read_text()
    assert "{{ .Values.target }}" in (repo / "helmfile.yaml").read_text()


def test_the_render_follows_the_state_value(tmp_path: Path) -> None:
    repo = build(CASE, tmp_path)
    assert rendered_tree(repo) == expected_tree(CASE)
    helmfile = repo / "helmfile.yaml"
    helmfile.write_text(helmfile.read_text().replace("target: shop", "target: depot"))
    text = rendered_tree(repo)["svc-one/svc-one.yaml"].decode()
    assert text.count("  namespace: depot\n") == 4 and "shop" not in text


def test_a_missing_chart_fails_the_render(tmp_path: Path) -> None:
    repo = build(CASE, tmp_path)
    shutil.rmtree(repo / "source")
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert str(err.value).startswith("helmfile.yaml:6: ")
    assert "chart './source/shop' is neither a directory of the repository" in str(err.value)

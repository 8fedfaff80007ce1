"""The registry of fleet layouts (shared/engine/layout.py): every entry builds the `Layout` of
its name, rollwright.yaml's `layout` accepts exactly the registered names, and detection
follows the registry's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError, FleetErrors
from shared.engine.fleet import Fleet, detect_layout, layout_factory
from shared.engine.layout import LAYOUT_NAMES, LAYOUTS
from shared.engine.tree import WorkTree
from tests.support.paths import EXAMPLES


def test_every_entry_names_a_layout_class_of_its_name() -> None:
    assert len({kind.name for kind in LAYOUTS}) == len(LAYOUTS)
    for kind in LAYOUTS:
        factory = layout_factory(kind)
        assert isinstance(factory, type)
        assert factory.name == kind.name  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["atlas", "dimensions"])
def test_an_example_fleet_opens_with_its_layout(name: str) -> None:
    fleet = Fleet.open(WorkTree(EXAMPLES / f"{name}-fleet"))
    assert fleet.layout_name == name
    assert fleet.roots()


def test_rollwright_yaml_accepts_the_registered_names_only() -> None:
    for name in LAYOUT_NAMES:
        assert FleetConfig.model_validate({"layout": name}).layout == name
    schema = FleetConfig.model_json_schema()["properties"]["layout"]
    assert schema["anyOf"][0] == {"enum": list(LAYOUT_NAMES), "type": "string"}


def test_an_unknown_layout_names_the_registered_ones(tmp_path: Path) -> None:
    (tmp_path / "rollwright.yaml").write_text("layout: kustomize\n")
    with pytest.raises(FleetErrors) as err:
        FleetConfig.load(WorkTree(tmp_path))
    assert str(err.value) == (
        "rollwright.yaml:1: layout: Input should be 'atlas', 'commodore', 'dimensions' or "
        "'helmfile'"
    )


def test_detection_takes_the_first_registered_marker(tmp_path: Path) -> None:
    tree = WorkTree(tmp_path)
    (tmp_path / "deployments").mkdir()
    assert detect_layout(tree, FleetConfig()) == "atlas"
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("{}\n")
    assert detect_layout(tree, FleetConfig()) == "dimensions"
    assert detect_layout(tree, FleetConfig(layout="atlas")) == "atlas"


def test_the_commodore_layout_is_chosen_by_name_only(tmp_path: Path) -> None:
    (tmp_path / "rollwright.yaml").write_text("strict: true\n")
    tree = WorkTree(tmp_path)
    with pytest.raises(FleetError):
        detect_layout(tree, FleetConfig.load(tree))
    assert detect_layout(tree, FleetConfig(layout="commodore")) == "commodore"


def test_an_undetected_layout_names_every_marker(tmp_path: Path) -> None:
    with pytest.raises(FleetError) as err:
        detect_layout(WorkTree(tmp_path), FleetConfig())
    assert str(err.value) == (
        "rollwright.yaml: cannot tell the fleet layout: no rollwright.yaml 'layout', no "
        "config/config.yaml (dimensions), no deployments/ directory (atlas) and no "
        "helmfile.yaml, helmfile.yaml.gotmpl or helmfile.d/ directory (helmfile)"
    )

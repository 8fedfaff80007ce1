"""config/config.yaml with dimensions of any names and depth: the sequence must nest by
those names, and every mistake is a `path:line: message`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.engine.dimensions.sequence import singular
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from tests.support.paths import EXAMPLES

TWO = "dimensions: [environments, regions]\nsequence:\n  environments:\n"

CASES: dict[str, tuple[str, list[str]]] = {
    "a child list under another dimension's name": (
        TWO + "    - name: e1\n      sectors: [{name: s1}]\n",
        [
            "config/config.yaml:4: missing required key 'sequence/environments/0/regions'",
            "config/config.yaml:5: unknown key 'sequence/environments/0/sectors'",
        ],
    ),
    "a node with no children": (
        TWO + "    - name: e1\n      regions: [{name: r1}]\n    - name: e2\n      regions: []\n",
        ["config/config.yaml:7: sequence/environments/1/regions: needs at least one region"],
    ),
    "children below the last dimension": (
        TWO + "    - name: e1\n      regions:\n        - name: r1\n          zones: [{name: z}]\n",
        ["config/config.yaml:7: unknown key 'sequence/environments/0/regions/0/zones'"],
    ),
    "the sequence under another name": (
        "dimensions: [environments, regions]\nsequence:\n  regions: [{name: r}]\n",
        [
            "config/config.yaml:2: missing required key 'sequence/environments'",
            "config/config.yaml:3: unknown key 'sequence/regions'",
        ],
    ),
    "a dimension the sequence names otherwise": (
        "dimensions:\n  - environments\n  - region\nsequence:\n  environments:\n"
        "    - name: e1\n      regions: [{name: r1}]\n"
        "    - name: e2\n      regions: [{name: r1}, {name: r2}]\n",
        [
            "config/config.yaml:3: dimension 'region' is not what the sequence calls it: each "
            "of its environments holds 'regions', none 'region' (did you mean 'regions'?)"
        ],
    ),
    "a node key as a dimension": (
        "dimensions: [regions, name]\nsequence: {regions: [{name: r}]}\n",
        ["config/config.yaml:1: dimension name 'name' is reserved (a node key)"],
    ),
    "two names for one cluster value": (
        "dimensions: [region, regions]\nsequence: {region: [{name: r, regions: [{name: x}]}]}\n",
        [
            "config/config.yaml:1: dimension 'regions' repeats 'region' (both are "
            ".Values.cluster.region)"
        ],
    ),
    "the cluster type's key": (
        "dimensions: [types]\nsequence: {types: [{name: r}]}\n",
        [
            "config/config.yaml:1: dimension name 'types' is reserved: .Values.cluster.type is "
            "the cluster type"
        ],
    ),
    "a name that is no identifier": (
        "dimensions: [availability-zones]\nsequence: {}\n",
        ["config/config.yaml:1: dimensions/0: String should match pattern"],
    ),
    "a duplicate zone": (
        "dimensions: [zones]\nsequence:\n  zones:\n    - name: a\n    - name: a\n",
        ["config/config.yaml:5: duplicate zone 'a'"],
    ),
    "a node named patches": (
        "dimensions: [zones]\nsequence:\n  zones:\n    - name: patches\n",
        ["config/config.yaml:4: zone name 'patches' is reserved"],
    ),
    "an empty dimensions list": (
        "dimensions: []\nsequence: {}\n",
        ["config/config.yaml:1: dimensions: List should have at least 1 item"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_config_mistakes(tmp_path: Path, case: str) -> None:
    text, wanted = CASES[case]
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(text)
    got = [str(p) for p in validate_fleet(WorkTree(tmp_path))]
    assert len(got) == len(wanted), got
    for line, prefix in zip(got, wanted, strict=True):
        assert line.startswith(prefix), got


def test_any_names_at_any_depth(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config/config.yaml").write_text(
        "dimensions: [tiers, cells]\n"
        "sequence:\n"
        "  tiers:\n"
        "    - name: canary\n"
        "      cells: [{name: c1}]\n"
        "    - name: general\n"
        "      promotion: manual\n"
        "      cells: [{name: c2}, {name: c3}]\n"
        "cluster_types:\n"
        "  - name: edge\n"
    )
    # no problem with the names; the type lists no application: a warning, not silence
    problems = validate_fleet(WorkTree(tmp_path))
    assert [(p.hygiene, p.message.split(":")[0]) for p in problems] == [
        (True, "cluster type 'edge' lists no application or ApplicationSet")
    ]


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("environments", "environment"),
        ("regions", "region"),
        ("availabilities", "availability"),
        ("tier", "tier"),
        ("classes", "classe"),  # the simple rule: write singular names to choose the key
        ("access", "access"),
    ],
)
def test_cluster_value_keys(name: str, key: str) -> None:
    assert singular(name) == key


def test_the_example_with_a_misnamed_dimension_says_so_once(tmp_path: Path) -> None:
    """`- region` where the example's sequence writes `regions:` at its five sectors: one
    problem at the dimension's line, not ten at the sectors below it."""
    shutil.copytree(EXAMPLES / "dimensions-fleet", tmp_path / "fleet")
    config = tmp_path / "fleet/config/config.yaml"
    text = config.read_text()
    assert "\n  - regions\n" in text
    config.write_text(text.replace("\n  - regions\n", "\n  - region\n", 1))
    line = text.split("\n").index("  - regions") + 1
    assert [str(p) for p in validate_fleet(WorkTree(tmp_path / "fleet"))] == [
        f"config/config.yaml:{line}: dimension 'region' is not what the sequence calls it: "
        "each of its sectors holds 'regions', none 'region' (did you mean 'regions'?)"
    ]

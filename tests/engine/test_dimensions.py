"""The dimensions layout on small fixture fleets: roots, merge order, patches, validation,
the rendered chart of Argo CD Applications and affected roots."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.engine.config.fleet import FleetConfig
from shared.engine.dimensions.layout import DimensionsLayout
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree, WorkTree
from shared.engine.validate import validate_fleet
from tests.support.dimensions import (
    ROOTS,
    app_values,
    base_files,
    layout_of,
    patch_doc,
    second_pass,
)
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, init_repo


def app(layout: DimensionsLayout, root: str, name: str = "a") -> dict[str, Any]:
    result: dict[str, Any] = layout.values(root, None)["applications"][name]
    return result


def problems_of(path: Path, files: dict[str, Any]) -> list[str]:
    write_files(path, files)
    return [str(p) for p in validate_fleet(WorkTree(path))]


def vo(value: dict[str, Any]) -> dict[str, Any]:
    """Application fields setting helm valuesObject."""
    return {"source": {"helm": {"valuesObject": value}}}


def valuesobject(fields: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = fields["source"]["helm"]["valuesObject"]
    return result


# --- roots ------------------------------------------------------------------------------------


def test_roots_are_every_type_times_every_region_sorted(tmp_path: Path) -> None:
    files = base_files()
    files["config/config.yaml"]["cluster_types"].insert(0, {"name": "rc", "applications": []})
    layout = layout_of(tmp_path, files)
    assert layout.roots() == ROOTS + [r.replace("mc/", "rc/", 1) for r in ROOTS]
    assert Fleet.open(WorkTree(tmp_path)).layout_name == "dimensions"


def test_sequence_nodes_in_promotion_order(tmp_path: Path) -> None:
    layout = layout_of(tmp_path, base_files())
    nodes = [(n.id, n.promotion) for n in layout.sequence_nodes()]
    assert nodes == [
        ("e1", "automated"),
        ("e1/s1", "automated"),
        ("e1/s1/r1", "automated"),
        ("e1/s1/r2", "automated"),
        ("e1/s2", "automated"),
        ("e1/s2/r1", "automated"),
        ("e2", "manual"),
        ("e2/s3", "automated"),
        ("e2/s3/r3", "automated"),
    ]


# --- merge order ------------------------------------------------------------------------------


def test_each_level_wins_over_the_previous(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/application-defaults.yaml"]["defaults"].update(
        vo({"level": "defaults", "fromDefaults": True})
    )
    base = files["config/mc/a/values.yaml"]["applications"]["a"]
    base["source"]["helm"] = {"valuesObject": {"level": "base", "fromBase": True}}
    files["config/mc/a/e1/values.yaml"] = app_values("a", vo({"level": "env"}))
    files["config/mc/a/e1/s1/values.yaml"] = app_values("a", vo({"level": "sector"}))
    files["config/mc/a/e1/s1/r1/values.yaml"] = app_values("a", vo({"level": "region"}))
    files["config/mc/a/e1/s1/r1/patches/p.yaml"] = patch_doc("p", "a", vo({"level": "patch"}))
    layout = layout_of(tmp_path, files)
    levels = {root: valuesobject(app(layout, root))["level"] for root in ROOTS}
    assert levels == {
        "mc/e1/s1/r1": "patch",  # a patch wins over the region's values
        "mc/e1/s1/r2": "sector",
        "mc/e1/s2/r1": "env",
        "mc/e2/s3/r3": "base",
    }
    for root in ROOTS:
        merged = valuesobject(app(layout, root))
        assert merged["fromDefaults"] is True and merged["fromBase"] is True
    # defaults reach every application, base values only their own
    assert app(layout, "mc/e2/s3/r3", "b")["project"] == "platform"
    assert "level" not in app(layout, "mc/e2/s3/r3", "b")["source"]


def test_lists_are_replaced_by_values_levels(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/e1/values.yaml"] = app_values(
        "a", {"syncPolicy": {"syncOptions": ["ServerSideApply=true"]}}
    )
    layout = layout_of(tmp_path, files)
    assert app(layout, "mc/e1/s1/r1")["syncPolicy"]["syncOptions"] == ["ServerSideApply=true"]
    assert app(layout, "mc/e2/s3/r3")["syncPolicy"]["syncOptions"] == ["CreateNamespace=true"]


def test_null_removes_what_a_lower_level_set(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/e2/values.yaml"] = app_values("a", {"syncPolicy": None})
    layout = layout_of(tmp_path, files)
    assert app(layout, "mc/e2/s3/r3")["syncPolicy"] is None
    text = layout.render_files("mc/e2/s3/r3")["templates/a.yaml"].decode()
    assert "syncPolicy" not in text


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("append", ["CreateNamespace=true", "ServerSideApply=true"]),
        ("replace", ["ServerSideApply=true"]),
        (None, ["ServerSideApply=true"]),
    ],
)
def test_patch_merge_strategy(tmp_path: Path, strategy: str | None, expected: list[str]) -> None:
    files = base_files()
    ptr = "/a/syncPolicy/syncOptions"
    doc = patch_doc(
        "p",
        "a",
        {"syncPolicy": {"syncOptions": ["ServerSideApply=true"]}},
        strategy={ptr: strategy} if strategy else None,
    )
    files["config/mc/a/e1/patches/p.yaml"] = doc
    layout = layout_of(tmp_path, files)
    assert app(layout, "mc/e1/s2/r1")["syncPolicy"]["syncOptions"] == expected
    assert app(layout, "mc/e2/s3/r3")["syncPolicy"]["syncOptions"] == ["CreateNamespace=true"]


# --- patch activation -------------------------------------------------------------------------


def test_staged_patch_is_not_applied(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/patches/p.yaml"] = patch_doc("p", "a", {"project": "patched"})
    layout = layout_of(tmp_path, files)
    assert {app(layout, r)["project"] for r in ROOTS} == {"platform"}
    assert validate_fleet(WorkTree(tmp_path)) == []


@pytest.mark.parametrize(
    ("node", "patched"),
    [
        ("e1", {"mc/e1/s1/r1", "mc/e1/s1/r2", "mc/e1/s2/r1"}),
        ("e1/s1", {"mc/e1/s1/r1", "mc/e1/s1/r2"}),
        ("e1/s1/r2", {"mc/e1/s1/r2"}),
        ("e2/s3/r3", {"mc/e2/s3/r3"}),
    ],
)
def test_a_copy_in_a_node_activates_the_patch_under_it(
    tmp_path: Path, node: str, patched: set[str]
) -> None:
    files = base_files()
    doc = patch_doc("p", "a", {"project": "patched"})
    files["config/mc/a/patches/p.yaml"] = doc
    files[f"config/mc/a/{node}/patches/p.yaml"] = doc
    layout = layout_of(tmp_path, files)
    assert {r for r in ROOTS if app(layout, r)["project"] == "patched"} == patched
    assert validate_fleet(WorkTree(tmp_path)) == []


def test_active_patches_apply_in_file_name_order(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/e1/patches/b-second.yaml"] = patch_doc("second", "a", {"project": "2"})
    files["config/mc/a/e1/s1/patches/a-first.yaml"] = patch_doc("first", "a", {"project": "1"})
    layout = layout_of(tmp_path, files)
    assert app(layout, "mc/e1/s1/r1")["project"] == "2"  # a-first, then b-second
    assert app(layout, "mc/e1/s2/r1")["project"] == "2"


def test_one_patch_active_at_two_nodes_applies_once(tmp_path: Path) -> None:
    files = base_files()
    ptr = "/a/syncPolicy/syncOptions"
    doc = patch_doc("p", "a", {"syncPolicy": {"syncOptions": ["X"]}}, strategy={ptr: "append"})
    for where in ("patches", "e1/patches", "e1/s1/r1/patches"):
        files[f"config/mc/a/{where}/p.yaml"] = doc
    layout = layout_of(tmp_path, files)
    assert app(layout, "mc/e1/s1/r1")["syncPolicy"]["syncOptions"] == ["CreateNamespace=true", "X"]
    assert validate_fleet(WorkTree(tmp_path)) == []


# --- dependencies -----------------------------------------------------------------------------


def test_dependencies_decide_where_a_patch_applies(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/b/e1/s1/values.yaml"] = app_values(
        "b", {"source": {"targetRevision": "v2.1.0"}}
    )
    doc = patch_doc(
        "needs-b-2.1",
        "a",
        {"project": "patched"},
        deps=[{"/b/source/targetRevision": ">=v2.1.0"}, {"/a/project": "platform"}],
    )
    files["config/mc/a/patches/p.yaml"] = doc
    files["config/mc/a/e1/patches/p.yaml"] = doc
    layout = layout_of(tmp_path, files)
    patched = {r for r in ROOTS if app(layout, r)["project"] == "patched"}
    assert patched == {"mc/e1/s1/r1", "mc/e1/s1/r2"}
    outcome = layout.state("mc/e1/s2/r1").outcomes[0]
    assert not outcome.applied
    assert [why for _, why in outcome.unmet] == ["found 'v2.0.0'"]
    assert [str(p) for p in validate_fleet(WorkTree(tmp_path))] == [
        "config/mc/a/e1/patches/p.yaml:5: dependency /b/source/targetRevision >=v2.1.0 of patch "
        "'needs-b-2.1' is not met (found 'v2.0.0'), so the patch is not applied at mc/e1/s2/r1"
    ]


def test_a_dependency_sees_what_an_earlier_patch_brought(tmp_path: Path) -> None:
    files = base_files()
    # File-name order alone would check a-needs before b-brings ran.
    files["config/mc/a/e1/patches/a-needs.yaml"] = patch_doc(
        "needs", "a", {"project": "patched"}, deps=[{"/b/source/targetRevision": ">=v3"}]
    )
    files["config/mc/b/e1/patches/b-brings.yaml"] = patch_doc(
        "brings", "b", {"source": {"targetRevision": "v3.0.0"}}
    )
    layout = layout_of(tmp_path, files)
    assert app(layout, "mc/e1/s1/r1")["project"] == "patched"
    assert app(layout, "mc/e2/s3/r3")["project"] == "platform"
    ids = [o.patch.id for o in layout.state("mc/e1/s1/r1").outcomes]
    assert ids == ["brings", "needs"]


# --- validation -------------------------------------------------------------------------------


def test_valid_fixture_has_no_problems(tmp_path: Path) -> None:
    assert problems_of(tmp_path, base_files()) == []


def config_text(extra: str = "") -> str:
    return (
        "dimensions: [environments, sectors, regions]\n"
        "sequence:\n"
        "  environments:\n"
        "    - name: e1\n"
        "      sectors:\n"
        "        - name: s1\n"
        f"{extra}"
        "          regions:\n"
        "            - name: r1\n"
        "cluster_types:\n"
        "  - name: mc\n"
        "    applications:\n"
        "      - a\n"
        "      - b\n"
    )


CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "unknown key in config.yaml": (
        {"config/config.yaml": config_text("          promotoin: manual\n")},
        ["config/config.yaml:7: unknown key 'sequence/environments/0/sectors/0/promotoin'"],
    ),
    "bad promotion value": (
        {"config/config.yaml": config_text("          promotion: sometimes\n")},
        ["config/config.yaml:7: sequence/environments/0/sectors/0/promotion: Input should be"],
    ),
    "duplicate region": (
        {
            "config/config.yaml": config_text().replace(
                "- name: r1\n", "- name: r1\n            - name: r1\n"
            )
        },
        ["config/config.yaml:9: duplicate region 'r1'"],
    ),
    "config.yaml syntax": (
        {"config/config.yaml": "sequence: [\n"},
        ["config/config.yaml:2: YAML syntax error"],
    ),
    "missing application directory": (
        {"config/config.yaml": config_text().replace("      - b\n", "      - b\n      - c\n")},
        [
            "config/config.yaml:14: application 'c' of cluster type 'mc' has no directory "
            "config/mc/c/"
        ],
    ),
    "application directory not listed": (
        {"config/mc/zz/values.yaml": "{}\n"},
        [
            "config/mc/zz: application directory 'zz' is not listed in config/config.yaml "
            "cluster_types[0].applications"
        ],
    ),
    "cluster type directory not listed": (
        {"config/other/a/values.yaml": "{}\n"},
        ["config/other: directory 'other' is not a cluster type listed in config/config.yaml"],
    ),
    "unknown application key in values": (
        {
            "config/mc/a/e1/values.yaml": (
                "applications:\n  a:\n    source: {targetRevision: x}\n    syncPolcy: {}\n"
            )
        },
        ["config/mc/a/e1/values.yaml:4: unknown key 'applications/a/syncPolcy'"],
    ),
    "values of another application": (
        {"config/mc/a/e1/s1/values.yaml": "applications:\n  a: {}\n  b:\n    project: x\n"},
        [
            "config/mc/a/e1/s1/values.yaml:3: unknown key 'applications/b': a values file "
            "under config/mc/a/ may only define applications.a"
        ],
    ),
    "unknown top-level key in values": (
        {"config/mc/a/values.yaml": "application:\n  a: {}\n"},
        ["config/mc/a/values.yaml:1: unknown key 'application'"],
    ),
    "values YAML syntax": (
        {"config/mc/b/e1/values.yaml": "applications:\n  b:\n    project: [x\n"},
        ["config/mc/b/e1/values.yaml:4: YAML syntax error"],
    ),
    "wrong type in defaults": (
        {"config/mc/application-defaults.yaml": "defaults:\n  revisionHistoryLimit: '3'\n"},
        ["config/mc/application-defaults.yaml:2: defaults/revisionHistoryLimit: Input should"],
    ),
    "unknown environment directory": (
        {"config/mc/a/prdo/values.yaml": "{}\n"},
        ["config/mc/a/prdo: directory 'prdo' is not an environment of the sequence"],
    ),
    "unknown region directory": (
        {"config/mc/a/e1/s1/r9/values.yaml": "{}\n"},
        ["config/mc/a/e1/s1/r9: directory 'r9' is not a region of e1/s1 in config/config.yaml"],
    ),
    "unexpected yaml file": (
        {"config/mc/a/e1/notes.yaml": "{}\n"},
        ["config/mc/a/e1/notes.yaml: unexpected file (expected values.yaml"],
    ),
    "the generator's override.yaml in the document's spelling": (
        {"config/mc/a/e1/override.yaml": "{}\n"},
        [
            "config/mc/a/e1/override.yaml: both spellings in one repository: this is the "
            "generator's spelling of a node's values (override.yaml), while "
            "config/mc/application-defaults.yaml is the design document's defaults file; the "
            "repository is read in the design document's spelling"
        ],
    ),
    "OWNERS that does not parse": (
        {"config/mc/a/OWNERS": "approvers:\n  - x\n reviewers: [\n"},
        ["config/mc/a/OWNERS:3: warning: YAML syntax error"],
    ),
    "OWNERS with an unknown key": (
        {"config/mc/b/OWNERS": "approvers: [x]\napprover: [y]\n"},
        ["config/mc/b/OWNERS:2: warning: unknown key 'approver' (did you mean 'approvers'?)"],
    ),
    "metadata name mismatch": (
        {"config/mc/a/metadata.yaml": "name: b\n"},
        ["config/mc/a/metadata.yaml:1: warning: name 'b' does not match the directory 'a'"],
    ),
    "unknown key in patch": (
        {
            "config/mc/a/patches/p.yaml": (
                "metadata:\n  id: p\n  dependancies: []\npatch:\n  a: {project: x}\n"
            )
        },
        ["config/mc/a/patches/p.yaml:3: unknown key 'metadata/dependancies'"],
    ),
    "patch of another application": (
        {"config/mc/a/patches/p.yaml": "metadata: {id: p}\npatch:\n  b: {project: x}\n"},
        [
            "config/mc/a/patches/p.yaml:3: unknown key 'patch/b': a patch under config/mc/a/ "
            "may only change application 'a'"
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validation_messages(tmp_path: Path, case: str) -> None:
    files = base_files()
    if "config/config.yaml" not in CASES[case][0]:
        files["config/config.yaml"] = config_text()
    files.update(CASES[case][0])
    got = problems_of(tmp_path, files)
    wanted = CASES[case][1]
    assert len(got) == len(wanted), got
    for line, prefix in zip(got, wanted, strict=True):
        assert line.startswith(prefix), got


def test_missing_metadata_is_a_problem(tmp_path: Path) -> None:
    files = base_files()
    del files["config/mc/b/metadata.yaml"]
    assert problems_of(tmp_path, files) == [
        "config/mc/b/metadata.yaml: warning: missing: every application needs metadata.yaml"
    ]


def test_overlapping_patches_are_named_with_both_files(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/e1/patches/p1.yaml"] = patch_doc(
        "one", "a", {"source": {"targetRevision": "v1.1.0"}}
    )
    files["config/mc/a/e1/s1/r1/patches/p2.yaml"] = patch_doc(
        "two", "a", {"source": {"targetRevision": "v1.2.0", "path": "x"}}
    )
    assert problems_of(tmp_path, files) == [
        "config/mc/a/e1/patches/p1.yaml:7: patches 'one' and 'two' "
        "(config/mc/a/e1/s1/r1/patches/p2.yaml:7) both set /a/source/targetRevision; "
        "overlapping patches are active at mc/e1/s1/r1"
    ]


def test_a_patch_active_everywhere_must_graduate(tmp_path: Path) -> None:
    files = base_files()
    doc = patch_doc("everywhere", "a", {"project": "x"})
    files["config/mc/a/patches/p.yaml"] = doc
    files["config/mc/a/e1/patches/p.yaml"] = doc
    files["config/mc/a/e2/s3/patches/p.yaml"] = doc
    assert problems_of(tmp_path, files) == [
        "config/mc/a/patches/p.yaml:2: warning: patch 'everywhere' is active on every root of "
        "cluster type 'mc' and must graduate: fold it into values.yaml and delete its copies "
        "(config/mc/a/e1/patches/p.yaml, config/mc/a/e2/s3/patches/p.yaml)"
    ]
    # one region short of everywhere is fine
    (tmp_path / "config/mc/a/e2/s3/patches/p.yaml").unlink()
    assert [str(p) for p in validate_fleet(WorkTree(tmp_path))] == []


def test_a_copy_that_differs_from_the_staged_patch(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/patches/p.yaml"] = patch_doc("p", "a", {"project": "x"})
    files["config/mc/a/e1/patches/p.yaml"] = patch_doc("p", "a", {"project": "y"})
    assert problems_of(tmp_path, files) == [
        "config/mc/a/e1/patches/p.yaml:2: active copy of patch 'p' differs from the staged "
        "config/mc/a/patches/p.yaml; copies must be identical to it"
    ]


def test_duplicate_patch_ids(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/patches/p1.yaml"] = patch_doc("same", "a", {"project": "x"})
    files["config/mc/b/patches/p2.yaml"] = patch_doc("same", "b", {"project": "y"})
    files["config/mc/a/e1/patches/q1.yaml"] = patch_doc("q", "a", {"project": "x"})
    files["config/mc/b/e1/patches/q2.yaml"] = patch_doc("q", "b", {"project": "y"})
    assert problems_of(tmp_path, files) == [
        "config/mc/b/e1/patches/q2.yaml:2: duplicate patch id 'q' at node e1: "
        "config/mc/a/e1/patches/q1.yaml has it too",
        "config/mc/b/patches/p2.yaml:2: duplicate patch id 'same': config/mc/a/patches/p1.yaml "
        "has it too (ids are unique in the fleet)",
    ]


def test_render_errors_name_the_application(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/b/e2/values.yaml"] = app_values("b", {"destination": None})
    assert problems_of(tmp_path, files) == [
        "config/mc/b/values.yaml: application 'b' has no destination (set it in values.yaml "
        "or config/mc/application-defaults.yaml) (in root mc/e2/s3/r3)"
    ]


def test_template_errors_in_values_are_fleet_errors(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/e1/values.yaml"] = app_values("a", {"project": "{{ .Values.nope.x }}"})
    # Once, with the roots it fails (not once per root), in words: `.Values.nope` is unset.
    assert problems_of(tmp_path, files) == [
        "config/mc/a: application 'a': templating in its values failed: Go template error in "
        "{{ .Values.nope.x }}: cannot read 'x': .Values.nope is not set "
        f"(in {len(E1)} roots: {', '.join(sorted(E1))})"
    ]


def test_missing_application_directory_is_a_render_error(tmp_path: Path) -> None:
    files = base_files()
    layout = layout_of(tmp_path, files)
    shutil.rmtree(tmp_path / "config/mc/b")
    with pytest.raises(FleetError, match="application 'b' of cluster type 'mc' has no directory"):
        DimensionsLayout(WorkTree(tmp_path), FleetConfig()).render_files(ROOTS[0])
    assert layout.roots() == ROOTS


# --- the rendered chart -----------------------------------------------------------------------


def test_rendered_chart_layout(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/values.yaml"]["applications"]["a"].update(
        {
            "namespace": "apps",
            "additionalLabels": {"team": "x"},
            "additionalAnnotations": {"note": "y"},
            "revisionHistoryLimit": 0,
            "info": [{"name": "docs", "value": "https://example.com"}],
        }
    )
    layout = layout_of(tmp_path, files)
    out = layout.render_files("mc/e1/s1/r2")
    assert sorted(out) == ["Chart.yaml", "templates/a.yaml", "templates/b.yaml", "values.yaml"]
    assert yaml.safe_load(out["Chart.yaml"]) == {
        "apiVersion": "v2",
        "name": "mc-e1-s1-r2",
        "description": "ArgoCD applications for mc in e1/s1/r2",
        "type": "application",
        "version": "0.1.0",
    }
    values = yaml.safe_load(out["values.yaml"])
    assert values["cluster"] == {"type": "mc", "environment": "e1", "sector": "s1", "region": "r2"}
    assert list(values["applications"]) == ["a", "b"]
    application = yaml.safe_load(out["templates/a.yaml"])
    assert application == {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {
            "name": "a",
            "namespace": "apps",
            "annotations": {"note": "y"},
            "labels": {"team": "x"},
        },
        "spec": {
            "project": "platform",
            "source": {
                "repoURL": "https://charts.example.com/a",
                "chart": "a",
                "targetRevision": "v1.0.0",
            },
            "destination": {"name": "in-cluster", "namespace": "a"},
            "syncPolicy": {"syncOptions": ["CreateNamespace=true"]},
            "revisionHistoryLimit": 0,
            "info": [{"name": "docs", "value": "https://example.com"}],
        },
    }
    b = yaml.safe_load(out["templates/b.yaml"])
    assert b["metadata"] == {"name": "b", "namespace": "argocd"}
    info = layout.releases("mc/e1/s1/r2")
    assert [(r.id, r.template, r.namespace, r.labels) for r in info] == [
        ("a", "config/mc/a", "apps", {"team": "x"}),
        ("b", "config/mc/b", "argocd", {}),
    ]


def test_escaped_cluster_templating_survives_one_level(tmp_path: Path) -> None:
    """The published chart, rendered again with the ApplicationSet's cluster values, resolves
    the escaped templating; unescaped templating was resolved at render time."""
    files = base_files()
    files["config/mc/a/values.yaml"]["applications"]["a"].update(
        {
            "destination": {"name": "{{`{{ .Values.cluster.name }}`}}", "namespace": "a"},
            "source": {
                "repoURL": "https://charts.example.com/a",
                "chart": "a",
                "targetRevision": "v1.0.0",
                "helm": {
                    "valuesObject": {
                        "region": "{{`{{ .Values.cluster.region }}`}}",
                        "renderedFor": "{{ .Values.cluster.environment }}",
                        "endpoint": "https://{{`{{ .Values.cluster.name }}`}}.example.com",
                    }
                },
            },
        }
    )
    layout = layout_of(tmp_path / "fleet", files)
    out = layout.render_files("mc/e1/s1/r1")
    assert "'{{`{{ .Values.cluster.region }}`}}'" in out["values.yaml"].decode()  # raw
    published = out["templates/a.yaml"].decode()
    assert "region: '{{ .Values.cluster.region }}'" in published
    assert "renderedFor: 'e1'" in published

    cluster = {"region": "us-east1", "name": "mc-1"}
    templates = second_pass(out, tmp_path / "published", cluster)
    application = yaml.safe_load(templates["mc-e1-s1-r1/templates/a.yaml"])
    helm_values = application["spec"]["source"]["helm"]["valuesObject"]
    assert helm_values == {
        "region": "us-east1",
        "renderedFor": "e1",
        "endpoint": "https://mc-1.example.com",
    }
    assert application["spec"]["destination"] == {"name": "mc-1", "namespace": "a"}


def test_render_is_deterministic(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/e1/patches/p.yaml"] = patch_doc("p", "a", vo({"z": 1, "a": [3, 1]}))
    first = layout_of(tmp_path / "one", files)
    second = layout_of(tmp_path / "two", files)
    for root in ROOTS:
        assert first.render_files(root) == second.render_files(root)
        assert first.render_files(root) == first.render_files(root)


def test_values_and_render_read_git_revisions(tmp_path: Path) -> None:
    files = base_files()
    files["config/mc/a/e1/patches/p.yaml"] = patch_doc("p", "a", {"project": "patched"})
    repo = init_repo(tmp_path / "repo")
    write_files(repo, files)
    commit_all(repo)
    (repo / "config/mc/a/e1/patches/p.yaml").unlink()  # the checkout moves on, HEAD does not
    git_layout = DimensionsLayout(GitTree(repo, "HEAD"), FleetConfig())
    disk_layout = DimensionsLayout(WorkTree(repo), FleetConfig())
    assert app(git_layout, "mc/e1/s1/r1")["project"] == "patched"
    assert app(disk_layout, "mc/e1/s1/r1")["project"] == "platform"
    assert git_layout.validate() == []
    assert "templates/a.yaml" in git_layout.render_files("mc/e1/s1/r1")


def test_values_of_one_application(tmp_path: Path) -> None:
    layout = layout_of(tmp_path, base_files())
    only_b = layout.values("mc/e1/s1/r1", "b")
    assert list(only_b["applications"]) == ["b"]
    with pytest.raises(FleetError, match="has no application 'zz'"):
        layout.values("mc/e1/s1/r1", "zz")
    only_b["applications"]["b"]["project"] = "changed"  # a copy: the layout is unaffected
    assert app(layout, "mc/e1/s1/r1", "b")["project"] == "platform"


# --- affected roots ---------------------------------------------------------------------------

E1 = {"mc/e1/s1/r1", "mc/e1/s1/r2", "mc/e1/s2/r1"}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("config/config.yaml", set(ROOTS)),
        ("config/mc/application-defaults.yaml", set(ROOTS)),
        ("config/mc/a/values.yaml", set(ROOTS)),
        ("config/mc/a/values.sops.yaml", set(ROOTS)),
        ("config/mc/a/metadata.yaml", set(ROOTS)),
        ("config/mc/a/patches/p.yaml", set(ROOTS)),
        ("config/mc/a/e1/values.yaml", E1),
        ("config/mc/a/e1/patches/p.yaml", E1),
        ("config/mc/a/e1/s1/values.sops.yaml", {"mc/e1/s1/r1", "mc/e1/s1/r2"}),
        ("config/mc/b/e1/s1/r2/patches/x.yml", {"mc/e1/s1/r2"}),
        ("config/mc/b/e1/s2/r1/values.yaml", {"mc/e1/s2/r1"}),
        ("config/mc/a/OWNERS", set()),
        ("config/mc/a/README.md", set()),
        ("config/mc/a/e1/s1/README.md", set()),
        # Files never read are problems of the roots they would reach: a change there can
        # make their renders refuse, or stop refusing.
        ("config/mc/a/e3/values.yaml", set(ROOTS)),  # not an environment
        ("config/mc/a/e1/s3/values.yaml", E1),  # s3 belongs to e2
        ("config/mc/a/e1/notes.yaml", E1),
        # A file of the other spelling may make the repository read in it.
        ("config/mc/a/e1/override.yaml", set(ROOTS)),
        ("config/mc/a/e1/s1/patch-001.yaml", set(ROOTS)),
        ("config/mc/zz/values.yaml", set(ROOTS)),  # not an application of mc
        ("config/mc/defaults.yaml", set(ROOTS)),
        ("config/rc/a/values.yaml", set(ROOTS)),  # rc is not a cluster type
        ("config/mc/README.md", set()),
        ("config/README.md", set()),
        ("config/application-defaults.yaml", set(ROOTS)),  # never read: every root refuses
        ("docs/x.md", set()),
        ("config", set()),
    ],
)
def test_affected_paths(tmp_path: Path, path: str, expected: set[str]) -> None:
    layout = layout_of(tmp_path, base_files())
    assert layout.affected({path}) == expected


# --- secrets ----------------------------------------------------------------------------------


def test_encrypted_values_next_to_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    age = pytest.importorskip("tests.support.age")
    key = age.generate_key(tmp_path / "keys")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.key_file))
    monkeypatch.delenv("SOPS_AGE_KEY", raising=False)
    files = base_files()
    files["config/mc/a/e1/values.yaml"] = app_values("a", vo({"user": "plain", "level": "env"}))
    layout_dir = tmp_path / "fleet"
    write_files(layout_dir, files)
    secret = {"applications": {"a": vo({"password": "s3cret", "user": "from-sops"})}}
    age.write_encrypted(layout_dir / "config/mc/a/e1/values.sops.yaml", secret, [key.recipient])
    layout = DimensionsLayout(WorkTree(layout_dir), FleetConfig())
    merged = valuesobject(app(layout, "mc/e1/s1/r1"))
    assert merged == {"user": "plain", "level": "env", "password": "s3cret"}
    assert "helm" not in app(layout, "mc/e2/s3/r3")["source"]
    bad = {"applications": {"b": {"project": "x"}}}
    age.write_encrypted(layout_dir / "config/mc/a/e2/values.sops.yaml", bad, [key.recipient])
    problems = [str(p) for p in validate_fleet(WorkTree(layout_dir))]
    assert problems == [
        "config/mc/a/e2/values.sops.yaml:2: unknown key 'applications/b': a values file under "
        "config/mc/a/ may only define applications.a"
    ]

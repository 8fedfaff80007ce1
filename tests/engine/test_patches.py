"""Patch files of the dimensions layout: parsing, dependencies, order, overlap and merge."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from shared.engine.dimensions import patches
from shared.engine.errors import FleetError, FleetErrors


def make(
    pid: str = "p",
    body: dict[str, Any] | None = None,
    deps: list[dict[str, Any]] | None = None,
    strategy: dict[str, str] | None = None,
    path: str = "config/t/a/patches/p.yaml",
) -> patches.Patch:
    doc: dict[str, Any] = {"metadata": {"id": pid}, "patch": body or {"a": {"project": pid}}}
    if deps is not None:
        doc["metadata"]["dependencies"] = deps
    if strategy is not None:
        doc["metadata"]["merge_strategy"] = strategy
    return patches.load_patch(yaml.safe_dump(doc, sort_keys=False), path)


APPS = {
    "cert-manager": {"source": {"targetRevision": "v1.13.2"}, "ready": True, "replicas": 2},
    "plain": {"source": {"targetRevision": "1.4"}},
    "odd": {"source": {"targetRevision": "latest"}},
}


@pytest.mark.parametrize(
    ("pointer", "expected", "met"),
    [
        # exact equality, type-aware
        ("/cert-manager/source/targetRevision", "v1.13.2", True),
        ("/cert-manager/source/targetRevision", "1.13.2", False),
        ("/cert-manager/ready", True, True),
        ("/cert-manager/ready", "true", False),
        ("/cert-manager/replicas", 2, True),
        ("/cert-manager/replicas", True, False),
        # every comparison operator, both sides of the boundary
        ("/cert-manager/source/targetRevision", ">=v1.13.0", True),
        ("/cert-manager/source/targetRevision", ">=v1.13.2", True),
        ("/cert-manager/source/targetRevision", ">=v1.14.0", False),
        ("/cert-manager/source/targetRevision", ">v1.13.1", True),
        ("/cert-manager/source/targetRevision", ">v1.13.2", False),
        ("/cert-manager/source/targetRevision", "<v1.14", True),
        ("/cert-manager/source/targetRevision", "<v1.13.2", False),
        ("/cert-manager/source/targetRevision", "<=v1.13.2", True),
        ("/cert-manager/source/targetRevision", "<=1.13.1", False),
        ("/cert-manager/source/targetRevision", "==1.13.2", True),
        ("/cert-manager/source/targetRevision", "== v1.13.3", False),
        ("/cert-manager/source/targetRevision", "!=v1.13.3", True),
        ("/cert-manager/source/targetRevision", "!=v1.13.2", False),
        # prereleases sort before the release
        ("/cert-manager/source/targetRevision", ">v1.13.2-rc.1", True),
        # the leading v is optional on the found value too, and short versions work
        ("/plain/source/targetRevision", ">=v1.3.9", True),
        ("/plain/source/targetRevision", ">=1.5", False),
        # something that is not a version never satisfies a comparison
        ("/odd/source/targetRevision", ">=v0.0.1", False),
        ("/odd/source/targetRevision", "!=v0.0.1", False),
        # missing paths never satisfy
        ("/cert-manager/source/chart", ">=v1", False),
        ("/nope/x", "x", False),
    ],
)
def test_dependency_evaluation(pointer: str, expected: Any, met: bool) -> None:
    patch = make(deps=[{pointer: expected}])
    assert (patch.unmet(APPS) == []) is met


def test_unmet_dependency_says_what_was_found() -> None:
    patch = make(
        deps=[
            {"/cert-manager/source/targetRevision": ">=v1.14.0"},
            {"/odd/source/targetRevision": ">=v1"},
            {"/cert-manager/chart": "x"},
            {"/cert-manager/ready": False},
        ]
    )
    found = {dep.describe(): why for dep, why in patch.unmet(APPS)}
    assert found == {
        "/cert-manager/source/targetRevision >=v1.14.0": "found 'v1.13.2'",
        "/odd/source/targetRevision >=v1": "found 'latest', which is not a semantic version",
        "/cert-manager/chart 'x'": "nothing is set there",
        "/cert-manager/ready false": "found true",
    }


def test_dependency_lines_point_into_the_file() -> None:
    text = (
        "metadata:\n"
        "  id: p\n"
        "  dependencies:\n"
        "    - /a/x: 1\n"
        "    - /b/y: '>=v2'\n"
        "patch:\n"
        "  a: {project: x}\n"
    )
    patch = patches.load_patch(text, "f.yaml")
    assert [patch.line(d.keys) for d in patch.dependencies] == [4, 5]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata: {id: p, nmae: x}\npatch: {a: {}}\n", "f.yaml:1: unknown key 'metadata/nmae'"),
        ("metadata:\n  id: p\npatch: {a: {}}\nextra: 1\n", "f.yaml:4: unknown key 'extra'"),
        ("metadata: {description: x}\npatch: {a: {}}\n", "missing required key 'metadata/id'"),
        ("metadata: {id: p}\n", "missing required key 'patch'"),
        (
            "metadata:\n  id: p\n  dependencies:\n    - a/x: 1\npatch: {a: {}}\n",
            "is not a JSON pointer",
        ),
        (
            "metadata:\n  id: p\n  dependencies:\n    - /a/x: '>=banana'\npatch: {a: {}}\n",
            "'banana' is not a semantic version",
        ),
        (
            "metadata:\n  id: p\n  merge_strategy:\n    /a/x: prepend\npatch: {a: {}}\n",
            "f.yaml:4: metadata/merge_strategy//a/x:",
        ),
        ("- 1\n", "f.yaml:1: expected a mapping"),
        ("metadata: [\n", "f.yaml:2: YAML syntax error"),
    ],
)
def test_bad_patch_files(text: str, message: str) -> None:
    with pytest.raises(FleetError) as err:
        patches.load_patch(text, "f.yaml")
    assert message in str(err.value)


def test_append_strategy_appends_lists_and_replace_is_the_default() -> None:
    apps: dict[str, Any] = {
        "a": {"syncPolicy": {"syncOptions": ["A"]}, "ignoreDifferences": [{"kind": "X"}]}
    }
    body = {"a": {"syncPolicy": {"syncOptions": ["B"]}, "ignoreDifferences": [{"kind": "Y"}]}}
    appended = make(body=body, strategy={"/a/syncPolicy/syncOptions": "append"}).apply(apps)
    assert appended["a"]["syncPolicy"]["syncOptions"] == ["A", "B"]
    assert appended["a"]["ignoreDifferences"] == [{"kind": "Y"}]
    replaced = make(body=body).apply(apps)
    assert replaced["a"]["syncPolicy"]["syncOptions"] == ["B"]
    assert apps["a"]["syncPolicy"]["syncOptions"] == ["A"]  # input untouched


def test_order_puts_a_patch_after_the_patch_it_depends_on() -> None:
    needs = make("needs-new-cm", body={"a": {"project": "x"}}, deps=[{"/cm/version": ">=2"}])
    brings = make("brings-cm-2", body={"cm": {"version": "2.0.0"}})
    unrelated = make("other", body={"b": {"project": "y"}})
    ordered = patches.order([needs, unrelated, brings])
    assert [p.id for p in ordered] == ["other", "brings-cm-2", "needs-new-cm"]
    applied, outcomes = patches.apply_all({"cm": {"version": "1.0.0"}}, ordered)
    assert all(o.applied for o in outcomes)
    assert applied["a"]["project"] == "x"
    # in file order alone the dependency would have been checked too early
    _, early = patches.apply_all({"cm": {"version": "1.0.0"}}, [needs, brings])
    assert not early[0].applied


def test_order_keeps_the_given_order_without_dependencies() -> None:
    ps = [make(str(i), body={"a": {"project": str(i)}}) for i in (3, 1, 2)]
    assert [p.id for p in patches.order(ps)] == ["3", "1", "2"]


def test_dependency_cycle_is_an_error_naming_the_files() -> None:
    a = make("a", body={"x": {"v": 1}}, deps=[{"/y/v": 1}], path="pa.yaml")
    b = make("b", body={"y": {"v": 1}}, deps=[{"/x/v": 1}], path="pb.yaml")
    with pytest.raises(FleetError, match=r"cycle: pa.yaml \(a\), pb.yaml \(b\)"):
        patches.order([a, b])


def test_overlap_finds_shared_leaves_and_prefixes() -> None:
    a = make("a", body={"a": {"source": {"targetRevision": "1", "path": "p"}}})
    b = make("b", body={"a": {"source": {"targetRevision": "2"}}})
    c = make("c", body={"a": {"source": {"repoURL": "u"}}})
    whole = make("d", body={"a": {"source": {}}})
    assert patches.overlap(a, b) == ["/a/source/targetRevision"]
    assert patches.overlap(a, c) == []
    assert patches.overlap(c, whole) == ["/a/source/repoURL"]


def test_two_appends_to_the_same_list_do_not_overlap() -> None:
    ptr = "/a/syncPolicy/syncOptions"
    body = {"a": {"syncPolicy": {"syncOptions": ["X"]}}}
    a = make("a", body=body, strategy={ptr: "append"})
    b = make("b", body=body, strategy={ptr: "append"})
    c = make("c", body=body)
    assert patches.overlap(a, b) == []
    assert patches.overlap(a, c) == [ptr]


def test_errors_are_fleet_errors_with_every_problem() -> None:
    text = "metadata: {id: p, a: 1, b: 2}\npatch: {a: {}}\n"
    with pytest.raises(FleetErrors) as err:
        patches.load_patch(text, "f.yaml")
    assert len(err.value.problems) == 2

"""Rendered documents: parsing, scope, namespaces, hooks, labels and file names."""

from __future__ import annotations

from typing import Any

import pytest

from shared.engine.errors import FleetError
from shared.engine.manifests import documents
from shared.engine.manifests.documents import DEFAULT_PATTERN, Resource


def obj(kind: str, name: str, api_version: str = "v1", **meta: Any) -> Resource:
    return Resource(
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, **meta}}, "src"
    )


def test_parse_drops_empty_documents_and_flattens_lists() -> None:
    text = """
---
# only a comment
---
apiVersion: v1
kind: List
items:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}
  -
  - {apiVersion: v1, kind: Secret, metadata: {name: b}}
---
apiVersion: v1
kind: ConfigMapList
items:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
---
apiVersion: v1
kind: Service
metadata: {name: d}
"""
    parsed = documents.parse(text, "chart:templates/x.yaml", "hooks")
    assert [(r.kind, r.name) for r in parsed] == [
        ("ConfigMap", "a"),
        ("Secret", "b"),
        ("ConfigMap", "c"),
        ("Service", "d"),
    ]
    assert {r.source for r in parsed} == {"chart:templates/x.yaml"}
    assert {r.section for r in parsed} == {"hooks"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "rendered document is a list, expected a Kubernetes object"),
        ("apiVersion: v1\nkind: List\nitems: [x]\n", "item of List is a string"),
        ("kind: ConfigMap\nmetadata: {name: a}\n", "lacks apiVersion, kind or metadata.name"),
        ("apiVersion: v1\nmetadata: {name: a}\n", "lacks apiVersion, kind or metadata.name"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n", "lacks apiVersion, kind or metadata"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: [a]\n", "lacks apiVersion, kind or metadata"),
    ],
)
def test_parse_rejects_what_is_not_an_object(text: str, message: str) -> None:
    with pytest.raises(FleetError) as err:
        documents.parse(text, "chart:templates/x.yaml")
    assert err.value.path == "chart:templates/x.yaml"
    assert message in str(err.value)


def test_parse_syntax_error_has_a_line() -> None:
    with pytest.raises(FleetError) as err:
        documents.parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n", "f.yaml")
    assert err.value.path == "f.yaml"
    assert err.value.line == 4


def test_group_and_identity() -> None:
    deployment = obj("Deployment", "web", "apps/v1", namespace="x")
    assert deployment.group == "apps"
    assert deployment.identity() == ("apps", "Deployment", "x", "web")
    assert obj("Service", "web").group == ""


@pytest.mark.parametrize(
    ("annotation", "section"),
    [
        (None, ""),
        ("pre-install", "hooks"),
        ("post-upgrade, pre-delete", "hooks"),
        ("test", "tests"),
        ("test-success", "tests"),
        ("pre-install,test", "tests"),
    ],
)
def test_hook_section(annotation: str | None, section: str) -> None:
    res = obj("Job", "j", "batch/v1")
    if annotation is not None:
        res.metadata["annotations"] = {"helm.sh/hook": annotation}
    assert documents.hook_section(res) == section


def test_cluster_scoped_kinds_include_builtins_config_and_cluster_crds() -> None:
    crd = Resource(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"scope": "Cluster", "names": {"kind": "Widget"}},
        },
        "src",
    )
    namespaced = Resource(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"scope": "Namespaced", "names": {"kind": "Gadget"}},
        },
        "src",
    )
    kinds = documents.cluster_scoped_kinds([crd, namespaced], frozenset({"Thing"}))
    assert {"Widget", "Thing", "ClusterRole", "Namespace", "StorageClass"} <= kinds
    assert "Gadget" not in kinds
    assert "ConfigMap" not in kinds


def test_apply_namespace() -> None:
    kinds = documents.cluster_scoped_kinds([], frozenset())
    lacking = Resource(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {}}}, "s"
    )
    documents.apply_namespace(lacking, "apps", kinds)
    assert list(lacking.metadata.items()) == [("name", "a"), ("namespace", "apps"), ("labels", {})]

    own = obj("ConfigMap", "b", namespace="mine")
    documents.apply_namespace(own, "apps", kinds)
    assert own.namespace == "mine"

    cluster = obj("ClusterRole", "c", "rbac.authorization.k8s.io/v1", namespace="oops")
    documents.apply_namespace(cluster, "apps", kinds)
    assert "namespace" not in cluster.metadata

    no_release_namespace = obj("ConfigMap", "d")
    documents.apply_namespace(no_release_namespace, "", kinds)
    assert "namespace" not in no_release_namespace.metadata


def test_remove_labels_drops_empty_label_maps() -> None:
    res = obj("ConfigMap", "a", labels={"x": "1", "y": "2"})
    documents.remove_labels(res, ["x", "absent"])
    assert res.metadata["labels"] == {"y": "2"}
    documents.remove_labels(res, ["y"])
    assert "labels" not in res.metadata


def name(res: Resource, pattern: str = DEFAULT_PATTERN, kinds: frozenset[str] = frozenset()) -> str:
    return documents.file_name(
        res,
        pattern=pattern,
        root="staging/cluster-a",
        deployment="web",
        release="web-api",
        cluster_kinds=kinds or documents.cluster_scoped_kinds([], frozenset()),
    )


def test_default_file_names() -> None:
    assert name(obj("ConfigMap", "a", namespace="apps")) == "web/web-api/apps/ConfigMap_a.yaml"
    assert (
        name(obj("Deployment", "a", "apps/v1", namespace="apps"))
        == "web/web-api/apps/Deployment.apps_a.yaml"
    )
    assert (
        name(obj("ClusterRole", "system:a", "rbac.authorization.k8s.io/v1"))
        == "web/web-api/_cluster/ClusterRole.rbac.authorization.k8s.io_system_a.yaml"
    )
    # a namespaced kind without a namespace (no release namespace) is written under _cluster
    assert name(obj("ConfigMap", "a")) == "web/web-api/_cluster/ConfigMap_a.yaml"
    crd = obj("CustomResourceDefinition", "x.example.com", "apiextensions.k8s.io/v1")
    crd.section = "crds"
    crd_file = "CustomResourceDefinition.apiextensions.k8s.io_x.example.com.yaml"
    assert name(crd) == f"web/web-api/_cluster/crds/{crd_file}"
    hook = obj("Job", "migrate", "batch/v1", namespace="apps")
    hook.section = "hooks"
    assert name(hook) == "web/web-api/apps/hooks/Job.batch_migrate.yaml"


def test_unsafe_characters_are_replaced_in_every_part() -> None:
    res = obj("Odd Kind", "a/b\\c d*e", "ex ample.com/v1", namespace="n s")
    assert name(res) == "web/web-api/n_s/Odd_Kind.ex_ample.com_a_b_c_d_e.yaml"


def test_custom_patterns() -> None:
    res = obj("Deployment", "a", "apps/v1", namespace="apps")
    assert name(res, "{root}/{kind}-{name}.yml") == "staging/cluster-a/Deployment-a.yml"
    assert name(res, "/{namespace}//{kind}{group}/{name}.yaml") == "apps/Deployment.apps/a.yaml"


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (DEFAULT_PATTERN, None),
        ("{kind}_{name}.yml", None),
        ("{name}.yaml", "must contain {kind} and {name}"),
        ("{kind}_{name}_{cluster}.yaml", "unknown field(s) ['cluster']"),
        ("{kind}_{name}_{0}.yaml", "unknown field(s) ['0']"),
        ("{kind}_{name}}.yaml", "not a valid format string"),
        ("{kind}_{name!x}{name}.yaml", "not a valid format string"),
        ("a/../../{kind}_{name}.yaml", "must not leave the root directory"),
        ("{kind}_{name}.json", "must end with .yaml or .yml"),
    ],
)
def test_validate_pattern(pattern: str, problem: str | None) -> None:
    result = documents.validate_pattern(pattern)
    if problem is None:
        assert result is None
    else:
        assert result is not None
        assert problem in result


def test_dump_keeps_key_order_and_ends_with_newline() -> None:
    res = Resource(
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "z"}, "data": {"b": "1"}},
        "s",
    )
    text = documents.dump(res)
    assert text == "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: z\ndata:\n  b: '1'\n"

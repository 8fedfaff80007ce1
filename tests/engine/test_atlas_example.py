"""examples/atlas-fleet through the CLI, against golden output.

Regenerate the golden tree after an intended change with
`ROLLWRIGHT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/engine/test_atlas_example.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.cli import main as cli
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support import paths
from tests.support.atlas import assert_matches_golden
from tests.support.files import copy_example
from tests.support.golden import tree_of
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "atlas-fleet"
GOLDEN = paths.GOLDEN / "atlas-fleet"
ROOTS = ["prod/eu-1", "staging/cluster-a", "staging/cluster-b", "standalone"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_roots(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "roots", "--repo", str(EXAMPLE)) == (0, "\n".join(ROOTS) + "\n", "")


def test_validate_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "validate", "--repo", str(EXAMPLE)) == (
        0,
        "",
        f"{len(ROOTS)} root(s) checked: no problems found\n",
    )


def test_values_of_the_overriding_cluster_deployment(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "values", "prod/eu-1", "--repo", str(EXAMPLE), "--release", "web/api-shop"
    )
    assert code == 0, err
    values = yaml.safe_load(out)
    assert values["replicaCount"] == 3  # prod/eu-1/apps/web/values.yaml beats the prod group
    assert values["image"] == {"repository": "registry.example.com/web-api", "tag": "2.4.0"}
    assert values["env"]["FEATURE_FLAGS"] == "checkout-v2"  # instance values
    assert values["env"]["PUBLIC_URL"] == "https://web.eu-1.example.com"  # template gotmpl
    assert values["env"]["STAGE"] == "prod"
    assert values["atlas"]["labels"]["instance"] == "shop"
    assert values["atlas"]["cwd"] == "."


def test_values_without_release_lists_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "values", "standalone", "--repo", str(EXAMPLE))
    assert (code, out) == (1, "")
    assert err == (
        "error: root 'standalone' has 4 releases; choose one with --release: "
        "cert-operator/cert-operator, monitoring/node-metrics, web/api, web/frontend\n"
    )


def test_render_matches_golden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, stdout, err = run(capsys, "render", "--repo", str(EXAMPLE), "--out", str(out))
    assert (code, stdout) == (0, "")
    assert err.startswith(f"rendered {len(ROOTS)} root(s), ") and err.count("\n") == 1
    assert_matches_golden(out, GOLDEN)


def test_golden_tree_shows_every_feature() -> None:
    golden = tree_of(GOLDEN)
    cert = "staging/cluster-a/cert-operator/cert-operator"
    # a CRD in crds/ under _cluster, a hook (rendered by default), cluster-scoped RBAC
    assert (
        f"{cert}/_cluster/crds/CustomResourceDefinition.apiextensions.k8s.io_"
        "certificates.certs.example.com.yaml" in golden
    )
    assert f"{cert}/cert-system/hooks/Job.batch_cert-operator-register.yaml" in golden
    # kustomize template, with the release namespace applied to namespaced objects only
    daemonset = yaml.safe_load(
        golden["standalone/monitoring/node-metrics/monitoring/DaemonSet.apps_node-metrics.yaml"]
    )
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "quay.io/prometheus/node-exporter:v1.8.2"
    )
    metrics = "standalone/monitoring/node-metrics"
    assert f"{metrics}/_cluster/ClusterRole.rbac.authorization.k8s.io_node-metrics.yaml" in golden
    # plain manifests with remove_labels and a strategic merge patch; group app on staging only
    netshoot = yaml.safe_load(
        golden["staging/cluster-b/debug-tools/debug-tools/debug/Deployment.apps_netshoot.yaml"]
    )
    assert "example.com/lint" not in netshoot["metadata"]["labels"]
    assert netshoot["spec"]["template"]["metadata"]["annotations"] == {
        "example.com/cluster": "staging/cluster-b"
    }
    assert not any(p.startswith(("prod/", "standalone/")) and "debug-tools" in p for p in golden)
    # the cluster override: suffix names, its own namespace, template jsonPatch + instance SMP
    api = yaml.safe_load(golden["prod/eu-1/web/api-shop/shop/Deployment.apps_api-shop.yaml"])
    assert api["spec"]["template"]["metadata"]["annotations"] == {
        "example.com/cluster": "prod/eu-1"
    }
    assert api["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "memory": "512Mi"
    }
    assert not any(p.startswith("prod/eu-1/web/api/") for p in golden)


def test_render_is_deterministic_and_independent_of_the_checkout_path(tmp_path: Path) -> None:
    first = list(Fleet.open(WorkTree(EXAMPLE)).render_all())
    second = list(Fleet.open(WorkTree(EXAMPLE)).render_all())
    elsewhere = list(
        Fleet.open(WorkTree(copy_example("atlas-fleet", tmp_path / "copy"))).render_all()
    )
    assert [r.digest for r in first] == [r.digest for r in second] == [r.digest for r in elsewhere]
    assert [r.files for r in first] == [r.files for r in elsewhere]
    assert len({r.digest for r in first}) == len(ROOTS)


def test_releases_carry_the_common_labels() -> None:
    fleet = Fleet.open(WorkTree(EXAMPLE))
    by_id = {r.id: r for r in fleet.releases("prod/eu-1")}
    assert sorted(by_id) == ["monitoring/node-metrics", "web/api-shop", "web/frontend-shop"]
    assert by_id["web/api-shop"].labels == {
        "tier": "backend",
        "cluster": "prod/eu-1",
        "clusterName": "eu-1",
        "clusterGroup": "prod",
        "deploymentName": "web",
        "template": "web",
        "instance": "shop",
        "variant": "default",
    }
    assert by_id["web/api-shop"].namespace == "shop"
    assert by_id["monitoring/node-metrics"].namespace == "monitoring"

"""ApplicationSets in the rendered chart (tests/fixtures/fleets/bootstrap-fleet: infra clusters
bootstrap the management clusters of their place): golden output, the second Helm pass over
the published chart with a cluster's values, defaults, overrides, patches and secrets as for
applications, and the schema of their fields."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.cli import main as cli
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.dimensions import second_pass
from tests.support.golden import assert_golden
from tests.support.paths import FIXTURES

FLEET = FIXTURES / "fleets" / "bootstrap-fleet"
GOLDEN_ROOTS = ["infra-cluster/production/europe-west1", "infra-cluster/staging/us-east1"]
SET = "config/infra-cluster/management-cluster-root"
PROD_EU = "infra-cluster/production/europe-west1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def copy_fleet(tmp_path: Path) -> Path:
    return shutil.copytree(FLEET, tmp_path / "fleet")


def test_render_matches_golden(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["render", "--repo", str(FLEET), "--out", str(tmp_path)]
    for root in GOLDEN_ROOTS:
        argv += ["--root", root]
    code, out, err = run(capsys, *argv)
    assert (code, out) == (0, "")
    assert err.startswith(f"rendered {len(GOLDEN_ROOTS)} root(s), ") and err.count("\n") == 1
    assert_golden(tmp_path, "bootstrap-fleet", GOLDEN_ROOTS)


def test_the_published_chart_resolves_for_a_cluster(tmp_path: Path) -> None:
    """Argo CD renders the published chart with the infra cluster's values (the second Helm
    pass): the escaped templating resolves to that cluster, the ApplicationSet controller's
    own templating is left for it, and what rollwright resolved stays."""
    files = Fleet.open(WorkTree(FLEET)).render(PROD_EU).files
    cluster = {"name": "infra-eu-1", "region": "europe-west1"}
    templates = second_pass(files, tmp_path / PROD_EU, cluster)
    prefix = "infra-cluster-production-europe-west1/templates"
    appset = yaml.safe_load(templates[f"{prefix}/management-cluster-root.yaml"])
    assert appset["kind"] == "ApplicationSet"
    selector = appset["spec"]["generators"][0]["clusters"]["selector"]["matchLabels"]
    assert selector == {
        "cluster-type": "management-cluster",
        "environment": "production",  # rollwright, from the root
        "region": "europe-west1",  # the cluster's pass
    }
    template = appset["spec"]["template"]
    assert template["metadata"]["name"] == "{{ .name }}-apps"  # the controller's
    source = template["spec"]["source"]
    assert source["path"] == "management-cluster/production/europe-west1"
    assert source["helm"]["valuesObject"]["cluster"] == {
        "name": "{{ .name }}",
        "region": "europe-west1",
    }
    assert template["spec"]["destination"]["server"] == "{{ .server }}"
    assert appset["spec"]["strategy"]["type"] == "RollingSync"  # production's override
    assert appset["spec"]["syncPolicy"] == {"preserveResourcesOnDeletion": True}  # defaults
    assert "{{" not in "".join(
        line
        for line in templates[f"{prefix}/management-cluster-root.yaml"].splitlines()
        if "Values" in line
    )
    argocd = yaml.safe_load(templates[f"{prefix}/argocd.yaml"])
    assert argocd["kind"] == "Application"


def test_defaults_overrides_and_patches(capsys: pytest.CaptureFixture[str]) -> None:
    def appset(root: str) -> dict[str, Any]:
        code, out, err = run(
            capsys, "values", root, "--repo", str(FLEET), "--release", "management-cluster-root"
        )
        assert code == 0, err
        values = yaml.safe_load(out)
        assert list(values) == ["cluster", "applicationsets"]
        result: dict[str, Any] = values["applicationsets"]["management-cluster-root"]
        return result

    staging = appset("infra-cluster/staging/us-east1")
    production = appset(PROD_EU)
    for fields in (staging, production):
        assert fields["goTemplate"] is True and fields["namespace"] == "argocd"  # defaults
    assert "strategy" not in staging and production["strategy"]["type"] == "RollingSync"
    # the patch active under staging
    assert staging["template"]["spec"]["source"]["targetRevision"] == "v2"
    assert production["template"]["spec"]["source"]["targetRevision"] == "main"
    code, out, err = run(capsys, "values", PROD_EU, "--repo", str(FLEET))
    assert code == 0, err
    assert list(yaml.safe_load(out)) == ["cluster", "applications", "applicationsets"]
    # a type without ApplicationSets keeps the output it always had
    code, out, err = run(
        capsys, "values", "management-cluster/staging/us-east1", "--repo", str(FLEET)
    )
    assert code == 0, err
    assert list(yaml.safe_load(out)) == ["cluster", "applications"]


CASES: dict[str, tuple[str, str, list[str]]] = {
    "unknown field of the template spec": (
        f"{SET}/staging/values.yaml",
        "applicationsets:\n  management-cluster-root:\n    template:\n      spec:\n"
        "        projct: x\n",
        [
            f"{SET}/staging/values.yaml:5: unknown key "
            "'applicationsets/management-cluster-root/template/spec/projct'"
        ],
    ),
    "unknown generator": (
        f"{SET}/staging/values.yaml",
        "applicationsets:\n  management-cluster-root:\n    generators:\n      - clusterz: {}\n",
        [
            f"{SET}/staging/values.yaml:4: unknown key "
            "'applicationsets/management-cluster-root/generators/0/clusterz'"
        ],
    ),
    "a sync policy Argo CD does not know": (
        f"{SET}/production/europe-west1/values.yaml",
        "applicationsets:\n  management-cluster-root:\n    syncPolicy:\n"
        "      applicationsSync: create-all\n",
        [
            f"{SET}/production/europe-west1/values.yaml:4: applicationsets/"
            "management-cluster-root/syncPolicy/applicationsSync: Input should be"
        ],
    ),
    "goTemplate is a boolean": (
        f"{SET}/values.yaml",
        "applicationsets:\n  management-cluster-root:\n    goTemplate: sometimes\n",
        [
            f"{SET}/values.yaml:3: applicationsets/management-cluster-root/goTemplate: "
            "Input should be a valid boolean"
        ],
    ),
    # The design document's defaults give ApplicationSets a `project`: no such field, so it
    # is ignored, and said so (the generator renders none either).
    "project in the ApplicationSet defaults": (
        "config/infra-cluster/applicationset-defaults.yaml",
        "defaults:\n  project: default\n  namespace: argocd\n",
        [
            "config/infra-cluster/applicationset-defaults.yaml:2: warning: project in the "
            "ApplicationSet defaults is ignored: an ApplicationSet has no project"
        ],
    ),
    "project in an ApplicationSet's values": (
        f"{SET}/staging/values.yaml",
        "applicationsets:\n  management-cluster-root:\n    project: default\n",
        [
            f"{SET}/staging/values.yaml:3: unknown key "
            "'applicationsets/management-cluster-root/project'"
        ],
    ),
    "an application key in an ApplicationSet's directory": (
        f"{SET}/staging/values.yaml",
        "applications:\n  management-cluster-root: {}\n",
        [
            f"{SET}/staging/values.yaml:1: unknown key 'applications': a values file under "
            f"{SET}/ may only define applicationsets.management-cluster-root"
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_schema_of_applicationset_fields(tmp_path: Path, case: str) -> None:
    rel, text, wanted = CASES[case]
    fleet = copy_fleet(tmp_path)
    (fleet / rel).parent.mkdir(parents=True, exist_ok=True)
    (fleet / rel).write_text(text)
    got = [str(p) for p in validate_fleet(WorkTree(fleet))]
    assert len(got) == len(wanted), got
    for line, prefix in zip(got, wanted, strict=True):
        assert line.startswith(prefix), got


def test_generators_and_template_are_required(tmp_path: Path) -> None:
    fleet = copy_fleet(tmp_path)
    (fleet / SET / "production/values.yaml").write_text(
        "applicationsets:\n  management-cluster-root:\n    generators: null\n"
    )
    # One mistake, reported once with the roots it fails.
    assert [str(p) for p in validate_fleet(WorkTree(fleet))] == [
        f"{SET}/values.yaml: ApplicationSet "
        "'management-cluster-root' has no generators (set it in values.yaml or "
        "config/infra-cluster/applicationset-defaults.yaml) (in 2 roots: "
        "infra-cluster/production/europe-west1, infra-cluster/production/us-east1)"
    ]


def test_applicationset_listed_twice(tmp_path: Path) -> None:
    fleet = copy_fleet(tmp_path)
    config = fleet / "config/config.yaml"
    config.write_text(config.read_text().replace("[argocd]", "[argocd, management-cluster-root]"))
    [problem] = validate_fleet(WorkTree(fleet))
    assert str(problem) == (
        "config/config.yaml:20: 'management-cluster-root' is listed both as an application and "
        "as an ApplicationSet (each has a directory of its own)"
    )


def test_encrypted_values_of_an_applicationset(tmp_path: Path, age_key: AgeKey) -> None:
    fleet = copy_fleet(tmp_path)
    token = "s3cret-bootstrap-token"
    secret = {
        "applicationsets": {
            "management-cluster-root": {
                "template": {"metadata": {"annotations": {"bootstrap-token": token}}}
            }
        }
    }
    (fleet / SET / "values.sops.yaml").write_text(encrypt_yaml(secret, [age_key.recipient]))
    render = Fleet.open(WorkTree(fleet)).render(PROD_EU)
    shown = render.files["templates/management-cluster-root.yaml"].decode()
    assert token not in shown and token not in render.files["values.yaml"].decode()
    assert "bootstrap-token: REDACT" in shown  # redacted, shape kept
    assert token in render.reveal()["templates/management-cluster-root.yaml"].decode()

"""Rendered Argo CD Applications and ApplicationSets follow Argo CD's own schema: unknown or
mistyped fields are content errors with file, line and "did you mean", in the fleet's values
files (dimensions) and in what charts render (atlas); the vendored schema is Argo CD's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.cli.main import main
from shared.engine.errors import FleetErrors
from shared.engine.fleet import Fleet
from shared.engine.manifests import argocd
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from tests.support.files import write_files
from tests.support.paths import EXAMPLES, FIXTURES
from tests.support.vendored import ARGOCD_SWAGGER

DIMENSIONS = EXAMPLES / "dimensions-fleet"
BOOTSTRAP = FIXTURES / "fleets/bootstrap-fleet"
HYPERSHIFT = "config/management-cluster/hypershift-operator"


def test_the_vendored_schema_is_argo_cds() -> None:
    vendored = (Path(argocd.__file__).parent / argocd.SCHEMA_FILE).read_text()
    assert vendored == argocd.render_schema(ARGOCD_SWAGGER)
    assert {"v1alpha1Application", "v1alpha1ApplicationSource"} <= set(argocd.definitions())


def test_free_form_and_int_or_string_fields() -> None:
    doc = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "spec": {
            "source": {"repoURL": "r", "helm": {"valuesObject": {"any": {"thing": [1]}}}},
            "syncPolicy": {"retry": {"limit": 3, "backoff": {"factor": 2}}},
            "destination": {"server": "s"},
        },
    }
    assert argocd.check_object(doc) == []
    doc["spec"]["syncPolicy"]["retry"]["limit"] = "3"  # type: ignore[index]
    doc["metadata"]["labels"]["a"] = 1  # type: ignore[index]
    assert [argocd.describe(m) for m in argocd.check_object(doc)] == [
        "metadata/labels/a: expected a string, found a number",
        "spec/syncPolicy/retry/limit: expected an integer, found a string",
    ]


@pytest.fixture
def dimensions(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DIMENSIONS, tmp_path / "fleet"))


def test_a_typo_under_source_is_a_content_error_with_line(
    dimensions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = dimensions / HYPERSHIFT / "values.yaml"
    values.write_text(values.read_text().replace("targetRevision:", "targetRevison:"))
    wanted = (
        f"{HYPERSHIFT}/values.yaml:5: unknown key "
        "'applications/hypershift-operator/source/targetRevison' (did you mean 'targetRevision'?)"
    )
    assert [str(p) for p in validate_fleet(WorkTree(dimensions))] == [wanted]
    assert main(["render", "--repo", str(dimensions), "--out", str(dimensions / "out")]) == 1
    assert wanted in capsys.readouterr().err
    with pytest.raises(FleetErrors):
        Fleet.open(WorkTree(dimensions)).render(
            "management-cluster/integration/int-sector-1/us-central1"
        )


def test_patch_bodies_and_defaults_are_checked(dimensions: Path) -> None:
    patch = dimensions / HYPERSHIFT / "patches/patch-001-hypershift-v4.18.yaml"
    patch.write_text(patch.read_text().replace("targetRevision: v4.18.0", "targetRevison: v4.18.0"))
    defaults = dimensions / "config/management-cluster/application-defaults.yaml"
    defaults.write_text(defaults.read_text() + "  syncPolicy:\n    automated:\n      prnue: true\n")
    got = [str(p) for p in validate_fleet(WorkTree(dimensions))]
    assert any(
        line.startswith(f"{HYPERSHIFT}/patches/patch-001-hypershift-v4.18.yaml:13: unknown key ")
        and "'patch/hypershift-operator/source/targetRevison'" in line
        for line in got
    ), got
    assert any(
        "application-defaults.yaml" in line
        and "unknown key 'defaults/syncPolicy/automated/prnue' (did you mean 'prune'?)" in line
        for line in got
    ), got


def test_applicationset_generators_follow_argo_cd(tmp_path: Path) -> None:
    fleet = Path(shutil.copytree(BOOTSTRAP, tmp_path / "fleet"))
    rel = "config/infra-cluster/management-cluster-root/staging/values.yaml"
    write_files(
        fleet,
        {
            rel: "applicationsets:\n  management-cluster-root:\n    generators:\n"
            "      - list:\n          elemnts: []\n"
        },
    )
    assert [str(p) for p in validate_fleet(WorkTree(fleet))] == [
        f"{rel}:5: unknown key 'applicationsets/management-cluster-root/generators/0/list/"
        "elemnts' (did you mean 'elements'?)"
    ]


def test_an_application_a_chart_renders_is_checked_too(tmp_path: Path) -> None:
    base = tmp_path / "fleet"
    write_files(
        base,
        {
            "templates/apps/helmfile.yaml": "releases:\n  - name: apps\n    chart: ./manifests\n",
            "templates/apps/manifests/app.yaml": (
                "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n"
                "  name: guestbook\n  namespace: argocd\nspec:\n  project: default\n"
                "  source:\n    repoURL: https://example.com/repo.git\n"
                "    targetRevison: main\n    path: guestbook\n"
                "  destination:\n    server: https://kubernetes.default.svc\n"
            ),
            "deployments/one/apps/apps/deployment.yaml": "apps:\n  - template: apps\n",
        },
    )
    with pytest.raises(FleetErrors) as info:
        Fleet.open(WorkTree(base)).render("one")
    (problem,) = info.value.problems
    assert (problem.path, problem.line) == ("templates/apps/manifests/app.yaml", 10)
    assert problem.message == (
        "release 'apps/apps' renders Application 'guestbook' (templates/apps/manifests/app.yaml): "
        "unknown key 'spec/source/targetRevison' (did you mean 'targetRevision'?)"
    )

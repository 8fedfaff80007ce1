"""A fleet written the way ATLAS's README and starter template write fleets
(tests/fixtures/atlas-starter), rendered with no change to the fleet, against golden output.

The public repositories it names are served on 127.0.0.1 through the worker's mirror mapping,
with stand-in charts (tests/fixtures/starter-charts) of the same names and versions. Regenerate
the golden tree after an intended change with
`ROLLWRIGHT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/engine/test_atlas_starter.py`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from shared.cli import main as cli
from shared.engine.charts import access
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support import paths
from tests.support.atlas import assert_matches_golden
from tests.support.chart_repo import ChartRepo
from tests.support.golden import tree_of
from tests.support.paths import FIXTURES

FLEET = FIXTURES / "atlas-starter"
CHARTS = FIXTURES / "starter-charts"
GOLDEN = paths.GOLDEN / "atlas-starter"
ARGO = "https://argoproj.github.io/argo-helm"
TRAEFIK = "https://traefik.github.io/charts"


@pytest.fixture
def mirrors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ChartRepo]]:
    argo = ChartRepo(tmp_path / "argo-helm")
    argo.add(CHARTS / "argo-cd")
    argo.add(CHARTS / "argocd-apps")
    traefik = ChartRepo(tmp_path / "traefik")
    traefik.add(CHARTS / "traefik")
    with argo, traefik:
        argo.index()
        traefik.index()
        mapping = {ARGO: argo.url, TRAEFIK: traefik.url}
        monkeypatch.setenv(access.MIRRORS_ENV, json.dumps(mapping))
        yield {"argo": argo, "traefik": traefik}


def fingerprint(directory: Path) -> str:
    digest = hashlib.sha256()
    for path, data in tree_of(directory).items():
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def test_starter_fleet_renders_unchanged_against_golden(
    tmp_path: Path, mirrors: dict[str, ChartRepo], capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(FLEET)
    assert cli.main(["validate", "--repo", str(FLEET)]) == 0
    out = tmp_path / "out"
    assert cli.main(["render", "--repo", str(FLEET), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    # Nothing from Helm's Go side on the terminal: only the two commands' summaries.
    assert captured.err.splitlines()[0] == "1 root(s) checked: no problems found"
    assert captured.err.splitlines()[1].startswith("rendered 1 root(s), ")
    assert len(captured.err.splitlines()) == 2
    assert fingerprint(FLEET) == before  # rendered with no change to the fleet
    assert_matches_golden(out, GOLDEN)


def test_golden_tree_shows_what_the_starter_relies_on() -> None:
    golden = {p: yaml.safe_load(d) for p, d in tree_of(GOLDEN).items()}
    argocd = "in-cluster/argocd/argocd/argocd"
    # the hook Job without which Argo CD's own redis never starts
    assert f"{argocd}/hooks/Job.batch_argocd-redis-secret-init.yaml" in golden
    # the dependency is there (vendored, as packaged) but off: its condition is false
    assert not any("redis-ha" in p for p in golden)
    # Secret data is redacted in what is shown (the plaintext: the test below)
    secret = golden[f"{argocd}/Secret_argocd-age-secret-keys.yaml"]
    assert secret["stringData"]["keys.txt"].startswith("REDACTED:sha256:")
    # the strategic merge patch added the helmfile sidecar to the repo server
    repo_server = golden[f"{argocd}/Deployment.apps_argocd-repo-server.yaml"]
    names = [c["name"] for c in repo_server["spec"]["template"]["spec"]["containers"]]
    assert sorted(names) == ["helmfile", "repo-server"]
    # configs and the domain from the cluster's values
    assert golden[f"{argocd}/ConfigMap_argocd-cm.yaml"]["data"]["url"] == (
        "https://argocd.in-cluster.mydomain.tld"
    )
    # atlas.repoURL from global values reaches the ApplicationSet template
    appset = golden["in-cluster/atlas/atlas/argocd/ApplicationSet.argoproj.io_atlas.yaml"]
    git = appset["spec"]["generators"][0]["matrix"]["generators"][1]["git"]
    assert (git["repoURL"], git["revision"]) == (
        "https://github.com/example/my-deployments.git",
        "HEAD",
    )
    assert (
        "repoURL: https://github.com/example/my-deployments.git" in appset["spec"]["templatePatch"]
    )
    # Traefik's strict schema would reject `atlas` and `domain`: ATLAS skips schema validation
    assert "in-cluster/traefik/traefik/traefik/Deployment.apps_traefik.yaml" in golden
    assert (
        "in-cluster/traefik/traefik/_cluster/crds/"
        "CustomResourceDefinition.apiextensions.k8s.io_ingressroutes.traefik.io.yaml" in golden
    )


def test_get_with_a_default_in_a_block_scalar(mirrors: dict[str, ChartRepo]) -> None:
    # helmfile's `get` with a default; the block scalar keeps the template's final newline
    plain = Fleet.open(WorkTree(FLEET)).render("in-cluster").reveal()
    secret = yaml.safe_load(plain["argocd/argocd/argocd/Secret_argocd-age-secret-keys.yaml"])
    assert secret["stringData"] == {"keys.txt": "No key specified\n"}


def test_release_labels_as_the_readme_selects_them(mirrors: dict[str, ChartRepo]) -> None:
    fleet = Fleet.open(WorkTree(FLEET))
    labels = {r.id: r.labels for r in fleet.releases("in-cluster")}
    assert labels["argocd/argocd"]["bootstrap"] == "true"  # `bootstrap: true`, a YAML bool
    assert labels["atlas/atlas"]["bootstrap"] == "true"
    assert "bootstrap" not in labels["traefik/traefik"]
    assert labels["argocd/argocd"]["cluster"] == "in-cluster"
    assert "clusterGroup" not in labels["argocd/argocd"]  # a standalone cluster

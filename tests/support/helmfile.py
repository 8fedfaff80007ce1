"""Fixture repositories of the helmfile layout: a case's input with its source charts."""

from __future__ import annotations

import posixpath
import shutil
from pathlib import Path

from shared.engine.config.fleet import FleetConfig
from shared.engine.fleet import Fleet
from shared.engine.helmfile.layout import HelmfileLayout
from shared.engine.tree import WorkTree
from tests.support import paths

FIXTURES = paths.FIXTURES / "helmfile"
CASES = FIXTURES / "cases"


def sources(case: str) -> list[tuple[str, str]]:
    """(source folder under fixtures/helmfile/sources, path in the repository) of a case."""
    listing = CASES / case / "sources.txt"
    lines = listing.read_text().splitlines() if listing.exists() else []
    return [(source, target) for source, target in (line.split() for line in lines)]


def build(case: str, into: Path) -> Path:
    """The case's repository in `into`: its input plus the sources `sources.txt` lists.
    A listed source that does not exist fails the test here, naming it."""
    repo = into / case
    shutil.copytree(CASES / case / "input", repo)
    for source, target in sources(case):
        folder = FIXTURES / "sources" / source
        if not (folder / "Chart.yaml").is_file() and not any(folder.glob("*.yaml")):
            raise AssertionError(f"{case}/sources.txt: {source} is not a chart or manifest folder")
        shutil.copytree(folder, repo / target)
    return repo


def local_charts(repo: Path) -> list[tuple[str, str]]:
    """(release, chart path) of every release of the repository's helmfile whose chart is a
    local path (`./…` or `../…`), resolved against the state file that declares it."""
    layout = HelmfileLayout(WorkTree(repo), FleetConfig())
    out = []
    for state in layout.states():
        for release in state.releases:
            if release.chart.startswith((".", "/")):
                chart = posixpath.normpath(posixpath.join(release.base, release.chart))
                out.append((release.name, chart))
    return out


def rendered_tree(repo: Path) -> dict[str, bytes]:
    """Every file of every root, by its path below kube-renderer's TARGET."""
    fleet = Fleet.open(WorkTree(repo))
    out: dict[str, bytes] = {}
    for root in fleet.roots():
        for path, data in fleet.render(root).reveal().items():
            out[f"{root}/{path}"] = data
    return out


def expected_tree(case: str) -> dict[str, bytes]:
    base = CASES / case / "expected"
    return {
        p.relative_to(base).as_posix(): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }

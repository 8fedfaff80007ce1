"""What a helmfile-layout root reads, so that a change elsewhere affects no root.

A release root reads, for each of its releases (its own and those merged into it):
- its own values files (`Release.inputs`: they matter to no other release);
- its state: the state file, its bases, their environment values files, the files its
  templates read (`readFile`, ...), and the same of every state above it (`State.inputs`,
  recorded while loading: a parent's values can change which sub-helmfiles it lists). Not
  the listing of a `helmfiles:` glob: a state file it adds or drops is read by the roots of
  that state, on the side of the change where they exist;
- its chart: the local directory or archive the `chart:` path names (looked for even when it
  is a remote chart: a directory of that name would take its place); a chart or
  kustomization there that reaches outside it (`../`, `file://../`) makes the root read
  everything;
- the Kubernetes version files `kubeversion-<release>` and `kubeversion`;
- the top-level file names kube-renderer looks for (`helmfile.yaml`, ...).

The bootstrap root reads every state and every release's values files (its template sees
them all) and the top-level names. rollwright.yaml is the engine's (shared.engine.fleet).
A path counts as read when it is one of these or lies below one.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from shared.engine.helmfile.states import Release, State
from shared.engine.tree import Tree

TOP_LEVEL = ("helmfile.yaml", "helmfile.yaml.gotmpl", "helmfile.d")
KUBE_VERSION = "kubeversion"
REFERENCING = frozenset(
    {"kustomization.yaml", "kustomization.yml", "Kustomization", "Chart.yaml", "requirements.yaml"}
)


@dataclass(frozen=True)
class Inputs:
    paths: frozenset[str]  # files and directories read: a change at or below one counts
    everything: bool = False

    def touched(self, changed: Iterable[str]) -> bool:
        if self.everything:
            return True
        return any(_below(path, self.paths) for path in changed)

    def __or__(self, other: Inputs) -> Inputs:
        return Inputs(self.paths | other.paths, self.everything or other.everything)


def _below(path: str, read: frozenset[str]) -> bool:
    if "" in read or path in read:
        return True
    parts = path.split("/")
    return any("/".join(parts[:i]) in read for i in range(1, len(parts)))


def release_inputs(tree: Tree, release: Release, state: State) -> Inputs:
    chart = posixpath.normpath(posixpath.join(release.base, release.chart))
    paths = {*state.inputs, *release.inputs, *TOP_LEVEL, KUBE_VERSION}
    paths.add(f"{KUBE_VERSION}-{release.name}")
    if chart.startswith("../") or chart == "..":
        return Inputs(frozenset(paths))  # a remote chart's name, not a path of the repository
    paths.add(chart)
    return Inputs(frozenset(paths), everything=_reaches_out(tree, chart))


def bootstrap_inputs(states: list[State]) -> Inputs:
    paths: set[str] = set(TOP_LEVEL)
    for state in states:
        paths |= state.inputs
        for release in state.releases:
            paths |= release.inputs
    return Inputs(frozenset(paths))


def _reaches_out(tree: Tree, chart: str) -> bool:
    """True when a kustomization or chart metadata below `chart` names a path above it."""
    if not tree.is_dir(chart):
        return False
    pending = [chart]
    while pending:
        here = pending.pop()
        for name in tree.listdir(here):
            path = f"{here}/{name}"
            if tree.is_dir(path):
                pending.append(path)
            elif name in REFERENCING and "../" in tree.read_text(path):
                return True
    return False

"""A root published to git is what Argo CD and Flux consume with no settings
of their own. Every root of the example atlas fleet is published to a branch and built with
`kubectl kustomize` of the system's kubectl (Debian package `kubectl`: another build than the
engine's, as a cluster's reader is) at the root's path; the build is exactly the render."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.testing import ActivityEnvironment

from activities.joblog import JobLog
from activities.publish import BlobPublisher, PublishActivities, PublishTargets
from activities.publish_git import GitPublisher
from activities.render import render_checkout
from shared.contracts.deploy import PublishRequest, RepoRef
from shared.engine.fleet import Fleet
from shared.engine.manifests.kustomization import KUSTOMIZATION
from shared.engine.tree import WorkTree
from shared.stores.blob import FileBlobStore
from shared.stores.gitmirror import GitMirror
from tests.support.files import copy_example
from tests.support.gitrepo import commit_all, git, local_remote

SYSTEM_KUBECTL = shutil.which("kubectl", path="/usr/bin:/usr/local/bin")


def docs(data: bytes) -> list[Any]:
    return [d for d in yaml.safe_load_all(data) if d]


def identity(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return (doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"])


@pytest.mark.skipif(SYSTEM_KUBECTL is None, reason="Debian package kubectl not installed")
def test_every_published_atlas_root_builds_with_kustomize_as_rendered(tmp_path: Path) -> None:
    repo = copy_example("atlas-fleet", tmp_path / "fleet")
    (repo / "rollwright.yaml").write_text("publish:\n  target: git\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@rollwright.invalid")
    git(repo, "config", "user.name", "t")
    revision = commit_all(repo, "fleet")
    roots = Fleet.open(WorkTree(repo)).roots()
    assert len(roots) >= 2
    state = tmp_path / "worker"
    mirror = GitMirror(state / "git", remote_for=local_remote)
    blobs = FileBlobStore(state / "blobs")
    targets = PublishTargets(
        mirror=mirror, blobs=blobs, git=GitPublisher(state / "git" / "publish")
    )
    publish = PublishActivities(BlobPublisher(blobs), JobLog(blobs), targets=targets)
    ref = RepoRef(owner="acme", name="fleet", clone_url=str(repo))
    renders = {}
    for n, root in enumerate(roots):
        render = render_checkout(repo, root)
        renders[root] = render.reveal()
        request = PublishRequest(
            repo=ref,
            root=root,
            revision=revision,
            deployment_id=f"dep-{n}",
            trigger="merge",
            blob_prefix=f"renders/{root}/",
            render_digest=render.digest,
        )
        asyncio.run(ActivityEnvironment().run(publish.publish, request))
    # What Argo CD / Flux see: a checkout of the branch.
    seen = tmp_path / "cluster-view"
    subprocess.run(["git", "clone", "-q", "--branch", "rendered", str(repo), str(seen)], check=True)
    for root, files in renders.items():
        assert (seen / root / KUSTOMIZATION).is_file(), root
        assert SYSTEM_KUBECTL is not None
        built = subprocess.run(
            [SYSTEM_KUBECTL, "kustomize", str(seen / root)], check=True, capture_output=True
        ).stdout
        expected = [d for data in files.values() for d in docs(data)]
        got = docs(built)
        assert sorted(map(identity, got)) == sorted(map(identity, expected)), root
        # and the documents themselves, as written (kustomize only reorders)
        by_id = {identity(d): d for d in expected}
        assert all(d == by_id[identity(d)] for d in got), root

"""Shared pieces of the publisher tests: a small atlas fleet in a real git repo, the publish
activity wired to a worker's mirror, and helpers to read what landed in a git target."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import yaml
from temporalio.testing import ActivityEnvironment

from activities.joblog import JobLog
from activities.publish import BlobPublisher, PublishActivities, PublishTargets
from activities.publish_git import GitPublisher
from activities.publish_s3 import S3Publisher
from activities.render import render_checkout
from shared.contracts.deploy import PublishRequest, PublishResult, RepoRef
from shared.engine.manifests.kustomization import KUSTOMIZATION, kustomization
from shared.engine.secrets.sops import sops_binary, sops_environment
from shared.stores.blob import FileBlobStore
from shared.stores.gitmirror import GitMirror
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import make_fleet, one_app
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.secrets import app_chart_files

ROOTS = ("g/c1", "g/c2")
HTML_URL = "https://github.example/acme/fleet"
YAML_IO = ("--input-type", "yaml", "--output-type", "yaml")


def fleet_files(publish: dict[str, Any], greeting: str = "hello") -> dict[str, Any]:
    return {
        "rollwright.yaml": {"publish": publish},
        "deployments/g/c1/cluster.values.yaml": {"greeting": greeting},
        "deployments/g/c1/apps/app/deployment.yaml": one_app(),
        "deployments/g/c2/apps/app/deployment.yaml": one_app(),
    }


def secret_fleet_files(
    publish: dict[str, Any], fleet_key: AgeKey, password: str, sops_rules: str = ""
) -> dict[str, Any]:
    """Root g/c1 renders the secrets chart (a Secret, a ConfigMap and a Deployment built
    from `password`, decrypted from a SOPS file); g/c2 renders the echo chart, no secret."""
    files: dict[str, Any] = {
        "rollwright.yaml": {"publish": publish},
        **app_chart_files("templates/app/chart"),
        "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
        "deployments/g/c1/apps/app/deployment.yaml": one_app("app"),
        "deployments/g/c1/cluster.values.sops.yaml": encrypt_yaml(
            {"password": password, "mode": "production"}, [fleet_key.recipient]
        ),
        "deployments/g/c2/apps/app/deployment.yaml": one_app(),
    }
    if sops_rules:
        files[".sops.yaml"] = sops_rules
    return files


@dataclasses.dataclass
class PublishWorld:
    repo: Path
    ref: RepoRef
    mirror: GitMirror
    blobs: FileBlobStore
    git: GitPublisher
    activities: PublishActivities
    env: ActivityEnvironment

    def commit(self, files: dict[str, Any], message: str = "change") -> str:
        write_files(self.repo, files)
        return commit_all(self.repo, message)

    def remove(self, *paths: str) -> str:
        git(self.repo, "rm", "-r", "-q", *paths)
        return commit_all(self.repo, "remove")

    def plain(self, root: str) -> dict[str, bytes]:
        """The root's plaintext render at the fleet's HEAD (the test's view of the truth)."""
        return render_checkout(self.repo, root).reveal()

    def on_branch(self, root: str) -> dict[str, bytes]:
        """What the git publisher writes for the root at HEAD: the plaintext render and the
        kustomization.yaml that lists it."""
        files = self.plain(root)
        generated = kustomization(files)
        return files if generated is None else {**files, KUSTOMIZATION: generated}

    def request(
        self, root: str, deployment: str, *, digest: str | None = None, approved_by: str = "@ana"
    ) -> PublishRequest:
        revision = git(self.repo, "rev-parse", "HEAD")
        return PublishRequest(
            repo=self.ref,
            root=root,
            revision=revision,
            deployment_id=deployment,
            trigger="merge",
            approved_by=approved_by,
            blob_prefix=f"renders/acme/fleet/{root}/{revision}/",
            render_digest=digest or render_checkout(self.repo, root).digest,
        )

    def publish(self, request: PublishRequest) -> PublishResult:
        result: PublishResult = asyncio.run(self.env.run(self.activities.publish, request))
        return result


def publish_world(
    tmp_path: Path,
    files: dict[str, Any],
    *,
    remotes: Path | None = None,
    s3: S3Publisher | None = None,
) -> PublishWorld:
    """A fleet repo and a worker that publishes from it. The worker's "GitHub" is local: the
    fleet repo is `acme/fleet`, any other repository `remotes/<owner>/<name>.git`."""
    repo = init_repo(tmp_path / "fleet")
    make_fleet(repo, files, echo=True)
    commit_all(repo, "fleet")
    state = tmp_path / "worker"
    hosted = remotes or tmp_path / "remotes"

    def remote_for(ref: RepoRef) -> str:
        if ref.full_name == "acme/fleet":
            return str(repo)
        return str(hosted / ref.owner / f"{ref.name}.git")

    mirror = GitMirror(state / "git", remote_for=remote_for)
    blobs = FileBlobStore(state / "blobs")
    publisher = GitPublisher(state / "git" / "publish")
    targets = PublishTargets(mirror=mirror, blobs=blobs, git=publisher, s3=s3)
    activities = PublishActivities(BlobPublisher(blobs), JobLog(blobs), targets=targets)
    ref = RepoRef(owner="acme", name="fleet", clone_url=str(repo), html_url=HTML_URL)
    return PublishWorld(repo, ref, mirror, blobs, publisher, activities, ActivityEnvironment())


# --- reading a git target ----------------------------------------------------------------------


def branch_files(repo: Path, branch: str, under: str = "") -> dict[str, bytes]:
    """Every file of `branch` (below `under`, paths relative to it)."""
    names = git(repo, "ls-tree", "-r", "--name-only", branch, "--", *([under] if under else []))
    names = [n for n in names.splitlines() if n]
    out = {}
    for name in names:
        data = subprocess.run(
            ["git", "-C", str(repo), "show", f"{branch}:{name}"], check=True, capture_output=True
        ).stdout
        out[name[len(under) :]] = data
    return out


def commit_count(repo: Path, branch: str) -> int:
    return int(git(repo, "rev-list", "--count", branch))


def has_branch(repo: Path, branch: str) -> bool:
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        capture_output=True,
    )
    return proc.returncode == 0


def sops_decrypt(data: bytes, key: AgeKey) -> bytes:
    """`sops decrypt` of published YAML with one age identity (the cluster's)."""
    env = {**sops_environment(), "SOPS_AGE_KEY_FILE": str(key.key_file)}
    proc = subprocess.run(
        [sops_binary(), "--config", "/dev/null", "decrypt", *YAML_IO],
        input=data,
        capture_output=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def documents(data: bytes) -> list[Any]:
    return [d for d in yaml.safe_load_all(data) if d is not None]

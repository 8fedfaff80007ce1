"""A repository URL with a password (`https://user:secret@host/...`) never shows the password
in a message: the global repository's, a component's and a package's. The repositories are
real: each URL's mirror in rollwright's cache is a clone of a local repository, read at a full
commit id (which is never fetched again), so nothing goes to the network."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from shared.engine.commodore.repos import Mirrors
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore import repo_with
from tests.support.commodore_tenant import DEMO_CLASS, Tenant
from tests.support.gitrepo import git

PASSWORD = "hunter2-url-password"


def mirrored(source: Path, files: dict[str, str], name: str) -> tuple[str, str]:
    """A URL with a password whose cached mirror holds `files`, and the commit."""
    repo = repo_with(source, files)
    sha = git(repo, "rev-parse", "HEAD").strip()
    url = f"https://rollwright:{PASSWORD}@git.invalid/syn/{name}.git"
    mirror = Mirrors().mirror(url).path
    subprocess.run(
        ["git", "clone", "-q", "--mirror", str(repo), str(mirror)], check=True, capture_output=True
    )
    return url, sha


def render_error(tenant: Tenant, tmp_path: Path, cluster: str, common: str = "") -> str:
    checkout = tmp_path / "t-acme"
    if not checkout.exists():
        shutil.copytree(tenant.checkout, checkout, ignore=shutil.ignore_patterns(".git"))
    path = checkout / "common.yml"
    path.write_text(path.read_text() + common)
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout)).render(cluster)
    message = str(caught.value)
    assert PASSWORD not in message
    assert "https://rollwright@git.invalid/syn/" in message
    return message


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"README.md": "# global\n"}, "has no commodore.yml"),
        ({"commodore.yml": "parameters: [\n"}, "commodore.yml:"),
    ],
)
def test_the_global_repositorys_password_never_shows(
    tenant: Tenant, tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    url, sha = mirrored(tmp_path / "global", files, "global")
    checkout = tmp_path / "t-acme"
    shutil.copytree(tenant.checkout, checkout, ignore=shutil.ignore_patterns(".git"))
    config = yaml.safe_load((checkout / "rollwright.yaml").read_text())
    config["commodore"]["global"] = {"url": url, "revision": sha}
    (checkout / "rollwright.yaml").write_text(yaml.safe_dump(config))
    message = render_error(tenant, tmp_path, "c-one")
    assert "global repository https://rollwright@git.invalid/syn/global.git " in message
    assert expected in message


def test_a_components_password_never_shows(tenant: Tenant, tmp_path: Path) -> None:
    url, sha = mirrored(tmp_path / "demo", {"class/demo.yml": DEMO_CLASS}, "component-demo")
    common = f"  components:\n    demo:\n      url: {url}\n      version: {sha}\n"
    message = render_error(tenant, tmp_path, "c-one", common)
    assert "has no class/defaults.yml" in message


def test_a_packages_password_never_shows(tenant: Tenant, tmp_path: Path) -> None:
    url, sha = mirrored(tmp_path / "monitoring", {"README.md": "# m\n"}, "package-monitoring")
    common = f"  packages:\n    monitoring:\n      url: {url}\n      version: {sha}\n"
    message = render_error(tenant, tmp_path, "c-three", common + "      path: classes\n")
    assert "has no classes/" in message

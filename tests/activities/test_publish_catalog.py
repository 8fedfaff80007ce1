"""Publishing commodore catalogs (`publish.target: catalog`) on real repositories: the publish
activity compiles the cluster again on the worker, commits `manifests/` and `refs/` to the
cluster's catalog repository with Commodore's message (other files kept), only when they
changed and once per deployment, then reports compileMeta to Lieutenant (the dev stack's fake,
which validates the body against Lieutenant's OpenAPI description); and all of it against
what the real Commodore 1.35.1 commits and reports from the same tenant."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.exceptions import ApplicationError

from activities.publish_catalog import catalog_target, compile_meta_key
from activities.publish_git import TRAILER
from activities.publish_plaintext import PublishTree, fleet_config, publish_tree
from activities.render import render_checkout
from shared.contracts.deploy import RepoRef
from shared.devstack.gitremotes import write_gitconfig
from shared.devstack.lieutenant import LieutenantSchemas
from shared.engine.commodore.compilemeta import timestamp_of
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from tests.support.catalog_publish import (
    TOKEN,
    CatalogWorld,
    catalog_files,
    catalog_url,
    catalog_world,
    commit_message,
)
from tests.support.commodore import compile_with_commodore, tree_bytes
from tests.support.commodore_tenant import VENV, needs_commodore
from tests.support.gitrepo import git
from tests.support.vendored import LIEUTENANT_OPENAPI

MESSAGE = re.compile(
    r"\AAutomated catalog update from Commodore\n\n"
    r"Component instance commits:\n"
    r"(?: \* [a-z-]+(?: \([a-z-]+\))?: \S+ \([0-9a-f]{6,}\)\n   url: \S+\n)+\n"
    r"Package commits:\n\n\n"
    r"Configuration commits:\n"
    r" \* global: main \([0-9a-f]{6,}\)\n   url: \S+\n"
    r" \* tenant: main \([0-9a-f]{6,}\)\n   url: \S+\n\n"
    r"Compilation timestamp: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d\n"
    r"\n" + TRAILER + r": (\S+)\n\Z"
)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CatalogWorld]:
    made = catalog_world(tmp_path, monkeypatch)
    try:
        yield made
    finally:
        made.lieutenant.stop()


def valid_compile_meta(body: dict[str, Any]) -> list[str]:
    """Problems of `body` as Lieutenant's ClusterCompileMeta, from the vendored description
    itself (not the fake's packaged copy)."""
    schemas = yaml.safe_load(LIEUTENANT_OPENAPI.read_text())["components"]["schemas"]
    return LieutenantSchemas(schemas).problems("ClusterCompileMeta", body)


def test_publish_commits_the_catalog_and_reports_it(world: CatalogWorld) -> None:
    before = git(world.catalog("c-one"), "rev-parse", "main")
    request = world.request("c-one", "dep-1")
    result = world.publish(request)
    assert not result.already_published
    catalog = world.catalog("c-one")
    head = git(catalog, "rev-parse", "main")
    assert result.commit == head and git(catalog, "rev-parse", "main~1") == before
    assert result.target == f"{catalog_url('c-one')}@main ({head[:12]})"
    # manifests/ and refs/ are the compiled catalog; the README of the repository is kept
    files = catalog_files(catalog)
    assert files.pop("README.md") == b"# c-one\n"
    assert files == render_checkout(world.tenant.checkout, "c-one").reveal()
    assert any(p.startswith("refs/t-acme/c-one/") for p in files)
    # Commodore's message, the deployment's trailer after it
    message = commit_message(catalog)
    found = MESSAGE.match(message)
    assert found, message
    assert found.group(1) == "dep-1"
    assert " * demo: v1.0.0 (" in message and " * demo-two (demo): v1.0.0 (" in message
    revision = request.revision
    assert f" * tenant: main ({revision[:6]})\n   url: {world.tenant.urls['tenant']}\n" in message
    # compileMeta: once, valid for Lieutenant, the commit's timestamp as lastCompile
    reported = world.lieutenant.reported()
    assert [cluster for cluster, _ in reported] == ["c-one"]
    body = reported[0][1]
    assert valid_compile_meta(body) == []
    stamp = timestamp_of(message)
    assert stamp is not None and body["lastCompile"] == stamp.isoformat(timespec="milliseconds")
    assert sorted(body["instances"]) == ["demo", "demo-two", "extra"]
    assert body["instances"]["demo-two"]["component"] == "demo"
    assert body["tenant"] == {
        "gitSha": revision,
        "url": world.tenant.urls["tenant"],
        "version": "main",
    }
    assert body["global"]["url"] == world.tenant.urls["global"]
    assert body["global"]["gitSha"] == git(
        Path(world.tenant.urls["global"].removeprefix("file://")), "rev-parse", "main"
    )
    # the other cluster's catalog is untouched
    assert git(world.catalog("c-two"), "rev-list", "--count", "main") == "1"


def test_a_retry_makes_no_second_commit_and_reports_the_same_body(world: CatalogWorld) -> None:
    request = world.request("c-one", "dep-1")
    first = world.publish(request)
    again = world.publish(request)
    assert again.already_published and again.commit == first.commit
    assert git(world.catalog("c-one"), "rev-list", "--count", "main") == "2"
    # reported again (the attempt that pushed may have died before reporting), unchanged
    bodies = [body for _, body in world.lieutenant.reported()]
    assert len(bodies) == 2 and bodies[0] == bodies[1]


def test_a_retry_after_the_branch_moved_on_still_finds_its_commit(world: CatalogWorld) -> None:
    first = world.publish(world.request("c-one", "dep-1"))
    world.commit({"c-one.yml": (world.tenant.checkout / "c-one.yml").read_text() + "\n# x\n"})
    world.commit(
        {
            "common.yml": (world.tenant.checkout / "common.yml")
            .read_text()
            .replace("acme-demo", "acme-demo-2")
        }
    )
    second = world.publish(world.request("c-one", "dep-2"))
    assert not second.already_published and second.commit != first.commit
    # dep-1 retried late: its commit is in the history; nothing is published over dep-2's
    late = world.publish(world.request("c-one", "dep-1"))
    assert late.already_published and late.commit == first.commit
    assert git(world.catalog("c-one"), "rev-parse", "main") == second.commit


def test_an_unchanged_catalog_makes_no_commit_and_no_report(world: CatalogWorld) -> None:
    world.publish(world.request("c-one", "dep-1"))
    # a tenant change that does not change c-one's catalog
    world.commit({"c-one.yml": (world.tenant.checkout / "c-one.yml").read_text() + "\n# note\n"})
    result = world.publish(world.request("c-one", "dep-2"))
    assert result.already_published
    assert git(world.catalog("c-one"), "rev-list", "--count", "main") == "2"
    assert len(world.lieutenant.reported()) == 1  # dep-1's only, as Commodore


def test_the_catalog_lands_on_the_repository_default_branch(world: CatalogWorld) -> None:
    catalog = world.catalog("c-one")
    git(catalog, "branch", "-m", "main", "master")
    git(catalog, "symbolic-ref", "HEAD", "refs/heads/master")
    result = world.publish(world.request("c-one", "dep-1"))
    assert result.target.startswith(f"{catalog_url('c-one')}@master (")
    assert git(catalog, "rev-parse", "master") == result.commit


def test_an_empty_catalog_repository_is_refused(world: CatalogWorld, tmp_path: Path) -> None:
    empty = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", str(empty))
    world.rewrite(catalog_url("c-one"), empty)
    with pytest.raises(ApplicationError, match="no default branch"):
        world.publish(world.request("c-one", "dep-1"))
    assert world.lieutenant.reported() == []


def test_a_lieutenant_outage_fails_the_publish_after_the_push_and_the_retry_reports(
    world: CatalogWorld,
) -> None:
    world.lieutenant.fail_reports(503)  # an outage: a retryable error, the commit stays
    request = world.request("c-one", "dep-1")
    with pytest.raises(ApplicationError) as caught:
        world.publish(request)
    assert not caught.value.non_retryable
    assert "answered 503" in caught.value.message
    assert TOKEN not in caught.value.message
    assert git(world.catalog("c-one"), "rev-list", "--count", "main") == "2"
    assert world.lieutenant.reported() == []
    # the body the retry will report is kept, the commit's own timestamp in it
    stored = world.blobs.get(compile_meta_key("acme/fleet", "c-one", "dep-1"))
    assert stored is not None
    stamp = timestamp_of(commit_message(world.catalog("c-one")))
    assert stamp is not None
    assert json.loads(stored)["lastCompile"] == stamp.isoformat(timespec="milliseconds")
    # the retry finds the commit and reports what it says
    again = world.publish(request)
    assert again.already_published
    assert [body for _, body in world.lieutenant.reported()] == [json.loads(stored)]


def test_pull_request_mode_commits_to_a_branch_and_opens_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[str, str, str, str]] = []

    def open_pull(repo: RepoRef, head: str, base: str, title: str, body: str) -> str:
        opened.append((repo.full_name, head, base, title))
        return f"https://github.example/{repo.full_name}/pull/1"

    world = catalog_world(
        tmp_path,
        monkeypatch,
        publish_settings={"catalog": {"mode": "pull-request", "branch": "rollwright/catalog"}},
        open_pull=open_pull,
        github_catalogs=True,
    )
    request = world.request("c-one", "dep-1")
    try:
        result = world.publish(request)
    finally:
        world.lieutenant.stop()
    catalog = world.catalog("c-one")
    assert result.target.startswith("acme/catalog-c-one@rollwright/catalog (")
    assert git(catalog, "rev-list", "--count", "main") == "1"  # the default branch waits
    assert git(catalog, "rev-parse", "rollwright/catalog~1") == git(catalog, "rev-parse", "main")
    assert opened == [
        (
            "acme/catalog-c-one",
            "rollwright/catalog",
            "main",
            f"Catalog of cluster c-one at {request.revision[:12]}",
        )
    ]
    assert world.lieutenant.reported() == []  # the catalog is not deployed until merged


def test_pull_request_mode_is_refused_outside_the_configured_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = catalog_world(
        tmp_path, monkeypatch, publish_settings={"catalog": {"mode": "pull-request"}}
    )
    try:
        with pytest.raises(ApplicationError, match="pull-request needs the catalog repository"):
            world.publish(world.request("c-one", "dep-1"))
    finally:
        world.lieutenant.stop()


def test_the_installation_token_goes_only_to_the_configured_github() -> None:
    fleet = RepoRef(owner="acme", name="fleet", installation_id=7)

    def remote_for(ref: RepoRef) -> str:
        return f"https://github.example/{ref.owner}/{ref.name}.git"

    ours = catalog_target(
        "https://github.example/acme/catalog-c-one", fleet, remote_for=remote_for, root="c-one"
    )
    assert ours.auth is not None and ours.url == "https://github.example/acme/catalog-c-one.git"
    for url in (
        "https://git.example.test/acme/catalog-c-one.git",  # another host
        "https://github.example/other/catalog-c-one.git",  # another owner
        "https://user@github.example/acme/catalog-c-one.git",  # credentials of its own
        "ssh://git@github.example/acme/catalog-c-one.git",
        "git@github.example:acme/catalog-c-one.git",
    ):
        target = catalog_target(url, fleet, remote_for=remote_for, root="c-one")
        assert target.auth is None and target.url == url
    for local in ("file:///srv/catalog.git", "/srv/catalog.git"):
        with pytest.raises(FleetError, match="paths on the worker"):
            catalog_target(local, fleet, remote_for=remote_for, root="c-one")


@needs_commodore
@pytest.mark.parametrize("cluster", ["c-one", "c-three"])
def test_commit_and_report_equal_commodores(
    world: CatalogWorld, tmp_path: Path, cluster: str
) -> None:
    """The real Commodore pushes the cluster's catalog to a copy of the same catalog repository and
    reports to the same Lieutenant: the commits' trees are identical, the messages too but for
    the timestamp and rollwright's trailer, the compileMeta bodies but for the timestamp and
    who compiled."""
    assert VENV is not None
    if cluster == "c-three":
        # Its Secrets hold the component's literal default password, which Commodore would
        # commit as it is: rollwright refuses (publish.secrets: refuse) ...
        with pytest.raises(ApplicationError, match=r"manifests/demo/10_secret\.yaml") as caught:
            world.publish(world.request(cluster, "dep-0"))
        assert caught.value.non_retryable and "changeme" not in caught.value.message
        # ... until they are Vault references, as a tenant would make them.
        ref = "'?{vaultkv:${cluster:tenant}/${cluster:name}/%s/password}'"
        text = (world.tenant.checkout / "c-three.yml").read_text()
        text = text.replace("    replicas: 3\n", f"    replicas: 3\n    password: {ref % 'next'}\n")
        text = text.replace("      - --three\n", f"      - --three\n    password: {ref % 'demo'}\n")
        world.commit({"c-three.yml": text}, "c-three: Vault references")
    theirs = tmp_path / "theirs.git"
    shutil.copytree(world.catalog(cluster), theirs)
    home = tmp_path / "home"
    home.mkdir()
    # Commodore's git reads ~/.gitconfig: the catalog URL is the copy for it
    # (Commodore pushes an https catalog at its ssh:// twin)
    ssh = catalog_url(cluster).replace("https://", "ssh://git@")
    rewrites = {**world.rewrites, catalog_url(cluster): theirs, ssh: theirs}
    write_gitconfig(home / ".gitconfig", rewrites)
    done = compile_with_commodore(
        VENV, tmp_path / "work", cluster, world.lieutenant.url, home, push=True
    )
    assert done.returncode == 0, done.stderr
    assert [c for c, _ in world.lieutenant.reported()] == [cluster]
    world.publish(world.request(cluster, "dep-1"))
    ours = world.catalog(cluster)

    assert catalog_files(ours) == catalog_files(theirs)
    assert tree_bytes(tmp_path / "work" / "catalog" / "manifests")  # it did compile

    def masked(message: str) -> str:
        return re.sub(r"Compilation timestamp: .*\n", "Compilation timestamp: T\n", message)

    our_message = commit_message(ours)
    assert our_message.endswith(f"\n\n{TRAILER}: dep-1\n")
    assert masked(our_message.removesuffix(f"\n{TRAILER}: dep-1\n")) == masked(
        commit_message(theirs)
    )
    (_, their_body), (_, our_body) = world.lieutenant.reported()
    for body in (their_body, our_body):
        assert valid_compile_meta(body) == []
        body.pop("lastCompile")
        body.pop("commodoreBuildInfo")
    assert our_body == their_body
    if cluster == "c-three":  # a configuration package, with a path, in both
        assert our_body["packages"]["monitoring"]["path"] == "classes"
        assert "Package commits:\n * monitoring: v1.0.0 (" in our_message


def test_an_attempt_overtaken_by_another_reports_that_commit(world: CatalogWorld) -> None:
    """Two attempts of one deployment (a heartbeat timeout let Temporal start a second while
    the first still ran): the one that finds the other's commit when it pushes makes none and
    reports the commit's own timestamp."""
    request = world.request("c-one", "dep-1")
    targets = world.activities.targets
    assert targets is not None and targets.catalog is not None
    config = fleet_config(targets.mirror, request)

    def overtaken(inspect: Callable[[Fleet], object]) -> PublishTree:
        world.publish(request)  # the other attempt commits and reports first
        return publish_tree(
            targets.mirror,
            request,
            config,
            expected_digest=str(request.render_digest),
            target="the catalog repository",
            published_path=lambda path: path,
            inspect=inspect,
        )

    outcome = targets.catalog.publish(request, config, targets.mirror, overtaken)
    assert outcome.already_published and outcome.reported
    assert git(world.catalog("c-one"), "rev-list", "--count", "main") == "2"
    stamp = timestamp_of(commit_message(world.catalog("c-one")))
    assert stamp is not None
    bodies = [body for _, body in world.lieutenant.reported()]
    assert len(bodies) == 2
    assert {b["lastCompile"] for b in bodies} == {stamp.isoformat(timespec="milliseconds")}

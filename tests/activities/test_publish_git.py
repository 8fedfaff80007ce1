"""The git publisher on real repositories: the publish activity re-renders on the worker,
commits one root's subtree with provenance, is idempotent, re-applies onto a moved branch, and
refuses or re-encrypts secrets with the real sops."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError

from activities.publish_git import TRAILER, GitOutcome, GitPublisher, GitPublishError, GitTarget
from activities.publish_plaintext import ERR_RENDER_MISMATCH
from shared.contracts.deploy import ERR_FLEET
from tests.support.age import AgeKey, generate_key
from tests.support.gitrepo import git
from tests.support.publish import (
    HTML_URL,
    PublishWorld,
    branch_files,
    commit_count,
    documents,
    fleet_files,
    has_branch,
    publish_world,
    secret_fleet_files,
    sops_decrypt,
)
from tests.support.secrets import assert_hidden

GIT = {"target": "git"}
PASSWORD = "hunter2-is-not-a-good-password"


@pytest.fixture
def world(tmp_path: Path) -> PublishWorld:
    return publish_world(tmp_path, fleet_files(GIT))


def test_publish_commits_the_root_subtree_with_provenance(world: PublishWorld) -> None:
    request = world.request("g/c1", "dep-1")
    result = world.publish(request)
    assert not result.already_published
    assert result.target.startswith("acme/fleet@rendered:g/c1/ (")
    # the branch commit, for delivery verification (Argo CD must be Synced at it)
    assert result.commit == git(world.repo, "rev-parse", "rendered")
    # the fleet repo's `rendered` branch holds exactly the root's plaintext render
    assert branch_files(world.repo, "rendered") == {
        f"g/c1/{p}": d for p, d in world.on_branch("g/c1").items()
    }
    message = git(world.repo, "log", "-1", "--format=%B", "rendered")
    for expected in (
        "Root: g/c1",
        f"Revision: {request.revision} ({HTML_URL}/commit/{request.revision})",
        "Deployment: dep-1",
        "Trigger: merge",
        "Approved by: @ana",
        "Published by: rollwright ",
    ):
        assert expected in message
    trailers = git(world.repo, "log", "-1", "--format=%(trailers:only,unfold)", "rendered")
    assert trailers.strip() == f"{TRAILER}: dep-1"
    who = git(world.repo, "log", "-1", "--format=%an <%ae>|%cn", "rendered")
    assert who == "rollwright[bot] <rollwright[bot]@users.noreply.github.com>|rollwright[bot]"
    # the worker's temporary worktree is gone
    assert not list((world.mirror.checkouts_dir).glob("*"))


def test_republishing_a_deployment_makes_no_second_commit(world: PublishWorld) -> None:
    first = world.publish(world.request("g/c1", "dep-1"))
    world.publish(world.request("g/c2", "dep-2"))  # the branch moves on
    count = commit_count(world.repo, "rendered")
    again = world.publish(world.request("g/c1", "dep-1"))
    assert again.already_published
    assert commit_count(world.repo, "rendered") == count
    assert again.target.split("(")[1] == first.target.split("(")[1]  # the original commit
    assert again.commit == first.commit
    # a new deployment of an unchanged render: nothing to commit either
    same = world.publish(world.request("g/c2", "dep-3"))
    assert same.already_published
    assert commit_count(world.repo, "rendered") == count


def test_a_retry_after_the_push_does_not_render_again(world: PublishWorld) -> None:
    """An attempt that pushed and then timed out is retried: the retry finds the commit before
    rendering, so a render that changed meanwhile (a re-published remote chart) does not turn
    a landed deployment into a `RenderMismatch` failure."""
    first = world.publish(world.request("g/c1", "dep-1"))
    count = commit_count(world.repo, "rendered")
    retry = world.publish(world.request("g/c1", "dep-1", digest="sha256:" + "0" * 64))
    assert retry.already_published
    assert retry.target == first.target
    assert commit_count(world.repo, "rendered") == count
    assert not list(world.mirror.checkouts_dir.glob("*"))


def test_a_changed_render_touches_only_its_subtree(world: PublishWorld) -> None:
    world.publish(world.request("g/c1", "dep-1"))
    world.publish(world.request("g/c2", "dep-2"))
    c2_before = branch_files(world.repo, "rendered", "g/c2/")
    world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": "bonjour"}})
    world.publish(world.request("g/c1", "dep-3"))
    changed = git(world.repo, "diff", "--name-only", "rendered~1", "rendered").splitlines()
    assert changed and all(name.startswith("g/c1/") for name in changed)
    assert branch_files(world.repo, "rendered", "g/c2/") == c2_before
    assert branch_files(world.repo, "rendered", "g/c1/") == world.on_branch("g/c1")
    # a root deleted from the fleet publishes an empty render: its subtree goes away
    world.remove("deployments/g/c1")
    world.publish(world.request("g/c1", "dep-4"))
    assert branch_files(world.repo, "rendered", "g/c1/") == {}
    assert branch_files(world.repo, "rendered", "g/c2/") == c2_before


def test_concurrent_publishes_of_two_roots_both_land(tmp_path: Path, world: PublishWorld) -> None:
    """Two workers (own scratch repositories) build on the same tip and push at once: one
    push is rejected, re-applies its subtree onto the new tip, and lands."""
    world.publish(world.request("g/c2", "dep-0"))  # the branch exists, tip T
    world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": "salut"}})
    world.commit({"deployments/g/c2/cluster.values.yaml": {"greeting": "hej"}})
    barrier = threading.Barrier(2, timeout=30)

    def hold(target: GitTarget, attempt: int) -> None:
        if attempt == 1:
            barrier.wait()  # both built their commit on T before either pushes

    target = GitTarget(str(world.repo), "acme/fleet", "rendered", None)
    outcomes: dict[str, GitOutcome] = {}
    errors: list[BaseException] = []

    def run(root: str, n: int) -> None:
        publisher = GitPublisher(tmp_path / f"worker-{n}", before_push=hold, backoff=0.01)
        try:
            outcomes[root] = publisher.publish_tree(
                target,
                f"{root}/",
                world.on_branch(root),
                deployment_id=f"dep-{root}",
                message=f"publish {root}\n\n{TRAILER}: dep-{root}\n",
                root=root,
            )
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [
        threading.Thread(target=run, args=(root, n)) for n, root in enumerate(("g/c1", "g/c2"))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(o.attempts for o in outcomes.values()) == [1, 2]  # the race happened
    for root in ("g/c1", "g/c2"):
        assert branch_files(world.repo, "rendered", f"{root}/") == world.on_branch(root)
        log = git(world.repo, "log", "--format=%B", "rendered")
        assert f"{TRAILER}: dep-{root}" in log
    assert commit_count(world.repo, "rendered") == 3  # dep-0 and one per root, nothing lost


def test_a_render_that_differs_from_the_reviewed_one_is_refused(world: PublishWorld) -> None:
    request = world.request("g/c1", "dep-1", digest="sha256:" + "0" * 64)
    with pytest.raises(ApplicationError) as info:
        world.publish(request)
    assert info.value.type == ERR_RENDER_MISMATCH and info.value.non_retryable
    assert 'publishing root "g/c1"' in info.value.message
    assert "not the reviewed render" in info.value.message
    assert not has_branch(world.repo, "rendered")


def test_another_repository_of_the_same_owner(tmp_path: Path) -> None:
    remotes = tmp_path / "remotes"
    catalog = remotes / "acme" / "catalog.git"
    catalog.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "--bare", str(catalog)], check=True)
    publish = {"target": "git", "git": {"repository": "acme/catalog", "branch": "main"}}
    publish["git"]["path"] = "clusters/{root}/manifests"
    world = publish_world(tmp_path, fleet_files(publish), remotes=remotes)
    world.publish(world.request("g/c1", "dep-1"))
    assert branch_files(catalog, "main", "clusters/g/c1/manifests/") == world.on_branch("g/c1")
    assert not has_branch(world.repo, "rendered")


def test_another_owner_is_refused(tmp_path: Path) -> None:
    publish = {"target": "git", "git": {"repository": "evil/catalog"}}
    world = publish_world(tmp_path, fleet_files(publish))
    with pytest.raises(ApplicationError) as info:
        world.publish(world.request("g/c1", "dep-1"))
    assert info.value.type == ERR_FLEET and info.value.non_retryable
    assert "only repositories of the fleet's owner (acme)" in info.value.message


def test_an_unreachable_target_is_retried_and_the_job_log_says_why(tmp_path: Path) -> None:
    """Infrastructure trouble is not the fleet's fault: a retryable error naming the root and
    target, and a job log line for each failed attempt (the job page would otherwise show
    "publishing" and nothing else while Temporal retries)."""
    publish = {"target": "git", "git": {"repository": "https://127.0.0.1:1/acme/rendered.git"}}
    world = publish_world(tmp_path, fleet_files(publish))
    with pytest.raises(GitPublishError) as info:
        world.publish(world.request("g/c1", "dep-1"))
    assert 'publishing root "g/c1" to git branch "rendered" of https://127.0.0.1:1/' in str(
        info.value
    )
    lines = world.activities.jobs.read("dep-1")
    assert [line["message"] for line in lines] == ["publishing", "publish attempt failed"]
    failed = lines[-1]
    assert failed["attempt"] == 1 and failed["error"] == str(info.value)


# --- secrets -----------------------------------------------------------------------------------


def test_plaintext_secrets_are_refused(tmp_path: Path, age_key: AgeKey) -> None:
    world = publish_world(tmp_path, secret_fleet_files(GIT, age_key, PASSWORD))
    with pytest.raises(ApplicationError) as info:
        world.publish(world.request("g/c1", "dep-1"))
    message = info.value.message
    assert info.value.type == ERR_FLEET and info.value.non_retryable
    assert 'publishing root "g/c1" to git branch "rendered" of acme/fleet' in message
    assert "publish.secrets: sops" in message
    assert "Secret_app.yaml" in message and "ConfigMap_app-config.yaml" in message
    assert_hidden([("message", message)], [PASSWORD])
    log = b"".join(world.blobs.get(k) or b"" for k in world.blobs.list("jobs/"))
    assert b"publish failed" in log
    assert_hidden([("job log", log)], [PASSWORD])
    assert not has_branch(world.repo, "rendered")
    # a root without secrets publishes plaintext as usual
    world.publish(world.request("g/c2", "dep-2"))
    assert branch_files(world.repo, "rendered", "g/c2/") == world.on_branch("g/c2")


def sops_rules(cluster: AgeKey, fleet: AgeKey) -> str:
    return (
        "creation_rules:\n"
        f"  - path_regex: ^g/c1/\n    age: {cluster.recipient}\n"
        f"  - path_regex: \\.sops\\.yaml$\n    age: {fleet.recipient}\n"
    )


def test_sops_round_trip(tmp_path: Path, age_key: AgeKey) -> None:
    """Published files decrypt, with the cluster's key, back to the real render."""
    cluster = generate_key(tmp_path / "cluster-key")
    publish = {"target": "git", "secrets": "sops"}
    files = secret_fleet_files(publish, age_key, PASSWORD, sops_rules(cluster, age_key))
    world = publish_world(tmp_path, files)
    world.publish(world.request("g/c1", "dep-1"))
    published = branch_files(world.repo, "rendered", "g/c1/")
    plain = world.on_branch("g/c1")
    assert sorted(published) == sorted(plain)
    assert_hidden(published.items(), [PASSWORD])
    encrypted = {p for p, d in published.items() if b"\nsops:\n" in d}
    # every file the engine found secret values in, and only those
    assert {p.rsplit("/", 1)[1] for p in encrypted} == {
        "Secret_app.yaml",
        "ConfigMap_app-config.yaml",
        "Deployment.apps_app.yaml",
    }
    for path, data in published.items():
        if path in encrypted:
            assert cluster.recipient.encode() in data
            assert documents(sops_decrypt(data, cluster)) == documents(plain[path]), path
        else:
            assert data == plain[path], path  # files without secrets go out as rendered
    secret = next(documents(published[p])[0] for p in encrypted if "Secret_" in p)
    assert secret["sops"]["encrypted_regex"] == "^(data|stringData)$"
    assert secret["metadata"]["name"] == "app"  # kustomize still identifies it
    assert all(str(v).startswith("ENC[") for v in secret["stringData"].values())


def test_sops_without_a_matching_rule_says_so(tmp_path: Path, age_key: AgeKey) -> None:
    rules = f"creation_rules:\n  - path_regex: ^other/\n    age: {age_key.recipient}\n"
    publish = {"target": "git", "secrets": "sops"}
    world = publish_world(tmp_path, secret_fleet_files(publish, age_key, PASSWORD, rules))
    with pytest.raises(ApplicationError) as info:
        world.publish(world.request("g/c1", "dep-1"))
    assert info.value.type == ERR_FLEET
    assert "no creation rule in .sops.yaml matches the published path 'g/c1/" in info.value.message
    assert_hidden([("message", info.value.message)], [PASSWORD])
    assert not has_branch(world.repo, "rendered")

"""The fake Argo CD (shared/devstack/argocd.py) over real HTTP: its bodies validate against
Argo CD's own swagger definitions, and its applications move OutOfSync → Synced/Progressing →
Healthy once the published commit lands on their git branch, or fail as the control API says."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from shared.devstack.argocd import FakeArgoCD
from tests.support.vendored import ARGOCD_SWAGGER

TOKEN = "argocd-test-token"


def validator(definition: str) -> jsonschema.Draft4Validator:
    """A validator of one swagger definition, its `$ref`s resolved inside the document."""
    definitions = json.loads(ARGOCD_SWAGGER.read_text())["definitions"]
    schema = {"$ref": f"#/definitions/{definition}", "definitions": definitions}
    return jsonschema.Draft4Validator(schema)


APPLICATION = validator("v1alpha1Application")
APPLICATION_LIST = validator("v1alpha1ApplicationList")
RUNTIME_ERROR = validator("runtimeError")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def commit(repo: Path, path: str, text: str) -> str:
    """A commit on branch `rendered` changing one file; its sha."""
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", f"publish {path}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def published(tmp_path: Path) -> Path:
    repo = tmp_path / "published"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "rendered")
    return repo


@pytest.fixture
def argocd(published: Path) -> Iterator[FakeArgoCD]:
    with FakeArgoCD(token=TOKEN, git_dir=published) as fake:
        yield fake


def get(fake: FakeArgoCD, path: str, **params: str) -> httpx.Response:
    return httpx.get(
        fake.url + path, params=params, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
    )


def app(fake: FakeArgoCD, name: str) -> dict[str, Any]:
    response = get(fake, f"/api/v1/applications/{name}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    APPLICATION.validate(body)
    return body


def states(body: dict[str, Any]) -> tuple[str, str, str | None]:
    status = body["status"]
    return status["sync"]["status"], status["health"]["status"], status["sync"].get("revision")


def test_an_application_syncs_the_published_commit_then_turns_healthy(
    argocd: FakeArgoCD, published: Path
) -> None:
    first = commit(published, "prod/eu/a.yaml", "a: 1\n")
    argocd.add_application("prod-eu", path="prod/eu", target_revision="rendered", revision=first)
    assert states(app(argocd, "prod-eu")) == ("Synced", "Healthy", first)
    second = commit(published, "prod/eu/a.yaml", "a: 2\n")
    assert states(app(argocd, "prod-eu")) == ("OutOfSync", "Healthy", first)
    synced = app(argocd, "prod-eu")
    assert states(synced) == ("Synced", "Progressing", second)
    assert synced["status"]["operationState"]["phase"] == "Succeeded"
    assert synced["status"]["history"][-1]["revision"] == second
    assert states(app(argocd, "prod-eu")) == ("Synced", "Healthy", second)
    assert states(app(argocd, "prod-eu")) == ("Synced", "Healthy", second)  # settled


def test_degraded_never_sync_and_failed_sync_through_the_control_api(
    argocd: FakeArgoCD, published: Path
) -> None:
    rev = commit(published, "x/a.yaml", "a: 1\n")
    for name in ("bad", "stuck", "refused"):
        response = httpx.post(
            f"{argocd.url}/_argocd/applications",
            json={"name": name, "path": "x", "targetRevision": "rendered"},
            timeout=5,
        )
        assert response.status_code == 201, response.text
    for name, behaviour in (
        ("bad", "degraded"),
        ("stuck", "never_sync"),
        ("refused", "sync_fails"),
    ):
        response = httpx.post(
            f"{argocd.url}/_argocd/applications/{name}/behaviour",
            json={"behaviour": behaviour},
            timeout=5,
        )
        assert response.status_code == 200, response.text
    for _ in range(4):
        bad, stuck, refused = (app(argocd, n) for n in ("bad", "stuck", "refused"))
    assert states(bad) == ("Synced", "Degraded", rev)
    assert "progress deadline" in bad["status"]["health"]["message"]
    assert states(stuck)[0] == "OutOfSync"
    assert "operationState" not in stuck["status"]
    assert states(refused)[0] == "OutOfSync"
    assert refused["status"]["operationState"]["phase"] == "Failed"
    assert refused["status"]["conditions"][0]["type"] == "SyncError"
    bogus = httpx.post(
        f"{argocd.url}/_argocd/applications/bad/behaviour", json={"behaviour": "x"}, timeout=5
    )
    assert bogus.status_code == 400


def test_told_revision_without_git_and_the_list_with_a_selector(argocd: FakeArgoCD) -> None:
    argocd.add_application(
        "a-web",
        path="a",
        repo_url="https://git.example/pub.git",
        labels={"rollwright.dev/root": "a", "tier": "web"},
    )
    argocd.add_application(
        "b-web",
        path="b",
        repo_url="https://git.example/pub.git",
        labels={"rollwright.dev/root": "b"},
    )
    unresolved = app(argocd, "a-web")
    assert states(unresolved)[0] == "Unknown"
    assert unresolved["status"]["conditions"][0]["type"] == "ComparisonError"
    httpx.post(
        f"{argocd.url}/_argocd/applications/a-web/revision", json={"revision": "c" * 40}, timeout=5
    ).raise_for_status()
    for _ in range(3):
        listing = get(argocd, "/api/v1/applications", selector="rollwright.dev/root=a")
        assert listing.status_code == 200
        APPLICATION_LIST.validate(listing.json())
    items = listing.json()["items"]
    assert [i["metadata"]["name"] for i in items] == ["a-web"]
    assert states(items[0]) == ("Synced", "Healthy", "c" * 40)
    both = get(argocd, "/api/v1/applications", selector="rollwright.dev/root,tier!=db").json()
    assert [i["metadata"]["name"] for i in both["items"]] == ["a-web", "b-web"]


def test_token_required_and_errors_shaped_like_argo_cd(argocd: FakeArgoCD) -> None:
    argocd.add_application("a", path="a")
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = httpx.get(f"{argocd.url}/api/v1/applications/a", headers=headers, timeout=5)
        assert response.status_code == 401
        RUNTIME_ERROR.validate(response.json())
        assert TOKEN not in response.text and "wrong" not in response.text
    missing = get(argocd, "/api/v1/applications/nope")
    assert missing.status_code == 404
    RUNTIME_ERROR.validate(missing.json())
    assert "nope" in missing.json()["message"]

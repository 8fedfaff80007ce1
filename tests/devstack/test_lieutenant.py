"""The fake Lieutenant (shared/devstack/lieutenant.py) over real HTTP: its schemas are
Lieutenant's own, it refuses clusters, tenants and compileMeta bodies that Lieutenant's
description does not allow, and answers as Lieutenant does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from shared.devstack.lieutenant import SCHEMAS_FILE, FakeLieutenant, extract_schemas
from tests.support.vendored import LIEUTENANT_OPENAPI

TOKEN = "lieutenant-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TENANT = {
    "id": "t-acme",
    "displayName": "Acme Corp",
    "gitRepo": {"url": "https://git.example.test/syn/t-acme.git"},
    "globalGitRepoURL": "https://git.example.test/syn/global.git",
}
CLUSTER = {
    "id": "c-one",
    "tenant": "t-acme",
    "displayName": "Cluster one",
    "facts": {"distribution": "k3s", "cloud": "local"},
    "dynamicFacts": {"kubernetes_version": {"major": "1", "minor": "30"}},
    "gitRepo": {"url": "https://git.example.test/syn/c-one.git"},
}
META = {
    "commodoreBuildInfo": {"version": "rollwright 0.2.0", "gitVersion": "0.2.0"},
    "global": {
        "gitSha": "a" * 40,
        "url": "https://git.example.test/syn/global.git",
        "version": "main",
    },
    "instances": {
        "demo": {
            "component": "demo",
            "gitSha": "b" * 40,
            "url": "https://git.example.test/syn/component-demo.git",
            "version": "v1.0.0",
        }
    },
    "lastCompile": "2026-11-28T13:59:40.969+00:00",
    "packages": {},
    "tenant": {
        "gitSha": "c" * 40,
        "url": "https://git.example.test/syn/t-acme.git",
        "version": "main",
    },
}


@pytest.fixture
def lieutenant() -> Iterator[FakeLieutenant]:
    with FakeLieutenant(
        token=TOKEN, clusters={"c-one": CLUSTER}, tenants={"t-acme": TENANT}
    ) as fake:
        yield fake


def test_the_packaged_schemas_are_lieutenants() -> None:
    assert json.loads(SCHEMAS_FILE.read_text()) == extract_schemas(LIEUTENANT_OPENAPI)


def test_reads_answer_as_lieutenant(lieutenant: FakeLieutenant) -> None:
    got = httpx.get(f"{lieutenant.url}/clusters/c-one", headers=AUTH)
    assert got.status_code == 200 and got.json() == CLUSTER
    listed = httpx.get(f"{lieutenant.url}/clusters", params={"tenant": "t-acme"}, headers=AUTH)
    assert [c["id"] for c in listed.json()] == ["c-one"]
    assert httpx.get(f"{lieutenant.url}/tenants/t-acme", headers=AUTH).json() == TENANT
    missing = httpx.get(f"{lieutenant.url}/clusters/c-nope", headers=AUTH)
    assert missing.status_code == 404 and "reason" in missing.json()
    anonymous = httpx.get(f"{lieutenant.url}/clusters/c-one")
    assert anonymous.status_code == 401 and "reason" in anonymous.json()


def test_compile_meta_is_validated_recorded_and_stored(lieutenant: FakeLieutenant) -> None:
    url = f"{lieutenant.url}/clusters/c-one/compileMeta"
    done = httpx.post(url, json=META, headers=AUTH)
    assert done.status_code == 204 and not done.content
    assert lieutenant.reported() == [("c-one", META)]
    assert httpx.get(f"{lieutenant.url}/clusters/c-one", headers=AUTH).json()["compileMeta"] == META
    listed = httpx.get(f"{lieutenant.url}/_lieutenant/compile-meta").json()
    assert listed == [{"cluster": "c-one", "body": META}]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"lastCompile": 1700000000}, "lastCompile"),
        ({"instances": {"demo": {"gitSha": 7}}}, "instances.demo.gitSha"),
        ({"commodoreBuildInfo": {"version": ["1"]}}, "commodoreBuildInfo.version"),
    ],
)
def test_a_body_lieutenant_cannot_read_is_refused(
    lieutenant: FakeLieutenant, change: dict[str, Any], where: str
) -> None:
    answer = httpx.post(
        f"{lieutenant.url}/clusters/c-one/compileMeta", json={**META, **change}, headers=AUTH
    )
    assert answer.status_code == 400
    assert where in answer.json()["reason"]
    assert lieutenant.reported() == []


def test_answers_it_could_not_give_are_refused_when_added() -> None:
    with pytest.raises(ValueError, match="facts"):
        FakeLieutenant(token=TOKEN, clusters={"c-x": {**CLUSTER, "facts": ["k3s"]}})
    with pytest.raises(ValueError, match="tenant"):
        FakeLieutenant(token=TOKEN, clusters={"c-x": {"id": "c-x", "displayName": "x"}})

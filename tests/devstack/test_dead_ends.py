"""No dead ends in the dev stack: the GitHub emulator serves commit pages (the job page's
revision link) and check-run pages with their Markdown rendered and GitHub's *Details* link;
the gateway's `/` lists the roots instead of a JSON 404. (Superseded check runs keep their
diff and point at the job page: tests/activities/test_github.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import httpx
import pytest
from fastapi.testclient import TestClient

from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from shared.contracts.deploy import DeploymentRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.github.app import CheckRunOutput, GitHubApp
from shared.settings import Settings
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.machine import MACHINE_HEADERS, MACHINE_SECRET
from tests.support.pages import QueueRecorder

APP_ID = 5151
INSTALLATION = 31


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "fleet")
    write_files(repo, {"deployments/staging/a/cluster.values.yaml": {"region": "eu-west-1"}})
    commit_all(repo, "first")
    write_files(repo, {"deployments/staging/a/cluster.values.yaml": {"region": "eu-central-1"}})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Move staging/a to <eu-central-1>", "-m", "Why: latency.")
    return repo


@pytest.fixture
def emulator(app_key: str, repo: Path) -> Iterator[GitHubEmulator]:
    emu = GitHubEmulator(app_id=APP_ID, app_key=app_key)
    emu.seed_repository("acme", "fleet", INSTALLATION, "main", git_dir=repo / ".git")
    with emu:
        yield emu


def test_emulator_serves_commit_pages(emulator: GitHubEmulator, repo: Path) -> None:
    sha = git(repo, "rev-parse", "HEAD")
    with httpx.Client(base_url=emulator.url, timeout=10) as http:
        page = http.get(f"/acme/fleet/commit/{sha}")
        short = http.get(f"/acme/fleet/commit/{sha[:12]}")
        missing = http.get(f"/acme/fleet/commit/{'0' * 40}")
        other = http.get(f"/acme/other/commit/{sha}")
    assert page.status_code == 200 and short.status_code == 200
    assert "<h1 id='subject'>Move staging/a to &lt;eu-central-1&gt;</h1>" in page.text
    assert f"<code id='sha'>{sha}</code>" in page.text
    assert "Why: latency." in page.text
    assert "+region: eu-central-1" in page.text and "-region: eu-west-1" in page.text
    assert (missing.status_code, other.status_code) == (404, 404)


def test_check_run_page_renders_markdown_and_links_details(
    emulator: GitHubEmulator, app_key: str, repo: Path
) -> None:
    sha = git(repo, "rev-parse", "HEAD")
    app = GitHubApp(APP_ID, app_key, emulator.url, min_request_interval=0, min_write_interval=0)
    try:
        run_id = app.create_check_run(
            "acme/fleet",
            "rollwright/staging/a",
            sha,
            "dep-1",
            "completed",
            "http://rollwright.test/jobs/dep-1",
            CheckRunOutput(
                title="Review: 1 changed",
                summary="**Queued**: first in line",
                text="<details><summary>ConfigMap</summary>\n\n```diff\n+a\n```\n</details>\n",
            ),
            [],
            conclusion="neutral",
        )
    finally:
        app.close()
    with httpx.Client(base_url=emulator.url, timeout=10) as http:
        page = http.get(f"/acme/fleet/runs/{run_id}").text
        commit = http.get(f"/acme/fleet/commit/{sha}")
    assert "<a id='details' href='http://rollwright.test/jobs/dep-1'>Details</a>" in page
    assert "<strong>Queued</strong>: first in line" in page
    assert "<details><summary>ConfigMap</summary>" in page
    assert '<code class="language-diff">+a' in page
    assert f"<a href='/acme/fleet/commit/{sha}'>{sha[:12]}</a>" in page
    assert commit.status_code == 200  # the head link is no dead end either


def test_gateway_front_page_lists_roots(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "state", public_url="http://rollwright.test", api_token=MACHINE_SECRET
    )
    settings.data_dir.mkdir(parents=True)
    database = Database(settings.database)
    app = create_app(settings, dispatcher=cast(Dispatcher, QueueRecorder()), database=database)
    t0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    with TestClient(app, headers=MACHINE_HEADERS) as client:
        empty = client.get("/")
        assert empty.status_code == 200 and 'id="empty"' in empty.text
        for i, (root, at) in enumerate(
            [("staging/a", t0), ("staging/a", t0 + timedelta(hours=1)), ("prod/b", t0)]
        ):
            DeploymentStore(database).record(
                DeploymentRecord(
                    deployment_id=f"dep-{i}",
                    repo="acme/fleet",
                    root=root,
                    revision="a" * 40,
                    trigger="merge",
                    state="published",
                    at=at,
                )
            )
        page = client.get("/")
    database.close()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    rows = page.text.split("<tbody>", 1)[1]
    # most recently active first, each linked to its root page
    assert rows.index("staging/a") < rows.index("prod/b")
    assert 'href="http://rollwright.test/roots/staging/a?repo=acme%2Ffleet"' in page.text
    assert "<td>2</td>" in rows and "<td>1</td>" in rows

"""Job pages, root pages and their JSON API, on the real gateway app (FastAPI TestClient)
with real SQLite and a real file blob store, filled the way the worker fills them: the record
activity's SQL calls, `JobLog` lines and the `diff.json` that diff_render stores. Dev mode
against the real GitHub emulator over HTTP; `rollwright deploy` against the gateway served by
uvicorn."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from github import Auth, Github
from pydantic import SecretStr

from gateway.app import create_app
from gateway.dispatcher import Dispatcher
from gateway.pages import marked_parts
from shared.contracts.deploy import AuditRecord, HotfixRef, LatestDeployment
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.ports import free_port
from shared.review.diff import diff_renders
from shared.review.diffdoc import diff_document, document_key
from shared.stores.blob import latest_key
from tests.support.gitrepo import commit_all, init_repo
from tests.support.pages import DEP, NEW, OLD, PUBLIC, REPO, ROOT, SHA, T0, UI, World, cm
from tests.support.serving import serving

QUEUE_URL = f"{UI}/namespaces/default/workflows/deploy%3Aacme%2Ffleet%3Aprod%2Feu-1"


def awaiting(world: World) -> None:
    world.record("rendering", T0, check_run_id=7)
    world.jobs.write(DEP, "render started", root=ROOT)
    world.jobs.write(DEP, "rendered", files=2, seconds=0.5)
    world.store_diff()
    world.record(
        "awaiting_review", T0 + timedelta(seconds=5), check_run_id=7, added=1, removed=1, changed=1
    )


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# --- the job page ------------------------------------------------------------------------------


def test_job_page_shows_the_deployment_timeline_log_diff_and_rollback(world: World) -> None:
    awaiting(world)
    world.record(
        "publishing",
        T0 + timedelta(seconds=60),
        check_run_id=8,
        approved_by="@bob",
        added=1,
        removed=1,
        changed=1,
    )
    world.record(
        "published",
        T0 + timedelta(seconds=70),
        check_run_id=8,
        approved_by="@bob",
        added=1,
        removed=1,
        changed=1,
        message="Published to file:///x.",
    )
    page = world.client.get(f"/jobs/{DEP}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    text = text_of(html)
    assert f"{ROOT} @ {SHA[:12]}" in text
    assert "Repository acme/fleet" in text and "Trigger merge" in text
    assert "Requested by alice" in text and "Approved by @bob" in text
    assert f'href="https://github.com/{REPO}/commit/{SHA}"' in html
    assert f'href="https://github.com/{REPO}/runs/7"' in html
    assert f'href="https://github.com/{REPO}/runs/8"' in html
    assert f'href="{UI}/namespaces/default/workflows/{DEP}"' in html
    assert f'href="{QUEUE_URL}"' in html
    # the timeline, oldest first
    timeline = html[html.index('id="timeline"') : html.index("</ol>")]
    states = re.findall(r'class="state (\w+)"', timeline)
    assert states == ["rendering", "awaiting_review", "publishing", "published"]
    assert "2025-03-01 12:00:05 UTC" in timeline
    # the log so far, and no polling needed: finished
    assert 'data-finished="true"' in html
    assert "render started root=prod/eu-1" in text and "rendered files=2 seconds=0.5" in text
    # the rollback command
    assert f"rollwright deploy {ROOT} --revision {SHA} --repo {REPO} --url {PUBLIC}" in html
    # the diff: counts and one section per resource, kind/name from the manifests; a diff
    # of a few resources opens expanded
    assert "3 resource(s): 1 added, 1 removed, 1 changed" in text
    sections = re.findall(r'<details class="resource" id="r\d+" data-path="([^"]+)" open>', html)
    assert sections == sorted(NEW.keys() | OLD.keys())
    assert "ConfigMap web/settings" in text and "ConfigMap web/gone" in text
    # unified by default, with both line numbers and the +/- signs
    assert '<table class="diff unified">' in html and 'class="diff split"' not in html
    assert re.search(
        r'<tr class="del"><td class="n">\d+</td><td class="n"></td><td class="c">-  region: eu',
        html,
    )
    assert re.search(
        r'<tr class="add"><td class="n"></td><td class="n">\d+</td><td class="c">\+  region: us',
        html,
    )
    # no buttons outside dev mode
    assert "<form" not in html


def test_side_by_side_pairs_removed_and_added_lines(world: World) -> None:
    awaiting(world)
    html = world.client.get(f"/jobs/{DEP}?view=split").text
    assert '<table class="diff split">' in html and 'class="diff unified"' not in html
    # the pair of lines side by side, with what changed within them marked
    row = re.search(
        r'<tr><td class="n">(\d+)</td><td class="c del">  region: <span class="chg">eu</span>'
        r'</td><td class="n">(\d+)</td><td class="c add">  region: <span class="chg">us</span>'
        r"</td></tr>",
        html,
    )
    assert row and row.group(1) == row.group(2)
    assert 'href="?view=unified#diff"' in html
    assert world.client.get(f"/jobs/{DEP}?view=sideways").status_code == 400


def test_a_diff_of_many_resources_starts_collapsed(world: World) -> None:
    world.record("awaiting_review", T0)
    new = {f"web/web/web/ConfigMap_c{i}.yaml": cm(f"c{i}", "web", a=str(i)) for i in range(6)}
    document = diff_document(diff_renders({}, new), {}, new)
    world.blobs.put(document_key(DEP), document.to_json())
    html = world.client.get(f"/jobs/{DEP}").text
    assert len(re.findall(r'<details class="resource" id="r\d+" data-path="[^"]+">', html)) == 6


def test_changed_parts_are_escaped_on_the_page() -> None:
    assert str(marked_parts([("<b>", True), ("&", False)])) == (
        '<span class="chg">&lt;b&gt;</span>&amp;'
    )


def test_everything_shown_is_escaped(world: World) -> None:
    world.record(
        "failed",
        T0,
        message='<img src=x onerror="alert(1)">',
        requested_by="<b>mallory</b>",
    )
    world.jobs.write(DEP, "render failed", error="<script>alert(2)</script>")
    world.store_diff()
    html = world.client.get(f"/jobs/{DEP}").text
    assert "<script>alert" not in html and "<img src=x" not in html and "<b>mallory" not in html
    assert "&lt;b&gt;mallory&lt;/b&gt;" in html
    assert '&lt;img src=x onerror="alert(1)"&gt;' in html  # text, in the outcome's Markdown
    assert "error=&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # inside the diff
    # only the page's own script, a file of the gateway's (no inline code: the CSP allows none)
    assert html.count("<script") == 1
    assert '<script src="http://rollwright.test/static/job.js"></script>' in html


HOSTILE_MARKDOWN = (
    "**Approval still needed** from:\n- anyone with write access\n\n"
    "| Application | Sync |\n|---|---|\n| `web` | Synced |\n\n"
    "<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) "
    '<a href="https://evil.example">x</a> <details open><summary onclick="alert(4)">s</summary>'
)


def test_messages_are_markdown_shown_as_safe_html(world: World) -> None:
    """A deployment's messages are Markdown (written for its check run): the job page (its
    outcome and timeline) and the root page show them as HTML, through the safe renderer
    that escapes raw HTML and refuses script links."""
    world.record("awaiting_review", T0, message=HOSTILE_MARKDOWN)
    world.record("failed", T0 + timedelta(minutes=1), message=HOSTILE_MARKDOWN)
    for path in (f"/jobs/{DEP}", f"/roots/{ROOT}"):
        html = world.client.get(path).text
        assert "<strong>Approval still needed</strong>" in html, path
        assert "**Approval" not in html and "| Application |" not in html, path
        assert "<li>anyone with write access</li>" in html, path
        assert "<th>Application</th>" in html and "<td><code>web</code></td>" in html, path
        assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html, path
        assert "<img" not in html and 'href="javascript:' not in html, path
        assert '<a href="https://evil.example"' not in html, path
        assert "onclick" not in html.replace("&lt;summary onclick", ""), path
    job = world.client.get(f"/jobs/{DEP}").text
    assert job.count("<strong>Approval still needed</strong>") == 3  # outcome, two events
    assert job.count("<script") == 1  # only the page's own file (the CSP runs nothing inline)
    assert '<script src="http://rollwright.test/static/job.js"></script>' in job


def test_unknown_deployment_is_a_404_page(world: World) -> None:
    page = world.client.get("/jobs/no-such-deployment")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "No such deployment" in page.text
    assert world.client.get("/api/jobs/no-such-deployment").status_code == 404
    assert world.client.get("/api/jobs/no-such-deployment/log").status_code == 404
    assert world.client.get("/api/jobs/no-such-deployment/diff").status_code == 404
    assert world.client.get("/jobs/..%2Fetc").status_code == 404


def test_a_queued_deployment_shows_from_its_check_run_log_line(world: World) -> None:
    queued = "queued-0001"
    world.jobs.write(
        queued,
        "check run created",
        check_run=41,
        repo=REPO,
        root="staging/a",
        revision=SHA,
        status="completed",
        conclusion="action_required",
    )
    page = world.client.get(f"/jobs/{queued}")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "staging/a @" in text and "waits in its root's queue" in text
    assert f'href="https://github.com/{REPO}/runs/41"' in page.text
    assert world.client.get(f"/api/jobs/{queued}").json()["state"] == "queued"


# --- JSON ---------------------------------------------------------------------------------------


def test_job_json(world: World) -> None:
    awaiting(world)
    job = world.client.get(f"/api/jobs/{DEP}").json()
    assert job["state"] == "awaiting_review" and not job["finished"]
    assert [e["state"] for e in job["timeline"]] == ["rendering", "awaiting_review"]
    assert job["links"]["page"] == f"{PUBLIC}/jobs/{DEP}"
    assert job["links"]["check_runs"] == {"7": f"https://github.com/{REPO}/runs/7"}
    assert job["rollback_command"].startswith(f"rollwright deploy {ROOT} --revision {SHA}")
    diff = job["diff"]
    assert (diff["added"], diff["removed"], diff["changed"]) == (1, 1, 1)
    settings = next(r for r in diff["resources"] if r["name"] == "settings")
    assert (settings["kind"], settings["namespace"], settings["status"]) == (
        "ConfigMap",
        "web",
        "changed",
    )
    assert (settings["additions"], settings["deletions"]) == (1, 1)
    assert "hunks" not in settings
    full = world.client.get(f"/api/jobs/{DEP}/diff").json()
    hunks = next(r for r in full["resources"] if r["name"] == "settings")["hunks"]
    assert "-  region: eu" in hunks[0]["lines"] and "+  region: us" in hunks[0]["lines"]


def test_the_audit_trail_on_the_job_page_and_in_the_api(world: World) -> None:
    """Clicks as the record_audit activity stores them: shown on the job page (refused ones
    with why) and queryable under /api/audit by repo, root, actor, action and outcome."""
    awaiting(world)
    clicks = [
        ("approve", "rita", False, "@rita has read access to acme/fleet; only people with write"),
        ("approve", "alice", True, ""),
    ]
    for n, (action, actor, counted, reason) in enumerate(clicks):
        world.audit_trail.record(
            AuditRecord(
                repo=REPO,
                root=ROOT,
                deployment_id=DEP,
                action=action,
                actor=actor,
                counted=counted,
                reason=reason,
                at=T0 + timedelta(minutes=n + 1),
            )
        )
    world.audit_trail.record(
        AuditRecord(
            repo=REPO,
            root="prod/us-1",
            action="unlock",
            actor="bob",
            source="api",
            counted=True,
            at=T0 + timedelta(minutes=5),
        )
    )
    job = world.client.get(f"/api/jobs/{DEP}").json()
    assert [(a["actor"], a["counted"], a["source"]) for a in job["audit"]] == [
        ("rita", False, "check_run"),
        ("alice", True, "check_run"),
    ]
    page = text_of(world.client.get(f"/jobs/{DEP}").text)
    assert "Audit" in page and "@rita approve check run no — @rita has read access" in page
    assert "@alice approve check run yes" in page

    every = world.client.get("/api/audit").json()
    assert [e["actor"] for e in every["events"]] == ["bob", "alice", "rita"]  # newest first
    assert every["next"] is None
    refused = world.client.get("/api/audit", params={"counted": "false"}).json()["events"]
    assert [e["actor"] for e in refused] == ["rita"]
    by_root = world.client.get("/api/audit", params={"root": "prod/us-1"}).json()["events"]
    assert [(e["action"], e["source"]) for e in by_root] == [("unlock", "api")]
    first = world.client.get("/api/audit", params={"limit": 2}).json()
    assert [e["actor"] for e in first["events"]] == ["bob", "alice"]
    rest = world.client.get("/api/audit", params={"limit": 2, "before": first["next"]}).json()
    assert [e["actor"] for e in rest["events"]] == ["rita"] and rest["next"] is None
    assert (
        world.client.get("/api/audit", params={"actor": "alice", "action": "reject"}).json()[
            "events"
        ]
        == []
    )


def test_log_follow_api(world: World) -> None:
    world.record("rendering", T0)
    world.jobs.write(DEP, "render started", root=ROOT)
    first = world.client.get(f"/api/jobs/{DEP}/log").json()
    assert [line["message"] for line in first["lines"]] == ["state: rendering", "render started"]
    assert first["next"] == 2 and not first["finished"] and first["state"] == "rendering"
    assert world.client.get(f"/api/jobs/{DEP}/log?after=2").json()["lines"] == []

    world.jobs.write(DEP, "rendered", files=3)
    world.record("failed", T0 + timedelta(seconds=3), message="render failed")
    later = world.client.get(f"/api/jobs/{DEP}/log?after=2").json()
    assert [line["message"] for line in later["lines"]] == ["rendered", "state: failed"]
    assert later["next"] == 4 and later["finished"] and later["state"] == "failed"
    assert later["lines"][0]["files"] == 3
    # beyond the end: nothing, and the position stays the end
    assert world.client.get(f"/api/jobs/{DEP}/log?after=99").json()["next"] == 4
    assert world.client.get(f"/api/jobs/{DEP}/log?after=-1").status_code == 422
    # the job index in SQL
    (job,) = world.job_index.of_deployment(DEP)
    assert job.state == "failed" and job.finished_at is not None


# --- the root page ------------------------------------------------------------------------------


def test_root_page_pages_newest_first(world: World) -> None:
    for n in range(30):
        world.record(
            "published",
            T0 + timedelta(minutes=n),
            deployment_id=f"dep-{n:02d}",
            revision=f"{n:02d}" * 20,
        )
    world.record(
        "published", T0 - timedelta(minutes=1), deployment_id="other-repo", repo="acme/other"
    )
    page1 = world.client.get(f"/roots/{ROOT}?repo={REPO}")
    assert page1.status_code == 200
    ids = re.findall(r'href="http://rollwright.test/jobs/(dep-\d+)"><code>', page1.text)
    assert ids == [f"dep-{n:02d}" for n in range(29, 4, -1)]  # 25 newest first
    assert "page 1 of 2" in page1.text and 'rel="next"' in page1.text
    assert (
        f'href="{UI}/namespaces/default/workflows/deploy%3Aacme%2Ffleet%3Aprod%2Feu-1"'
        in page1.text
    )
    page2 = world.client.get(f"/roots/{ROOT}?repo={REPO}&page=2").text
    ids = re.findall(r'href="http://rollwright.test/jobs/(dep-\d+)"><code>', page2)
    assert ids == [f"dep-{n:02d}" for n in range(4, -1, -1)]
    assert 'rel="prev"' in page2 and 'rel="next"' not in page2
    # without ?repo=: every repository's deployments of the root, with their repository
    everything = world.client.get(f"/api/roots/{ROOT}").json()
    assert everything["total"] == 31 and everything["pages"] == 2
    assert set(everything["workflows"]) == {REPO}  # the repositories on this page
    oldest = world.client.get(f"/api/roots/{ROOT}?page=2").json()
    assert oldest["deployments"][-1]["repo"] == "acme/other"
    assert set(oldest["workflows"]) == {REPO, "acme/other"}
    api = world.client.get(f"/api/roots/{ROOT}?repo={REPO}&page=2").json()
    assert [d["deployment_id"] for d in api["deployments"]] == [
        f"dep-{n:02d}" for n in range(4, -1, -1)
    ]
    assert api["deployments"][0]["page"] == f"{PUBLIC}/jobs/dep-04"
    missing = world.client.get("/roots/no/such/root")
    assert missing.status_code == 404 and "No such root" in missing.text
    assert world.client.get("/api/roots/no/such/root").status_code == 404


# --- dev mode -----------------------------------------------------------------------------------


def test_no_buttons_and_no_action_route_outside_dev_mode(world: World) -> None:
    awaiting(world)
    assert "<form" not in world.client.get(f"/jobs/{DEP}").text
    answer = world.client.post(f"/jobs/{DEP}/actions/approve", data={"check_run_id": "7"})
    assert answer.status_code == 404


def test_dev_mode_buttons_click_the_emulators_check_run(
    tmp_path: Path, emulator: tuple[GitHubEmulator, list[tuple[str, dict[str, Any]]]]
) -> None:
    emu, received = emulator
    github = Github(base_url=emu.url, auth=Auth.Token(emu.issue_token(1)))
    run = github.get_repo(REPO).create_check_run(
        name=f"rollwright/{ROOT}",
        head_sha=SHA,
        external_id=DEP,
        status="completed",
        conclusion="action_required",
        output={"title": "Review", "summary": "s"},
        actions=[
            {"label": "Approve", "description": "Publish this render", "identifier": "approve"},
            {"label": "Reject", "description": "Do not publish", "identifier": "reject"},
        ],
    )
    w = World(tmp_path, dev_mode=True, github_api_url=emu.url)
    with w.client:
        awaiting(w)
        html = w.client.get(f"/jobs/{DEP}").text
        forms = re.findall(r'<form class="action" method="post" action="([^"]+)">', html)
        assert forms == [
            f"{PUBLIC}/jobs/{DEP}/actions/approve",
            f"{PUBLIC}/jobs/{DEP}/actions/reject",
        ]
        assert f'name="check_run_id" value="{run.id}"' in html
        # the buttons come after the diff, with its summary beside them; the top links there
        assert html.index('id="diff"') < html.index('id="actions"') < html.index('id="log"')
        summary = html.split('id="review-summary">', 1)[1].split("</span>", 1)[0]
        assert summary.startswith("the diff above: 3 resource(s), 1 added, 1 removed, 1 changed")
        assert html.index('id="review-jump"') < html.index('id="diff"')
        # a merge of the same root waiting behind the locked queue: its Unlock shows here too
        unlock = {"label": "Unlock", "description": "Let merges deploy", "identifier": "unlock"}
        waiting = github.get_repo(REPO).create_check_run(
            name=f"rollwright/{ROOT}",
            head_sha="c3" * 20,
            external_id="another-deployment",
            status="completed",
            conclusion="action_required",
            output={"title": "Waiting: the queue is locked", "summary": "s"},
            actions=[unlock],
        )
        html = w.client.get(f"/jobs/{DEP}").text
        forms = re.findall(r'<form class="action" method="post" action="([^"]+)">', html)
        assert [form.rsplit("/", 1)[1] for form in forms] == ["approve", "reject", "unlock"]
        assert f'name="check_run_id" value="{waiting.id}"' in html
        answer = w.client.post(
            f"/jobs/{DEP}/actions/approve",
            data={"check_run_id": str(run.id)},
            follow_redirects=False,
        )
        assert answer.status_code == 303 and answer.headers["location"] == f"{PUBLIC}/jobs/{DEP}"
        ((event, payload),) = received
        assert event == "check_run" and payload["action"] == "requested_action"
        assert payload["requested_action"] == {"identifier": "approve"}
        assert payload["check_run"]["id"] == run.id and payload["check_run"]["external_id"] == DEP
        # a button the check run does not offer (any more) is refused, nothing is sent
        stale = w.client.post(f"/jobs/{DEP}/actions/unlock", data={"check_run_id": str(run.id)})
        assert stale.status_code == 409 and len(received) == 1
        # a finished deployment shows no buttons
        w.record("published", T0 + timedelta(minutes=5), approved_by="@dev-reviewer")
        assert "<form" not in w.client.get(f"/jobs/{DEP}").text
    w.close()


# --- rollwright deploy --------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[World, str]]:
    world = World(tmp_path, api_token=SecretStr("t0ken"))
    app = create_app(
        world.settings, dispatcher=cast(Dispatcher, world.dispatcher), database=world.database
    )
    try:
        with serving(app) as url:
            yield world, url
    finally:
        world.close()


def deploy(
    url: str, *args: str, token: str | None = "t0ken", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    if token is not None:
        env["ROLLWRIGHT_API_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", "deploy", *args, "--url", url],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or Path(__file__).resolve().parents[1],
        check=False,
        timeout=60,
    )


def test_rollwright_deploy_queues_a_manual_deployment(served: tuple[World, str]) -> None:
    world, url = served
    done = deploy(url, ROOT, "--revision", SHA.upper(), "--repo", REPO)
    assert done.returncode == 0, done.stderr
    assert f"queued a manual deployment of {ROOT} at {SHA}" in done.stdout
    assert f"root page: {PUBLIC}/roots/prod/eu-1?repo=acme%2Ffleet" in done.stdout
    ((repo, root, revision),) = world.dispatcher.queued
    assert (repo.full_name, root) == (REPO, ROOT)
    assert (revision.revision, revision.trigger, revision.reason, revision.requested_by) == (
        SHA,
        "manual",
        "api",
        "api token",  # the caller the token stands for: nobody names themselves
    )
    as_json = deploy(url, ROOT, "--revision", SHA, "--repo", REPO, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    answer = json.loads(as_json.stdout)
    assert (answer["root"], answer["revision"], answer["repo"]) == (ROOT, SHA, REPO)
    assert answer["job_url"].startswith(f"{PUBLIC}/jobs/")


def test_rollwright_deploy_errors(served: tuple[World, str], tmp_path: Path) -> None:
    world, url = served
    wrong = deploy(url, ROOT, "--revision", SHA, "--repo", REPO, token="nope")
    assert wrong.returncode == 1 and "401" in wrong.stderr
    missing = deploy(url, ROOT, "--revision", SHA, "--repo", REPO, token=None)
    assert missing.returncode == 2 and "ROLLWRIGHT_API_TOKEN" in missing.stderr
    bad_root = deploy(url, "../etc", "--revision", SHA, "--repo", REPO)
    assert bad_root.returncode == 2 and "422" in bad_root.stderr and "root" in bad_root.stderr
    short = deploy(url, ROOT, "--revision", "abc123", "--repo", REPO, cwd=tmp_path)
    assert short.returncode == 2 and "not a full commit sha" in short.stderr
    no_repo = deploy(url, ROOT, "--revision", SHA, cwd=tmp_path)
    assert no_repo.returncode == 2 and "--repo OWNER/NAME" in no_repo.stderr
    unreachable = deploy(
        f"http://127.0.0.1:{free_port('127.0.0.1')}", ROOT, "--revision", SHA, "--repo", REPO
    )
    assert unreachable.returncode == 1 and "Connection refused" in unreachable.stderr
    assert world.dispatcher.queued == []


def test_rollwright_deploy_resolves_a_short_revision_and_the_origin_remote(
    served: tuple[World, str], tmp_path: Path
) -> None:
    world, url = served
    repo = init_repo(tmp_path / "clone")
    (repo / "x").write_text("x\n")
    sha = commit_all(repo, "x")
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/fleet.git"],
        check=True,
    )
    done = deploy(url, ROOT, "--revision", "HEAD", cwd=repo)
    assert done.returncode == 0, done.stderr
    ((ref, _, revision),) = world.dispatcher.queued
    assert ref.full_name == REPO and revision.revision == sha


def test_rollback_only_for_a_deployed_revision_and_the_diff_before_the_log(world: World) -> None:
    awaiting(world)
    html = world.client.get(f"/jobs/{DEP}").text
    # the diff comes before the log
    assert html.index('id="diff"') < html.index('id="log"')
    # never published on the root: no rollback to it
    assert 'id="rollback"' not in html
    assert world.client.get(f"/api/jobs/{DEP}").json()["revision_deployed"] is False
    # another deployment published the same revision: now it is a known-good state
    world.record("published", T0 + timedelta(minutes=5), deployment_id="other-dep")
    html = world.client.get(f"/jobs/{DEP}").text
    assert 'id="rollback"' in html and f"--revision {SHA}" in html
    # a different root with that revision does not count
    world.record("awaiting_review", T0, deployment_id="third", root="prod/other")
    assert 'id="rollback"' not in world.client.get("/jobs/third").text


def test_live_parts_are_the_page_without_log_and_diff(world: World) -> None:
    """What the page's script fetches on each state change to refresh every field."""
    awaiting(world)
    live = world.client.get(f"/jobs/{DEP}?live=1").text
    for part in ('id="state"', 'id="facts"', 'id="review-actions"', 'id="timeline-section"'):
        assert part in live, part
    assert 'id="log"' not in live and 'id="diff"' not in live and "<script>" not in live
    world.record("publishing", T0 + timedelta(seconds=60), check_run_id=8, approved_by="@bob")
    live = world.client.get(f"/jobs/{DEP}?live=1").text
    assert '<dd id="approved-by">@bob</dd>' in live
    assert f'href="https://github.com/{REPO}/runs/8"' in live
    assert re.findall(r'class="state (\w+)"', live.split('id="timeline"', 1)[1]) == [
        "rendering",
        "awaiting_review",
        "publishing",
    ]
    # the full page's script asks for exactly this, and swaps exactly these parts
    page = world.client.get(f"/jobs/{DEP}").text
    assert 'data-live="?live=1"' in page
    script = world.client.get("/static/job.js").text
    assert 'var LIVE = ["state", "facts", "review-actions", "timeline-section"];' in script


# --- hotfixes ----------------------------------------------------------------------------------


def test_a_hotfix_is_marked_on_the_job_and_root_pages_and_its_lock_names_the_pull_request(
    world: World,
) -> None:
    hotfix = HotfixRef(pr=12, head=SHA, url=f"https://github.com/{REPO}/pull/12")
    world.record("awaiting_review", T0, trigger="manual", hotfix=hotfix)
    world.record("published", T0 + timedelta(minutes=1), trigger="manual")  # a row without it
    latest = LatestDeployment(
        deployment_id=DEP,
        revision=SHA,
        trigger="manual",
        state="published",
        finished_at=T0 + timedelta(minutes=1),
        locks_queue=True,
        hotfix=hotfix,
    )
    world.blobs.put(latest_key(REPO, ROOT), latest.model_dump_json().encode())

    job = world.client.get(f"/api/jobs/{DEP}").json()
    assert job["hotfix"] == {"pr": 12, "head": SHA, "url": f"https://github.com/{REPO}/pull/12"}
    page = text_of(world.client.get(f"/jobs/{DEP}").text)
    assert f"manual — hotfix from pull request #12 at {SHA[:12]} , not merged" in page

    root = world.client.get(f"/api/roots/{ROOT}", params={"repo": REPO}).json()
    assert root["deployments"][0]["hotfix"]["pr"] == 12
    [lock] = root["locks"]
    assert lock["hotfix"]["pr"] == 12
    html = world.client.get(f"/roots/{ROOT}", params={"repo": REPO}).text
    assert "hotfix #12" in text_of(html)
    assert "until pull request #12 , whose head it hotfixed , is merged" in text_of(html)

"""A merged revision's page (`/revisions/<owner>/<repo>/<sha>`, the Details link of the
`rollwright` summary check run with Approve all): every root deployed at the revision with its
newest deployment there, what awaits review, and the outcome's Markdown as HTML. Rendered by
the real gateway app over SQLite rows the record activity writes."""

from __future__ import annotations

import re
from datetime import timedelta

from tests.support.pages import REPO, SHA, T0, World

OTHER = "b2" * 20


def test_the_revision_lists_its_roots_deployments(world: World) -> None:
    world.record("published", T0, deployment_id="dep-eu", root="prod/eu-1", message="Published.")
    world.record("failed", T0, deployment_id="dep-us-1", root="prod/us-1", message="boom")
    world.record(
        "awaiting_review",
        T0 + timedelta(minutes=5),
        deployment_id="dep-us-2",
        root="prod/us-1",
        message="**Approval still needed** from:\n\n- anyone with write access",
        added=1,
        removed=0,
        changed=2,
    )
    world.record("published", T0, deployment_id="dep-other", root="prod/ap-1", revision=OTHER)

    page = world.client.get(f"/revisions/{REPO}/{SHA}")
    assert page.status_code == 200
    html = page.text
    rows = re.findall(r'<tr class="root-row [a-z_]+">\s*<td><a href="([^"]+)">([^<]+)</a>', html)
    assert rows == [
        ("http://rollwright.test/jobs/dep-eu", "prod/eu-1"),
        ("http://rollwright.test/jobs/dep-us-2", "prod/us-1"),  # the newest of the root
    ]
    assert "prod/ap-1" not in html  # another revision
    assert "(2 attempts)" in html
    assert "<strong>1 root(s) await review</strong>" in html
    # the outcome is Markdown on the check run; here it is HTML
    assert "<strong>Approval still needed</strong>" in html and "**Approval" not in html
    assert "<li>anyone with write access</li>" in html
    assert f'href="https://github.com/{REPO}/commit/{SHA}"' in html


def test_a_revision_without_deployments_is_a_page_that_says_so(world: World) -> None:
    page = world.client.get(f"/revisions/{REPO}/{OTHER}")
    assert page.status_code == 200 and 'id="empty"' in page.text
    # an address that cannot be a revision is an HTML page, never FastAPI's raw 422
    for bad in (f"/revisions/{REPO}/revision:{SHA}", f"/jobs/revision:{SHA}"):
        answer = world.client.get(bad)
        assert answer.status_code == 404, bad
        assert answer.headers["content-type"].startswith("text/html"), bad

"""POST /api/deploy answers with the deployment that will really run the revision.

The gateway picks a fresh deployment id, but a deploy queue drops a revision it already holds:
then the answer (and `rollwright deploy`'s job link) must name the deployment already queued or
running. Runs the gateway app in the test's event loop against the real DeployWorkflow on the
time-skipping server (tests/support/deploy_world.py), with the real TemporalDispatcher.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from gateway.app import create_app
from gateway.dispatcher import TemporalDispatcher
from shared.contracts.deploy import TASK_QUEUE
from shared.settings import Settings
from shared.stores.sql.engine import Database
from tests.support.deploy_world import REPO, Harness, harness, sha

ROOT = "staging/cluster-a"
A, B, C = sha("a"), sha("b"), sha("c")
TOKEN = "api-token-for-tests"


@asynccontextmanager
async def gateway(h: Harness, tmp: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        data_dir=tmp,
        database_url=f"sqlite:///{tmp / 'gateway.db'}",
        task_queue=TASK_QUEUE,
        api_token=TOKEN,
        public_url="https://rollwright.example",
    )
    database = Database(settings.database)
    app = create_app(
        settings, dispatcher=TemporalDispatcher(h.client, TASK_QUEUE), database=database
    )
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
                yield client
    finally:
        database.close()


async def deploy(client: httpx.AsyncClient, revision: str) -> dict[str, Any]:
    body = {
        "repo": REPO.full_name,
        "root": ROOT,
        "revision": revision,
    }
    answer = await client.post(
        "/api/deploy", json=body, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert answer.status_code == 202, answer.text
    accepted: dict[str, Any] = answer.json()
    return accepted


def test_deploy_answer_names_the_deployment_that_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with harness() as h, gateway(h, tmp_path) as client:
            await h.push(ROOT, A)
            running = await h.awaiting_review(ROOT, A)
            await h.push(ROOT, B)
            state = await h.until_state(ROOT, "B queued", lambda s: len(s.queue) == 1)
            queued_b = state.queue[0].deployment_id

            # Already running: that deployment, not a new id that would never exist.
            again = await deploy(client, A)
            assert again["deployment_id"] == running
            assert again["job_url"] == f"https://rollwright.example/jobs/{running}"

            # Queued as a merge: the manual request promotes that same deployment.
            promoted = await deploy(client, B)
            assert promoted["deployment_id"] == queued_b
            state = await h.until_state(
                ROOT, "B promoted to manual", lambda s: s.queue[0].trigger == "manual"
            )
            assert [i.deployment_id for i in state.queue] == [queued_b]

            # New to the queue: the id the gateway chose is the one the queue uses.
            fresh = await deploy(client, C)
            assert uuid.UUID(fresh["deployment_id"]).version == 4
            assert fresh["deployment_id"] not in (running, queued_b)
            state = await h.until_state(ROOT, "C queued", lambda s: len(s.queue) == 2)
            ids = {i.revision: i.deployment_id for i in state.queue}
            assert ids == {B: queued_b, C: fresh["deployment_id"]}

    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_deploy_to_a_root_without_a_queue_uses_the_chosen_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with harness() as h, gateway(h, tmp_path) as client:
            accepted = await deploy(client, A)
            state = await h.until_state(ROOT, "queue started", lambda s: s.current is not None)
            assert state.current is not None
            assert state.current.deployment_id == accepted["deployment_id"]

    asyncio.run(asyncio.wait_for(scenario(), 90))

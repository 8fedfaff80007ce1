"""Recorded workflow histories (tests/histories/): written by scenario tests when asked to,
replayed by tests/workflows/test_replay.py against the workflows the worker registers.

`make histories` runs the recording scenarios with ROLLWRIGHT_RECORD_HISTORIES=1, which makes
`keep` write each history as `tests/histories/<workflow type>/<scenario>-<n>.json` (the JSON
the Temporal CLI and UI export). Recorded once per release of the workflow code: a change that
no longer replays them needs a `workflow.patched` branch (docs/workflow-versions.md), not a
new recording.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from temporalio.client import Client, WorkflowHistory

DIR = Path(__file__).resolve().parents[1] / "histories"
RECORD = "ROLLWRIGHT_RECORD_HISTORIES"


def workflow_type(history: WorkflowHistory) -> str:
    first = history.events[0]
    return first.workflow_execution_started_event_attributes.workflow_type.name


async def run_chain(client: Client, workflow_id: str, first_run_id: str) -> list[WorkflowHistory]:
    """Every run of a workflow id from `first_run_id` on, following continue-as-new."""
    histories = []
    run_id: str | None = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.HasField("workflow_execution_continued_as_new_event_attributes")
            else None
        )
    return histories


def keep(scenario: str, histories: Iterable[WorkflowHistory]) -> None:
    """Write the scenario's histories when recording (ROLLWRIGHT_RECORD_HISTORIES=1)."""
    if os.environ.get(RECORD) != "1":
        return
    counts: dict[str, int] = {}
    for history in histories:
        kind = workflow_type(history)
        counts[kind] = counts.get(kind, 0) + 1
        path = DIR / kind / f"{scenario}-{counts[kind]}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        # indent: reviewable diffs when a history is recorded again
        path.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")


def on_disk() -> list[tuple[Path, WorkflowHistory]]:
    """Every recorded history, by file, sorted."""
    return [
        (path, WorkflowHistory.from_json(f"{path.parent.name}/{path.stem}", path.read_text()))
        for path in sorted(DIR.glob("*/*.json"))
    ]


async def run_chain_to(client: Client, workflow_id: str, last_run_id: str) -> list[WorkflowHistory]:
    """Every run of a workflow id up to `last_run_id`, oldest first, followed backwards through
    each run's `continued_execution_run_id` (needs no first run id, which a handle may not
    know for certain)."""
    histories: list[WorkflowHistory] = []
    run_id = last_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.insert(0, history)
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id
    return histories

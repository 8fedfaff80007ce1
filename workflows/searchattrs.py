"""Typed search-attribute upserts for rollwright workflows (Keyword attributes only)."""

from __future__ import annotations

from collections.abc import Iterable

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from shared.contracts.deploy import SA_REPO, SA_REVISION, SA_ROOT, SA_STATE, SA_TRIGGER

_KEYS = {
    "repo": SA_REPO,
    "root": SA_ROOT,
    "revision": SA_REVISION,
    "trigger": SA_TRIGGER,
    "state": SA_STATE,
}


def keyword(name: str) -> SearchAttributeKey[str]:
    return SearchAttributeKey.for_keyword(name)


def upsert(*, keys: Iterable[str] | None = None, **values: str | None) -> None:
    """Set the given attributes (by short name: repo, root, revision, trigger, state).

    `keys` limits the upsert to attributes the caller owns. Attributes that the namespace does
    not know are a server error, so the dev stack registers them and docs/operations.md lists
    them for production.
    """
    wanted = set(keys) if keys is not None else None
    updates = []
    for short, value in values.items():
        name = _KEYS[short]
        if wanted is not None and name not in wanted:
            continue
        key = keyword(name)
        updates.append(key.value_unset() if value is None else key.value_set(value))
    if updates:
        workflow.upsert_search_attributes(updates)

"""Every typed activity reference is registered by the worker, with the same name, request and
result as the registered function says: what mypy checks in the workflows holds at run time."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from activities import build_activities
from shared.contracts import activityrefs
from shared.contracts.activityrefs import ActivityRef
from shared.settings import Settings

# Set by `temporalio.activity.defn` on the function it registers; read here for its name.
DEFINITION = "__temporal_activity_definition"


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Callable[..., Any]]]:
    # The client is only kept for later calls: building the activities needs no server.
    built = build_activities(Settings(data_dir=tmp_path_factory.mktemp("worker")), None)  # type: ignore[arg-type]
    try:
        yield {getattr(fn, DEFINITION).name: fn for fn in built.all}
    finally:
        built.close()


def signature(fn: Callable[..., Any]) -> tuple[Any, Any]:
    """(request type or None, result type) of a registered activity from its annotations."""
    hints = typing.get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    assert len(params) <= 1, f"{fn.__qualname__} takes more than one argument"
    request = hints[params[0]] if params else None
    result = hints["return"]
    return request, None if result is type(None) else result


def test_every_reference_is_registered_with_its_types(
    registered: dict[str, Callable[..., Any]],
) -> None:
    assert len(activityrefs.ALL) == len({ref.name for ref in activityrefs.ALL})
    for ref in activityrefs.ALL:
        assert ref.name in registered, f"no activity registered as {ref.name!r}"
        assert signature(registered[ref.name]) == (ref.request, ref.result), ref.name


def test_every_registered_activity_has_a_reference(
    registered: dict[str, Callable[..., Any]],
) -> None:
    assert set(registered) == {ref.name for ref in activityrefs.ALL}


def test_annotations_of_each_reference_match_its_types() -> None:
    # `ACT_X: ActivityRef[Req, Res] = ActivityRef("x", Req, Res)`: what mypy reads (the
    # annotation) and what the data converter uses (the values) must be the same types.
    hints = typing.get_type_hints(activityrefs)
    refs = {name: value for name, value in vars(activityrefs).items() if name.startswith("ACT_")}
    assert len(refs) == len(activityrefs.ALL)
    for name, ref in refs.items():
        request, result = typing.get_args(hints[name])
        assert (request, result) == (_none(ref.request), _none(ref.result)), name


def test_a_mismatch_is_caught(registered: dict[str, Callable[..., Any]]) -> None:
    wrong = ActivityRef(
        "check_run", activityrefs.ACT_PUBLISH.request, activityrefs.ACT_CHECK_RUN.result
    )
    assert signature(registered[wrong.name]) != (wrong.request, wrong.result)


def _none(value: Any) -> Any:
    return type(None) if value is None else value

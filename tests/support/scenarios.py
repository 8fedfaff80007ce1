"""Async test scenarios as plain tests: `@scenario` runs the coroutine to its end under a
deadline (a workflow that never gets there fails the test instead of hanging it)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any


def scenario(
    seconds: float = 120,
) -> Callable[[Callable[..., Coroutine[Any, Any, None]]], Callable[..., None]]:
    def decorate(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
        @functools.wraps(fn)
        def test(*args: Any, **kwargs: Any) -> None:
            asyncio.run(asyncio.wait_for(fn(*args, **kwargs), seconds))

        return test

    return decorate

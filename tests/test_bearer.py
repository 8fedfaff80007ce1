"""The one rule both `/metrics` endpoints apply to their bearer token (shared.bearer); each
endpoint's own test checks it is applied (tests/gateway/test_signatures.py,
tests/activities/test_metrics.py)."""

from __future__ import annotations

import pytest

from shared import bearer


@pytest.mark.parametrize(
    "header",
    ["Bearer s3cret", "bearer s3cret", "BEARER s3cret", "Bearer  s3cret ", " Bearer s3cret"],
)
def test_the_token_after_the_bearer_scheme_is_accepted(header: str) -> None:
    assert bearer.accepts(header, "s3cret")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "s3cret",
        "Basic s3cret",
        "Bearer",
        "Bearer ",
        "Bearer s3cre",
        "Bearer s3cretx",
        "Bearers3cret",
        "Token s3cret",
    ],
)
def test_anything_else_is_refused(header: str | None) -> None:
    assert not bearer.accepts(header, "s3cret")

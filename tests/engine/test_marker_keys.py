"""The secret markers' keys cannot be half-used: an empty key is refused where markers are
keyed (its markers would look keyed while anyone could compute them), a marker made with
part of a key is not the key's marker, and a blank configured key gives no key at all."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.engine.secrets.redact import KEYED_HASH_PREFIX, keyed_markers, secret_hash
from shared.settings import Settings

# HMAC pads a short key with zero bytes, so a key ending in zeros equals its prefix without
# them: that is HMAC, not the code under test, and no derived key is compared that way.
keys = st.binary(min_size=1, max_size=96).filter(lambda key: key[-1] != 0)


def test_an_empty_marker_key_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"), keyed_markers(b""):
        pass
    with keyed_markers(None):  # None is the unkeyed marker of local renders, not a key
        assert secret_hash("hunter2").startswith("REDACTED:sha256:")


@given(key=keys, value=st.text(max_size=64))
def test_a_marker_made_with_part_of_the_key_is_another_marker(key: bytes, value: str) -> None:
    with keyed_markers(key):
        marker = secret_hash(value)
    expected = hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:12]
    assert marker == KEYED_HASH_PREFIX + expected
    for end in range(1, len(key)):
        with keyed_markers(key[:end]):
            assert secret_hash(value) != marker, end
    with pytest.raises(ValueError), keyed_markers(key[:0]):
        pass


@given(repo=st.from_regex(r"[a-z0-9-]{1,20}/[a-z0-9._-]{1,30}", fullmatch=True))
def test_a_blank_redaction_key_is_no_key(
    tmp_path_factory: pytest.TempPathFactory, repo: str
) -> None:
    where = Path(tmp_path_factory.getbasetemp())
    for blank in ("", "   ", "\n"):
        assert Settings(data_dir=where, redaction_key=blank).marker_key(repo) is None
    key = Settings(data_dir=where, redaction_key="r1").marker_key(repo)
    assert key is not None and len(key) == 32

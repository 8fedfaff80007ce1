"""`X-Hub-Signature-256` cannot be half-matched: the verifier compares the whole value, so a
truncated digest, an empty one, or one made with an empty key never verifies. (The gateway's
`/events` refusing the same values is in tests/gateway/test_signatures.py.)"""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import given
from hypothesis import strategies as st

from shared.github.app import verify_webhook_signature, webhook_signature

secrets = st.binary(min_size=1, max_size=64) | st.text(min_size=1, max_size=64)
bodies = st.binary(max_size=2048)


def githubs(secret: str | bytes, body: bytes) -> str:
    """The signature as GitHub computes it, independently of the code under test."""
    key = secret.encode() if isinstance(secret, str) else secret
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


@given(secret=secrets, body=bodies)
def test_no_proper_prefix_of_a_valid_signature_verifies(secret: str | bytes, body: bytes) -> None:
    signature = githubs(secret, body)
    assert webhook_signature(secret, body) == signature
    assert verify_webhook_signature(secret, body, signature)
    for end in range(len(signature)):  # "", "s", …, "sha256=", "sha256=a", … one short
        assert not verify_webhook_signature(secret, body, signature[:end]), end


@given(secret=secrets, body=bodies)
def test_an_empty_digest_never_verifies(secret: str | bytes, body: bytes) -> None:
    for header in ("sha256=", "sha256", "sha1=", " ", None):
        assert not verify_webhook_signature(secret, body, header)


@given(body=bodies)
def test_an_empty_key_is_refused_by_the_verifier(body: bytes) -> None:
    # anyone can make this signature: it proves nothing, so it never verifies
    for empty in ("", b""):
        assert not verify_webhook_signature(empty, body, githubs(empty, body))

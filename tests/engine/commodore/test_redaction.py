"""What the commodore layout shows of Secrets: a Secret holding only compiled Vault references
is shown (and publishable) as it is; one literal value hashes the file, as in every layout."""

from __future__ import annotations

from shared.engine.commodore.refs import references_only
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore_tenant import Tenant

SECRET = """\
apiVersion: v1
kind: Secret
metadata:
  name: demo
stringData:
  password: {value}
type: Opaque
"""


def test_references_are_shown_in_the_redacted_render(tenant: Tenant) -> None:
    render = Fleet.open(WorkTree(tenant.checkout)).render("c-one")
    shown = render.files["manifests/demo/10_secret.yaml"]
    assert b"password: ?{vaultkv:t-acme/c-one/demo/password:" in shown
    assert shown == render.reveal()["manifests/demo/10_secret.yaml"]


def test_a_literal_value_is_no_reference() -> None:
    assert references_only(
        SECRET.format(value="?{vaultkv:t-acme/c-one/demo/password:2d615000}").encode()
    )
    for literal in (
        "hunter2",
        "prefix-?{vaultkv:a/b:12345678}",
        "'?{vaultkv:a/b:1} ?{vaultkv:c/d:2}'",
    ):
        assert not references_only(SECRET.format(value=literal).encode()), literal
    assert not references_only(b"apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n")
    assert not references_only(b"{not yaml")
    both = SECRET.format(value="?{vaultkv:a/b:12345678}") + "---\n" + SECRET.format(value="x")
    assert not references_only(both.encode())


def test_a_secret_spelled_otherwise_is_still_read() -> None:
    """Files without the bytes `Secret` are passed over unparsed; a kind spelled with an
    escape, or a file in UTF-16, is still read as the Secret it is."""
    reference = "?{vaultkv:t-acme/c-one/demo/password:2d615000}"
    escaped = SECRET.format(value=reference).replace("kind: Secret", 'kind: "Secr\\x65t"')
    assert b"Secret" not in escaped.encode()
    assert references_only(escaped.encode())
    utf16 = SECRET.format(value=reference).encode("utf-16")
    assert b"Secret" not in utf16
    assert references_only(utf16)
    assert not references_only(SECRET.format(value="hunter2").encode("utf-16"))

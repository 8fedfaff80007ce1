"""Structure-preserving redaction: the ATLAS table, Secret hashing, secrets in rendered output."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.engine import yamldoc
from shared.engine.secrets.redact import (
    REDACTED,
    Redactor,
    is_weak,
    keyed_markers,
    leaf_digests,
    redact_number,
    redact_render_files,
    redact_secret_object,
    redact_tree,
    redact_value,
)
from shared.settings import Settings

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAq1w2Lk9x+PzJ0fQe/Xb8h3nY4vG2mT5sR6dU9wK0cZ1aB2eF\n"
    "3gH4iJ5kL6mN7oP8qR9s==\n"
    "-----END RSA PRIVATE KEY-----\n"
)
PEM_REDACTED = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "REDACTED+REDACTE/REDACTED\n"
    "REDACTED==\n"
    "-----END RSA PRIVATE KEY-----\n"
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # strings: runs of letters/digits → prefix of REDACTED, everything else kept
        ("mycompany.com", "REDACTED.RED"),
        ("s3cret!", "REDACT!"),
        ("db", "RE"),
        ("a", "R"),
        ("", ""),
        (
            "postgres://admin:hunter2@db.internal:5432/app",
            "REDACTED://REDAC:REDACTE@RE.REDACTED:REDA/RED",
        ),
        ("my_secret-key", "RE_REDACT-RED"),
        ("averyveryverylongpassword", "REDACTED"),
        ("  spaced out  ", "  REDACT RED  "),
        ("12345", "REDAC"),  # a string of digits is a string
        ("line one\nline two\n", "REDA RED\nREDA RED\n"),
        (PEM, PEM_REDACTED),
        (
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "-----BEGIN CERTIFICATE-----\nREDA\n-----END CERTIFICATE-----",
        ),
        # better than ATLAS: non-ASCII letters and digits are redacted too
        ("pässwörd", "REDACTED"),
        ("пароль", "REDACT"),
        ("密码123", "REDAC"),
        ("café-au-lait ✓", "REDA-RE-REDA ✓"),
        ("٣٤٥", "RED"),  # Arabic-Indic digits
        # numbers: fewer than 5 digits kept, 5+ digits cycled 1234567890, sign and point kept
        (0, 0),
        (7, 7),
        (5432, 5432),
        (-1234, -1234),
        (99999, 12345),
        (999999, 123456),
        (-987654, -123456),
        (-12345, -12345),
        (12345678901234, 12345678901234),
        (98765432109876, 12345678901234),
        (3.14, 3.14),
        (3.14159, 1.23456),
        (-2.71828, -1.23456),
        (100000.5, 123456.7),
        (0.5, 0.5),
        # booleans and null kept
        (True, True),
        (False, False),
        (None, None),
    ],
)
def test_redaction_table(value: Any, expected: Any) -> None:
    got = redact_value(value)
    assert got == expected
    assert type(got) is type(expected)


def test_number_rule_keeps_type_and_magnitude_notation() -> None:
    assert redact_number(1.5e20) == 1.5e20  # mantissa "1.5": 2 digits, kept
    assert redact_number(9.87654e-20) == 1.23456e-20  # exponent kept: no overflow to inf
    assert redact_number(float("inf")) == float("inf")
    assert isinstance(redact_number(123456), int)
    assert isinstance(redact_number(123456.0), float)


def test_redact_value_keeps_structure() -> None:
    tree = {"a": [1, "xy", {"b": 123456, "c": None}], "d": {}, "e": [], "f": True}
    assert redact_value(tree) == {
        "a": [1, "RE", {"b": 123456, "c": None}],
        "d": {},
        "e": [],
        "f": True,
    }
    assert list(redact_value(tree)) == ["a", "d", "e", "f"]


def test_redact_tree_by_origin_paths() -> None:
    values: dict[str, Any] = {
        "db": {"host": "db.internal", "password": "true", "port": 5432},
        "replicas": 3,
        "tls": {"key": "abcdef", "chain": ["certone", "certtwo"]},
        "enabled": "true",
    }
    secret_paths = {("db", "password"), ("tls",), ("missing", "path")}
    got = redact_tree(values, secret_paths)
    assert got == {
        "db": {"host": "db.internal", "password": "REDA", "port": 5432},
        "replicas": 3,
        "tls": {"key": "REDACT", "chain": ["REDACTE", "REDACTE"]},
        "enabled": "true",  # same word, not secret: kept
    }
    assert values["db"]["password"] == "true"  # input untouched
    assert redact_tree(values, {("tls", "chain", 1)})["tls"]["chain"] == ["certone", "REDACTE"]
    assert redact_tree(values) == redact_value(values)
    unchanged = redact_tree(values, set())
    assert unchanged == values and unchanged is not values


def test_secret_data_is_hashed_as_rendered() -> None:
    encoded = base64.b64encode(b"hunter2-password").decode()
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db"},
        "type": "Opaque",
        "data": {"password": encoded, "empty": ""},
        "stringData": {"token": "tok-abc", "port": 5432},
    }
    got = redact_secret_object(doc)

    def h(text: str) -> str:
        return "REDACTED:sha256:" + hashlib.sha256(text.encode()).hexdigest()[:12]

    assert got["data"] == {"password": h(encoded), "empty": h("")}
    assert got["stringData"] == {"token": h("tok-abc"), "port": h("5432")}
    assert got["metadata"] == {"name": "db"} and got["type"] == "Opaque"
    assert doc["data"]["password"] == encoded  # input untouched

    rotated = dict(doc, data={"password": base64.b64encode(b"hunter3-password").decode()})
    assert redact_secret_object(rotated)["data"]["password"] != got["data"]["password"]
    assert redact_secret_object(doc) == got  # deterministic

    for other in (dict(doc, kind="ConfigMap"), dict(doc, apiVersion="v2")):
        assert redact_secret_object(other)["data"] == doc["data"]


def test_keyed_markers_cannot_be_confirmed_without_the_key() -> None:
    """The service keys its markers: the same value gives the same marker under one key (a
    rotation still shows), another under another key, and never the plain SHA-256 a guess
    could be checked against."""
    doc = {"apiVersion": "v1", "kind": "Secret", "stringData": {"password": "hunter2"}}
    unkeyed = redact_secret_object(doc)["stringData"]["password"]
    assert unkeyed == "REDACTED:sha256:" + hashlib.sha256(b"hunter2").hexdigest()[:12]
    with keyed_markers(b"a" * 32):
        first = redact_secret_object(doc)["stringData"]["password"]
        again = redact_secret_object(doc)["stringData"]["password"]
        rotated = redact_secret_object({**doc, "stringData": {"password": "hunter3"}})[
            "stringData"
        ]["password"]
    with keyed_markers(b"b" * 32):
        other_key = redact_secret_object(doc)["stringData"]["password"]
    expected = hmac.new(b"a" * 32, b"hunter2", hashlib.sha256).hexdigest()[:12]
    assert first == again == "REDACTED:hmac:" + expected
    assert rotated != first and other_key != first
    assert hashlib.sha256(b"hunter2").hexdigest()[:12] not in first
    # outside the context the markers are unkeyed again
    assert redact_secret_object(doc)["stringData"]["password"] == unkeyed


def test_each_repository_gets_its_own_marker_key(tmp_path: Path) -> None:
    from_app = Settings(data_dir=tmp_path, github_private_key="-----BEGIN KEY-----\nabc\n")
    a, b = from_app.marker_key("acme/fleet"), from_app.marker_key("acme/other")
    assert a is not None and b is not None and a != b
    assert from_app.marker_key("acme/fleet") == a
    configured = Settings(
        data_dir=tmp_path, github_private_key="-----BEGIN KEY-----\nabc\n", redaction_key="r1"
    )
    assert configured.marker_key("acme/fleet") not in (None, a)
    rotated = Settings(data_dir=tmp_path, redaction_key="r2")
    assert rotated.marker_key("acme/fleet") != configured.marker_key("acme/fleet")
    assert Settings(data_dir=tmp_path).marker_key("acme/fleet") is None


def _deployment(env_value: str, annotation: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {"checksum/config": annotation}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "env": [
                                {"name": "DB_PASSWORD", "value": env_value},
                                {"name": "MODE", "value": "default"},
                            ],
                            "ports": [{"containerPort": 8080}],
                        }
                    ]
                }
            }
        },
    }


def test_redactor_replaces_secrets_wherever_they_land() -> None:
    secrets = {
        "db": {"password": "hunter2-pa55", "port": 987654},
        "tls": {"key": PEM},
        "api": 'tok"en\\with-quotes',
    }
    redactor = Redactor.from_tree(secrets)
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"app": "web"}},
        "data": {
            "DATABASE_URL": "postgres://app:hunter2-pa55@db:5432/app",
            "config.json": json.dumps({"token": 'tok"en\\with-quotes', "port": 987654}),
            "tls.key": "    " + PEM.replace("\n", "\n    "),  # re-indented by nindent
            "b64": base64.b64encode(b"hunter2-pa55").decode(),
            "port": "987654",
            "plain": "nothing secret here",
        },
    }
    got = redactor.redact_document(configmap)
    assert got["data"]["DATABASE_URL"] == "postgres://app:REDACTE-REDA@db:5432/app"
    assert got["data"]["port"] == "REDACT"
    assert got["data"]["plain"] == "nothing secret here"
    assert got["metadata"] == configmap["metadata"]
    text = yamldoc.dumps(got)
    for leak in (
        "hunter2",
        "MIIEowIBAAKCAQEAq1w2Lk9x",
        "3gH4iJ5kL6mN7oP8qR9s",
        "with-quotes",
        "987654",
    ):
        assert leak not in text, leak
    assert base64.b64encode(b"hunter2-pa55").decode() not in text

    deployment = _deployment("hunter2-pa55", "sha=hunter2-pa55;port=987654")
    got = redactor.redact_document(deployment)
    container = got["spec"]["template"]["spec"]["containers"][0]
    assert container["env"][0] == {"name": "DB_PASSWORD", "value": "REDACTE-REDA"}
    assert container["env"][1] == {"name": "MODE", "value": "default"}
    assert got["metadata"]["annotations"]["checksum/config"] == "sha=REDACTE-REDA;port=REDACT"

    # a secret number rendered as a number is redacted with the number rule
    assert redactor.redact_document({"port": 987654, "other": 987655}) == {
        "port": 123456,
        "other": 987655,
    }


def test_redacted_span_cannot_spell_another_secret() -> None:
    # "zzzz" redacts to "REDA"; followed by "q!" that spells the other secret "DAq!".
    redactor = Redactor(["zzzz", "DAq!"])
    got = redactor.redact_text("id=zzzzq! end")
    assert "DAq!" not in got and "zzzz" not in got
    assert got == "id=RERED! end"


def test_many_secrets_over_a_large_render_stay_fast() -> None:
    secrets = [f"secret-{i:04d}-{'x' * (i % 17)}" for i in range(500)]
    redactor = Redactor(secrets)
    text = ("ordinary manifest text with names, labels and numbers 12345 " * 40 + "\n") * 800
    text += secrets[250]
    start = time.perf_counter()
    got = redactor.redact_text(text)
    elapsed = time.perf_counter() - start
    assert secrets[250] not in got and got.startswith("ordinary manifest")
    assert elapsed < 5, f"{len(text)} characters against 500 secrets took {elapsed:.2f}s"


def test_redactor_hashes_secret_objects_even_inside_lists() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "stringData": {"k": "anything"}}
    got = Redactor([]).redact_document({"apiVersion": "v1", "kind": "List", "items": [secret]})
    assert got["items"][0]["stringData"]["k"].startswith("REDACTED:sha256:")


@pytest.mark.parametrize(
    "weak",
    [
        "true",
        "false",
        "True",
        "yes",
        "no",
        "null",
        "default",
        "on",
        "abc",
        "ab",
        "x",
        "1234",
        "8080",
        "12.5",
        "  ab  ",
        "----",
        "....",
    ],
)
def test_weak_secret_does_not_redact_unrelated_text(weak: str) -> None:
    assert is_weak(weak)
    redactor = Redactor([weak, "a-strong-one-42"])
    doc = {
        "metadata": {"labels": {"flag": weak, "mode": f"x-{weak}-y"}},
        "data": {"enabled": "true", "profile": "default", "ports": "8080 1234", "n": "abc abd"},
        "spec": {"replicas": 1234, "debug": True},
    }
    assert redactor.redact_document(doc) == doc
    # ...but where the engine knows a leaf came from the secret, it is redacted all the same
    got = redactor.redact_document(doc, secret_paths={("metadata", "labels", "flag")})
    assert got["metadata"]["labels"]["flag"] == redact_value(weak)
    assert got["metadata"]["labels"]["mode"] == f"x-{weak}-y"


def test_strength_boundaries() -> None:
    assert not is_weak("abcd")
    assert not is_weak("12345")
    assert not is_weak("admin")  # over-redacting a username is the safe side
    assert is_weak("Default")
    assert Redactor(["true", "abc", 1234, True, None]).terms == frozenset()
    assert not Redactor(["true"])
    assert Redactor(["abcd"])


def test_redact_render_files() -> None:
    secret_doc = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db"},
        "data": {"password": base64.b64encode(b"hunter2-pa55").decode()},
    }
    untouched = yamldoc.dumps({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}})
    files = {
        "r/web/ns/Secret_db.yaml": yamldoc.dumps(secret_doc).encode(),
        "r/web/ns/ConfigMap_cfg.yaml": yamldoc.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "data": {"url": "x://u:hunter2-pa55@h"}}
        ).encode(),
        "r/web/ns/ConfigMap_same.yaml": untouched.encode(),
        "r/web/ns/ConfigMap_commented.yaml": ("# pw hunter2-pa55\n" + untouched).encode(),
        "r/NOTES.txt": b"log in with hunter2-pa55\n",
        "r/blob.bin": b"\xff\xfe hunter2-pa55 \x00",
        "r/multi.yaml": b"a: hunter2-pa55\n---\nb: ok\n",
    }
    got = redact_render_files(files, Redactor(["hunter2-pa55"]))
    assert set(got) == set(files)
    for path, data in got.items():
        assert b"hunter2" not in data, path
    secret = yaml.safe_load(got["r/web/ns/Secret_db.yaml"])
    assert secret["data"]["password"].startswith("REDACTED:sha256:")
    assert (
        yaml.safe_load(got["r/web/ns/ConfigMap_cfg.yaml"])["data"]["url"] == "x://u:REDACTE-REDA@h"
    )
    assert got["r/web/ns/ConfigMap_same.yaml"] == untouched.encode()  # byte for byte
    assert got["r/NOTES.txt"] == b"log in with REDACTE-REDA\n"
    assert list(yaml.safe_load_all(got["r/multi.yaml"])) == [{"a": "REDACTE-REDA"}, {"b": "ok"}]
    # Secret values are hashed even when the redactor knows no secret at all
    plain = redact_render_files(files, Redactor([]))
    assert yaml.safe_load(plain["r/web/ns/Secret_db.yaml"]) == secret


def test_leaf_digests() -> None:
    tree = {"db": {"password": "p1-secret", "port": 5432}, "a/b": {"c~d": [1, {}]}, "e": None}
    digests = leaf_digests(tree)
    assert set(digests) == {"/db/password", "/db/port", "/a~1b/c~0d/0", "/a~1b/c~0d/1", "/e"}
    assert digests["/db/port"] == hashlib.sha256(b"5432").hexdigest()
    assert digests["/db/password"] == hashlib.sha256(b'"p1-secret"').hexdigest()
    rotated = leaf_digests({**tree, "db": {"password": "p2-secret", "port": 5432}})
    assert {p for p in digests if digests[p] != rotated[p]} == {"/db/password"}
    assert "p1-secret" not in json.dumps(digests)
    assert leaf_digests("scalar") == {"": hashlib.sha256(b'"scalar"').hexdigest()}
    assert leaf_digests({"x": 1}) != leaf_digests({"x": "1"})  # type changes count


# --- properties --------------------------------------------------------------------------------

# A credential has at least one letter or digit that redaction never writes (the letters of
# "REDACTED" are what it writes; punctuation it keeps). Secrets made only of those characters —
# "----", "CEDAR", "TRADE" — cannot be hidden by any shape-keeping rule and are excluded here.
_FOREIGN = st.characters(categories=("Lu", "Ll", "Lo", "Nd"), exclude_characters=REDACTED)
_SECRET_TEXT = st.tuples(st.text(max_size=12), _FOREIGN, st.text(max_size=12)).map("".join)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**15), max_value=10**15),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    _SECRET_TEXT,
)
_TREES = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=25,
)


def _same_shape(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same_shape(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_shape(x, y)


def _strings(node: Any) -> list[str]:
    """Every string value and key in `node`."""
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in [*_strings(k), *_strings(v)]]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


def _has_foreign(text: str) -> bool:
    return any(c.isalnum() and c not in REDACTED for c in text)


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(_TREES)
def test_property_redact_tree_keeps_shape_and_hides_secrets(tree: Any) -> None:
    out = redact_tree(tree)
    _same_shape(out, tree)
    values = [v for _, v in yamldoc.walk_leaves(out) if isinstance(v, str)]
    for _, secret in yamldoc.walk_leaves(tree):
        if isinstance(secret, str) and len(secret) >= 4 and _has_foreign(secret):
            assert not any(secret in v for v in values), secret


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    secrets=st.lists(_SECRET_TEXT.filter(lambda s: not is_weak(s)), min_size=1, max_size=5),
    context=st.lists(st.text(max_size=10), min_size=6, max_size=6),
    data=st.data(),
)
def test_property_redactor_hides_every_embedded_secret(
    secrets: list[str], context: list[str], data: st.DataObject
) -> None:
    pick = data.draw(st.permutations(secrets))
    first, last = pick[0], pick[-1]
    doc = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "cfg",
            "annotations": {"config": json.dumps({"s": first, "n": context[0]})},
        },
        "data": {
            "joined": context[1] + context[2].join(pick) + context[3],
            "url": f"scheme://{context[4]}:{last}@host/{context[5]}",
            "lines": "\n".join("  " + s for s in pick),
        },
        "spec": {"env": [{"name": "S", "value": s} for s in pick]},
    }
    out = Redactor(secrets).redact_document(doc)
    _same_shape(out["spec"], doc["spec"])
    assert list(out["data"]) == list(doc["data"])
    emitted = _strings(out)
    for secret in secrets:
        assert not any(secret in s for s in emitted), secret
    # origin-based redaction of a values tree holding the same secrets agrees
    tree = {"secrets": list(secrets), "context": context}
    redacted = redact_tree(tree, {("secrets",)})
    _same_shape(redacted, tree)
    assert redacted["context"] == context
    for secret in secrets:
        assert not any(secret in s for s in _strings(redacted["secrets"]))

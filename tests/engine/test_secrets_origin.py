"""Origin tracking (shared.engine.secrets.origin) and the Render's two trees, without sops:
perturbation, derived-string redaction, value paths, release files, and property tests."""

from __future__ import annotations

import base64
import hashlib
import logging
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.engine import yamldoc
from shared.engine.render import Render
from shared.engine.secrets.origin import (
    changed_paths,
    hash_secret_objects,
    origin_paths,
    perturb,
    perturb_string,
    redact_derived,
    redact_release_files,
    redact_values,
)
from shared.engine.secrets.redact import Redactor, redact_string, secret_hash

# --- perturbation ----------------------------------------------------------------------------


def test_perturb_keeps_shape_and_changes_every_letter_and_digit() -> None:
    value = {
        "s": "Ab9-x_y.Z",
        "n": [12345, -987654, 1234, 7, 3.14159, 2.5, True, False, None],
        "pem": "-----BEGIN KEY-----\nQUJD\n-----END KEY-----\n",
        "u": "pässwörd密码٣",
    }
    got = perturb(value)
    assert got["s"] == "No1-k_l.M"
    assert got["n"] == [23456, -198765, 1234, 7, 4.25261, 2.5, True, False, None]
    assert got["pem"] == "-----ORTVA XRL-----\nDHWQ\n-----RAQ XRL-----\n"
    assert len(got["u"]) == len(value["u"])
    for a, b in zip(value["u"], got["u"], strict=True):
        assert a != b and b.isalnum() and (a.isdigit(), a.isupper()) == (b.isdigit(), b.isupper())


@given(st.text())
def test_property_perturb_string(text: str) -> None:
    out = perturb_string(text)
    assert len(out) == len(text)
    for a, b in zip(text, out, strict=True):
        if a.isalnum():
            assert b != a and b.isalnum()
            assert a.isdigit() == b.isdigit()
        else:
            assert b == a


@given(st.integers().filter(lambda n: abs(n) >= 10_000))
def test_property_perturb_long_numbers(number: int) -> None:
    out = perturb(number)
    assert isinstance(out, int) and out != number
    assert len(str(abs(out))) == len(str(abs(number))) and (out < 0) == (number < 0)


# --- derived strings -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "secret", "expected"),
    [
        ("postgres://app:{}@db:5432/db", "hunter2-pa55", "postgres://app:REDACTE-REDA@db:5432/db"),
        # a weak secret: only where it was put, not the same word elsewhere
        ("postgres://app:{}@db/db", "db", "postgres://app:RE@db/db"),
        ("mode={} (the default)", "default", "mode=REDACTE (the default)"),
        ("x{}y", "s3cret", "xREDACTy"),
        ("line one\n  {}\nline three", "key-material", "line one\n  RED-REDACTED\nline three"),
    ],
)
def test_redact_derived_verbatim(template: str, secret: str, expected: str) -> None:
    real = template.format(secret)
    fake = template.format(perturb_string(secret))
    assert redact_derived(real, fake) == expected


def test_redact_derived_transformed_values_go_whole() -> None:
    secret = "hunter2-pa55"
    fake = perturb_string(secret)

    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    def sha(s: str) -> str:
        return hashlib.sha256(s.encode()).hexdigest()

    got = redact_derived(f"token: {b64(secret)} end", f"token: {b64(fake)} end")
    assert got.startswith("token: ") and got.endswith(" end")
    assert b64(secret) not in got and set(got[7:-4]) <= set("REDACT+/=")
    assert redact_derived(f"checksum/{sha(secret)}", f"checksum/{sha(fake)}") == "checksum/REDACTED"
    # different lengths (a transformation that changes length): line by line, else whole
    assert redact_derived("a\nb-XYZ\nc", "a\nb-QQQQ\nc") == "a\nR-RED\nc"
    assert redact_derived("one two", "one three") == "RED RED"


@settings(max_examples=300)
@given(prefix=st.text(), secret=st.text(min_size=1), suffix=st.text())
def test_property_verbatim_secret_is_redacted_exactly(
    prefix: str, secret: str, suffix: str
) -> None:
    """A secret copied anywhere into a string is redacted by the string rule, and nothing
    around it changes."""
    real = prefix + secret + suffix
    fake = prefix + perturb_string(secret) + suffix
    assert redact_derived(real, fake) == prefix + redact_string(secret) + suffix


# --- values ----------------------------------------------------------------------------------


def test_origin_paths_follow_the_merge() -> None:
    layers = [
        ({"a": {"x": "1", "y": "2"}, "l": ["s1", "s2"], "m": {"k": "v"}}, True),
        ({"a": {"y": "plain"}, "m": "replaced"}, False),
        ({"l": ["t"], "n": {"deep": {"er": 5}}}, True),
    ]
    assert origin_paths(layers) == {("a", "x"), ("l", 0), ("n", "deep", "er")}


def test_changed_paths_and_redact_values() -> None:
    real = {
        "pw": "s3cret-value",
        "dsn": "host=db password=s3cret-value",
        "plain": "same",
        "port": 5432,
        "big": 123456,
        "extra": {"only": "real"},
        "list": ["a", "b"],
    }
    fake = perturb(real)
    fake.update({"dsn": "host=db password=" + perturb_string("s3cret-value"), "plain": "same"})
    fake["port"] = 5432
    fake["extra"] = {}
    fake["list"] = ["a"]
    assert set(changed_paths(real, fake)) == {
        ("pw",),
        ("dsn",),
        ("big",),
        ("extra", "only"),
        ("list",),
    }
    shown = redact_values(real, fake, {("pw",)}, Redactor([]))
    assert shown == {
        "pw": "REDACT-REDAC",
        "dsn": "host=db password=REDACT-REDAC",
        "plain": "same",
        "port": 5432,
        "big": 123456,  # cycled 1..6: the number rule
        "extra": {"only": "REDA"},
        "list": ["R", "R"],
    }


# --- release files ---------------------------------------------------------------------------


def cm(data: dict[str, Any], kind: str = "ConfigMap") -> bytes:
    doc = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}, "data": data}
    return yamldoc.dumps(doc).encode()


def test_release_files_by_origin_with_keys_and_secret_objects() -> None:
    secret = "k3y-from-secret"
    fake_secret = perturb_string(secret)
    real = {
        "cm.yaml": cm({secret: "value", "plain": "text", "url": f"u:{secret}@h"}),
        "s.yaml": cm({"pw": base64.b64encode(b"plain").decode()}, kind="Secret"),
        "notes.txt": f"password is {secret}\n".encode(),
        "same.yaml": cm({"a": "b"}),
    }
    fake = {
        "cm.yaml": cm({fake_secret: "value", "plain": "text", "url": f"u:{fake_secret}@h"}),
        "s.yaml": real["s.yaml"],
        "notes.txt": f"password is {fake_secret}\n".encode(),
        "same.yaml": real["same.yaml"],
    }
    out = redact_release_files(real, fake, Redactor([secret]), label="r")
    assert yaml.safe_load(out["cm.yaml"])["data"] == {
        "RED-REDA-REDACT": "value",
        "plain": "text",
        "url": "u:RED-REDA-REDACT@h",
    }
    assert yaml.safe_load(out["s.yaml"])["data"] == {"pw": secret_hash("cGxhaW4=")}
    assert out["notes.txt"] == b"password is RED-REDA-REDACT\n"
    assert out["same.yaml"] == real["same.yaml"]  # untouched files keep their bytes


def test_release_files_fall_back_to_values_when_shapes_differ(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "long-secret-value"
    real = {"a.yaml": cm({"k": secret, "weak": "db"}), f"{secret}.yaml": cm({})}
    fake = {"a.yaml": cm({"k": perturb_string(secret)}), "b.yaml": cm({})}
    with caplog.at_level(logging.DEBUG, logger="shared.engine.secrets.origin"):
        out = redact_release_files(real, fake, Redactor([secret, "db"]), label="dep/rel")
    assert "release dep/rel: the perturbed render has other files" in caplog.text
    assert sorted(out) == ["REDA-REDACT-REDAC.yaml", "a.yaml"]  # names redacted too
    assert yaml.safe_load(out["a.yaml"])["data"] == {"k": "REDA-REDACT-REDAC", "weak": "db"}
    with caplog.at_level(logging.DEBUG, logger="shared.engine.secrets.origin"):
        same_names = {"a.yaml": real["a.yaml"]}
        out = redact_release_files(
            same_names, {"a.yaml": cm({"k": [1]})}, Redactor([secret]), label="x"
        )
    assert "differs in structure" in caplog.text
    assert secret not in caplog.text
    assert secret.encode() not in b"".join(out.values())
    assert (
        redact_release_files(real, None, Redactor([secret]), label="y")["a.yaml"] == out["a.yaml"]
    )


def test_secret_objects_are_hashed_in_releases_without_secrets() -> None:
    files = {"s.yaml": cm({"token": "dG9rZW4="}, kind="Secret"), "c.yaml": cm({"a": "b"})}
    out = hash_secret_objects(files)
    assert yaml.safe_load(out["s.yaml"])["data"] == {"token": secret_hash("dG9rZW4=")}
    assert out["c.yaml"] == files["c.yaml"]


# --- Render ----------------------------------------------------------------------------------


def test_render_two_trees() -> None:
    plain = {"b.yaml": cm({"pw": "hunter22"}), "a.txt": b"hunter22\n"}
    shown = {"b.yaml": cm({"pw": "REDACTED"}), "a.txt": b"REDACTED\n"}
    render = Render.of("root", plain, shown)
    assert list(render.files) == ["a.txt", "b.yaml"] and render.files == shown
    assert render.reveal() == plain and render.redacted
    assert render.file_digests["a.txt"] == "sha256:" + hashlib.sha256(b"hunter22\n").hexdigest()
    digest = hashlib.sha256(b'"hunter22"')  # the canonical JSON of the leaf
    assert render.leaf_digests() == {
        "a.txt": {"": hashlib.sha256(b"hunter22\n").hexdigest()},
        "b.yaml": {"/0/data/pw": digest.hexdigest()},
    }
    assert "hunter22" not in repr(render)
    same = Render.of("root", dict(plain), dict(shown))
    assert same == render
    rotated = Render.of("root", {**plain, "a.txt": b"hunter23\n"}, shown)
    assert rotated != render and rotated.files == render.files  # the digest tells them apart
    unsecret = Render.of("root", {"c.yaml": cm({})})
    assert unsecret.files == unsecret.reveal() and not unsecret.redacted

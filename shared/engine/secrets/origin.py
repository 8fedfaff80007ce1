"""Origin tracking for secrets: which values and which rendered bytes come from a secret.

Two sources of truth, combined:

- **Layers.** A value leaf is secret when the last layer that set it was decrypted from a
  SOPS file (`origin_paths`). A secret overridden by a plain value is not secret.
- **Taint.** Values built *from* a secret (a gotmpl that embeds it, a chart that copies it
  into a ConfigMap, `b64enc` in an annotation) have no secret layer of their own. They are
  found by differential rendering: the values are computed and the release is rendered a
  second time with every decrypted leaf replaced by `perturb(leaf)` — a different value of
  the same length and character classes. Whatever differs between the two runs depends on a
  secret (`changed_paths` for values, `redact_release_files` for rendered files).

`perturb` changes every letter and digit of a string (so every character of a secret that
lands in output verbatim differs), keeps punctuation and whitespace (so URLs, PEM blocks and
YAML stay well-formed), changes numbers with 5 or more digits and leaves booleans and shorter
numbers alone: redaction keeps those anyway, and flipping them would change control flow.

The second run's values and output never leave this module's callers: its errors are
swallowed, and `perturb` is an easily reversed mapping, so its output is as sensitive as the
plaintext.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml

from shared.engine import yamldoc
from shared.engine.secrets.redact import (
    Path,
    Redactor,
    is_secret_object,
    redact_number,
    redact_render_files,
    redact_string,
    redact_value,
    secret_hash,
    unique_key,
)

log = logging.getLogger(__name__)

_NUMBER_MIN_DIGITS = 5

# --- perturbation ----------------------------------------------------------------------------

# Digits never map to 0, so a perturbed number keeps its leading digit non-zero.
_DIGITS = {str(d): str(d % 9 + 1) for d in range(10)}
_ASCII: dict[int, str] = {}
for _i in range(26):
    _ASCII[ord("a") + _i] = chr(ord("a") + (_i + 13) % 26)
    _ASCII[ord("A") + _i] = chr(ord("A") + (_i + 13) % 26)
for _d, _to in _DIGITS.items():
    _ASCII[ord(_d)] = _to
_OTHER: dict[str, str] = {}


def shift_char(char: str) -> str:
    """The perturbed form of one character: a different letter or digit of the same kind;
    anything that is not a letter or digit is kept."""
    mapped = _ASCII.get(ord(char))
    if mapped is not None:
        return mapped
    if char.isascii() or not char.isalnum():
        return char
    found = _OTHER.get(char)
    if found is None:
        found = _neighbour(char)
        _OTHER[char] = found
    return found


def _neighbour(char: str) -> str:
    """A different non-ASCII letter/digit with the same case and digit-ness as `char`."""
    kind = (char.isdigit(), char.isupper(), char.islower())
    code = ord(char)
    for step in (*range(1, 64), *range(-1, -64, -1)):
        other = code + step
        if other <= 0x7F or other > 0x10FFFF or 0xD800 <= other <= 0xDFFF:
            continue
        candidate = chr(other)
        if (
            candidate.isalnum()
            and (
                candidate.isdigit(),
                candidate.isupper(),
                candidate.islower(),
            )
            == kind
        ):
            return candidate
    # No neighbour of the same kind: any other letter still differs and stays a letter.
    return "x" if char.isalpha() else "1"


def perturb_string(text: str) -> str:
    if text.isascii():
        return text.translate(_ASCII)
    return "".join(shift_char(c) for c in text)


def _perturb_number(value: int | float) -> int | float:
    if isinstance(value, int):
        digits = str(abs(value))
        if len(digits) < _NUMBER_MIN_DIGITS:
            return value
        shifted = int(digits.translate(_ASCII))
        return -shifted if value < 0 else shifted
    if not math.isfinite(value):
        return value
    mantissa, e, exponent = repr(value).partition("e")
    if sum(c.isdigit() for c in mantissa) < _NUMBER_MIN_DIGITS:
        return value
    moved = float(mantissa.translate(_ASCII) + e + exponent)
    # A shifted mantissa can overflow to inf near the float limit: keep the value then
    # (value-based redaction still covers 5+ digit numbers).
    return moved if math.isfinite(moved) else value


def perturb(value: Any) -> Any:
    """`value` with every secret-bearing leaf replaced by a different one of the same shape:
    strings (same length, letters → letters, digits → digits, the rest kept), numbers with
    5 or more digits (same digit count and sign). Keys, booleans, null and short numbers are
    kept."""
    if isinstance(value, str):
        return perturb_string(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return _perturb_number(value)
    if isinstance(value, Mapping):
        return {k: perturb(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [perturb(v) for v in value]
    return value


# --- values ----------------------------------------------------------------------------------


def _flags(data: Any, secret: bool) -> Any:
    if isinstance(data, Mapping):
        return {k: _flags(v, secret) for k, v in data.items()}
    if isinstance(data, list):
        return [_flags(v, secret) for v in data]
    return secret


def _merge_flags(target: dict[Any, Any], override: Mapping[Any, Any]) -> None:
    # The merge rule of the values (maps merge, everything else replaces), on flag trees.
    for key, value in override.items():
        current = target.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            _merge_flags(current, value)
        else:
            target[key] = value


def origin_paths(layers: Iterable[tuple[Mapping[str, Any], bool]]) -> set[Path]:
    """Leaf paths whose last setter, merging `(data, secret)` layers in order, is secret."""
    flags: dict[Any, Any] = {}
    for data, secret in layers:
        _merge_flags(flags, _flags(data, secret))
    return {path for path, flag in yamldoc.walk_leaves(flags) if flag is True}


def changed_paths(real: Any, fake: Any, prefix: Path = ()) -> Iterator[Path]:
    """Paths where `real` and `fake` differ: leaves that differ, and the whole subtree where
    the shapes differ (a key only one side has, lists of different lengths)."""
    if isinstance(real, dict) and isinstance(fake, dict):
        for key, value in real.items():
            if key not in fake:
                yield (*prefix, key)
            else:
                yield from changed_paths(value, fake[key], (*prefix, key))
    elif isinstance(real, list) and isinstance(fake, list) and len(real) == len(fake):
        for i, (a, b) in enumerate(zip(real, fake, strict=True)):
            yield from changed_paths(a, b, (*prefix, i))
    elif type(real) is not type(fake) or real != fake:
        yield prefix


_ABSENT = object()


def lookup(tree: Any, path: Path) -> Any:
    """The node of `tree` at `path`, or `_ABSENT`."""
    node = tree
    for key in path:
        if isinstance(node, dict):
            node = node.get(key, _ABSENT)
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return _ABSENT
        if node is _ABSENT:
            return _ABSENT
    return node


def leaves_at(tree: Any, paths: Iterable[Path]) -> list[Any]:
    """The values of `tree` at `paths` (a path may name a subtree); unknown paths skipped."""
    found = (lookup(tree, path) for path in paths)
    return [node for node in found if node is not _ABSENT]


def existing(tree: Any, paths: Iterable[Path]) -> set[Path]:
    """The paths of `paths` that exist in `tree`."""
    return {path for path in paths if lookup(tree, path) is not _ABSENT}


def redact_values(
    values: Any, fake: Any, secret: set[Path], redactor: Redactor, prefix: Path = ()
) -> Any:
    """`values` as shown: leaves under `secret` paths (set by a secret layer) fully redacted;
    leaves that differ from `fake` (the perturbed run) redacted as derived values, so a
    connection string built from a secret keeps its plain parts (`redact_derived`)."""
    if prefix in secret:
        return redact_value(values)
    if isinstance(values, dict):
        if not isinstance(fake, dict):
            return redact_value(values)
        return {
            k: redact_values(v, fake.get(k, _ABSENT), secret, redactor, (*prefix, k))
            for k, v in values.items()
        }
    if isinstance(values, list):
        if not isinstance(fake, list) or len(fake) != len(values):
            return redact_value(values)
        return [
            redact_values(v, f, secret, redactor, (*prefix, i))
            for i, (v, f) in enumerate(zip(values, fake, strict=True))
        ]
    if fake is _ABSENT or isinstance(fake, dict | list):
        return redact_value(values)
    return _leaf(values, fake, redactor)


# --- derived strings -------------------------------------------------------------------------

# Token boundaries for transformed values: a value computed from a secret (b64enc, sha256sum)
# is redacted as a whole token, never character by character.
_DELIMITERS = re.compile(r"""[\s"'`,;:{}\[\]()<>|\\/@.?&#=+]+""")


def redact_derived(real: str, fake: str) -> str:
    """`real` with what depends on a secret redacted, `fake` being the same string from the
    perturbed run.

    Where the secret landed verbatim (every differing character is the perturbed form of
    the real one), exactly those characters are redacted, with the string rule: so a weak
    secret `db` inside `postgres://app:db@db` becomes `postgres://app:RE@db`, and the
    hostname stays. A token (text between delimiters) holding a transformed value is
    redacted whole. Strings whose lengths differ are compared line by line, else redacted
    whole.
    """
    if real == fake:
        return real
    if len(real) == len(fake):
        return _redact_aligned(real, fake)
    real_lines = real.split("\n")
    fake_lines = fake.split("\n")
    if len(real_lines) > 1 and len(real_lines) == len(fake_lines):
        return "\n".join(redact_derived(a, b) for a, b in zip(real_lines, fake_lines, strict=True))
    return redact_string(real)


def _redact_aligned(real: str, fake: str) -> str:
    spans = [m.span() for m in _DELIMITERS.finditer(real)]
    if spans != [m.span() for m in _DELIMITERS.finditer(fake)] or any(
        real[a:b] != fake[a:b] for a, b in spans
    ):
        return redact_string(real)  # punctuation moved: not a verbatim copy anywhere
    out: list[str] = []
    pos = 0
    for start, end in _tokens(real):
        out.append(real[pos:start])
        token, other = real[start:end], fake[start:end]
        if token == other:
            out.append(token)
        elif all(b == a or b == shift_char(a) for a, b in zip(token, other, strict=True)):
            out.append(_redact_spans(token, other))
        else:
            out.append(redact_string(token))
        pos = end
    out.append(real[pos:])
    return "".join(out)


def _tokens(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    for match in _DELIMITERS.finditer(text):
        if match.start() > pos:
            yield pos, match.start()
        pos = match.end()
    if pos < len(text):
        yield pos, len(text)


def _redact_spans(real: str, fake: str) -> str:
    """Redact each maximal run of characters that differ (all of them letters or digits)."""
    out: list[str] = []
    run: list[str] = []
    for a, b in zip(real, fake, strict=True):
        if a != b:
            run.append(a)
            continue
        if run:
            out.append(redact_string("".join(run)))
            run = []
        out.append(a)
    if run:
        out.append(redact_string("".join(run)))
    return "".join(out)


# --- rendered files --------------------------------------------------------------------------

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ShapeDiffers(Exception):
    """The perturbed render differs in structure, not only in values (no value in it)."""


def redact_release_files(
    real: Mapping[str, bytes],
    fake: Mapping[str, bytes] | None,
    redactor: Redactor,
    *,
    label: str,
) -> dict[str, bytes]:
    """The redacted twin of one release's files.

    `fake` is the same release rendered from perturbed secrets (None when that run failed).
    Where both runs have the same structure, every string and long number that differs is
    redacted by origin (`redact_derived`), and `redactor` (the release's secret values) is
    applied to those strings as a second net. Where they do not, the release falls back to
    value-based redaction: every occurrence of a secret (4+ characters) anywhere, file names
    included. `v1` `Secret` data is hashed either way.
    """
    if fake is None:
        log.debug("release %s: the perturbed render failed; redacting by value", label)
        return _by_value(real, redactor)
    if set(real) != set(fake):
        log.debug("release %s: the perturbed render has other files; redacting by value", label)
        return _by_value(real, redactor)
    out: dict[str, bytes] = {}
    try:
        for path, data in real.items():
            out[path] = _redact_file(path, data, fake[path], redactor)
    except ShapeDiffers:
        log.debug(
            "release %s: the perturbed render differs in structure; redacting by value", label
        )
        return _by_value(real, redactor)
    return out


def _by_value(real: Mapping[str, bytes], redactor: Redactor) -> dict[str, bytes]:
    files = redact_render_files(real, redactor)
    out: dict[str, bytes] = {}
    for path, data in files.items():
        # A file name can carry a secret (an object named after it); keep names unique.
        name = redactor.redact_text(path) if redactor else path
        while name in out:
            name += "~"
        out[name] = data
    return out


def hash_secret_objects(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """Files of a release without secrets: only `v1` `Secret` data is hashed."""
    return redact_render_files(files, Redactor([]))


def _redact_file(path: str, real: bytes, fake: bytes, redactor: Redactor) -> bytes:
    if real == fake:
        if b"Secret" not in real:
            return real  # nothing derives from a secret and there is no Secret to hash
        return hash_secret_objects({path: real})[path]
    try:
        real_text, fake_text = real.decode("utf-8"), fake.decode("utf-8")
    except UnicodeDecodeError:
        return redactor.redact_bytes(real) if redactor else _redact_binary()
    if not path.endswith((".yaml", ".yml")):
        return redactor.redact_text(redact_derived(real_text, fake_text)).encode()
    try:
        real_docs = [d for d in yaml.load_all(real_text, Loader=_Loader) if d is not None]
        fake_docs = [d for d in yaml.load_all(fake_text, Loader=_Loader) if d is not None]
    except yaml.YAMLError:
        return redactor.redact_text(redact_derived(real_text, fake_text)).encode()
    if len(real_docs) != len(fake_docs):
        raise ShapeDiffers
    redacted = [_walk(a, b, redactor) for a, b in zip(real_docs, fake_docs, strict=True)]
    if redacted == real_docs:
        return real
    return yamldoc.dumps_all(redacted).encode()


def _redact_binary() -> bytes:
    # Bytes that are not text and differ with the secret: nothing safe is left to show.
    return b"REDACTED\n"


def _walk(real: Any, fake: Any, redactor: Redactor) -> Any:
    if isinstance(real, dict):
        if not isinstance(fake, dict):
            raise ShapeDiffers
        secret = is_secret_object(real)
        out: dict[Any, Any] = {}
        for key, other in _pair_keys(real, fake):
            value = real[key]
            new_key = unique_key(out, _leaf(key, other, redactor))
            if secret and key in ("data", "stringData") and isinstance(value, Mapping):
                out[new_key] = {
                    unique_key(out, _leaf(k, o, redactor)): secret_hash(value[k])
                    for k, o in _pair_keys(value, fake.get(other) or {})
                }
            else:
                out[new_key] = _walk(value, fake[other], redactor)
        return out
    if isinstance(real, list):
        if not isinstance(fake, list) or len(real) != len(fake):
            raise ShapeDiffers
        return [_walk(a, b, redactor) for a, b in zip(real, fake, strict=True)]
    if isinstance(fake, dict | list):
        raise ShapeDiffers
    return _leaf(real, fake, redactor)


def _leaf(real: Any, fake: Any, redactor: Redactor) -> Any:
    if type(real) is type(fake) and real == fake:
        return real
    if isinstance(real, str):
        derived = redact_derived(real, fake if isinstance(fake, str) else str(fake))
        return redactor.redact_text(derived)
    if isinstance(real, bool) or real is None:
        return real  # booleans and null are kept by the rules
    if isinstance(real, int | float):
        return redact_number(real)
    return redact_value(real)


def _pair_keys(real: Mapping[Any, Any], fake: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    """Keys of `real` with their counterpart in `fake`: the same key, or (for keys built from
    a secret) the unmatched keys of both sides in order."""
    if real.keys() == fake.keys():
        return [(k, k) for k in real]
    only_fake = [k for k in fake if k not in real]
    if sum(1 for k in real if k not in fake) != len(only_fake):
        raise ShapeDiffers
    others = iter(only_fake)
    return [(k, k if k in fake else next(others)) for k in real]

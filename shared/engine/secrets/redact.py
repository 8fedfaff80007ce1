"""Structure-preserving redaction: ATLAS's rules, and what rollwright adds to them.

Values trees (`redact_value`, `redact_tree`) keep their shape and leaf types:
- strings: every maximal run of letters and digits becomes the first min(len, 8) characters
  of "REDACTED"; everything else is kept (`mycompany.com` → `REDACTED.RED`). PEM boundary
  lines (`-----BEGIN RSA PRIVATE KEY-----`) are kept verbatim. ATLAS only treats ASCII
  letters and digits as word characters; here every character `str.isalnum()` accepts is
  redacted, so `pässwörd` and `пароль` do not leak their non-ASCII letters.
- numbers with fewer than 5 digits, booleans and null are kept; numbers with 5 or more digits
  have each digit replaced from the cycle 1234567890 (sign, decimal point and exponent kept).

Rendered manifests (`Redactor`, `redact_render_files`):
- every `v1` `Secret`'s `data` / `stringData` values become
  `REDACTED:sha256:<12 hex of sha256 of the value as rendered>`, so a rotation shows;
- every occurrence of a secret value in any other string (ConfigMap data, annotations, env
  values, keys) is replaced by its redacted form, longest secret first;
- secrets too weak to search for by value (3 characters or fewer, common words such as
  `true` / `default`, numbers with fewer than 5 digits, punctuation only) are redacted only
  where their origin is known — the values tree by key path, Secret objects, and document
  paths the caller marks — never by searching for the word everywhere.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import yaml

from shared.engine import yamldoc
from shared.engine.values import escape_pointer_token

REDACTED = "REDACTED"
SECRET_HASH_PREFIX = "REDACTED:sha256:"
KEYED_HASH_PREFIX = "REDACTED:hmac:"
# The key of the secret markers made in this context (the service: one per repository, see
# docs/secrets.md); None: the unkeyed sha256 marker of local renders without a key.
_MARKER_KEY: ContextVar[bytes | None] = ContextVar("rollwright_marker_key", default=None)

Path = tuple[str | int, ...]

# PEM boundaries (RFC 7468 labels: upper-case words joined by spaces or hyphens) are kept;
# any other run of letters/digits ([^\W_] is exactly str.isalnum()) is redacted.
_PEM_BOUNDARY = r"-----(?:BEGIN|END)(?: [A-Z0-9]+(?:[ -][A-Z0-9]+)*)?-----"
_TOKENS = re.compile(rf"({_PEM_BOUNDARY})|([^\W_]+)")
_PEM_LINE = re.compile(rf"\s*{_PEM_BOUNDARY}\s*")

_DIGIT_CYCLE = "1234567890"
_NUMBER_MIN_DIGITS = 5


# --- values ----------------------------------------------------------------------------------


def _token(match: re.Match[str]) -> str:
    boundary = match.group(1)
    if boundary is not None:
        return boundary
    return REDACTED[: len(match.group(2))]


def redact_string(text: str) -> str:
    return _TOKENS.sub(_token, text)


def _cycle_digits(text: str) -> str:
    out: list[str] = []
    n = 0
    for char in text:
        if char.isdigit():
            out.append(_DIGIT_CYCLE[n % 10])
            n += 1
        else:
            out.append(char)
    return "".join(out)


def redact_number(value: int | float) -> int | float:
    """ATLAS's number rule; the result has the input's type."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        digits = str(abs(value))
        if len(digits) < _NUMBER_MIN_DIGITS:
            return value
        masked = int(_cycle_digits(digits))
        return -masked if value < 0 else masked
    if not math.isfinite(value):
        return value
    # Only the mantissa is masked: cycling exponent digits could overflow to inf.
    mantissa, e, exponent = repr(value).partition("e")
    if sum(c.isdigit() for c in mantissa) < _NUMBER_MIN_DIGITS:
        return value
    return float(_cycle_digits(mantissa) + e + exponent)


def redact_value(value: Any) -> Any:
    """`value` with every leaf redacted; maps and lists keep their keys, order and length."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return redact_number(value)
    if isinstance(value, str):
        return redact_string(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    # Dates and other YAML scalars have no redacted form of their own type.
    return redact_string(str(value))


def redact_tree(tree: Any, secret_paths: Iterable[Path] | None = None) -> Any:
    """A copy of `tree` with the leaves under `secret_paths` redacted (all when None).

    Paths use dict keys and list indices (ints), as `yamldoc.walk_leaves` yields them. A path
    naming a map or list redacts everything under it; unknown paths are ignored.
    """
    if secret_paths is None:
        return redact_value(tree)
    paths = frozenset(tuple(p) for p in secret_paths)
    if not paths:
        return _copy(tree)
    return _redact_at(tree, (), paths)


def _redact_at(node: Any, path: Path, paths: frozenset[Path]) -> Any:
    if path in paths:
        return redact_value(node)
    if isinstance(node, Mapping):
        return {k: _redact_at(v, (*path, k), paths) for k, v in node.items()}
    if isinstance(node, list):
        return [_redact_at(v, (*path, i), paths) for i, v in enumerate(node)]
    return node


def _copy(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


# --- digests ---------------------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def leaf_digests(tree: Any) -> dict[str, str]:
    """JSON pointer of every leaf (scalars and empty maps/lists) → sha256 hex of its canonical
    JSON, so a diff can say a secret changed without showing it.

    The digest of a guessable value (`true`, a 4-digit PIN) can be confirmed by hashing
    guesses: publish digests only where the redacted values may be seen anyway.
    """
    out: dict[str, str] = {}
    for path, value in yamldoc.walk_leaves(tree):
        pointer = "".join("/" + escape_pointer_token(str(p)) for p in path)
        out[pointer] = hashlib.sha256(canonical_json(value).encode()).hexdigest()
    return out


# --- Secret objects --------------------------------------------------------------------------


def is_secret_object(doc: Any) -> bool:
    return (
        isinstance(doc, Mapping) and doc.get("apiVersion") == "v1" and doc.get("kind") == "Secret"
    )


@contextmanager
def keyed_markers(key: bytes | None) -> Iterator[None]:
    """Secret markers made inside are `REDACTED:hmac:…` keyed with `key` (None: unkeyed).
    An empty key is refused: its markers would look keyed while anyone could compute them
    to confirm a guessed value."""
    if key is not None and not key:
        raise ValueError("a secret-marker key must not be empty (None: unkeyed markers)")
    token = _MARKER_KEY.set(key)
    try:
        yield
    finally:
        _MARKER_KEY.reset(token)


def marker_key() -> bytes | None:
    """The key of the markers made here (`keyed_markers`), for worker processes."""
    return _MARKER_KEY.get()


def secret_hash(value: Any) -> str:
    """The marker of a Secret value as rendered (non-strings: their JSON): 12 hex of its
    HMAC-SHA256 with the context's key (`keyed_markers`), so a rotation shows but a guessed
    value cannot be confirmed without the key; without a key, of its plain SHA-256."""
    text = value if isinstance(value, str) else canonical_json(value)
    key = _MARKER_KEY.get()
    if key is None:
        return SECRET_HASH_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:12]
    return KEYED_HASH_PREFIX + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:12]


def redact_secret_object(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a `v1` `Secret` with each `data` / `stringData` value hashed; anything else
    is returned as a plain copy."""
    out = dict(doc)
    if not is_secret_object(doc):
        return out
    for field in ("data", "stringData"):
        values = doc.get(field)
        if isinstance(values, Mapping):
            out[field] = {k: secret_hash(v) for k, v in values.items()}
    return out


# --- secrets inside rendered output ----------------------------------------------------------

COMMON_WORDS = frozenset(
    {
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "null",
        "none",
        "nil",
        "default",
        "enabled",
        "disabled",
    }
)
MIN_SEARCH_LENGTH = 4
_NUMBER_TEXT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_REDACTION_LETTERS = frozenset(REDACTED)


def is_weak(text: str) -> bool:
    """Too short or too common to find by value without redacting unrelated text."""
    stripped = text.strip()
    if len(stripped) < MIN_SEARCH_LENGTH or stripped.lower() in COMMON_WORDS:
        return True
    if _NUMBER_TEXT.fullmatch(stripped):
        return sum(c.isdigit() for c in stripped) < _NUMBER_MIN_DIGITS
    return not any(c.isalnum() for c in stripped)


def _foreign(text: str) -> int:
    """Letters/digits redaction never emits; replacing a term that has some lowers this
    count in the text, which is what makes `Redactor.redact_text`'s repeat loop finish."""
    return sum(1 for c in text if c.isalnum() and c not in _REDACTION_LETTERS)


def _variants(secret: str) -> set[str]:
    """The forms a secret takes in rendered text: as is, trimmed, line by line (re-indented
    multi-line values), JSON-escaped, base64 and URL-encoded."""
    if is_weak(secret):
        return set()  # its encodings would be just as unspecific
    forms = {secret, secret.strip()}
    if "\n" in secret:
        forms.update(line.strip() for line in secret.splitlines() if not _PEM_LINE.fullmatch(line))
    for form in list(forms):
        forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
        forms.add(json.dumps(form)[1:-1])
        forms.add(urllib.parse.quote(form, safe=""))
    forms.add(base64.b64encode(secret.encode()).decode())
    stripped = secret.strip()
    if stripped != secret:
        forms.add(base64.b64encode(stripped.encode()).decode())
    return {f for f in forms if not is_weak(f) and redact_string(f) != f}


def _trie_pattern(words: Iterable[str]) -> re.Pattern[str] | None:
    """One regex matching any of `words`, longest first at each position.

    A trie-shaped regex costs about one step per character of input instead of one per word,
    which matters with hundreds of secrets over megabytes of manifests.
    """
    words = sorted(set(words))
    if not words:
        return None
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # end of a word

    def build(node: dict[str, Any]) -> str:
        prefix: list[str] = []
        while "" not in node and len(node) == 1:  # a chain: no choice to make
            ((char, child),) = node.items()
            prefix.append(re.escape(char))
            node = child
        branches = [re.escape(c) + build(child) for c, child in sorted(node.items()) if c]
        head = "".join(prefix)
        if not branches:
            return head
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        # Greedy optional: the longer word is tried first, the shorter one when it fails.
        return head + (f"(?:{body})?" if "" in node else body)

    try:
        return re.compile(build(trie))
    except (RecursionError, re.error):
        longest_first = sorted(words, key=len, reverse=True)
        return re.compile("|".join(re.escape(w) for w in longest_first))


class Redactor:
    """Replaces a release's secret values wherever they land in rendered output.

    Built from the plaintext secret leaves (strings and numbers; maps and lists are walked).
    Weak secrets (`is_weak`) are never searched for; they are redacted only through
    `redact_document(..., secret_paths=...)`, Secret objects, and `redact_tree` on values.
    """

    def __init__(self, secrets: Iterable[Any]) -> None:
        strings: set[str] = set()
        self._numbers: set[int | float] = set()
        for leaf in _leaves(secrets):
            if isinstance(leaf, str):
                strings.add(leaf)
            elif isinstance(leaf, int | float) and not isinstance(leaf, bool):
                if _digits(leaf) >= _NUMBER_MIN_DIGITS:
                    self._numbers.add(leaf)
                strings.add(str(leaf))
        terms: set[str] = set()
        for text in strings:
            terms |= _variants(text)
        self.terms = frozenset(terms)
        self._pattern = _trie_pattern(terms)
        self._repeat = _trie_pattern(t for t in terms if _foreign(redact_string(t)) < _foreign(t))

    @classmethod
    def from_tree(cls, tree: Any, secret_paths: Iterable[Path] | None = None) -> Redactor:
        """A redactor for the leaves of `tree` under `secret_paths` (all when None)."""
        if secret_paths is None:
            return cls([tree])
        paths = frozenset(tuple(p) for p in secret_paths)
        return cls(
            value
            for path, value in yamldoc.walk_leaves(tree)
            if any(path[:n] in paths for n in range(len(path) + 1))
        )

    def __bool__(self) -> bool:
        return bool(self.terms or self._numbers)

    def redact_text(self, text: str) -> str:
        if self._pattern is None:
            return text
        out = self._pattern.sub(_redact_match, text)
        if self._repeat is not None and out != text:
            # A redacted span next to ordinary text can spell another secret ("zzzz" → "REDA"
            # before "q!" makes "REDAq!"); repeat until stable. Each pass removes letters or
            # digits that redaction never produces, so this ends.
            while True:
                again = self._repeat.sub(_redact_match, out)
                if again == out:
                    break
                out = again
        return out

    def redact_bytes(self, data: bytes) -> bytes:
        try:
            return self.redact_text(data.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            for term in sorted(self.terms, key=len, reverse=True):
                data = data.replace(term.encode(), redact_string(term).encode())
            return data

    def redact_document(self, doc: Any, secret_paths: Iterable[Path] = ()) -> Any:
        """A redacted copy of one rendered document: Secret values hashed (at any depth, so
        `List` items count), secret values replaced in every other string, key or number,
        and everything under `secret_paths` (origin known to the caller) fully redacted."""
        return self._walk(doc, (), frozenset(tuple(p) for p in secret_paths))

    def _walk(self, node: Any, path: Path, paths: frozenset[Path]) -> Any:
        if path in paths:
            return redact_value(node)
        if isinstance(node, Mapping):
            hashed = redact_secret_object(node) if is_secret_object(node) else None
            out: dict[Any, Any] = {}
            for key, value in node.items():
                new_key = unique_key(out, self._key(key))
                if (
                    hashed is not None
                    and isinstance(hashed.get(key), Mapping)
                    and key
                    in (
                        "data",
                        "stringData",
                    )
                ):
                    out[new_key] = {self._key(k): v for k, v in hashed[key].items()}
                else:
                    out[new_key] = self._walk(value, (*path, key), paths)
            return out
        if isinstance(node, list):
            return [self._walk(v, (*path, i), paths) for i, v in enumerate(node)]
        if isinstance(node, str):
            return self.redact_text(node)
        if isinstance(node, int | float) and not isinstance(node, bool) and node in self._numbers:
            return redact_number(node)
        return node

    def _key(self, key: Any) -> Any:
        return self.redact_text(key) if isinstance(key, str) else key


def unique_key(out: Mapping[Any, Any], key: Any) -> Any:
    """`key`, or `key~2`, `key~3`… when it is taken: two keys can redact to the same text,
    and both must be kept rather than one lost."""
    if key not in out:
        return key
    n = 2
    while f"{key}~{n}" in out:
        n += 1
    return f"{key}~{n}"


def _redact_match(match: re.Match[str]) -> str:
    return redact_string(match.group(0))


def _digits(value: int | float) -> int:
    return sum(c.isdigit() for c in repr(value).partition("e")[0])


def _leaves(values: Iterable[Any]) -> Iterable[Any]:
    for value in values:
        if isinstance(value, Mapping | list | tuple):
            yield from (leaf for _, leaf in yamldoc.walk_leaves(_plain(value)))
        else:
            yield value


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def redact_render_files(files: Mapping[str, bytes], redactor: Redactor) -> dict[str, bytes]:
    """The redacted twin of a render: YAML files parsed and redacted document by document
    (Secret values hashed even when there is no secret to search for), other files redacted
    as text. A file that redaction does not change keeps its exact bytes."""
    out: dict[str, bytes] = {}
    for path, data in files.items():
        out[path] = _redact_file(path, data, redactor)
    return out


def _redact_file(path: str, data: bytes, redactor: Redactor) -> bytes:
    if not path.endswith((".yaml", ".yml")):
        return redactor.redact_bytes(data) if redactor else data
    try:
        docs = [d for d in yaml.load_all(data.decode("utf-8"), Loader=_Loader) if d is not None]
    except (UnicodeDecodeError, yaml.YAMLError):
        return redactor.redact_bytes(data)  # not YAML after all: still no secret may pass
    if not docs:
        return redactor.redact_bytes(data)  # only comments
    redacted = [redactor.redact_document(d) for d in docs]
    if redacted == docs:
        # Same documents: keep the exact bytes, but comments may still quote a secret.
        return redactor.redact_bytes(data)
    return yamldoc.dumps_all(redacted).encode()

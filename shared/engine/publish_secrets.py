"""The secrets policy of publishers that deliver plaintext (git, S3): refuse, or re-encrypt.

A render's redacted twin (`Render.files`) differs from its plaintext exactly where the engine found
secret values: Secret `data` / `stringData`, values from SOPS files and whatever was built from them
(see shared.engine.secrets.origin and shared.engine.secrets.redact). A file whose two forms differ
"holds secret values"; `Render.leaf_digests()` names the leaves (JSON pointers, never values).

- `refuse` (the default): publishing such a render fails with a message naming the root and
  the files, and how to allow it (`publish.secrets: sops`). The same refusal is known as soon
  as the root renders (`unpublishable`: the deployment's render and the pull request preview
  fail with it, before anyone approves) and `validate` reports it (`unpublishable_roots`).
- `sops`: each such file is encrypted with the real `sops` binary for the recipients of the
  fleet's `.sops.yaml` creation rule matching the file's published path. Secrets encrypt
  `^(data|stringData)$` (what Flux and KSOPS expect); other documents encrypt the top-level
  keys that hold hidden leaves (under `metadata`: `annotations` / `labels`), so `apiVersion`,
  `kind` and `metadata.name` / `namespace` stay readable for kustomize.

Whatever sops left readable is then checked against the redacted twin: every unencrypted leaf
must be one the redacted render shows with the same value. A secret that sops cannot hide (a
secret in a mapping key, in `metadata.name`) therefore fails the publish instead of leaking.
Messages name files and JSON pointers, never values; sops' own stderr is not passed on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import yaml

from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.errors import ROOTS_NAMED, FleetError, Problem
from shared.engine.render import Render, leaf_pointers
from shared.engine.secrets.sops import sops_binary, sops_environment
from shared.engine.tree import Tree
from shared.engine.values import parse_pointer
from shared.engine.yamldoc import key_line
from shared.process import CommandTimedOut, run

SECRET_REGEX = "^(data|stringData)$"
SOPS_CONFIG = ".sops.yaml"
ENCRYPTED_PREFIX = "ENC[AES256_GCM,"
TIMEOUT_SECONDS = 60.0
SOPS_JOBS = 4  # sops runs at once: each is a short Go process

Policy = Literal["refuse", "sops"]

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Keys kustomize needs readable to identify a resource; never in the encrypted regex.
_IDENTITY = frozenset({"apiVersion", "kind", "name", "namespace", "metadata"})


class PlaintextSecretsError(FleetError):
    """A render with secret values may not be published as it is (policy `refuse`)."""

    def __init__(self, root: str, target: str, paths: list[str]) -> None:
        shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
        super().__init__(
            f'publishing root "{root}" to {target}: the render holds secret values in '
            f"{len(paths)} file(s) ({shown}), which would be written in plaintext; set "
            "`publish.secrets: sops` to re-encrypt them for the recipients in .sops.yaml "
            "(docs/publishing.md)",
        )
        self.paths = paths


def unpublishable(
    tree: Tree, config: FleetConfig, root: str, secret_paths: Iterable[str]
) -> FleetError | None:
    """The refusal publishing would end with, known as soon as the root is rendered (before
    anyone approves): a git or S3 target, `secrets: refuse`, and files holding secret values
    (`secret_paths`, e.g. the keys of `secret_files`). At rollwright.yaml's publish line."""
    paths = sorted(secret_paths)
    publish = config.publish
    if not paths or not publish_refuses(config):
        return None
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return FleetError(
        f'root "{root}" renders secret values in {len(paths)} file(s) ({shown}); '
        + _REFUSAL.format(target=publish.target),
        path=CONFIG_FILE,
        line=_policy_line(tree),
    )


def unpublishable_roots(tree: Tree, config: FleetConfig, roots: list[str]) -> Problem | None:
    """`validate`'s one problem for every root whose render publishing would refuse."""
    if not roots or not publish_refuses(config):
        return None
    named = ", ".join(roots[:ROOTS_NAMED])
    more = f" and {len(roots) - ROOTS_NAMED} more" if len(roots) > ROOTS_NAMED else ""
    return Problem(
        CONFIG_FILE,
        _policy_line(tree),
        f"{len(roots)} root(s) render secret values ({named}{more}); "
        + _REFUSAL.format(target=config.publish.target),
    )


def publish_refuses(config: FleetConfig) -> bool:
    """Whether the fleet's publishing target refuses renders holding secret values."""
    return config.publish.target != "blob" and config.publish.secrets == "refuse"


_REFUSAL = (
    "`publish.target: {target}` would write them in plaintext and `publish.secrets` is "
    "`refuse` (the default), so publishing would fail after approval: set "
    "`publish.secrets: sops` to re-encrypt them for the recipients in .sops.yaml "
    "(docs/publishing.md)"
)


def _policy_line(tree: Tree) -> int | None:
    """The line of rollwright.yaml's `publish.secrets` (where it says refuse), else of
    `publish.target`."""
    if not tree.is_file(CONFIG_FILE):
        return None
    text = tree.read_text(CONFIG_FILE)
    for keys in (("publish", "secrets"), ("publish", "target"), ("publish",)):
        line = key_line(text, keys)
        if line is not None and (keys == ("publish",) or _names(text, line, keys[-1])):
            return line
    return None


def _names(text: str, line: int, key: str) -> bool:
    """`key_line` answers its deepest reachable node: check that this line holds `key`."""
    lines = text.split("\n")
    return 0 < line <= len(lines) and lines[line - 1].lstrip().startswith(f"{key}:")


def secret_files(render: Render) -> dict[str, list[str]]:
    """Each file of `render` holding secret values → JSON pointers of the hidden leaves
    (`[""]` for a file that is not YAML). Only paths and pointers: safe to show."""
    hidden = render.leaf_digests()
    return {path: sorted(hidden.get(path, {})) for path in sorted(hidden)}


def publishable_files(
    render: Render,
    policy: Policy,
    *,
    target: str,
    published_path: Callable[[str], str],
    checkout: Path,
) -> dict[str, bytes]:
    """The files to deliver for `render` (root-relative paths): plaintext where nothing is
    secret, sops-encrypted where something is (`sops`), or `PlaintextSecretsError`.

    `published_path(path)` is the file's path in the target (sops matches creation rules
    against it); `checkout` is the fleet checkout whose `.sops.yaml` holds the rules.
    """
    secrets = secret_files(render)
    if not secrets:
        return render.reveal()
    if policy == "refuse":
        raise PlaintextSecretsError(render.root, target, list(secrets))
    # sops finds the rules' directory and the file's path from the real directories: a
    # checkout reached through a link (a revision's shared worktree) must not confuse it.
    checkout = checkout.resolve()
    config = checkout / SOPS_CONFIG
    if not config.is_file():
        raise FleetError(
            f'publishing root "{render.root}" with `publish.secrets: sops`: the fleet has no '
            f"{SOPS_CONFIG} with creation rules for the published files",
            path=SOPS_CONFIG,
        )
    plain = render.reveal()
    shown = render.files

    def encrypt_one(path: str) -> tuple[str, bytes]:
        return path, _encrypt_file(
            path, plain[path], shown[path], published_path(path), config, checkout
        )

    out = dict(plain)
    with ThreadPoolExecutor(max_workers=SOPS_JOBS) as pool:
        out.update(pool.map(encrypt_one, secrets))
    return out


def _encrypt_file(
    path: str, plain: bytes, shown: bytes, published: str, config: Path, checkout: Path
) -> bytes:
    if not path.endswith((".yaml", ".yml")):
        raise FleetError(
            f"holds secret values but is not YAML, so sops cannot encrypt it for Flux/KSOPS "
            f"(published as {published})",
            path=path,
        )
    try:
        real = _documents(plain)
        redacted = _documents(shown)
    except (UnicodeDecodeError, yaml.YAMLError):
        raise FleetError(
            f"holds secret values but is not valid YAML (published as {published})", path=path
        ) from None
    regex = encrypted_regex(real, redacted)
    encrypted = _run_sops(plain, regex, published, config, checkout, path)
    _check_hidden(encrypted, redacted, path)
    return encrypted


def encrypted_regex(real: list[Any], redacted: list[Any]) -> str:
    """The `--encrypted-regex` for one file: Secret data plus the keys holding hidden leaves."""
    keys: set[str] = set()
    for doc in real:
        if isinstance(doc, dict) and doc.get("kind") == "Secret" and doc.get("apiVersion") == "v1":
            keys.update(("data", "stringData"))
    shown = dict(leaf_pointers(redacted))
    # Keys the redacted render shows too: a secret key never goes into the regex (argv, and
    # the `sops:` metadata of the published file); the readable check then refuses it.
    visible = {tuple(parse_pointer(p)[1:3]) for p in shown}
    visible |= {t[:1] for t in visible}
    for pointer, value in leaf_pointers(real):
        if pointer in shown and shown[pointer] == value:
            continue
        tokens = parse_pointer(pointer)[1:]  # [0] is the document index
        depth = 2 if tokens and tokens[0] == "metadata" and len(tokens) > 1 else 1
        key = tokens[depth - 1] if tokens else ""
        if tokens and key not in _IDENTITY and tuple(tokens[:depth]) in visible:
            keys.add(key)
    if not keys:
        return SECRET_REGEX
    return "^(" + "|".join(re.escape(k) for k in sorted(keys)) + ")$"


def _documents(data: bytes) -> list[Any]:
    return [d for d in yaml.load_all(data.decode("utf-8"), Loader=_Loader) if d is not None]


def _run_sops(
    plain: bytes, regex: str, published: str, config: Path, checkout: Path, path: str
) -> bytes:
    command = [
        sops_binary(),
        "--config",
        str(config),
        "encrypt",
        "--filename-override",
        published,
        "--encrypted-regex",
        regex,
        "--input-type",
        "yaml",
        "--output-type",
        "yaml",
    ]
    try:
        proc = run(
            command, input=plain, cwd=checkout, env=sops_environment(), timeout=TIMEOUT_SECONDS
        )
    except CommandTimedOut:
        raise RuntimeError(
            f"encrypting {path} with sops: no answer within {TIMEOUT_SECONDS:g}s"
        ) from None
    if proc.ok:
        return proc.stdout
    # sops' stderr may quote the input: only recognised messages are passed on.
    stderr = proc.err
    if "no matching creation rules" in stderr:
        raise FleetError(
            f"no creation rule in {SOPS_CONFIG} matches the published path {published!r}; "
            "add one (path_regex matching the published paths, with the cluster's "
            "recipients) to re-encrypt this file",
            path=path,
        )
    if "error loading config" in stderr or "error parsing" in stderr.lower():
        raise FleetError(
            f"sops cannot read {SOPS_CONFIG} to encrypt the published files", path=SOPS_CONFIG
        )
    raise FleetError(
        f"sops could not encrypt it (exit {proc.returncode}; published as {published})",
        path=path,
    )


def _check_hidden(encrypted: bytes, redacted: list[Any], path: str) -> None:
    """Every leaf sops left readable must be shown, with that value, by the redacted twin."""
    try:
        docs = [
            {k: v for k, v in d.items() if k != "sops"} if isinstance(d, dict) else d
            for d in _documents(encrypted)
        ]
    except (UnicodeDecodeError, yaml.YAMLError):
        raise FleetError("sops wrote something that is not YAML", path=path) from None
    shown = dict(leaf_pointers(redacted))
    for pointer, value in leaf_pointers(docs):
        # Keys stay readable even where values are encrypted: the path must be shown as is.
        hidden = isinstance(value, str) and value.startswith(ENCRYPTED_PREFIX)
        empty = value is None or value == ""  # nothing to hide; sops leaves them as they are
        if pointer in shown and (hidden or empty or shown[pointer] == value):
            continue
        raise FleetError(
            f"a secret value at {_shown_part(pointer, shown)} would stay readable after sops "
            "encryption (secrets in mapping keys or resource names cannot be encrypted); move "
            "it into a value",
            path=path,
        )


def _shown_part(pointer: str, shown: dict[str, Any]) -> str:
    """The longest leading part of `pointer` the redacted render shows too: a key that is
    itself secret (the reason sops could not hide it) must not appear in the message."""
    prefixes = {""}
    for known in shown:
        parts = known.split("/")
        prefixes.update("/".join(parts[:n]) for n in range(2, len(parts) + 1))
    parts = pointer.split("/")
    for n in range(len(parts), 1, -1):
        candidate = "/".join(parts[:n])
        if candidate in prefixes:
            return candidate + ("" if n == len(parts) else "/…")
    return "(the document)"


__all__ = [
    "SECRET_REGEX",
    "PlaintextSecretsError",
    "Policy",
    "encrypted_regex",
    "publish_refuses",
    "publishable_files",
    "secret_files",
    "unpublishable",
    "unpublishable_roots",
]

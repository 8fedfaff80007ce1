"""Throwaway age keys and real-sops encryption for test fixtures.

Keys are generated per test (PyPI `pyrage`); nothing checked in holds key material.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pyrage import x25519

from shared.engine.secrets.sops import sops_binary, sops_environment


@dataclass(frozen=True)
class AgeKey:
    recipient: str  # public key, `age1...`
    key_file: Path  # identity file in age-keygen's format, for SOPS_AGE_KEY_FILE
    identity: str  # `AGE-SECRET-KEY-1...`, for SOPS_AGE_KEY


def generate_key(directory: Path, name: str = "age-key.txt") -> AgeKey:
    """A fresh X25519 identity written like `age-keygen -o` does."""
    identity = x25519.Identity.generate()
    recipient = str(identity.to_public())
    secret = str(identity)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"# throwaway test key\n# public key: {recipient}\n{secret}\n")
    path.chmod(0o600)
    return AgeKey(recipient=recipient, key_file=path, identity=secret)


def encrypt_yaml(content: str | dict[str, Any], recipients: Sequence[str]) -> str:
    """Encrypt YAML text (or a mapping, dumped first) with the real sops for `recipients`."""
    text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
    proc = subprocess.run(
        [
            sops_binary(),
            "--config",
            "/dev/null",
            "encrypt",
            "--age",
            ",".join(recipients),
            "--input-type",
            "yaml",
            "--output-type",
            "yaml",
            "--filename-override",
            "values.sops.yaml",
        ],
        input=text.encode(),
        capture_output=True,
        env=sops_environment(),
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"sops encrypt failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode()


def write_encrypted(path: Path, content: str | dict[str, Any], recipients: Sequence[str]) -> Path:
    """Write `content` encrypted for `recipients` to `path` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(encrypt_yaml(content, recipients))
    return path

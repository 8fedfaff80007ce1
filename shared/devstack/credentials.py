"""Local credentials of the embedded stack: the emulated GitHub App's key, the webhook secret
and the API token, generated once and kept (mode 0600) under the data directory."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def ensure_app_key(path: Path) -> str:
    """The PEM private key at `path`, generated (RSA 2048, like GitHub's) when missing."""
    if path.is_file():
        return path.read_text()
    pem = new_app_key()
    _write_private(path, pem.encode())
    return pem


def new_app_key() -> str:
    """A new GitHub App private key, PEM (RSA 2048, PKCS#1: what GitHub hands out)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def ensure_token(path: Path) -> str:
    """A random URL-safe token stored at `path` (webhook secret, API token)."""
    if path.is_file():
        value = path.read_text().strip()
        if value:
            return value
    value = secrets.token_urlsafe(32)
    _write_private(path, value.encode() + b"\n")
    return value

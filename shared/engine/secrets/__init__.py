"""SOPS decryption, redaction and origin tracking of secret values: docs/secrets.md."""

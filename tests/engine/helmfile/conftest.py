"""Fixtures of the helmfile layout tests (their helpers are in tests/support/helmfile.py)."""

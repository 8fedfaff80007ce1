"""Fixtures of the worker tests (none beyond the shared ones)."""

"""Fixtures of the review tests: none of their own. They use `age_key` from tests/conftest.py;
a fixture one module needs stays in that module."""

"""Fixtures of the dev stack tests: none of their own. They use `app_key` from
tests/conftest.py; a fixture one module needs stays in that module."""

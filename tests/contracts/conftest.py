"""Fixtures of the contracts tests: none of their own; a fixture one module needs stays in
that module."""

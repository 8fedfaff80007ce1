"""Fixtures of the end-to-end tests: none of their own (each module starts the embedded stack
its story needs); a fixture one module needs stays in that module."""

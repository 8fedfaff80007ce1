"""Fixtures of the workflow tests: none of their own (the Temporal ones start their own test
server through the harnesses in tests/support); a fixture one module needs stays in that
module."""

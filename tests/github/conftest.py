"""Fixtures of the GitHub client tests: none of their own (test_app.py makes its own App
keys); a fixture one module needs stays in that module."""

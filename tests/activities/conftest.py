"""Fixtures of the activities tests: none of their own. They use `s3_server`, `sql_url`,
`age_key` and `app_key` from tests/conftest.py; a fixture one module needs stays in that
module."""

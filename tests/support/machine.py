"""Reading the pages as a machine does: the bearer token (ROLLWRIGHT_API_TOKEN). Tests about
page content use it; signing in with GitHub has tests of its own (tests/gateway/test_signin.py
and the job page's browser test, tests/e2e/test_job_page_browser.py)."""

from __future__ import annotations

from pydantic import SecretStr

MACHINE_TOKEN = "pages-machine-t0ken"
MACHINE_HEADERS = {"Authorization": f"Bearer {MACHINE_TOKEN}"}
MACHINE_SECRET = SecretStr(MACHINE_TOKEN)

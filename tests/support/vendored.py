"""Where the third-party data the tests read lives: vendored under `tests/fixtures/`.

Each folder's README names the project, file and version it comes from, its licence and how to
refresh it. Tests read these through the names here, never from outside the repository.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# GitHub's example webhook payloads (@octokit/webhooks-examples, MIT)
GITHUB_WEBHOOKS = FIXTURES / "github" / "webhooks"
# Request schemas and response examples of the REST endpoints rollwright calls (@octokit/openapi)
GITHUB_ENDPOINTS = FIXTURES / "github" / "rest" / "endpoints.json"
# Argo CD's REST API description (argoproj/argo-cd assets/swagger.json, Apache-2.0)
ARGOCD_SWAGGER = FIXTURES / "argocd" / "swagger.json"
# Lieutenant's API description (projectsyn/lieutenant-api openapi.yaml, BSD-3-Clause)
LIEUTENANT_OPENAPI = FIXTURES / "lieutenant" / "openapi.yaml"

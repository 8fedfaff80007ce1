"""Request validation against GitHub's own schemas: each endpoint's request body schema from
GitHub's OpenAPI description (`rest_schemas.json`, copied from `@octokit/openapi`, and
`rest_schemas_git.json`), plus the limits GitHub enforces without saying so in the schema;
problems are answered with GitHub's 422 shape. `extract_request_schemas` makes the packaged
file from GitHub's `endpoints.json`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema

from shared.devstack.emulator.model import DOCS, ApiError
from shared.github.limits import OUTPUT_LIMIT

SCHEMAS_FILE = Path(__file__).with_name("rest_schemas.json")
# The git data API and pull request creation (promotions), from the same OpenAPI description.
GIT_SCHEMAS_FILE = Path(__file__).with_name("rest_schemas_git.json")
COMMENT_BODY_LIMIT = 65536  # GitHub: "Body is too long (maximum is 65536 characters)"

# Endpoint key (as in endpoints.json) → documentation page GitHub links in its errors.
_DOC_PAGES = {
    "POST /repos/{owner}/{repo}/check-runs": "checks/runs#create-a-check-run",
    "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}": "checks/runs#update-a-check-run",
    "POST /app/installations/{installation_id}/access_tokens": (
        "apps/apps#create-an-installation-access-token-for-an-app"
    ),
    "POST /repos/{owner}/{repo}/issues/{issue_number}/comments": (
        "issues/comments#create-an-issue-comment"
    ),
    "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}": (
        "issues/comments#update-an-issue-comment"
    ),
}
_DOC_PAGES.update(
    {
        "POST /repos/{owner}/{repo}/git/blobs": "git/blobs#create-a-blob",
        "POST /repos/{owner}/{repo}/git/trees": "git/trees#create-a-tree",
        "POST /repos/{owner}/{repo}/git/commits": "git/commits#create-a-commit",
        "POST /repos/{owner}/{repo}/git/refs": "git/refs#create-a-reference",
        "PATCH /repos/{owner}/{repo}/git/refs/{ref}": "git/refs#update-a-reference",
        "POST /repos/{owner}/{repo}/pulls": "pulls/pulls#create-a-pull-request",
    }
)
_RESOURCES = {
    "POST /repos/{owner}/{repo}/git/blobs": "Blob",
    "POST /repos/{owner}/{repo}/git/trees": "Tree",
    "POST /repos/{owner}/{repo}/git/commits": "Commit",
    "POST /repos/{owner}/{repo}/git/refs": "Reference",
    "PATCH /repos/{owner}/{repo}/git/refs/{ref}": "Reference",
    "POST /repos/{owner}/{repo}/pulls": "PullRequest",
    "POST /repos/{owner}/{repo}/check-runs": "CheckRun",
    "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}": "CheckRun",
    "POST /app/installations/{installation_id}/access_tokens": "InstallationAccessToken",
    "POST /repos/{owner}/{repo}/issues/{issue_number}/comments": "IssueComment",
    "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}": "IssueComment",
}


def extract_request_schemas(endpoints: dict[str, Any]) -> dict[str, Any]:
    """The packaged form of `endpoints.json`: request schemas only (responses are built here)."""
    return {
        key: {"operationId": spec["operationId"], "request_schema": spec["request_schema"]}
        for key, spec in endpoints.items()
        if spec.get("request_schema")
    }


def _with_github_limits(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Add the limits GitHub enforces that its published schema leaves out."""
    schema = copy.deepcopy(schema)
    props = schema.get("properties", {})
    actions = props.get("actions", {}).get("items")
    if actions is not None:
        action_props = actions.setdefault("properties", {})
        for name, limit in (("label", 20), ("identifier", 20), ("description", 40)):
            action_props.setdefault(name, {"type": "string"})
            action_props[name]["maxLength"] = limit
        props["actions"]["maxItems"] = 3
    output = props.get("output", {}).get("properties")
    if output is not None:
        for name in ("summary", "text"):
            output.setdefault(name, {"type": "string"})
            output[name]["maxLength"] = OUTPUT_LIMIT
    if key.endswith("/comments") or key.endswith("/comments/{comment_id}"):
        props.setdefault("body", {"type": "string"})["maxLength"] = COMMENT_BODY_LIMIT
    return schema


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0's `nullable: true` in JSON Schema terms (`type: [T, "null"]`): GitHub
    documents a null tree entry sha as "delete this path"."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: _json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _load_validators(
    path: Path = SCHEMAS_FILE, extra: tuple[Path, ...] = (GIT_SCHEMAS_FILE,)
) -> dict[str, jsonschema.protocols.Validator]:
    data = json.loads(path.read_text())["endpoints"]
    for more in extra:
        data.update(json.loads(more.read_text())["endpoints"])
    validators: dict[str, jsonschema.protocols.Validator] = {}
    for key, spec in data.items():
        schema = _with_github_limits(key, _json_schema(spec["request_schema"]))
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        validators[key] = cls(schema, format_checker=jsonschema.FormatChecker())
    return validators


class RequestSchemas:
    """The validators of every endpoint that takes a body, by endpoint key
    (`POST /repos/{owner}/{repo}/check-runs`)."""

    def __init__(self) -> None:
        self._validators = _load_validators()

    def validate(self, key: str, body: Any) -> None:
        validator = self._validators[key]
        problems = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        problems_out = [_schema_problem(_RESOURCES[key], e) for e in problems]
        if isinstance(body, dict):
            problems_out += _byte_limit_problems(_RESOURCES[key], body)
        if problems_out:
            raise ApiError(
                422,
                "Invalid request.",
                errors=problems_out,
                documentation_url=f"{DOCS}/{_DOC_PAGES[key]}",
            )


def _schema_problem(resource: str, error: jsonschema.ValidationError) -> dict[str, Any]:
    path = ".".join(str(p) for p in error.absolute_path)
    code = {
        "maxLength": "too_long",
        "maxItems": "too_long",
        "required": "missing_field",
        "enum": "invalid",
        "type": "invalid",
    }.get(str(error.validator), "invalid")
    if error.validator == "required" and isinstance(error.validator_value, list):
        missing = [
            name
            for name in error.validator_value
            if isinstance(error.instance, dict) and name not in error.instance
        ]
        path = ".".join(filter(None, [path, missing[0] if missing else ""]))
    return {"resource": resource, "field": path, "code": code, "message": error.message}


def _byte_limit_problems(resource: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    output = body.get("output")
    if not isinstance(output, dict):
        return []
    problems = []
    for name in ("summary", "text"):
        value = output.get(name)
        if isinstance(value, str) and len(value) <= OUTPUT_LIMIT:
            size = len(value.encode())
            if size > OUTPUT_LIMIT:
                problems.append(
                    {
                        "resource": resource,
                        "field": f"output.{name}",
                        "code": "too_long",
                        "message": f"Only {OUTPUT_LIMIT} bytes are allowed; {size} were supplied.",
                    }
                )
    return problems

"""`rollwright deploy ROOT… --revision SHA [--format json]`: a manual deployment through the
gateway's API — the rollback path (deploy an older revision) and a redeploy.

It calls `POST /api/deploy` as whoever the token says: the API token (`ROLLWRIGHT_API_TOKEN`,
taken first when set), which deploys as `api token`, one root at a time; else your GitHub token
(`GH_TOKEN` or `GITHUB_TOKEN`; `gh auth token` prints yours), which the gateway checks with
GitHub (write access to the repository; several roots at once only for the deploy admin
team). Nobody names themselves: the check run, the job page and the audit trail show the
caller GitHub vouched for. The root's DeployWorkflow queues the revision as a manual deployment:
ahead of merged revisions, reviewed like any other, and it locks the queue for merges until
someone clicks Unlock. Every job page shows the command that redeploys its revision.

Exit codes: 0 queued; 1 the gateway refused or could not be reached; 2 a usage error (a bad
argument, no token, a revision that is not a commit sha).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Any

FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}([0-9a-fA-F]{24})?$")
REPO_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*/[A-Za-z0-9_.][A-Za-z0-9_.-]*$")
TIMEOUT_SECONDS = 30.0


class UsageError(Exception):
    pass


def add_parsers(sub: Any) -> None:
    """Register `deploy` on the `rollwright` subparsers."""
    p = sub.add_parser(
        "deploy",
        help="deploy a root at a revision (rollback / redeploy) through the gateway's API",
        description=(
            "Queue a manual deployment of ROOT at REVISION through POST /api/deploy: it runs "
            "before merged revisions, asks for review on its check run, and locks the root's "
            "queue for merges until someone clicks Unlock. Exit 0 when queued, 1 when the "
            "gateway refused or was unreachable, 2 on a usage error."
        ),
    )
    p.add_argument(
        "root",
        nargs="+",
        help="the root id, e.g. staging/cluster-a (several: the deploy admin team only)",
    )
    p.add_argument(
        "--revision",
        required=True,
        metavar="SHA",
        help="full commit sha; a branch, tag or short sha is resolved in the current "
        "directory's git repository",
    )
    p.add_argument(
        "--repo",
        metavar="OWNER/NAME",
        default=os.environ.get("ROLLWRIGHT_REPO"),
        help="the fleet repository (default: $ROLLWRIGHT_REPO, else the GitHub remote "
        "`origin` of the current directory)",
    )
    p.add_argument(
        "--url",
        default=os.environ.get("ROLLWRIGHT_PUBLIC_URL", "http://localhost:8000"),
        help="the gateway's base URL (default: $ROLLWRIGHT_PUBLIC_URL or http://localhost:8000)",
    )
    p.add_argument(
        "--token",
        default=None,
        help="bearer token (default: $ROLLWRIGHT_API_TOKEN, the machine's; else $GH_TOKEN or "
        "$GITHUB_TOKEN, your GitHub token); prefer the variables, arguments show in process "
        "lists",
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="json: the gateway's answer (repo, root, revision, deployment_id, job_url, ...)",
    )
    p.set_defaults(func=cmd_deploy)


def cmd_deploy(args: argparse.Namespace) -> int:
    try:
        body = _request_body(args)
        # ROLLWRIGHT_API_TOKEN first: where it is set (a pipeline) the deploy is the
        # machine's, and GITHUB_TOKEN there is an Actions installation token, no person's.
        token = args.token or next(
            (
                os.environ[name]
                for name in ("ROLLWRIGHT_API_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")
                if os.environ.get(name)
            ),
            None,
        )
        if not token:
            raise UsageError(
                "no token: set GH_TOKEN (your GitHub token: `gh auth token`) or "
                "ROLLWRIGHT_API_TOKEN, or pass --token"
            )
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    url = args.url.rstrip("/") + "/api/deploy"
    what = body.get("root") or ", ".join(body["roots"])
    try:
        status, answer = _post(url, body, token)
    except OSError as err:
        print(f"error: deploying {what} via {url}: {err}", file=sys.stderr)
        return 1
    if status == 202 and args.format == "json":
        sys.stdout.write(json.dumps(answer, indent=2) + "\n")
        return 0
    if status == 202:
        for queued in answer.get("deployments") or [answer]:
            print(
                f"queued a manual deployment of {queued.get('root')} at "
                f"{queued.get('revision')} ({queued.get('repo')}; workflow "
                f"{queued.get('workflow_id')}; requested by {queued.get('requested_by')})"
            )
            for key, label in (("job_url", "job page"), ("root_url", "root page")):
                if queued.get(key):
                    print(f"{label}: {queued[key]}")
        return 0
    detail = _detail(answer)
    print(f"error: deploying {what} via {url}: {status} {detail}", file=sys.stderr)
    return 2 if status == 422 else 1


def _request_body(args: argparse.Namespace) -> dict[str, Any]:
    repo = args.repo or _origin_repo()
    if not repo:
        raise UsageError(
            "which repository? pass --repo OWNER/NAME (or set ROLLWRIGHT_REPO, or run this in "
            "a clone whose origin is on GitHub)"
        )
    if not REPO_NAME.match(repo):
        raise UsageError(f"--repo {repo!r}: expected OWNER/NAME")
    roots = list(dict.fromkeys(root.strip("/") for root in args.root))
    body: dict[str, Any] = {"repo": repo, "revision": _full_sha(args.revision)}
    if len(roots) == 1:
        body["root"] = roots[0]
    else:
        body["roots"] = roots
    return body


def _full_sha(revision: str) -> str:
    if FULL_SHA.match(revision):
        return revision.lower()
    proc = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    sha = proc.stdout.strip()
    if proc.returncode != 0 or not FULL_SHA.match(sha):
        raise UsageError(
            f"--revision {revision!r} is not a full commit sha, and the current directory's "
            "git repository does not know it"
        )
    return sha


def _origin_repo() -> str | None:
    """OWNER/NAME of the `origin` remote of the current directory, when it looks like one."""
    proc = subprocess.run(
        ["git", "remote", "get-url", "origin"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    match = re.search(r"[:/]([^/:]+/[^/]+?)(?:\.git)?/?$", proc.stdout.strip())
    return match.group(1) if proc.returncode == 0 and match else None


def _post(url: str, body: dict[str, Any], token: str) -> tuple[int, Any]:
    # `shared.cli.main` builds this parser on every run; urllib's HTTP client (http.client,
    # ssl, email) loads only when `deploy` posts, for start-up time.
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    class Refuse(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # a 3xx is answered as is: the caller prints it and exits 1

    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    # The token (a person's GitHub token) goes to this URL only: urllib copies ordinary
    # headers to wherever a redirect points, and the gateway never redirects this call.
    request.add_unredirected_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.build_opener(Refuse).open(request, timeout=TIMEOUT_SECONDS) as response:
            return response.status, _json(response.read())
    except urllib.error.HTTPError as err:
        return err.code, _json(err.read())


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _detail(answer: Any) -> str:
    """FastAPI's `detail`: a message, or validation problems as `field: message`."""
    detail = answer.get("detail") if isinstance(answer, dict) else answer
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', [])[1:])}: {item.get('msg')}"
            for item in detail
            if isinstance(item, dict)
        )
    return str(detail)[:500]

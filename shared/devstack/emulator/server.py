"""A stateful fake of the slice of GitHub that rollwright talks to: `GitHubEmulator`, and the
command that runs one on its own.

Used by the tests and by `rollwright dev` when no GitHub App is configured. It is an HTTP
server (stdlib `ThreadingHTTPServer`, in a background thread or as its own process) that

- serves the REST endpoints rollwright calls, with GitHub App authentication: installation
  tokens are only issued for an RS256 App JWT signed by the configured App key, and repository
  endpoints need one of those tokens (`auth`, `apps`);
- validates every request body against the endpoint's JSON schema from GitHub's OpenAPI
  description (`rest_schemas.json`, copied from `@octokit/openapi`) plus the limits
  GitHub enforces without saying so in the schema, and answers 422 the way GitHub does
  (`schemas`);
- keeps check runs (with the full history of every create/update), issue comments, pull
  requests and check suites in memory (`checks`, `issues`, `pulls`, `commits`, `access`,
  `gitdata`);
- sends GitHub-shaped, signed webhooks: any payload, a push computed from a real git
  repository, and the `check_run.requested_action` a button click produces (`webhooks`);
- implements the GitHub App's OAuth web flow for user access tokens (`oauth`).

Control endpoints under `/_emulator/…` (no auth; bind to loopback) let another process seed
state, read it back and click buttons (`control`); `GET /<owner>/<repo>/runs/<id>` is a small
HTML page of a check run with its buttons, the emulator's stand-in for github.com (`pages`).

Run standalone: `python -m shared.devstack.emulator.server --app-id 1 --app-key app.pem --port 9100
--repo acme/fleet:1:main --webhook-url http://127.0.0.1:8000/events --webhook-secret s`.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

from shared.devstack.background import BackgroundHTTPServer
from shared.devstack.emulator import commits
from shared.devstack.emulator.access import Access
from shared.devstack.emulator.apps import Installations
from shared.devstack.emulator.auth import Credentials
from shared.devstack.emulator.checks import CheckRuns
from shared.devstack.emulator.control import Control
from shared.devstack.emulator.gitdata import GitDataApi
from shared.devstack.emulator.handler import GitHubHandler
from shared.devstack.emulator.issues import IssueComments
from shared.devstack.emulator.model import App, Route
from shared.devstack.emulator.oauth import OAuthFlow
from shared.devstack.emulator.pages import Pages
from shared.devstack.emulator.pulls import Pulls
from shared.devstack.emulator.router import Router
from shared.devstack.emulator.schemas import SCHEMAS_FILE, RequestSchemas, extract_request_schemas
from shared.devstack.emulator.shapes import Shapes
from shared.devstack.emulator.state import Store
from shared.devstack.emulator.webhooks import Webhooks


class GitHubEmulator(BackgroundHTTPServer):
    """The fake GitHub. `start()` it (or use it as a context manager), then point PyGithub's
    `base_url` at `url`.

    Its API families keep their own state and answer their own routes; what tests and the dev
    stack call on the emulator (`set_pull`, `issue_token`, `check_runs`…) is a family's
    operation, bound here under its name."""

    handler = GitHubHandler

    def __init__(
        self,
        *,
        app_id: int,
        app_key: str,
        app_slug: str = "rollwright",
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        token_ttl: int = 3600,
        default_permission: str = "none",
        oauth_client_id: str = "Iv1.emulator",
        oauth_client_secret: str | None = None,
        oauth_code_ttl: float = 600,
    ) -> None:
        super().__init__("GitHub emulator", host, port)
        self.app_id = app_id
        self.app_slug = app_slug
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        self.default_permission = default_permission
        # The App's OAuth credentials (user access tokens, the web flow); a random secret
        # unless given. GitHub's codes live 10 minutes (`oauth_code_ttl`, seconds).
        self.oauth_client_id = oauth_client_id
        self.oauth_client_secret = oauth_client_secret or secrets.token_hex(20)
        self._app = app = App(app_id, app_slug, oauth_client_id)
        self._store = store = Store()
        self._credentials = Credentials(store, app_id=app_id, app_key=app_key, token_ttl=token_ttl)
        self._access = Access(store, default_permission)
        self._credentials.user_reads = self._access.reads
        self._shapes = shapes = Shapes(app, store)
        self._installations = Installations(app, store, shapes, self._credentials, self._base_url)
        self._checks = CheckRuns(store, shapes)
        self._comments = IssueComments(app, store, shapes)
        self._pulls = Pulls(store, shapes, self._base_url)
        self._webhooks = Webhooks(
            app, store, shapes, self._base_url, url=webhook_url, secret=webhook_secret
        )
        self._oauth = OAuthFlow(
            app,
            store,
            self._credentials,
            client_secret=self.oauth_client_secret,
            code_ttl=oauth_code_ttl,
        )
        self._router = Router(store, self._credentials, RequestSchemas(), self._routes())

        # What tests and the dev stack call on the emulator: each an API family's operation.
        self.seed_repository = self._installations.seed_repository
        self.issue_token = self._credentials.issue_token
        self.set_permission = self._access.set_permission
        self.add_team_member = self._access.add_team_member
        self.add_review = self._pulls.add_review
        self.set_pull = self._pulls.set_pull
        self.pulls = self._pulls.pulls
        self.check_runs = self._checks.check_runs
        self.check_run = self._checks.check_run
        self.add_foreign_check_run = self._checks.add_foreign_check_run
        self.set_status = self._checks.set_status
        self.comments = self._comments.comments
        self.add_comment = self._comments.add_comment
        self.issue_oauth_code = self._oauth.issue_oauth_code
        self.issue_user_token = self._oauth.issue_user_token
        self.fail_next = self._router.fail_next
        self.before_next = self._router.before_next
        self.requests = self._router.requests
        self.dispatch = self._router.dispatch  # what the HTTP handler threads call
        self.deliveries = self._webhooks.deliveries
        self.send_webhook = self._webhooks.send_webhook
        self.redeliver = self._webhooks.redeliver
        self.requested_action_payload = self._webhooks.requested_action_payload
        self.click_action = self._webhooks.click_action
        self.push_payload = self._webhooks.push_payload
        self.send_push = self._webhooks.send_push

    def _base_url(self) -> str:
        """The emulator's URL for answers given outside a request (seeding, webhook payloads)."""
        return self.url if self.running else self.configured_url

    def _routes(self) -> list[Route]:
        """Every route, in the order they are matched."""
        control = Control(
            self._store,
            installations=self._installations,
            pulls=self._pulls,
            access=self._access,
            webhooks=self._webhooks,
            oauth=self._oauth,
        )
        gitdata = GitDataApi(self._app, self._shapes, self._pulls, self._webhooks)
        return [
            *self._installations.routes(),
            *self._checks.routes(),
            *self._comments.routes(),
            *commits.routes(),
            *self._pulls.routes(),
            *self._access.routes(),
            *gitdata.routes(),  # the git data API and pull request creation
            *self._oauth.routes(),
            *control.routes(),  # control surface for other processes (rollwright dev, the demo)
            *Pages(self._store).routes(),
        ]


def _parse_repo(spec: str) -> tuple[str, str, int, str]:
    """`owner/repo[:installation_id[:default_branch]]`."""
    name, *rest = spec.split(":")
    owner, _, repo = name.partition("/")
    if not owner or not repo:
        raise argparse.ArgumentTypeError(f"--repo {spec!r}: expected owner/repo[:id[:branch]]")
    installation = int(rest[0]) if rest and rest[0] else 1
    branch = rest[1] if len(rest) > 1 else "main"
    return owner, repo, installation, branch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.devstack.emulator.server", description="Run the fake GitHub API."
    )
    parser.add_argument("--app-id", type=int, default=1)
    parser.add_argument("--app-key", type=Path, help="PEM file: the App's private or public key")
    parser.add_argument("--app-slug", default="rollwright")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--webhook-url")
    parser.add_argument("--webhook-secret")
    parser.add_argument("--oauth-client-id", default="Iv1.emulator")
    parser.add_argument(
        "--oauth-client-secret", help="the App's OAuth client secret (default: a random one)"
    )
    parser.add_argument("--repo", action="append", default=[], type=_parse_repo)
    parser.add_argument("--git-dir", type=Path, help="git repository backing the first --repo")
    parser.add_argument(
        "--extract-schemas",
        type=Path,
        metavar="ENDPOINTS_JSON",
        help=f"rewrite {SCHEMAS_FILE.name} from GitHub's endpoints.json and exit",
    )
    args = parser.parse_args(argv)
    if args.extract_schemas:
        data = {
            "source": json.loads(SCHEMAS_FILE.read_text())["source"],
            "endpoints": extract_request_schemas(json.loads(args.extract_schemas.read_text())),
        }
        SCHEMAS_FILE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return 0
    if args.app_key is None:
        parser.error("--app-key is required")
    emulator = GitHubEmulator(
        app_id=args.app_id,
        app_key=args.app_key.read_text(),
        app_slug=args.app_slug,
        webhook_url=args.webhook_url,
        webhook_secret=args.webhook_secret,
        host=args.host,
        port=args.port,
        oauth_client_id=args.oauth_client_id,
        oauth_client_secret=args.oauth_client_secret,
    )
    for index, (owner, repo, installation, branch) in enumerate(args.repo):
        git_dir = args.git_dir if index == 0 else None
        emulator.seed_repository(owner, repo, installation, branch, git_dir=git_dir)
    emulator.start()
    print(f"GitHub emulator listening on {emulator.url}", flush=True)
    emulator.serve_until_signalled()
    return 0


if __name__ == "__main__":
    sys.exit(main())

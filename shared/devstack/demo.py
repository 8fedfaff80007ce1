"""`rollwright demo`: one merge taken from push to published and verified on the embedded stack.

Every step must happen, in order, within its timeout; the first one that does not is named and
the command exits 1. Nothing here is simulated: a real git repository, the real gateway and
worker processes, the Temporal dev server, and the GitHub emulator sending signed webhooks.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import yaml

from shared.contracts.deploy import deploy_workflow_id
from shared.devstack import commodorerepos, fleetrepo
from shared.devstack.emulator.model import CheckRunRecord
from shared.devstack.emulator.server import GitHubEmulator
from shared.devstack.processes import ChildExited
from shared.devstack.signin import open_signed_in
from shared.devstack.stack import (
    DEV_ARGOCD_TOKEN_VAR,
    DevStack,
    StackError,
    options_from_args,
)
from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from shared.stores.blob import FileBlobStore, latest_key
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database

OWNER = "acme"
REPO = "fleet"
NEW_REGION = "eu-central-1"
REVIEWER = "demo-reviewer"
MARKER = ".rollwright-demo"
FAILED = frozenset({"failure", "cancelled", "skipped", "timed_out"})

T = TypeVar("T")


@dataclass(frozen=True)
class Scenario:
    """The change the demo merges: `key` (dotted) of `changed_file` set to NEW_REGION, which
    changes what `root` renders and nothing else, so its review shows the new value."""

    layout: str
    root: str
    changed_file: str
    key: str


# One per layout, on the layout's example fleet (or a copy of it).
SCENARIOS = {
    "atlas": Scenario(
        "atlas",
        "staging/cluster-a",
        "deployments/staging/cluster-a/cluster.values.yaml",
        "env.REGION",
    ),
    "dimensions": Scenario(
        "dimensions",
        "management-cluster/integration/int-sector-1/us-central1",
        "config/management-cluster/prometheus/integration/int-sector-1/us-central1/values.yaml",
        "applications.prometheus.source.helm.valuesObject.region",
    ),
    # The web release's own values file: the one root that reads it (shared.engine.helmfile).
    "helmfile": Scenario("helmfile", "apps/web", "values/web.yaml", "region"),
    # One cluster's class: the one cluster whose catalog changes.
    "commodore": Scenario("commodore", "c-prod", "c-prod.yml", "parameters.echo.region"),
}
EXAMPLES = {layout: f"examples/{layout}-fleet" for layout in SCENARIOS}
EXAMPLES["commodore"] = "examples/commodore-tenant"


class DemoRefused(Exception):
    """The fleet given with --fleet cannot run the demo's scenario (said before starting)."""


def scenario_for(fleet: Path) -> Scenario:
    """The scenario for the fleet's layout, refused when the fleet lacks what it changes."""
    try:
        layout = FleetConfig.load(WorkTree(fleet)).layout
    except FleetError as err:
        raise DemoRefused(f"{fleet} is not a fleet rollwright can read: {err}") from None
    if layout == "commodore":
        return _commodore_scenario(fleet)
    try:
        opened = Fleet.open(WorkTree(fleet))
        roots = set(opened.roots())
    except FleetError as err:
        raise DemoRefused(f"{fleet} is not a fleet rollwright can read: {err}") from None
    scenario = SCENARIOS.get(opened.layout_name)
    if scenario is None:
        raise DemoRefused(f"{fleet}: the demo has no scenario for the {opened.layout_name} layout")
    owner = Path(scenario.changed_file).parent
    if scenario.layout == "dimensions":
        owner = Path(*Path(scenario.changed_file).parts[:3])  # config/<type>/<application>
    if scenario.root not in roots or not (fleet / owner).is_dir():
        example = EXAMPLES[scenario.layout]
        raise DemoRefused(
            f"{fleet} is a {scenario.layout} fleet without root {scenario.root} or {owner}/, "
            f"which the demo changes (it sets {scenario.key} in {scenario.changed_file}); "
            f"use {example} or a copy of it"
        )
    return scenario


def _commodore_scenario(fleet: Path) -> Scenario:
    """A commodore tenant's clusters come from Lieutenant, which the stack fakes from the
    tenant's `-repos` folder: the scenario's cluster must be there and its class here."""
    scenario = SCENARIOS["commodore"]
    repos = commodorerepos.repos_dir(fleet)
    answers = repos / commodorerepos.LIEUTENANT_FILE
    clusters: dict[str, object] = {}
    if answers.is_file():
        clusters = (yaml.safe_load(answers.read_text()) or {}).get("clusters") or {}
    if scenario.root not in clusters or not (fleet / scenario.changed_file).is_file():
        raise DemoRefused(
            f"{fleet} is a commodore tenant without cluster {scenario.root} in {answers} or "
            f"its class {scenario.changed_file}, which the demo changes (it sets "
            f"{scenario.key}); use {EXAMPLES['commodore']} or a copy of it with its "
            f"{commodorerepos.REPOS_SUFFIX} folder"
        )
    return scenario


class StepFailed(Exception):
    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason


@dataclass
class Demo:
    stack: DevStack
    repo_dir: Path
    step_timeout: float
    scenario: Scenario

    @property
    def emulator(self) -> GitHubEmulator:
        assert self.stack.emulator is not None
        return self.stack.emulator

    def wait_for(self, what: str, probe: Callable[[], T | None]) -> T:
        """Poll `probe` until it returns something, the step times out or a process dies."""
        deadline = time.monotonic() + self.step_timeout
        while True:
            self.stack.check()
            found = probe()
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} after {self.step_timeout:.0f}s")
            time.sleep(0.2)

    def deployment_run(self, deployment_id: str) -> CheckRunRecord | None:
        """The newest check run of a deployment (its external_id)."""
        runs = [
            run
            for run in self.emulator.check_runs(OWNER, REPO)
            if run.state.get("external_id") == deployment_id
        ]
        return runs[-1] if runs else None

    def check_run(self, head_sha: str) -> CheckRunRecord | None:
        runs = [
            run
            for run in self.emulator.check_runs(OWNER, REPO)
            if run.name == f"rollwright/{self.scenario.root}" and run.state["head_sha"] == head_sha
        ]
        return runs[-1] if runs else None


def default_fleet() -> Path:
    return Path(__file__).resolve().parents[2] / "examples" / "atlas-fleet"


@contextmanager
def step(number: int, total: int, name: str) -> Iterator[None]:
    print(f"[{number}/{total}] {name} …", flush=True)
    started = time.monotonic()
    try:
        yield
    except StepFailed:
        raise
    except ChildExited as err:
        raise StepFailed(name, str(err)) from err
    except (TimeoutError, StackError, fleetrepo.GitFailed, OSError, ValueError) as err:
        raise StepFailed(name, str(err)) from err
    print(f"      done in {time.monotonic() - started:.1f}s", flush=True)


def _data_dir(args: argparse.Namespace) -> tuple[Path, bool]:
    """(directory, remove afterwards)."""
    if args.data_dir is not None:
        return args.data_dir, False
    if args.keep:
        path = Path(".rollwright") / "demo"
        if path.exists():
            if not (path / MARKER).exists():
                raise SystemExit(f"rollwright demo: {path} exists and is not a demo directory")
            shutil.rmtree(path)  # a fresh demo each time: its repo history starts over
        path.mkdir(parents=True)
        (path / MARKER).write_text("created by rollwright demo; removed by the next run\n")
        return path, False
    return Path(tempfile.mkdtemp(prefix="rollwright-demo-")), True


def run_demo(args: argparse.Namespace) -> int:
    fleet = (args.fleet or default_fleet()).resolve()
    if not fleet.is_dir():
        print(f"rollwright demo: no example fleet at {fleet} (use --fleet DIR)", file=sys.stderr)
        return 1
    try:
        scenario = scenario_for(fleet)
    except DemoRefused as err:
        print(f"rollwright demo: {err}", file=sys.stderr)
        return 1
    data_dir, remove = _data_dir(args)
    stack = DevStack(options_from_args(args, data_dir))
    commodore = scenario.layout == "commodore"
    total = 8 if commodore else 9
    failed = False
    try:
        with step(1, total, "start the embedded stack"):
            stack.start()
            print(_indent(stack.banner()), flush=True)
        demo = Demo(stack, stack.data_dir / "repos" / REPO, args.step_timeout, scenario)
        run_steps = _run_commodore_steps if commodore else _run_steps
        links = run_steps(demo, total, fleet)
        if args.keep:
            print(_indent(links, "  "), flush=True)
            print(
                "The pages ask you to sign in: the GitHub emulator's page takes any login "
                "(every login may read and approve in the emulator).\n"
                "The stack keeps running (--keep); Ctrl-C stops it.",
                flush=True,
            )
            stack.wait()
        else:
            # The links would point at a stack that is about to stop: say how to keep it.
            print(
                "  The stack stops now. To open the job page, the root page, the Temporal UI\n"
                "  and the check runs, keep it running: make demo DEMO_ARGS=--keep\n"
                "  (rollwright demo --keep)",
                flush=True,
            )
            if not remove:
                print(f"  Its files stay in {data_dir} (repository, logs, blobs, database).")
    except StepFailed as err:
        failed = True
        print(f"\nrollwright demo FAILED at step: {err.step}\n  {err.reason}", file=sys.stderr)
        print(f"  logs: {stack.supervisor.log_dir} (kept)", file=sys.stderr)
        return 1
    except ChildExited as err:
        failed = True
        print(f"\nrollwright demo: {err}", file=sys.stderr)
        print(f"  logs: {stack.supervisor.log_dir} (kept)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nrollwright demo: stopping", flush=True)
        return 0 if args.keep else 130
    finally:
        stack.stop()
        # A failed demo keeps its directory: the logs it names are what explains the failure.
        if remove and not failed:
            shutil.rmtree(data_dir, ignore_errors=True)
    return 0


def approvers_needed(summary: str, default: str) -> list[str]:
    """Who to click Approve as on a governed check run: one login from each line of its
    "Approval still needed" list (teams skipped), or `default` where it has none."""
    section = summary.partition("**Approval still needed**")[2]
    logins: list[str] = []
    for line in section.splitlines():
        if not line.startswith("- "):
            if logins or line.startswith("**"):
                break
            continue
        mentions = [m.strip(" ,.") for m in line.split("@")[1:]]
        people = [m for m in mentions if m and "/" not in m]
        if people:
            logins.append(people[0])
    return logins or [default]


def _run_steps(demo: Demo, total: int, fleet: Path) -> str:
    """Run steps 2 to 9; return the links to what the demo made (while the stack runs)."""
    base = _create_fleet_repo(demo, total, fleet)
    head = _push_change(demo, total, base)
    run = _review_asked(demo, total, head)
    reviewers = _approve(demo, total, run)
    deployment_id = str(run.state.get("external_id") or "")
    final = _verified(demo, total, deployment_id)
    _recorded(demo, total, head, deployment_id)
    job_url = _job_page_shown(demo, total, deployment_id, reviewers[0])
    print("\nrollwright demo: every step happened.", flush=True)
    return _links(demo, deployment_id, job_url, run, final)


def _run_commodore_steps(demo: Demo, total: int, fleet: Path) -> str:
    """Steps 2 to 8 on a commodore tenant; the links to what the demo made."""
    base = _create_tenant_repos(demo, total, fleet)
    head = _push_change(demo, total, base)
    run = _review_asked(demo, total, head)
    others = [
        r.name
        for r in demo.emulator.check_runs(OWNER, REPO)
        if r.state["head_sha"] == head and r.name != f"rollwright/{demo.scenario.root}"
    ]
    if others:
        raise StepFailed("check run asks for review with the diff", f"also {others}")
    print("      no check run for the other clusters: their catalogs do not change", flush=True)
    _approve(demo, total, run)
    deployment_id = str(run.state.get("external_id") or "")
    final = _published(demo, total, deployment_id)
    _catalog_committed(demo, total)
    _compile_reported(demo, total)
    print("\nrollwright demo: every step happened.", flush=True)
    job_url = f"{demo.stack.urls.gateway}/jobs/{deployment_id}"
    return _links(demo, deployment_id, job_url, run, final)


def _create_tenant_repos(demo: Demo, total: int, fleet: Path) -> str:
    """Step 2: the tenant, global, component and catalog repositories, served by the
    emulator, and Lieutenant's answers. The tenant repository's first commit."""
    stack = demo.stack
    repos = commodorerepos.repos_dir(fleet)
    with step(2, total, f"create the tenant repo {OWNER}/{REPO} and the repos it needs"):
        if stack.lieutenant is None:
            raise ValueError(
                "the demo needs the stack's fake Lieutenant (it runs with the emulator)"
            )
        served_at = f"{demo.emulator.url}/{OWNER}"
        made = commodorerepos.create_commodore_repos(repos, stack.data_dir / "repos", served_at)
        for name, path in made.repositories.items():
            stack.add_repository(OWNER, name, path)
        for body in made.tenants.values():
            stack.lieutenant.add_tenant(body)
        for body in made.clusters.values():
            stack.lieutenant.add_cluster(body)
        base = fleetrepo.create_fleet_repo(fleet, demo.repo_dir, message="Tenant from example")
        stack.add_repository(OWNER, REPO, demo.repo_dir)
        print(f"      {demo.repo_dir} at {base[:12]}", flush=True)
        print(f"      served at {served_at}/: {', '.join(sorted(made.repositories))}", flush=True)
        print(f"      Lieutenant {stack.lieutenant.url}: {', '.join(sorted(made.clusters))}")
    return base


def _published(demo: Demo, total: int, deployment_id: str) -> CheckRunRecord:
    """Step 6; the deployment's final check run."""
    with step(6, total, "check run reports the catalog published"):

        def concluded() -> CheckRunRecord | None:
            current = demo.deployment_run(deployment_id)
            if current is None or current.conclusion in (None, "action_required"):
                return None
            return current

        final = demo.wait_for("final conclusion", concluded)
        if final.conclusion != "success":
            raise ValueError(
                f"check run {final.id} concluded {final.conclusion} "
                f"({final.output.get('title')}): {final.output.get('summary')}"
            )
        print(f"      check run {final.id}: {final.output.get('title')}", flush=True)
    return final


def _catalog_committed(demo: Demo, total: int) -> None:
    """Step 7: the changed cluster's catalog repository has Commodore's commit; the other
    cluster's is as Lieutenant made it."""
    root = demo.scenario.root
    repos = demo.stack.data_dir / "repos"
    with step(7, total, f"catalog committed to {root}'s catalog repository"):
        catalog = repos / f"catalog-{root}.git"
        message = fleetrepo.git(catalog, "log", "-1", "--format=%B", "main")
        if not message.startswith("Automated catalog update from Commodore"):
            raise ValueError(f"the last commit of {catalog} is not a catalog update: {message}")
        deployment = fleetrepo.git(catalog, "show", "main:manifests/echo/10_deployment.yaml")
        if NEW_REGION not in deployment:
            raise ValueError(f"{catalog}: manifests/echo/10_deployment.yaml lacks {NEW_REGION}")
        files = fleetrepo.git(catalog, "ls-tree", "-r", "--name-only", "main").splitlines()
        print(_indent(message, "      │ "), flush=True)
        print(f"      {len(files)} files: {', '.join(files)}", flush=True)
        for other in sorted(p for p in repos.glob("catalog-*.git") if p != catalog):
            count = fleetrepo.git(other, "rev-list", "--count", "main")
            if count != "1":
                raise ValueError(f"{other.name} changed ({count} commits): its cluster did not")
            print(f"      {other.name}: unchanged", flush=True)


def _compile_reported(demo: Demo, total: int) -> None:
    """Step 8: compileMeta POSTed to Lieutenant for the changed cluster."""
    root = demo.scenario.root
    lieutenant = demo.stack.lieutenant
    assert lieutenant is not None
    with step(8, total, f"compile metadata reported to Lieutenant for {root}"):

        def reported() -> dict[str, object] | None:
            found = [body for cluster, body in lieutenant.reported() if cluster == root]
            return found[-1] if found else None

        body = demo.wait_for("compileMeta", reported)
        instances = body.get("instances")
        assert isinstance(instances, dict)
        versions = ", ".join(f"{name} {info['version']}" for name, info in instances.items())
        print(f"      POST /clusters/{root}/compileMeta: {versions}", flush=True)
        others = sorted({c for c, _ in lieutenant.reported()} - {root})
        if others:
            raise ValueError(f"compileMeta reported for {others} too")


def _create_fleet_repo(demo: Demo, total: int, fleet: Path) -> str:
    """Step 2; the fleet repo's first commit."""
    with step(2, total, f"create the fleet repo {OWNER}/{REPO} from {fleet.name}"):
        fleetrepo.create_fleet_repo(fleet, demo.repo_dir, message="Fleet from example")
        base = _verified_delivery(demo)
        demo.stack.add_repository(OWNER, REPO, demo.repo_dir)
        print(f"      {demo.repo_dir} at {base[:12]}", flush=True)
    return base


def _push_change(demo: Demo, total: int, base: str) -> str:
    """Step 3; the merged commit."""
    scenario = demo.scenario
    root = scenario.root
    with step(3, total, f"merge a change to {root} and send the signed push webhook"):
        head = fleetrepo.set_value(
            demo.repo_dir,
            scenario.changed_file,
            scenario.key,
            NEW_REGION,
            f"{root}: move to {NEW_REGION}",
        )
        delivery = demo.emulator.send_push(OWNER, REPO, base, head)
        if not 200 <= delivery.status < 300:
            raise StepFailed("push", f"the gateway answered {delivery.status}: {delivery.response}")
        print(
            f"      {head[:12]}: {scenario.changed_file} {scenario.key} → {NEW_REGION}", flush=True
        )
        print(f"      gateway answered {delivery.status} {delivery.response.strip()}", flush=True)
    return head


def _review_asked(demo: Demo, total: int, head: str) -> CheckRunRecord:
    """Step 4; the check run asking for review."""
    root = demo.scenario.root
    with step(4, total, "check run asks for review with the diff"):

        def awaiting_review() -> CheckRunRecord | None:
            run = demo.check_run(head)
            if run is not None and run.conclusion in FAILED:
                # a render error in the fleet, say: no point waiting for the timeout
                raise ValueError(
                    f"check run {run.id} concluded {run.conclusion}: "
                    f"{run.output.get('title')}\n{run.output.get('summary')}"
                )
            if run is None or run.conclusion != "action_required":
                return None
            return run

        run = demo.wait_for(f"check run rollwright/{root} awaiting review", awaiting_review)
        text = run.output.get("text") or ""
        identifiers = [a["identifier"] for a in run.actions]
        if not text.strip():
            raise ValueError(f"check run {run.id} asks for review with an empty diff")
        if NEW_REGION not in text:
            raise ValueError(f"the diff on check run {run.id} does not show {NEW_REGION!r}")
        if "approve" not in identifiers:
            raise ValueError(f"check run {run.id} offers {identifiers}, not approve")
        print(f"      {run.output.get('title')} · buttons: {', '.join(identifiers)}", flush=True)
        print(_indent(_excerpt(text, NEW_REGION), "      │ "), flush=True)
    return run


def _approve(demo: Demo, total: int, run: CheckRunRecord) -> list[str]:
    """Step 5; who approved."""
    # The example fleets have OWNERS files: the approvals the check run says it still needs.
    reviewers = approvers_needed(run.output.get("summary") or "", REVIEWER)
    with step(5, total, f"click Approve as {', '.join(reviewers)} (check_run.requested_action)"):
        for reviewer in reviewers:
            delivery = demo.emulator.click_action(run.id, "approve", reviewer)
            if not 200 <= delivery.status < 300:
                raise ValueError(f"the gateway answered {delivery.status}: {delivery.response}")
    return reviewers


def _verified(demo: Demo, total: int, deployment_id: str) -> CheckRunRecord:
    """Step 6; the deployment's final check run."""
    stack = demo.stack
    root = demo.scenario.root
    with step(6, total, "check run reports the deployment published and verified by Argo CD"):
        # After a review GitHub keeps the reviewed run completed; the worker continues the
        # deployment on a new run with the same name and external_id (the old one says so).
        def concluded() -> CheckRunRecord | None:
            current = demo.deployment_run(deployment_id)
            if current is None or current.conclusion in (None, "action_required"):
                return None
            return current

        final = demo.wait_for("final conclusion", concluded)
        if final.conclusion != "success" or final.output.get("title") != "Verified":
            raise ValueError(
                f"check run {final.id} concluded {final.conclusion} "
                f"({final.output.get('title')}): {final.output.get('summary')}"
            )
        assert stack.argocd is not None
        app_name = argocd_application(root)
        app = stack.argocd.application(app_name)["status"]
        print(f"      check run {final.id}: {final.output.get('title')}", flush=True)
        print(
            f"      Argo CD {app_name}: {app['sync']['status']} at "
            f"{app['sync'].get('revision', '')[:12]}, {app['health']['status']}",
            flush=True,
        )
    return final


def _recorded(demo: Demo, total: int, head: str, deployment_id: str) -> None:
    """Steps 7 and 8: the deployment in the blob store and in SQL."""
    stack = demo.stack
    root = demo.scenario.root
    with step(7, total, "latest deployment recorded in the blob store"):
        latest = demo.wait_for("verified latest.json", lambda: _latest(stack, root, head))
        print(
            f"      deployments/{OWNER}/{REPO}/{root}/latest.json: {latest['state']} "
            f"{latest['revision'][:12]} approved by {latest.get('approved_by')}",
            flush=True,
        )

    with step(8, total, "deployment recorded in SQL"):
        row = demo.wait_for("verified deployment row", lambda: _sql_row(stack, deployment_id))
        print(f"      deployments row {row[0]}: {row[1]} {row[2][:12]}", flush=True)
        if stack.sink is not None:  # the events the worker sent to the stack's sink
            sent = demo.wait_for(
                "the verified deployment's notification",
                lambda: _announced(stack, deployment_id),
            )
            print(f"      notified (signed webhook): {', '.join(sent)}", flush=True)


def _announced(stack: DevStack, deployment_id: str) -> list[str] | None:
    assert stack.sink is not None
    kinds = [e["type"] for e in stack.sink.events() if e.get("deployment_id") == deployment_id]
    return kinds if "deployment.verified" in kinds else None


def _job_page_shown(demo: Demo, total: int, deployment_id: str, reviewer: str) -> str:
    """Step 9; the job page's URL."""
    job_url = f"{demo.stack.urls.gateway}/jobs/{deployment_id}"
    with (
        step(9, total, f"job page shows the deployment to {reviewer}, signed in with GitHub"),
        httpx.Client(timeout=5) as browser,
    ):
        page = demo.wait_for("job page", lambda: _job_page(browser, job_url, reviewer))
        print(f"      {job_url}: {page}", flush=True)
    return job_url


def _links(
    demo: Demo, deployment_id: str, job_url: str, run: CheckRunRecord, final: CheckRunRecord
) -> str:
    """What the demo made, one line each: pages, Temporal UI, check runs."""
    urls = demo.stack.urls
    root = demo.scenario.root
    emulator = demo.emulator
    links = [
        f"job page                       {job_url}",
        f"root page                      {urls.gateway}/roots/{root}",
    ]
    deploy_url = urls.workflow_url(deploy_workflow_id(f"{OWNER}/{REPO}", root))
    if deploy_url:
        links.append(f"Temporal UI (deploy workflow)  {deploy_url}")
        links.append(f"Temporal UI (this deployment)  {urls.workflow_url(deployment_id)}")
    links.append(f"check run (review)             {emulator.url}/{OWNER}/{REPO}/runs/{run.id}")
    links.append(f"check run (result)             {emulator.url}/{OWNER}/{REPO}/runs/{final.id}")
    return "\n".join(links)


def argocd_application(root: str) -> str:
    """The demo root's Application in the fake Argo CD: the root id with `/` as `-`, which
    is also what `{root}` becomes in the verify rule's selector."""
    return root.replace("/", "-")


def _verified_delivery(demo: Demo) -> str:
    """Publish the demo's root to the fleet repo's `rendered` branch and verify it with the
    stack's fake Argo CD: a rollwright.yaml saying so, and the root's Application, which
    follows that branch. The commit holding the settings."""
    stack = demo.stack
    if stack.argocd is None:
        raise ValueError("the demo needs the stack's fake Argo CD (it runs with the emulator)")
    (demo.repo_dir / "rollwright.yaml").write_text(
        "# The demo's delivery: a git branch Argo CD syncs, and verification of it.\n"
        "publish:\n"
        "  target: git\n"
        "  git: {branch: rendered}\n"
        "verify:\n"
        "  - timeout: 2m\n"
        "    interval: 2s\n"
        "    argocd:\n"
        f"      server: {stack.argocd.url}\n"
        f"      tokenEnv: {DEV_ARGOCD_TOKEN_VAR}\n"
        '      selector: "rollwright.dev/root={root}"\n'
    )
    root = demo.scenario.root
    stack.argocd.add_application(
        argocd_application(root),
        path=root,
        repo_url=str(demo.repo_dir),
        target_revision="rendered",
        labels={"rollwright.dev/root": argocd_application(root)},
    )
    return fleetrepo.commit_all(demo.repo_dir, "Publish to a branch, verified by Argo CD")


def _job_page(browser: httpx.Client, url: str, login: str) -> str | None:
    """What the job page says of the deployment, once it shows it verified, to `login`
    signed in through the emulator's OAuth flow (the pages ask for a sign-in)."""
    try:
        page = open_signed_in(browser, url, login)
        answer = browser.get(url.replace("/jobs/", "/api/jobs/", 1))
    except httpx.HTTPError:
        return None
    if answer.status_code != 200 or page.status_code != 200:
        return None
    job = answer.json()
    if job.get("state") != "verified":
        return None
    return f"{job['state']}, {len(job.get('timeline') or [])} states in the timeline"


def _latest(stack: DevStack, root: str, head: str) -> dict[str, str] | None:
    store = _blob_store(stack)
    data = store.get(latest_key(f"{OWNER}/{REPO}", root))
    if data is None:
        return None
    latest: dict[str, str] = json.loads(data)
    if latest.get("revision") != head or latest.get("state") != "verified":
        return None
    return latest


def _blob_store(stack: DevStack) -> FileBlobStore:

    url = stack.env.get("ROLLWRIGHT_BLOB_URL") or f"file://{stack.data_dir / 'blobs'}"
    if not url.startswith("file://"):
        raise StackError(f"the demo reads a filesystem blob store, not {url}")
    return FileBlobStore(Path(url.removeprefix("file://")))


def _sql_row(stack: DevStack, deployment_id: str) -> tuple[str, str, str] | None:
    url = stack.env.get("ROLLWRIGHT_DATABASE_URL") or (
        f"sqlite:///{stack.data_dir / 'rollwright.db'}"
    )
    database = Database(url)
    try:
        row = DeploymentStore(database).get(deployment_id)
        if row is None or row.state != "verified":
            return None
        return row.deployment_id, row.state, row.revision
    finally:
        database.close()


def _excerpt(text: str, needle: str, context: int = 6) -> str:
    """The diff's first line, then the lines around `needle` (the change the demo made)."""
    lines = text.splitlines()
    # A changed line of the diff, not the commit subject above it, which may name it too.
    changed = [i for i, line in enumerate(lines) if needle in line and line[:1] in "+-"]
    at = changed[0] if changed else next((i for i, ln in enumerate(lines) if needle in ln), 0)
    start, end = max(1, at - context), min(len(lines), at + context + 1)
    shown = lines[:1] + (["…"] if start > 1 else []) + lines[start:end]
    return "\n".join(shown + (["…"] if end < len(lines) else []))


def _indent(text: str, prefix: str = "      ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())

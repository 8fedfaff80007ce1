"""Any dimensions: fleets of 1, 2, 3 and 4 levels, written the way the fleet design document's
users write them (tests/fixtures/fleets/, and examples/dimensions-fleet for three levels).

Roots, values (overrides at every level), the rendered chart, affected roots, promotion order,
`rollout status` and, over the four-level fleet, the promotion workflow with the real engine
behind its activities (each step a real commit).
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio import activity

from activities.promotion import evaluate
from shared.cli import main as cli
from shared.contracts.activityrefs import (
    ACT_PROMOTION_COMMIT,
    ACT_PROMOTION_EVALUATE,
    ACT_PROMOTION_GRADUATE,
)
from shared.contracts.promotion import (
    SIGNAL_PROMOTE,
    CommitRequest,
    CommitResult,
    EvaluateRequest,
    Evaluation,
    GraduateRequest,
    GraduateResult,
    PromoteSignal,
    RolloutView,
    RootDeployment,
)
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree, WorkTree
from shared.promotion.plan import (
    patch_active_at_root,
    plan_graduation,
    plan_promotion,
    rollout_plan,
    rollout_status,
    roots_under,
)
from tests.support import promotion_world
from tests.support.deploy_world import until
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import EXAMPLES, FIXTURES

FLEETS = FIXTURES / "fleets"
EDGE, BOOTSTRAP, ZONES = FLEETS / "edge-fleet", FLEETS / "bootstrap-fleet", FLEETS / "zones-fleet"
DEPTHS = {1: EDGE, 2: BOOTSTRAP, 3: EXAMPLES / "dimensions-fleet", 4: ZONES}
ZONE_C = "management-cluster/production/main/us-east1/us-east1-c"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def repo_of(tmp_path: Path, fleet: Path) -> tuple[Path, str]:
    repo = init_repo(tmp_path / "fleet")
    shutil.copytree(fleet, repo, dirs_exist_ok=True)
    return repo, commit_all(repo, "base")


# --- roots, values, render --------------------------------------------------------------------


def test_roots_at_every_depth(capsys: pytest.CaptureFixture[str]) -> None:
    roots = {}
    for depth, fleet in DEPTHS.items():
        code, out, err = run(capsys, "roots", "--repo", str(fleet))
        assert code == 0, err
        roots[depth] = out.splitlines()
    assert roots[1] == ["edge/ap-south1", "edge/eu-west1", "edge/us-east1"]
    assert roots[2] == [
        f"{t}/{p}"
        for t in ("infra-cluster", "management-cluster")
        for p in ("production/europe-west1", "production/us-east1", "staging/us-east1")
    ]
    assert len(roots[3]) == 16 and all(r.count("/") == 3 for r in roots[3])
    assert roots[4] == [
        "management-cluster/integration/int-1/us-central1/us-central1-a",
        "management-cluster/integration/int-1/us-central1/us-central1-b",
        "management-cluster/production/canary/us-east1/us-east1-b",
        "management-cluster/production/main/europe-west1/europe-west1-b",
        "management-cluster/production/main/us-east1/us-east1-b",
        ZONE_C,
    ]


@pytest.mark.parametrize(
    ("depth", "root", "cluster"),
    [
        (1, "edge/eu-west1", {"region": "eu-west1"}),
        (
            2,
            "infra-cluster/production/us-east1",
            {"environment": "production", "region": "us-east1"},
        ),
        (
            3,
            "regional-cluster/prod/prod-canary/us-east1",
            {"environment": "prod", "sector": "prod-canary", "region": "us-east1"},
        ),
        (
            4,
            ZONE_C,
            {
                "environment": "production",
                "sector": "main",
                "region": "us-east1",
                "zone": "us-east1-c",
            },
        ),
    ],
)
def test_values_name_every_dimension(
    capsys: pytest.CaptureFixture[str], depth: int, root: str, cluster: dict[str, str]
) -> None:
    code, out, err = run(capsys, "values", root, "--repo", str(DEPTHS[depth]))
    assert code == 0, err
    values = yaml.safe_load(out)
    assert values["cluster"] == {"type": root.split("/")[0], **cluster}


def test_overrides_at_every_level_of_four() -> None:
    fleet = Fleet.open(WorkTree(ZONES))

    def hypershift(root: str) -> dict[str, Any]:
        apps = fleet.values(root)["applications"]
        helm: dict[str, Any] = apps["hypershift"]["source"]["helm"]["valuesObject"]
        return helm

    assert hypershift(ZONE_C) == {
        "replicas": 3,  # production
        "zone": "{{ .Values.cluster.zone }}",
        "clusterName": "{{`{{ .Values.cluster.name }}`}}",
        "nodeSelector": {"pool": "large"},  # the zone's own values
    }
    assert "nodeSelector" not in hypershift(ZONE_C.replace("us-east1-c", "us-east1-b"))
    # cert-manager's sector override, and the patch active under integration only
    integration = fleet.values("management-cluster/integration/int-1/us-central1/us-central1-a")
    assert integration["applications"]["cert-manager"]["source"]["targetRevision"] == "v1.15.1"
    assert integration["applications"]["hypershift"]["source"]["targetRevision"] == "v4.18.0"
    production = fleet.values(ZONE_C)["applications"]
    assert production["hypershift"]["source"]["targetRevision"] == "v4.17.0"


def test_render_a_four_level_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "render", "--repo", str(ZONES), "--out", str(tmp_path))
    assert code == 0, err
    chart = tmp_path / ZONE_C
    assert yaml.safe_load((chart / "Chart.yaml").read_text()) == {
        "apiVersion": "v2",
        "name": "management-cluster-production-main-us-east1-us-east1-c",
        "description": "ArgoCD applications for management-cluster in "
        "production/main/us-east1/us-east1-c",
        "type": "application",
        "version": "0.1.0",
    }
    app = yaml.safe_load((chart / "templates/hypershift.yaml").read_text())
    helm = app["spec"]["source"]["helm"]["valuesObject"]
    assert helm["zone"] == "us-east1-c"  # resolved here, from the root
    assert helm["clusterName"] == "{{ .Values.cluster.name }}"  # one level left
    assert app["spec"]["destination"] == {
        "name": "{{ .Values.cluster.name }}",
        "namespace": "hypershift",
    }


def test_render_a_one_level_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "render", "--repo", str(EDGE), "--out", str(tmp_path))
    assert code == 0, err
    for region in ("us-east1", "eu-west1", "ap-south1"):
        app = yaml.safe_load((tmp_path / "edge" / region / "templates/agent.yaml").read_text())
        helm = app["spec"]["source"]["helm"]["valuesObject"]
        assert helm["region"] == region
        assert helm.get("gdpr") is (True if region == "eu-west1" else None)
        revision = app["spec"]["source"]["targetRevision"]
        assert revision == ("1.5.0" if region == "us-east1" else "1.4.0")  # the active patch


# --- affected roots ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("depth", "path", "expected"),
    [
        (1, "config/edge/agent/eu-west1/values.yaml", ["edge/eu-west1"]),
        (
            1,
            "config/edge/agent/patches/agent-1.5.yaml",
            ["edge/ap-south1", "edge/eu-west1", "edge/us-east1"],
        ),
        (
            2,
            "config/infra-cluster/management-cluster-root/production/values.yaml",
            ["infra-cluster/production/europe-west1", "infra-cluster/production/us-east1"],
        ),
        (
            2,
            "config/management-cluster/prometheus/staging/us-east1/values.yaml",
            ["management-cluster/staging/us-east1"],
        ),
        (
            4,
            "config/management-cluster/hypershift/production/main/us-east1/us-east1-c/values.yaml",
            [ZONE_C],
        ),
        (
            4,
            "config/management-cluster/cert-manager/production/main/us-east1/values.yaml",
            [ZONE_C.replace("us-east1-c", "us-east1-b"), ZONE_C],
        ),
        # a directory that is no zone of us-east1: a problem of the roots under the region
        (
            4,
            "config/management-cluster/hypershift/production/main/us-east1/us-east1-z/values.yaml",
            [ZONE_C.replace("us-east1-c", "us-east1-b"), ZONE_C],
        ),
    ],
)
def test_affected_roots_at_any_depth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int, path: str, expected: list[str]
) -> None:
    repo, base = repo_of(tmp_path, DEPTHS[depth])
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    app = path.split("/")[2]
    section = "applicationsets" if app == "management-cluster-root" else "applications"
    target.write_text(yaml.safe_dump({section: {app: {"project": "changed"}}}))
    head = commit_all(repo, "edit")
    code, out, err = run(capsys, "roots", "--repo", str(repo), "--changed", f"{base}..{head}")
    assert code == 0, err
    assert out.splitlines() == expected


# --- promotion order and rollout status -------------------------------------------------------


def steps_to_graduation(repo: Path, patch_id: str) -> list[tuple[str, str, int]]:
    """Promote the patch step by step on a checkout: (node, gate, soak) of each commit."""
    steps: list[tuple[str, str, int]] = []
    while True:
        [status] = rollout_status(WorkTree(repo), patch_id)
        if status.next_node is None:
            assert status.graduated_ready
            return steps
        node = status.next_node
        steps.append((node.path, node.gate, node.soak_seconds))
        change = plan_promotion(WorkTree(repo), patch_id)
        for rel, data in change.writes.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes(data)
        commit_all(repo, change.message)


def test_promotion_order_of_one_level(tmp_path: Path) -> None:
    repo, _ = repo_of(tmp_path, EDGE)
    assert [n.path for n in rollout_plan(WorkTree(repo))] == ["us-east1", "eu-west1", "ap-south1"]
    assert steps_to_graduation(repo, "agent-1.5") == [
        ("eu-west1", "manual", 1800),
        ("ap-south1", "automated", 0),
    ]


def test_promotion_order_of_two_levels(tmp_path: Path) -> None:
    repo, _ = repo_of(tmp_path, BOOTSTRAP)
    assert [n.path for n in rollout_plan(WorkTree(repo))] == [
        "staging",
        "staging/us-east1",
        "production",
        "production/us-east1",
        "production/europe-west1",
    ]
    # an ApplicationSet's patch walks the sequence like an application's
    assert steps_to_graduation(repo, "rendered-v2") == [
        ("production/us-east1", "manual", 0),
        ("production/europe-west1", "automated", 0),
    ]
    change = plan_graduation(WorkTree(repo), "rendered-v2")
    base = yaml.safe_load(change.writes["config/infra-cluster/management-cluster-root/values.yaml"])
    spec = base["applicationsets"]["management-cluster-root"]["template"]["spec"]
    assert spec["source"]["targetRevision"] == "v2"
    assert "Every root of 'infra-cluster' merges to the same values as before." in change.message


def test_promotion_order_of_four_levels(tmp_path: Path) -> None:
    repo, _ = repo_of(tmp_path, ZONES)
    plan = [n.path for n in rollout_plan(WorkTree(repo))]
    assert plan[:5] == [
        "integration",
        "integration/int-1",
        "integration/int-1/us-central1",
        "integration/int-1/us-central1/us-central1-a",
        "integration/int-1/us-central1/us-central1-b",
    ]
    assert len(plan) == 15
    assert steps_to_graduation(repo, "hypershift-v4.18") == [
        ("production/canary/us-east1/us-east1-b", "manual", 0),  # enters production
        ("production/main/us-east1/us-east1-b", "manual", 0),  # enters main
        ("production/main/us-east1/us-east1-c", "automated", 7200),  # completes us-east1
        ("production/main/europe-west1/europe-west1-b", "automated", 86400),  # and production
    ]


def test_rollout_step_names_any_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, _ = repo_of(tmp_path, ZONES)
    (repo / "rollwright.yaml").write_text("rollout:\n  step: region\n")
    commit_all(repo, "step by region")
    assert steps_to_graduation(repo, "hypershift-v4.18") == [
        ("production/canary/us-east1", "manual", 0),
        ("production/main/us-east1", "manual", 7200),
        ("production/main/europe-west1", "automated", 86400),
    ]
    (repo / "rollwright.yaml").write_text("rollout:\n  step: cells\n")
    code, _, err = run(capsys, "rollout", "status", "--repo", str(repo))
    assert code == 2
    assert err == (
        "error: rollwright.yaml:2: rollout.step 'cells' is not a dimension of "
        "config/config.yaml (environment, sector, region, zone)\n"
    )


@pytest.mark.parametrize(
    ("depth", "patch", "active", "next_node"),
    [
        (1, "agent-1.5", "us-east1", "eu-west1 (gate manual)"),
        (2, "rendered-v2", "staging", "production/us-east1 (gate manual)"),
        (
            3,
            "hypershift-v4.18-rollout",
            "integration",
            "stage/stage-sector-1/us-east1 (gate manual)",
        ),
        (
            4,
            "hypershift-v4.18",
            "integration",
            "production/canary/us-east1/us-east1-b (gate manual)",
        ),
    ],
)
def test_rollout_status_at_every_depth(
    capsys: pytest.CaptureFixture[str], depth: int, patch: str, active: str, next_node: str
) -> None:
    code, out, err = run(capsys, "rollout", "status", "--repo", str(DEPTHS[depth]))
    assert code == 0, err
    assert out.startswith(f"{patch}  (")
    assert f"  active on:    {active}\n" in out
    assert f"  next:         {next_node}\n" in out


# --- the promotion workflow over four levels --------------------------------------------------


@dataclass
class GitFleet(promotion_world.Fleet):
    """promotion_world's fleet with the real engine behind the activities: evaluations read
    the git repository at the revision asked, commits are `plan_promotion`'s, and the roots
    under each new node report published deployments of it."""

    repo: Path = Path()

    def __post_init__(self) -> None:
        self.tip = git(self.repo, "rev-parse", "HEAD").strip()

    @activity.defn(name=ACT_PROMOTION_EVALUATE.name)
    async def evaluate(self, req: EvaluateRequest) -> Evaluation:
        self.evaluations.append(req)
        return evaluate(GitTree(self.repo, req.revision), req.patch_id, req.now)

    def contains_patch(self, root: str, revision: str) -> bool:
        return patch_active_at_root(GitTree(self.repo, revision), promotion_world.PATCH, root)

    @activity.defn(name=ACT_PROMOTION_COMMIT.name)
    async def commit(self, req: CommitRequest) -> CommitResult:
        change = plan_promotion(
            GitTree(self.repo, self.tip), req.patch_id, to=req.to_node, actor=req.actor
        )
        for rel, data in change.writes.items():
            (self.repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / rel).write_bytes(data)
        self.tip = commit_all(self.repo, change.message)
        self.commits.append(req)
        for root in roots_under(GitTree(self.repo, self.tip), req.patch_id, req.to_node):
            await self.report(root, self.tip, "published")
        return CommitResult(revision=self.tip)

    @activity.defn(name=ACT_PROMOTION_GRADUATE.name)
    async def graduate(self, req: GraduateRequest) -> GraduateResult:
        self.graduations.append(req)
        plan_graduation(GitTree(self.repo, self.tip), req.patch_id)  # must be possible
        return GraduateResult(number=7, url="https://gh/acme/fleet/pull/7", branch="graduate")


CANARY = "production/canary/us-east1/us-east1-b"
MAIN_B = "production/main/us-east1/us-east1-b"


def test_promotion_workflow_walks_a_four_level_sequence(tmp_path: Path) -> None:
    repo, base = repo_of(tmp_path, ZONES)
    fleet = GitFleet(plan=[], roots={}, repo=repo)
    for root in roots_under(GitTree(repo, base), promotion_world.PATCH, "integration"):
        fleet.latest[root] = RootDeployment(
            root=root,
            revision=base,
            deployment_id=f"dep-{root}",
            state="published",
            contains_patch=True,
        )

    async def scenario() -> RolloutView:
        async with promotion_world.rollout(fleet) as r:
            handle = await r.start()
            # Two manual gates: entering production, then its main sector.
            for gate in (CANARY, MAIN_B):

                async def waiting(gate: str = gate) -> bool:
                    view = await r.view()
                    return view.phase == "gate" and view.next_node == gate

                await until(waiting, f"the manual gate of {gate}", timeout=30)
                await r.signal(SIGNAL_PROMOTE, PromoteSignal(by="alice"))
            view: RolloutView = await handle.result()  # soaks of 2h and 1d pass here
            return view

    view = asyncio.run(asyncio.wait_for(scenario(), 120))
    assert [(c.to_node, c.actor) for c in fleet.commits] == [
        (CANARY, "alice"),
        (MAIN_B, "alice"),
        ("production/main/us-east1/us-east1-c", None),
        ("production/main/europe-west1/europe-west1-b", None),
    ]
    assert view.phase == "graduated"
    rows = {row.node: row.state for row in view.rows}
    assert rows["production/main/us-east1/us-east1-c"] == "passed"
    assert set(rows) == {n.path for n in rollout_plan(GitTree(repo, fleet.tip))}
    log = git(repo, "log", "--format=%s", f"{base}..HEAD").splitlines()
    assert log[0] == "promote hypershift-v4.18 to production/main/europe-west1/europe-west1-b"

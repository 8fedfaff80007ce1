"""Promotion in git: the engine (shared/promotion/plan.py) and `rollwright promote` / `rollout
status`, on real git repositories made from examples/dimensions-fleet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.cli.main import main
from shared.engine import yamldoc
from shared.engine.config.fleet import FleetConfig
from shared.engine.dimensions.layout import DimensionsLayout
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import GitTree, WorkTree
from shared.engine.validate import validate_fleet
from shared.promotion import plan as promotion
from shared.promotion import yamledit
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.dimensions import ROOTS, base_files, patch_doc
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo

PID = "hypershift-v4.18-rollout"
APP_DIR = "config/management-cluster/hypershift-operator"
PATCH_FILE = "patch-001-hypershift-v4.18.yaml"
STAGED = f"{APP_DIR}/patches/{PATCH_FILE}"
STAGE_ROOT = "management-cluster/stage/stage-sector-1/us-east1"

SEQUENCE = [
    "integration",
    "integration/int-sector-1",
    "integration/int-sector-1/us-central1",
    "integration/int-sector-1/europe-west1",
    "integration/int-sector-2",
    "integration/int-sector-2/us-central1",
    "stage",
    "stage/stage-sector-1",
    "stage/stage-sector-1/us-east1",
    "stage/stage-sector-1/europe-west1",
    "prod",
    "prod/prod-canary",
    "prod/prod-canary/us-east1",
    "prod/prod-sector-1",
    "prod/prod-sector-1/us-east1",
    "prod/prod-sector-1/europe-east1",
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def head_message(repo: Path) -> str:
    return git(repo, "log", "-1", "--format=%B")


def rendered_app(repo: Path, root: str, app: str = "hypershift-operator") -> dict[str, Any]:
    files = Fleet.open(WorkTree(repo)).render(root).files
    doc: dict[str, Any] = yaml.safe_load(files[f"templates/{app}.yaml"])
    return doc


def merged_apps(path: Path) -> dict[str, Any]:
    layout = DimensionsLayout(WorkTree(path), FleetConfig())
    return {root: layout.state(root).values["applications"] for root in layout.roots()}


# --- the sequence and status ----------------------------------------------------------------


def test_plan_lists_the_sequence_in_promotion_order_with_gates_and_soak(repo: Path) -> None:
    plan = promotion.rollout_plan(WorkTree(repo))
    assert [n.path for n in plan] == SEQUENCE
    by_path = {n.path: n for n in plan}
    # Entering stage enters its first sector and region too: stage's manual gate applies.
    assert by_path["stage"].gate == "manual"
    assert by_path["stage/stage-sector-1/us-east1"].gate == "manual"
    assert by_path["stage/stage-sector-1/europe-west1"].gate == "automated"
    assert by_path["integration/int-sector-1/europe-west1"].gate == "automated"
    # The last region of stage completes stage (soak 2h); the first does not.
    assert by_path["stage/stage-sector-1/europe-west1"].soak_seconds == 2 * 3600
    assert by_path["stage/stage-sector-1/us-east1"].soak_seconds == 0
    assert by_path["prod/prod-sector-1"].soak_seconds == 86400  # completes prod (1d > 12h)
    assert by_path["prod/prod-canary"].soak_seconds == 0


def test_default_soak_comes_from_rollwright_yaml(repo: Path) -> None:
    write_files(repo, {"rollwright.yaml": "rollout:\n  soak: 30m\n"})
    by_path = {n.path: n for n in promotion.rollout_plan(WorkTree(repo))}
    assert by_path["integration/int-sector-1/us-central1"].soak_seconds == 1800
    assert by_path["stage/stage-sector-1/europe-west1"].soak_seconds == 7200  # own soak wins


def test_status_of_the_example(repo: Path) -> None:
    [status] = promotion.rollout_status(WorkTree(repo))
    assert status.patch_id == PID
    assert (status.cluster_type, status.app) == ("management-cluster", "hypershift-operator")
    assert status.staged_path == STAGED
    assert status.active_nodes == ["integration"]
    assert status.current_node == promotion.Node("integration", "automated", 0)
    assert status.next_node == promotion.Node("stage/stage-sector-1/us-east1", "manual", 0)
    assert status.unmet_dependencies == []
    assert status.conflicts == []
    assert not status.graduated_ready
    assert status.skipped_nodes == []


def test_status_reads_a_git_revision_like_the_checkout(repo: Path) -> None:
    assert promotion.rollout_status(GitTree(repo, "HEAD")) == promotion.rollout_status(
        WorkTree(repo)
    )


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("environment", "stage"),
        ("sector", "stage/stage-sector-1"),
        ("region", "stage/stage-sector-1/us-east1"),
    ],
)
def test_step_size_sets_the_default_next_node(repo: Path, step: str, expected: str) -> None:
    write_files(repo, {"rollwright.yaml": f"rollout:\n  step: {step}\n"})
    [status] = promotion.rollout_status(WorkTree(repo))
    assert status.next_node is not None
    assert status.next_node.path == expected
    assert status.next_node.gate == "manual"


def test_roots_and_activity_per_root(repo: Path) -> None:
    tree = WorkTree(repo)
    assert promotion.roots_under(tree, PID, "stage") == [
        "management-cluster/stage/stage-sector-1/europe-west1",
        STAGE_ROOT,
    ]
    assert promotion.patch_active_at_root(
        tree, PID, "management-cluster/integration/int-sector-2/us-central1"
    )
    assert not promotion.patch_active_at_root(tree, PID, STAGE_ROOT)
    assert not promotion.patch_active_at_root(
        tree, PID, "regional-cluster/integration/int-sector-2/us-central1"
    )
    assert promotion.current_node(tree, PID) == promotion.Node("integration", "automated", 0)


def test_unknown_patch_and_node_are_errors(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "promote", "nope", "--repo", str(repo))
    assert code == 2
    assert "no patch with id 'nope'" in err and PID in err
    with pytest.raises(promotion.PatchNotFound) as caught:
        promotion.rollout_status(WorkTree(repo), "nope")
    assert isinstance(caught.value, FleetError) and caught.value.patch_id == "nope"
    code, _, err = run(capsys, "promote", PID, "--to", "prd", "--repo", str(repo))
    assert code == 1
    assert "unknown node 'prd'" in err


# --- promote --------------------------------------------------------------------------------


def test_promote_copies_the_patch_to_the_next_node_and_commits(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = rendered_app(repo, STAGE_ROOT)
    assert before["spec"]["source"]["targetRevision"] == "v4.17.0"
    head = git(repo, "rev-parse", "HEAD")

    code, out, err = run(capsys, "promote", PID, "--repo", str(repo))

    assert (code, err) == (0, "")
    assert f"promote {PID} to stage/stage-sector-1/us-east1" in out
    copy = repo / APP_DIR / "stage/stage-sector-1/us-east1/patches" / PATCH_FILE
    assert copy.read_bytes() == (repo / STAGED).read_bytes()
    assert git(repo, "rev-parse", "HEAD~1") == head
    assert git(repo, "status", "--porcelain") == ""
    message = head_message(repo)
    assert message.startswith(f"promote {PID} to stage/stage-sector-1/us-east1\n")
    assert f"Rollwright-Patch: {PID}" in message
    assert "Rollwright-Node: stage/stage-sector-1/us-east1" in message
    assert "Gate: manual" in message
    assert validate_fleet(WorkTree(repo)) == []
    after = rendered_app(repo, STAGE_ROOT)
    assert after["spec"]["source"]["targetRevision"] == "v4.18.0"
    assert "RespectIgnoreDifferences=true" in after["spec"]["syncPolicy"]["syncOptions"]
    # The other stage region is not touched yet.
    other = rendered_app(repo, "management-cluster/stage/stage-sector-1/europe-west1")
    assert other["spec"]["source"]["targetRevision"] == "v4.17.0"
    [status] = promotion.rollout_status(WorkTree(repo))
    assert status.active_nodes == ["integration", "stage/stage-sector-1/us-east1"]
    expected = promotion.Node("stage/stage-sector-1/europe-west1", "automated", 7200)
    assert status.next_node == expected


def test_a_gap_is_refused_and_force_is_recorded(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    code, _, err = run(capsys, "promote", PID, "--to", "prod/prod-canary", "--repo", str(repo))
    assert code == 1
    assert "would skip stage" in err and "the next node is stage/stage-sector-1/us-east1" in err
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "status", "--porcelain") == ""

    code, _, err = run(
        capsys, "promote", PID, "--to", "prod/prod-canary", "--force", "--repo", str(repo)
    )
    assert (code, err) == (0, "")
    message = head_message(repo)
    assert "Forced: skips stage" in message
    assert "Rollwright-Forced: skips stage" in message
    [status] = promotion.rollout_status(WorkTree(repo))
    assert status.skipped_nodes == ["stage"]
    assert status.next_node is not None and status.next_node.path.startswith("stage/")


def test_finer_step_than_the_default_is_not_a_gap(repo: Path) -> None:
    change = promotion.plan_promotion(WorkTree(repo), PID, to="stage")
    assert list(change.writes) == [f"{APP_DIR}/stage/patches/{PATCH_FILE}"]
    assert "Forced" not in change.message


def test_promoting_past_the_last_node_is_refused_then_graduation(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A stage override of a path the patch sets: graduation must fold into it too.
    write_files(
        repo,
        {
            f"{APP_DIR}/stage/values.yaml": {
                "applications": {"hypershift-operator": {"source": {"targetRevision": "v4.17.5"}}}
            }
        },
    )
    commit_all(repo, "stage pins v4.17.5")
    for node in ("stage", "prod"):
        code, _, err = run(capsys, "promote", PID, "--to", node, "--repo", str(repo))
        assert (code, err) == (0, "")
    code, _, err = run(capsys, "promote", PID, "--repo", str(repo))
    assert code == 1
    assert "active on every node" in err and "--graduate" in err
    problems = [str(p) for p in validate_fleet(WorkTree(repo), render=False)]
    assert any("must graduate" in p for p in problems)
    [status] = promotion.rollout_status(WorkTree(repo))
    assert status.graduated_ready and status.next_node is None
    before = merged_apps(repo)

    code, out, err = run(capsys, "promote", PID, "--graduate", "--repo", str(repo))

    assert (code, err) == (0, "")
    assert f"graduate {PID}" in out
    assert validate_fleet(WorkTree(repo)) == []
    assert merged_apps(repo) == before
    assert not (repo / STAGED).exists()
    assert not list(repo.glob("config/**/patches/*.yaml"))
    base = yaml.safe_load((repo / APP_DIR / "values.yaml").read_text())
    app = base["applications"]["hypershift-operator"]
    assert app["source"]["targetRevision"] == "v4.18.0"
    assert app["syncPolicy"]["syncOptions"] == [
        "CreateNamespace=true",
        "ServerSideApply=true",
        "RespectIgnoreDifferences=true",
    ]
    assert [d["kind"] for d in app["ignoreDifferences"]] == ["HostedCluster", "NodePool"]
    stage = yaml.safe_load((repo / APP_DIR / "stage/values.yaml").read_text())
    assert stage["applications"]["hypershift-operator"]["source"]["targetRevision"] == "v4.18.0"
    message = head_message(repo)
    assert "merges to the same values as before" in message
    assert rendered_app(repo, STAGE_ROOT)["spec"]["source"]["targetRevision"] == "v4.18.0"


def test_graduation_appends_to_the_list_in_force_below_the_base(tmp_path: Path) -> None:
    """The defaults hold syncOptions and the base values do not: the folded base list is the
    defaults' list plus the patch's items, as every root had it."""
    files = base_files()
    files["config/mc/a/patches/p.yaml"] = patch_doc(
        "p",
        "a",
        {"syncPolicy": {"syncOptions": ["PruneLast=true"]}, "project": "special"},
        strategy={"/a/syncPolicy/syncOptions": "append"},
    )
    files["config/mc/a/e1/s1/r2/values.yaml"] = {
        "applications": {"a": {"syncPolicy": None, "project": "r2-project"}}
    }
    for env in ("e1", "e2"):
        files[f"config/mc/a/{env}/patches/p.yaml"] = files["config/mc/a/patches/p.yaml"]
    write_files(tmp_path, files)
    before = merged_apps(tmp_path)
    assert before["mc/e1/s1/r1"]["a"]["syncPolicy"]["syncOptions"] == [
        "CreateNamespace=true",
        "PruneLast=true",
    ]
    assert before["mc/e1/s1/r2"]["a"]["syncPolicy"] == {"syncOptions": ["PruneLast=true"]}

    change = promotion.plan_graduation(WorkTree(tmp_path), "p")

    for rel, data in change.writes.items():
        (tmp_path / rel).write_bytes(data)
    for rel in change.deletes:
        (tmp_path / rel).unlink()
    assert merged_apps(tmp_path) == before
    assert sorted(merged_apps(tmp_path)) == ROOTS
    assert validate_fleet(WorkTree(tmp_path)) == []


def test_graduation_before_every_node_is_refused(repo: Path) -> None:
    with pytest.raises(promotion.PromotionError, match="still needs stage, prod"):
        promotion.plan_graduation(WorkTree(repo), PID)


def test_message_only_and_no_commit(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = git(repo, "rev-parse", "HEAD")
    code, out, _ = run(capsys, "promote", PID, "--message-only", "--repo", str(repo))
    assert code == 0
    assert out.startswith(f"promote {PID} to stage/stage-sector-1/us-east1\n")
    assert git(repo, "status", "--porcelain") == ""

    code, out, _ = run(capsys, "promote", PID, "--no-commit", "--repo", str(repo))
    assert code == 0 and "not committed" in out
    assert git(repo, "rev-parse", "HEAD") == head
    assert "stage/stage-sector-1/us-east1/patches" in git(repo, "status", "--porcelain", "-uall")


def test_a_dirty_checkout_touching_the_same_files_is_refused(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for node in ("stage", "prod"):
        assert run(capsys, "promote", PID, "--to", node, "--repo", str(repo))[0] == 0
    values = repo / APP_DIR / "values.yaml"
    edited = values.read_text() + "# work in progress\n"
    values.write_text(edited)
    head = git(repo, "rev-parse", "HEAD")
    code, _, err = run(capsys, "promote", PID, "--graduate", "--repo", str(repo))
    assert code == 1
    assert f"uncommitted changes to {APP_DIR}/values.yaml" in err
    assert values.read_text() == edited
    assert (repo / STAGED).exists()
    assert git(repo, "rev-parse", "HEAD") == head


def test_other_uncommitted_work_stays_out_of_the_commit(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = repo / "README.md"
    readme.write_text("notes\n")
    git(repo, "add", "README.md")
    code, _, _ = run(capsys, "promote", PID, "--repo", str(repo))
    assert code == 0
    assert git(repo, "show", "--name-only", "--format=", "HEAD").splitlines() == [
        f"{APP_DIR}/stage/stage-sector-1/us-east1/patches/{PATCH_FILE}"
    ]
    assert git(repo, "status", "--porcelain") == "A  README.md"


# --- dependencies and conflicts -------------------------------------------------------------


def test_dependencies_are_checked_on_the_target_nodes_merged_values(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The fleet's cert-manager is too old for the patch, except in integration (v1.15.1).
    write_files(
        repo,
        {
            "config/management-cluster/cert-manager/values.yaml": (
                repo / "config/management-cluster/cert-manager/values.yaml"
            )
            .read_text()
            .replace("v1.14.4", "v1.12.0")
        },
    )
    commit_all(repo, "older cert-manager")
    tree = WorkTree(repo)
    assert promotion.check_dependencies(tree, PID, "integration") == []
    unmet = promotion.check_dependencies(tree, PID, "stage")
    assert unmet == [
        "dependency /cert-manager/source/targetRevision >=v1.13.0 is not met at "
        "management-cluster/stage/stage-sector-1/europe-west1, "
        "management-cluster/stage/stage-sector-1/us-east1 (found 'v1.12.0')"
    ]
    [status] = promotion.rollout_status(tree)
    assert status.unmet_dependencies == [
        "dependency /cert-manager/source/targetRevision >=v1.13.0 is not met at "
        f"{STAGE_ROOT} (found 'v1.12.0')"
    ]
    code, _, err = run(capsys, "promote", PID, "--repo", str(repo))
    assert code == 1
    assert "not met" in err and "found 'v1.12.0'" in err
    # --force skips nodes, never dependencies.
    code, _, _ = run(capsys, "promote", PID, "--to", "stage", "--force", "--repo", str(repo))
    assert code == 1


def _rival_patch(repo: Path, where: str) -> str:
    rel = f"{APP_DIR}/{where}/patch-002-pin.yaml"
    write_files(
        repo,
        {
            rel: {
                "metadata": {"id": "pin-hypershift", "description": "pin"},
                "patch": {"hypershift-operator": {"source": {"targetRevision": "v4.17.9"}}},
            }
        },
    )
    return rel


def test_overlap_at_the_next_node_blocks_the_promotion_naming_both_files(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _rival_patch(repo, "patches")
    rival = _rival_patch(repo, "stage/patches")
    commit_all(repo, "rival patch active in stage")
    assert validate_fleet(WorkTree(repo)) == []  # no overlap yet: different nodes
    statuses = {s.patch_id: s for s in promotion.rollout_status(WorkTree(repo))}
    [conflict] = statuses[PID].conflicts
    assert f"{APP_DIR}/stage/stage-sector-1/us-east1/patches/{PATCH_FILE}" in conflict
    assert rival in conflict and "/hypershift-operator/source/targetRevision" in conflict
    code, _, err = run(capsys, "promote", PID, "--repo", str(repo))
    assert code == 1
    assert "overlap" in err and rival in err and PATCH_FILE in err


def test_overlapping_active_patches_are_conflicts_of_both(repo: Path) -> None:
    _rival_patch(repo, "patches")
    rival = _rival_patch(repo, "integration/int-sector-1/patches")
    statuses = {s.patch_id: s for s in promotion.rollout_status(WorkTree(repo))}
    mine = f"{APP_DIR}/integration/patches/{PATCH_FILE}"
    for pid in (PID, "pin-hypershift"):
        assert statuses[pid].conflicts, pid
        assert any(mine in c and rival in c for c in statuses[pid].conflicts), pid
    assert any("both set" in str(p) for p in validate_fleet(WorkTree(repo), render=False))


# --- windows in the CLI ---------------------------------------------------------------------


def test_a_closed_window_refuses_unless_forced(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_files(
        repo,
        {
            "rollwright.yaml": (
                "rollout:\n"
                "  windows:\n"
                "    - deny: '0 0 * * *'\n"
                "      duration: 2d\n"
                "      nodes: ['stage*']\n"
            )
        },
    )
    commit_all(repo, "freeze stage")
    code, out, _ = run(capsys, "rollout", "status", "--repo", str(repo))
    assert code == 0
    assert "window:       closed: the deny window '0 0 * * *' (UTC) is in force" in out
    code, _, err = run(capsys, "promote", PID, "--repo", str(repo))
    assert code == 1 and "promotion window" in err
    code, _, _ = run(capsys, "promote", PID, "--force", "--repo", str(repo))
    assert code == 0
    assert "Forced: outside the promotion window (closed: the deny window" in head_message(repo)


# --- rollout status -------------------------------------------------------------------------


def test_rollout_status_text_and_json(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "rollout", "status", "--repo", str(repo))
    assert code == 0
    assert out.splitlines()[0].startswith(f"{PID}  (management-cluster/hypershift-operator)")
    assert "  active on:    integration\n" in out
    assert "  next:         stage/stage-sector-1/us-east1 (gate manual)\n" in out
    assert "  window:       no promotion window applies" in out
    assert "  dependencies: met\n" in out
    assert "  graduation:   not yet\n" in out

    code, out, _ = run(capsys, "rollout", "status", "--format", "json", "--repo", str(repo))
    assert code == 0
    [item] = json.loads(out)
    assert item["patch_id"] == PID
    assert item["next_node"] == {
        "path": "stage/stage-sector-1/us-east1",
        "gate": "manual",
        "soak_seconds": 0,
    }
    assert item["window"]["open"] is True

    code, _, err = run(capsys, "rollout", "status", "--patch", "nope", "--repo", str(repo))
    assert code == 2 and "no patch with id 'nope'" in err


def test_rollout_status_shows_a_blocked_node_with_the_reason(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The required case: integration runs a cert-manager older than the patch needs. The patch
    # is not applied there (its roots refuse to render), and the status says so, by node.
    values = repo / "config/management-cluster/cert-manager/integration/values.yaml"
    values.write_text(values.read_text().replace("v1.15.1", "v1.12.0"))
    code, out, _ = run(capsys, "rollout", "status", "--repo", str(repo))
    assert code == 0
    assert "  active on:    integration (blocked)\n" in out
    blocked = next(line for line in out.splitlines() if line.startswith("  blocked:"))
    assert blocked == (
        "  blocked:      integration: dependency /cert-manager/source/targetRevision >=v1.13.0 "
        "is not met at management-cluster/integration/int-sector-1/europe-west1, "
        "management-cluster/integration/int-sector-1/us-central1, "
        "management-cluster/integration/int-sector-2/us-central1 (found 'v1.12.0'); the patch "
        "is not applied there and those roots refuse to render until it is met"
    )
    code, out, _ = run(capsys, "rollout", "status", "--format", "json", "--repo", str(repo))
    [item] = json.loads(out)
    assert [b["node"] for b in item["blocked"]] == ["integration"]
    assert "(found 'v1.12.0')" in item["blocked"][0]["reason"]
    # render and diff say why too: the roots refuse with the dependency and the value found
    code, _, err = run(capsys, "render", "--repo", str(repo), "--out", str(repo / "out"))
    assert code == 1
    assert "dependency /cert-manager/source/targetRevision >=v1.13.0 of patch" in err
    assert "is not met (found 'v1.12.0'), so the patch is not applied at" in err


def test_rollout_status_of_a_healthy_patch_has_no_blocked_node(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "rollout", "status", "--format", "json", "--repo", str(repo))
    assert code == 0
    [item] = json.loads(out)
    assert item["blocked"] == []


# --- graduation keeps the values files as people wrote them ---------------------------------

COMMENTED_BASE = """\
# hypershift-operator: base values for every management cluster.
# Reviewed by the platform team; see docs/hypershift.md.

applications:
  hypershift-operator:
    source:
      repoURL: https://github.com/openshift/hypershift.git  # upstream
      targetRevision: v4.17.0  # graduation bumps this
      path: install/charts/hypershift-operator  # chart directory
      helm:
        valuesObject:
          image:
            tag: v4.17.0  # keep in step with targetRevision

          resources:
            requests:
              cpu: 100m
              memory: "128Mi"  # measured in 2024
          # Cluster values injected by the ApplicationSet (escaped one level).
          cluster:
            region: "{{`{{ .Values.cluster.region }}`}}"
            projectId: '{{`{{ .Values.cluster.projectId }}`}}'
    destination:
      namespace: hypershift

    # Server-side apply: the CRDs are too large for client-side.
    syncPolicy:
      syncOptions:
        - CreateNamespace=true  # namespace comes with the app
        - ServerSideApply=true
    ignoreDifferences:
      - group: hypershift.openshift.io
        kind: HostedCluster  # status is the controller's
        jsonPointers:
          - /status
    revisionHistoryLimit: 5  # enough to roll back a week
"""

COMMENTED_STAGE = """\
# Stage pins an older build until the soak of v4.17.5 is over.
applications:
  hypershift-operator:
    source:
      targetRevision: v4.17.5  # pinned, see INC-1234


    # Longer history while we watch the pin.
    revisionHistoryLimit: 10
    info: ~
"""


def diff_lines(repo: Path, rel: str) -> tuple[list[str], list[str]]:
    """(removed, added) lines of the last commit's diff of `rel`."""
    out = git(repo, "diff", "--unified=0", "HEAD~1", "HEAD", "--", rel)
    removed = [ln[1:] for ln in out.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    added = [ln[1:] for ln in out.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return removed, added


def comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


def ready_to_graduate(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(
        repo,
        {f"{APP_DIR}/values.yaml": COMMENTED_BASE, f"{APP_DIR}/stage/values.yaml": COMMENTED_STAGE},
    )
    commit_all(repo, "commented values")
    for node in ("stage", "prod"):
        assert run(capsys, "promote", PID, "--to", node, "--repo", str(repo))[0] == 0


def test_graduation_keeps_comments_and_changes_only_the_lines_it_must(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ready_to_graduate(repo, capsys)
    before = merged_apps(repo)

    code, _, err = run(capsys, "promote", PID, "--graduate", "--repo", str(repo))

    assert (code, err) == (0, "")
    assert merged_apps(repo) == before
    assert validate_fleet(WorkTree(repo)) == []
    assert diff_lines(repo, f"{APP_DIR}/values.yaml") == (
        [
            "      targetRevision: v4.17.0  # graduation bumps this",
            "            tag: v4.17.0  # keep in step with targetRevision",
        ],
        [
            "      targetRevision: v4.18.0  # graduation bumps this",
            "            tag: v4.18.0  # keep in step with targetRevision",
            "        - RespectIgnoreDifferences=true",
            "      - group: hypershift.openshift.io",
            "        kind: NodePool",
            "        jsonPointers:",
            "          - /status",
        ],
    )
    base = (repo / APP_DIR / "values.yaml").read_text()
    assert comments(base) == comments(COMMENTED_BASE)
    assert "ServerSideApply=true\n        - RespectIgnoreDifferences=true\n" in base
    # The stage pin overrides a path the patch sets: folded there too, one line.
    assert diff_lines(repo, f"{APP_DIR}/stage/values.yaml") == (
        ["      targetRevision: v4.17.5  # pinned, see INC-1234"],
        ["      targetRevision: v4.18.0  # pinned, see INC-1234"],
    )
    assert (repo / APP_DIR / "stage/values.yaml").read_text() == COMMENTED_STAGE.replace(
        "targetRevision: v4.17.5", "targetRevision: v4.18.0"
    )


def without_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graduation as it was before shared/promotion/yamledit.py: every values file written in
    full."""
    monkeypatch.setattr(yamledit, "edit", lambda *args: None)


def assert_same_meaning(edited: promotion.FileChange, full: promotion.FileChange) -> None:
    assert sorted(edited.writes) == sorted(full.writes)
    assert edited.deletes == full.deletes and edited.message == full.message
    for rel in edited.writes:
        new = yamldoc.loads(edited.writes[rel].decode(), rel)
        old = yamldoc.loads(full.writes[rel].decode(), rel)
        assert yamledit.same(new, old), rel


def test_graduation_writes_what_a_full_rewrite_means_on_the_example(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ready_to_graduate(repo, capsys)
    edited = promotion.plan_graduation(WorkTree(repo), PID)
    assert b"# graduation bumps this" in edited.writes[f"{APP_DIR}/values.yaml"]
    without_round_trip(monkeypatch)
    full = promotion.plan_graduation(WorkTree(repo), PID)
    assert b"#" not in full.writes[f"{APP_DIR}/values.yaml"]
    assert_same_meaning(edited, full)


@pytest.mark.parametrize(
    "fields",
    [
        # An append list inherited from the defaults, a nulled override, a new key.
        {"syncPolicy": {"syncOptions": ["PruneLast=true"]}, "project": "special"},
        # A new nested mapping in the base, an edit inside a node's flow mapping.
        {"source": {"helm": {"valuesObject": {"image": {"tag": "v2"}}}}},
        # Values PyYAML reads differently from YAML 1.2, and an empty mapping.
        {
            "source": {"targetRevision": "1.10"},
            "additionalAnnotations": {"on": "yes"},
            "additionalLabels": {},
        },
    ],
)
def test_graduation_writes_what_a_full_rewrite_means_on_small_fleets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any]
) -> None:
    files = base_files()
    files["config/mc/a/patches/p.yaml"] = patch_doc(
        "p", "a", fields, strategy={"/a/syncPolicy/syncOptions": "append"}
    )
    files["config/mc/a/e1/s1/r2/values.yaml"] = (
        "# r2 differs\napplications:\n  a:\n    syncPolicy: null  # no sync options here\n"
        "    project: r2-project\n    destination:\n      name: r2  # own cluster\n"
    )
    files["config/mc/a/e1/values.yaml"] = (
        "applications:\n  a:\n    source: {helm: {valuesObject: {image: {tag: v0}}}}  # flow\n"
    )
    for env in ("e1", "e2"):
        files[f"config/mc/a/{env}/patches/p.yaml"] = files["config/mc/a/patches/p.yaml"]
    write_files(tmp_path, files)
    init_repo(tmp_path)
    commit_all(tmp_path, "fleet")
    before = merged_apps(tmp_path)
    in_place: list[bool] = []
    edit = yamledit.edit

    def recorded(*args: Any) -> str | None:
        out = edit(*args)
        in_place.append(out is not None)
        return out

    monkeypatch.setattr(yamledit, "edit", recorded)
    edited = promotion.plan_graduation(GitTree(tmp_path, "HEAD"), "p")
    assert in_place and all(in_place)  # no file fell back to a full rewrite
    with monkeypatch.context() as patched:
        without_round_trip(patched)
        full = promotion.plan_graduation(GitTree(tmp_path, "HEAD"), "p")
    assert_same_meaning(edited, full)
    for rel, data in edited.writes.items():
        (tmp_path / rel).write_bytes(data)
    for rel in edited.deletes:
        (tmp_path / rel).unlink()
    assert merged_apps(tmp_path) == before
    assert validate_fleet(WorkTree(tmp_path)) == []
    for rel in edited.writes:
        if "r2" in rel:
            assert b"# r2 differs" in edited.writes[rel]


def test_graduation_never_touches_an_encrypted_values_file(
    repo: Path,
    capsys: pytest.CaptureFixture[str],
    age_key: AgeKey,
) -> None:
    # Prod's encrypted level pins the image tag the patch sets; no plain prod file does.
    sops_rel = f"{APP_DIR}/prod/values.sops.yaml"
    image = {"image": {"tag": "v4.17.9-s3cr3t"}}
    text = encrypt_yaml(
        {"applications": {"hypershift-operator": {"source": {"helm": {"valuesObject": image}}}}},
        [age_key.recipient],
    )
    write_files(repo, {sops_rel: text})
    commit_all(repo, "encrypted stage override")
    ready_to_graduate(repo, capsys)

    change = promotion.plan_graduation(WorkTree(repo), PID)

    assert sops_rel not in change.paths
    assert all(not rel.endswith("values.sops.yaml") for rel in change.writes)
    # The encrypted override is listed for review, as before; never its value.
    assert "Review: the merged values change at management-cluster/prod" in change.message
    assert "s3cr3t" not in change.message
    assert not any(b"s3cr3t" in data for data in change.writes.values())
    assert (repo / sops_rel).read_text() == text

"""Refuse rather than render wrong: every content problem (docs/formats/problems.md) fails
`render`, `values`, `diff`, a deploy and a preview of the roots it touches, with the
`path:line: message` `validate` prints; hygiene problems are warnings and change no render.

The fleet is tests/fixtures/fleets/zones-fleet (four levels); each case is one mistake the
way a user of the fleet design document makes it (a defaults file under the document's name,
an `override.yaml`, a patch file beside the values, an application directory not listed …).
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio import activity

from activities.preview import outcome_of
from activities.render import RenderActivities
from shared.cli import main as cli
from shared.contracts.activityrefs import (
    ACT_CHECKOUT,
    ACT_RENDER_ROOT,
)
from shared.contracts.deploy import (
    CheckoutRequest,
    CheckoutResult,
    RenderRequest,
    RenderSummary,
)
from shared.contracts.preview import PreviewBuildRequest, PreviewRevisions
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from shared.review.preview import build_preview, export_revision
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from tests.support.atlas import make_fleet, one_app
from tests.support.deploy_world import REPO, World, harness, until
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import FIXTURES

ZONES = FIXTURES / "fleets" / "zones-fleet"
HS = "config/management-cluster/hypershift"
CM = "config/management-cluster/cert-manager"
PLACE = "management-cluster/{}"
ZONE_C = PLACE.format("production/main/us-east1/us-east1-c")
ZONE_B = PLACE.format("production/main/us-east1/us-east1-b")
INT_A = PLACE.format("integration/int-1/us-central1/us-central1-a")
STAGED = f"{HS}/patches/hypershift-4.18.yaml"
COPY = f"{HS}/integration/patches/hypershift-4.18.yaml"

Edit = Callable[[Path], None]

# The roots `render` names after a mistake it found in several of them.
ROOTS_NAMED = re.compile(r" \(in (?:root \S+|\d+ roots: [^)]*)\)$")


def write(rel: str, text: str | bytes) -> Edit:
    def edit(repo: Path) -> None:
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)

    return edit


def replace(rel: str, old: str, new: str) -> Edit:
    def edit(repo: Path) -> None:
        path = repo / rel
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new, 1))

    return edit


@dataclass(frozen=True)
class Case:
    edit: Edit
    touched: str  # a root whose render must refuse
    untouched: str | None = None  # a root the problem does not touch: it still renders


CASES: dict[str, Case] = {
    "application directory not listed": Case(
        write(
            "config/management-cluster/prometheus/values.yaml",
            "applications:\n  prometheus:\n    source: {repoURL: x, chart: p}\n",
        ),
        ZONE_C,
    ),
    "defaults file under the design document's other name": Case(
        write(
            "config/management-cluster/defaults.yaml",
            "applications:\n  default:\n    project: platform\n",
        ),
        INT_A,
    ),
    "override.yaml at a node": Case(
        write(
            f"{HS}/production/override.yaml",
            "applications:\n  hypershift:\n    source: {targetRevision: v4.17.1}\n",
        ),
        ZONE_C,
        INT_A,
    ),
    "patch file beside the values, not in patches/": Case(
        write(f"{HS}/integration/patch-002.yaml", "metadata: {id: x}\npatch: {}\n"),
        INT_A,
        ZONE_C,
    ),
    "directory that is no zone of the region": Case(
        write(f"{HS}/production/main/us-east1/us-east1-z/values.yaml", "applications: {}\n"),
        ZONE_C,
        INT_A,
    ),
    "unknown key in values": Case(
        replace(f"{HS}/production/values.yaml", "    source:", "    syncPolcy: {}\n    source:"),
        ZONE_C,
        INT_A,
    ),
    "values of another application": Case(
        write(
            f"{HS}/production/main/values.yaml",
            "applications:\n  cert-manager:\n    project: x\n",
        ),
        ZONE_C,
        INT_A,
    ),
    "YAML syntax error": Case(
        write(f"{CM}/production/values.yaml", "applications:\n  cert-manager: [\n"),
        ZONE_C,
        INT_A,
    ),
    "values file that is not UTF-8": Case(
        write(f"{HS}/production/main/us-east1/us-east1-c/values.yaml", b"\xff\xfe\x00"),
        ZONE_C,
        ZONE_B,
    ),
    "an encrypted values file that is not encrypted": Case(
        write(f"{HS}/production/values.sops.yaml", "applications:\n  hypershift: {project: x}\n"),
        ZONE_C,
        INT_A,
    ),
    "unknown key in a patch copy": Case(
        replace(COPY, "  dependencies:", "  dependancies: []\n  dependencies:"),
        INT_A,
        ZONE_C,
    ),
    "copy that differs from the staged patch": Case(
        replace(COPY, "targetRevision: v4.18.0", "targetRevision: v4.18.1"), INT_A, ZONE_C
    ),
    "unmet patch dependency": Case(
        replace(f"{CM}/integration/int-1/values.yaml", "v1.15.1", "v1.12.0"), INT_A, ZONE_C
    ),
    "overlapping patches": Case(
        write(
            f"{HS}/integration/int-1/patches/pin.yaml",
            "metadata: {id: pin}\npatch:\n  hypershift:\n    source: {targetRevision: v4.17.9}\n",
        ),
        INT_A,
        ZONE_C,
    ),
    "two patches with one id at a node": Case(
        write(
            f"{HS}/integration/patches/again.yaml",
            "metadata: {id: hypershift-v4.18}\npatch:\n  hypershift: {project: x}\n",
        ),
        INT_A,
        ZONE_C,
    ),
    "the design document's global application-defaults.yaml": Case(
        write("config/application-defaults.yaml", "defaults:\n  project: platform\n"), ZONE_C
    ),
    "directory that is not a cluster type": Case(
        write(
            "config/workload-cluster/agent/values.yaml",
            "applications:\n  agent: {project: x}\n",
        ),
        ZONE_C,
    ),
    "listed application without a directory": Case(
        replace(
            "config/config.yaml", "      - cert-manager\n", "      - cert-manager\n      - loki\n"
        ),
        ZONE_C,
    ),
    "unknown key in config.yaml": Case(
        replace("config/config.yaml", "              soak: 2h\n", "              sok: 2h\n"),
        ZONE_C,
    ),
}


@pytest.fixture(scope="module")
def revisions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    """One git repository: the sound fleet (`base`) and, for each case, a commit on top of
    it with that one mistake."""
    repo = init_repo(tmp_path_factory.mktemp("refusal") / "fleet")
    shutil.copytree(ZONES, repo, dirs_exist_ok=True)
    base = commit_all(repo, "base")
    shas = {}
    for name, case in CASES.items():
        git(repo, "checkout", "-q", "--detach", base)
        case.edit(repo)
        shas[name] = commit_all(repo, name)
    git(repo, "checkout", "-q", "--detach", base)
    return repo, base, shas


def checkout(repo: Path, sha: str, where: Path) -> Path:
    if not where.exists():
        export_revision(repo, sha, where)
    return where


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def validated(fleet: Path) -> list[str]:
    problems = validate_fleet(WorkTree(fleet))
    assert any(not p.hygiene for p in problems)
    return [str(p) for p in problems if not p.hygiene]


@pytest.mark.parametrize("name", list(CASES))
def test_render_and_values_refuse(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    revisions: tuple[Path, str, dict[str, str]],
    name: str,
) -> None:
    repo, _, shas = revisions
    case = CASES[name]
    fleet = checkout(repo, shas[name], tmp_path / "fleet")
    expected = validated(fleet)
    out = tmp_path / "out"

    def refused(*argv: str) -> list[str]:
        code, stdout, err = run(capsys, *argv, "--repo", str(fleet))
        assert code == 1 and stdout == "", (argv, err)
        lines = [
            # render: each mistake once with the roots it fails, then the summary line
            ROOTS_NAMED.sub("", line.removeprefix("error: "))
            for line in err.splitlines()
            if not line.startswith("rendered ")
        ]
        assert lines and set(lines) <= set(expected), (lines, expected)
        return lines

    refused("render", "--out", str(out))  # every root
    assert not (out / case.touched).exists()  # nothing half-written
    refused("render", "--out", str(out), "--root", case.touched)
    assert not (out / case.touched).exists()
    refused("values", case.touched)
    refused("values", case.touched, "--reveal=force")
    if case.untouched is not None:
        code, _, err = run(
            capsys, "render", "--repo", str(fleet), "--out", str(out), "--root", case.untouched
        )
        assert code == 0, err
        assert (out / case.untouched / "Chart.yaml").is_file()


@pytest.mark.parametrize("name", list(CASES))
def test_diff_and_preview_refuse(
    capsys: pytest.CaptureFixture[str], revisions: tuple[Path, str, dict[str, str]], name: str
) -> None:
    repo, base, shas = revisions
    head = shas[name]
    code, _, err = run(capsys, "diff", base, head, "--repo", str(repo), "--format", "json")
    assert code == 2, err
    report = build_preview(repo, base, head, roots=[CASES[name].touched])
    message = report.error or report.roots[0].head_error
    assert report.failed and message
    reason = message.splitlines()[0]
    assert reason.startswith("config/"), reason
    assert reason in err
    # the pull request's check run fails, quoting it
    revisions_ = PreviewRevisions(base_sha=base, head_sha=head, pr_head_sha=head, base_tip_sha=base)
    request = PreviewBuildRequest(repo=REPO, pr=3, revisions=revisions_, base_ref="main")
    outcome = outcome_of(report, request, prefix="p/", full_url="http://rw.test/p")
    assert outcome.conclusion == "failure"
    assert reason in outcome.error


def test_hygiene_problems_are_warnings_and_change_no_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = shutil.copytree(ZONES, tmp_path / "fleet")
    before = run(capsys, "render", "--repo", str(fleet), "--out", str(tmp_path / "before"))
    assert before[0] == 0
    (fleet / HS / "OWNERS").write_text("approvers: [x]\napprover: [y]\n")  # a typo
    (fleet / CM / "metadata.yaml").unlink()
    # a pin below a node the patch is active at
    write(
        f"{HS}/integration/int-1/us-central1/values.yaml",
        "applications:\n  hypershift:\n    source:\n      targetRevision: v4.17.5\n",
    )(fleet)
    code, out, err = run(capsys, "validate", "--repo", str(fleet))
    assert code == 0
    assert out.splitlines() == [
        f"{CM}/metadata.yaml: warning: missing: every application needs metadata.yaml",
        f"{HS}/OWNERS:2: warning: unknown key 'approver' (did you mean 'approvers'?)",
        f"{HS}/integration/int-1/us-central1/values.yaml:4: warning: "
        "/hypershift/source/targetRevision set here is overridden by patch 'hypershift-v4.18' "
        f"({COPY}:9), which applies after every values file, at {INT_A}, "
        f"{INT_A.replace('-a', '-b')}",
    ]
    assert err.endswith(" root(s) checked: 3 warning(s) found\n")
    assert run(capsys, "validate", "--repo", str(fleet), "--strict")[0] == 1
    code, _, err = run(capsys, "render", "--repo", str(fleet), "--out", str(tmp_path / "after"))
    assert code == 0, err


# --- deploys ----------------------------------------------------------------------------------


@dataclass
class RealRenders(World):
    """The deploy world with real checkouts of the repository and the real render activity
    behind `checkout` and `render_root`."""

    repo: Path = Path()
    workdir: Path = Path()
    renders: RenderActivities | None = None
    rendered: list[str] = field(default_factory=list)

    @activity.defn(name=ACT_CHECKOUT.name)
    async def checkout(self, req: CheckoutRequest) -> CheckoutResult:
        self._pinned()
        path = checkout(self.repo, req.revision, self.workdir / req.revision)
        return CheckoutResult(path=str(path), revision=req.revision)

    @activity.defn(name=ACT_RENDER_ROOT.name)
    async def render_root(self, req: RenderRequest) -> RenderSummary:
        self._pinned()
        assert self.renders is not None
        self.rendered.append(req.revision)
        summary: RenderSummary = await self.renders.render_root(req)
        return summary


def test_deploys_fail_their_check_run_and_the_queue_moves_on(
    tmp_path: Path, revisions: tuple[Path, str, dict[str, str]]
) -> None:
    repo, base, shas = revisions
    settings = Settings(data_dir=tmp_path / "state", public_url="http://rw.test", worker_id="w1")
    world = RealRenders(
        repo=repo,
        workdir=tmp_path / "checkouts",
        renders=RenderActivities(settings, FileBlobStore(tmp_path / "state" / "blobs")),
    )

    async def scenario() -> None:
        async with harness(world) as h:
            for name, sha in shas.items():
                await h.push(CASES[name].touched, sha)
            roots = sorted({case.touched for case in CASES.values()})
            for root in roots:
                await h.push(root, base)  # the fixed fleet, queued behind the broken ones
            for name, sha in shas.items():

                def finished(root: str = CASES[name].touched, sha: str = sha) -> list[int]:
                    return [i for i in world.runs_for(sha, root) if world.last(i).conclusion]

                (run_id,) = await until(finished, f"the check run of {name}", timeout=60)
                done = world.last(run_id)
                assert (done.conclusion, done.title) == ("failure", "Render failed"), name
                fleet = checkout(repo, sha, tmp_path / "checkouts" / sha)
                first = validated(fleet)
                assert any(line in done.summary for line in first), (name, done.summary)
            for root in roots:
                deployment = await h.awaiting_review(root, base)
                assert (await h.review(deployment, "approve", "alice")).state == "published"
        # only the fixed revision became a root's latest deployment
        assert set(world.latest) == set(roots)
        assert {r.revision for r in world.persisted} == {base}

    asyncio.run(asyncio.wait_for(scenario(), 120))


# --- the atlas layout ---------------------------------------------------------------------------


def test_atlas_renders_refuse_files_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_fleet(
        tmp_path / "fleet",
        {
            "deployments/staging/a/apps/web/deployment.yaml": one_app(),
            "deployments/staging/a/cluster.values.yaml": {"replicas": 2},
            "deployments/prod/b/apps/web/deployment.yaml": one_app(),
            # a group's values written as a cluster's: never read
            "deployments/prod/cluster.values.yaml": {"replicas": 5},
        },
    )
    code, out, _ = run(capsys, "validate", "--repo", str(base))
    assert code == 1
    problem = (
        "deployments/prod/cluster.values.yaml: cluster.values.yaml is never read: "
        "deployments/prod is a group (it has clusters below it); use group.values.*"
    )
    assert out.splitlines() == [problem]
    for argv in (
        ["render", "--out", str(tmp_path / "out"), "--root", "prod/b"],
        ["values", "prod/b"],
    ):
        code, _, err = run(capsys, *argv, "--repo", str(base))
        assert code == 1 and err.splitlines()[0] == problem
    code, _, err = run(
        capsys, "render", "--out", str(tmp_path / "out"), "--root", "staging/a", "--repo", str(base)
    )
    assert code == 0, err
    assert any((tmp_path / "out/staging/a").rglob("*.yaml"))

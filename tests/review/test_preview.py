"""build_preview on real git repositories with the real Helm engine: affected-only rendering,
roots added and removed, base errors warn and head errors fail, noise hidden, secrets
redacted, and the repository left untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shared.engine.errors import FleetError
from shared.engine.tree import GitError
from shared.review.markdown import report_markdown
from shared.review.preview import build_preview
from shared.review.report import PreviewReport, report_json, report_unified, repro_command
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import make_fleet, one_app
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.paths import EXAMPLES
from tests.support.preview import (
    CONFIGMAP,
    DEPLOYMENT,
    WEBHOOK,
    chart_version,
    commit,
    web_fleet_files,
    web_repo,
)
from tests.support.secrets import app_chart_files, assert_hidden


def preview(
    repo: Path, base: str = "HEAD~1", head: str = "HEAD", **kw: object
) -> tuple[PreviewReport, list[str]]:
    """The report, and the labels `progress` saw (which sides of which roots rendered)."""
    seen: list[str] = []
    report = build_preview(repo, base, head, progress=seen.append, **kw)  # type: ignore[arg-type]
    return report, seen


def by_root(report: PreviewReport) -> dict[str, object]:
    return {r.root: r for r in report.roots}


def paths(report: PreviewReport, root: str) -> dict[str, str]:
    item = next(r for r in report.roots if r.root == root)
    assert item.diff is not None
    return {f.path: f.change for f in item.diff.files}


# --------------------------------------------------------------------------- affected roots


def test_a_one_cluster_change_renders_only_that_root(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 3}})
    report, seen = preview(repo)
    assert seen == ["base g/c1", "head g/c1"]
    assert [r.root for r in report.roots] == ["g/c1"]
    assert not report.all_roots and report.changed and not report.failed
    assert paths(report, "g/c1") == {DEPLOYMENT: "changed"}
    unified = report.roots[0].diff.files[0].unified  # type: ignore[union-attr]
    assert "-  replicas: 1\n+  replicas: 3\n" in unified
    assert report.base == git(repo, "rev-parse", "HEAD~1")
    assert report.head == git(repo, "rev-parse", "HEAD")


def test_a_global_input_change_renders_every_root(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/global.values.yaml": {"greeting": "bonjour"}})
    report, seen = preview(repo)
    assert sorted(seen) == ["base g/c1", "base g/c2", "head g/c1", "head g/c2"]
    assert report.all_roots
    assert [r.status for r in report.roots] == ["changed", "changed"]
    for root in ("g/c1", "g/c2"):
        assert paths(report, root) == {CONFIGMAP: "changed"}  # the checksum is noise
    counts = report.counts
    assert (counts.roots, counts.roots_changed, counts.changed, counts.hidden) == (2, 2, 2, 2)
    assert "(a global input changed: every root)" in report_markdown(report)


def test_no_change_renders_nothing(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"README.md": "docs only\n"})
    report, seen = preview(repo)
    assert seen == [] and report.roots == []
    assert not report.changed and not report.failed
    assert "**No changes**" in report_markdown(report)


def test_roots_added_and_removed(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(
        repo,
        {
            "deployments/g/c3/cluster.values.yaml": {"cluster": "g/c3"},
            "deployments/g/c3/apps/.gitkeep": "",
        },
        delete=("deployments/g/c2",),
    )
    report, _ = preview(repo)
    roots = {r.root: r.status for r in report.roots}
    assert roots == {"g/c2": "removed", "g/c3": "added"}
    assert set(paths(report, "g/c3").values()) == {"added"}
    assert set(paths(report, "g/c2").values()) == {"removed"}
    c = report.counts
    assert (c.roots_added, c.roots_removed, c.added, c.removed) == (1, 1, 3, 3)
    text = report_markdown(report)
    assert "| `g/c3` | added | 3 | 0 | 0 | 0 |" in text
    assert "| `g/c2` | removed | 0 | 3 | 0 | 0 |" in text


def test_explicit_roots_render_exactly_those(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/global.values.yaml": {"greeting": "bonjour"}})
    report, seen = preview(repo, roots=["g/c2"])
    assert seen == ["base g/c2", "head g/c2"] and not report.all_roots
    with pytest.raises(FleetError, match="unknown root 'nope': neither revision has it"):
        build_preview(repo, "HEAD~1", "HEAD", roots=["nope"])


def test_unknown_revision_is_a_git_error(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    with pytest.raises(GitError, match="revision 'no-such-branch' is not a commit"):
        build_preview(repo, "no-such-branch", "HEAD")


# --------------------------------------------------------------------------- errors


def test_head_side_error_fails_and_other_roots_still_render(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(
        repo,
        {
            "deployments/global.values.yaml": {"greeting": "bonjour"},
            "deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "broken": True},
        },
    )
    report, seen = preview(repo)
    assert "head g/c2" in seen
    c1, c2 = report.roots
    assert c1.status == "error" and c1.diff is None and c1.base_error is None
    assert c1.head_error is not None and "web: broken on purpose" in c1.head_error
    assert 'rendering root "g/c1"' in c1.head_error
    assert "rollwright-preview-" not in c1.head_error  # no temporary paths in messages
    assert c2.status == "changed" and c2.head_error is None
    assert report.failed and report.counts.roots_failed == 1
    text = report_markdown(report)
    assert "**Failed on the PR side**: root `g/c1` does not render." in text
    assert repro_command(report.base, report.head, "g/c1") in text
    assert "| `g/c1` | **failed** |" in text


def test_an_object_the_api_server_would_refuse_fails_the_pr_side(tmp_path: Path) -> None:
    """The schema checks run in previews too: the pull request shows the problem, with the
    values file and line, before it is merged."""
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/g/c1/cluster.values.yaml": "cluster: g/c1\nreplicas: two\n"})
    report, _ = preview(repo)
    [c1] = report.roots  # only the root the change reaches
    assert c1.root == "g/c1" and c1.status == "error" and c1.head_error is not None
    assert c1.head_error.startswith(
        "deployments/g/c1/cluster.values.yaml:2: rendering root \"g/c1\": release 'web/web' "
        "renders Deployment 'default/web' (templates/web/chart:web/templates/deployment.yaml): "
        "spec.replicas: must be an integer or null, not a string"
    )
    assert report.failed


def test_base_side_error_is_a_warning(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "broken": True}})
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1"}}, message="fix")
    report, _ = preview(repo)
    (item,) = report.roots
    assert item.base_error is not None and "web: broken on purpose" in item.base_error
    assert item.head_error is None and not report.failed
    # Nothing to compare with: the whole PR-side render shows, as added.
    assert set(paths(report, "g/c1").values()) == {"added"}
    assert report.changed
    assert "**Base side failed to render** root `g/c1`" in report_markdown(report)


def test_an_unreadable_head_fleet_fails_the_whole_report(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"rollwright.yaml": "layout: atlas\nbogus: 1\n"})
    report, seen = preview(repo)
    assert seen == [] and report.failed
    assert report.error is not None and "rollwright.yaml:2: unknown key 'bogus'" in report.error
    assert "the fleet cannot be read at the head revision" in report_markdown(report)


def test_an_unreadable_base_fleet_renders_every_head_root(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet", {"rollwright.yaml": "bogus: 1\n"})
    commit(repo, {"rollwright.yaml": "layout: atlas\n"})
    report, _ = preview(repo)
    assert [r.root for r in report.roots] == ["g/c1", "g/c2"]
    assert all(r.base_error and "unknown key 'bogus'" in r.base_error for r in report.roots)
    assert not report.failed
    assert any("cannot be read" in w for w in report.warnings)


def test_warnings_from_the_caller_come_first(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 2}})
    report, _ = preview(repo, warnings=["no merge ref: rendering the PR head"])
    assert report.warnings == ["no merge ref: rendering the PR head"]


# --------------------------------------------------------------------------- noise


def test_a_chart_bump_alone_is_hidden_as_noise(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, chart_version(repo, "1.0.1"))
    report, _ = preview(repo)
    for item in report.roots:
        assert item.status == "unchanged" and item.diff is not None and item.diff.empty
        hidden = {h.path: h.pointers for h in item.hidden}
        assert hidden == {
            CONFIGMAP: ("/0/metadata/labels/helm.sh~1chart",),
            DEPLOYMENT: (
                "/0/metadata/labels/helm.sh~1chart",
                "/0/spec/template/metadata/annotations/checksum~1config",  # of the ConfigMap
                "/0/spec/template/metadata/labels/helm.sh~1chart",
            ),
        }
    assert not report.changed and report.counts.hidden == 4
    text = report_markdown(report)
    assert "**Hidden as noise** (2)" in text
    assert "`/0/spec/template/metadata/labels/helm.sh~1chart`" in text


def test_a_resource_with_real_changes_shows_its_noise_lines_too(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, chart_version(repo, "1.1.0", app_version="1.1"))
    report, _ = preview(repo)
    item = report.roots[0]
    assert paths(report, "g/c1") == {DEPLOYMENT: "changed"}  # the image changed
    unified = item.diff.files[0].unified  # type: ignore[union-attr]
    assert "+        image: registry.example.com/web:1.1\n" in unified
    assert "+    helm.sh/chart: web-1.1.0\n" in unified
    assert [h.path for h in item.hidden] == [CONFIGMAP]  # chart and version labels only


def test_checksum_and_ca_bundle_changes_are_noise(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(
        repo,
        {
            "deployments/g/c1/cluster.values.yaml": {
                "cluster": "g/c1",
                "greeting": "hi",
                "caBundle": "Q0EtMg==",
            }
        },
    )
    report, _ = preview(repo)
    (item,) = report.roots
    assert paths(report, "g/c1") == {CONFIGMAP: "changed"}
    assert {h.path: h.pointers for h in item.hidden} == {
        DEPLOYMENT: ("/0/spec/template/metadata/annotations/checksum~1config",),
        WEBHOOK: ("/0/webhooks/0/clientConfig/caBundle",),
    }


def test_rollwright_yaml_extends_and_disables_the_noise_rules(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    build = {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "build": "2"}}
    commit(repo, build)
    report, _ = preview(repo)
    assert paths(report, "g/c1") == {DEPLOYMENT: "changed"}  # not noise by default

    # Read from the head side: the commit that adds the rule already uses it.
    rule = "preview:\n  noise:\n    - annotation: example.com/*\n      kinds: [Deployment]\n"
    commit(repo, {"rollwright.yaml": rule, **{k: {**v, "build": "3"} for k, v in build.items()}})
    report, _ = preview(repo, roots=["g/c1"])
    assert report.roots[0].diff.empty  # type: ignore[union-attr]
    assert report.roots[0].hidden[0].pointers == ("/0/metadata/annotations/example.com~1build",)

    commit(repo, {"rollwright.yaml": "preview:\n  defaultNoise: false\n"})
    commit(repo, chart_version(repo, "1.0.1"))
    report, _ = preview(repo)
    assert paths(report, "g/c1") == {CONFIGMAP: "changed", DEPLOYMENT: "changed"}
    assert report.roots[0].hidden == []


def test_a_bad_noise_rule_is_a_fleet_error_with_its_line(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"rollwright.yaml": "preview:\n  noise:\n    - label: a\n      key: b\n"})
    report, _ = preview(repo)
    assert report.failed and report.error is not None
    assert "rollwright.yaml:3:" in report.error
    assert "exactly one of label, annotation, key, pointer (got label, key)" in report.error


# --------------------------------------------------------------------------- secrets


SECRET_OLD = "old-Pa55w0rd-9qXz"
SECRET_NEW = "new-Pa55w0rd-4kLm"


def test_a_rotated_sops_secret_shows_as_a_changed_hash_and_never_in_plaintext(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    repo = init_repo(tmp_path / "fleet")
    make_fleet(
        repo,
        {
            **app_chart_files("templates/app/chart"),
            "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
            "deployments/g/c/apps/d/deployment.yaml": one_app("app"),
            "deployments/global.values.sops.yaml": encrypt_yaml(
                {"password": SECRET_OLD}, [age_key.recipient]
            ),
        },
        echo=False,
    )
    commit_all(repo, "base")
    write_files(
        repo,
        {
            "deployments/global.values.sops.yaml": encrypt_yaml(
                {"password": SECRET_NEW}, [age_key.recipient]
            )
        },
    )
    commit_all(repo, "rotate")
    report, _ = preview(repo)
    (item,) = report.roots
    assert item.diff is not None
    files = {f.path: f for f in item.diff.files}
    secret = next(f for p, f in files.items() if p.endswith("Secret_app.yaml"))
    minus = [line for line in secret.unified.splitlines() if line.startswith("-  ")]
    plus = [line for line in secret.unified.splitlines() if line.startswith("+  ")]
    assert minus and plus and all("REDACTED:sha256:" in line for line in minus + plus)
    assert {line[1:] for line in minus}.isdisjoint(line[1:] for line in plus)  # hashes differ
    config = next(f for p, f in files.items() if p.endswith("ConfigMap_app-config.yaml"))
    assert "/0/data/url" in config.hidden  # changed, value not shown
    outputs = [
        ("markdown", report_markdown(report, limit=None)),
        ("markdown-cut", report_markdown(report, limit=2_000)),
        ("unified", report_unified(report)),
        ("json", json.dumps(report_json(report))),
    ]
    assert_hidden(outputs, [SECRET_OLD, SECRET_NEW])
    assert "REDACTED:sha256:" in outputs[0][1]


def test_a_head_render_publishing_would_refuse_fails_the_preview(
    tmp_path: Path, age_key: AgeKey
) -> None:
    """A pull request that brings secret values into a root whose target refuses them
    (`publish.secrets: refuse`, git): the preview fails on that root with the deployment's
    own message, before the merge; the base side is not held to it."""
    repo = init_repo(tmp_path / "fleet")
    app = {
        **app_chart_files("templates/app/chart"),
        "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
        "deployments/g/c/apps/d/deployment.yaml": one_app("app"),
        "deployments/global.values.yaml": {"password": "not-a-secret"},
        "rollwright.yaml": {"publish": {"target": "git"}},
    }
    make_fleet(repo, app, echo=False)
    commit_all(repo, "base: no secret values")
    secret = encrypt_yaml({"password": SECRET_NEW}, [age_key.recipient])
    commit(repo, {"deployments/global.values.sops.yaml": secret})
    report, _ = preview(repo)
    (c,) = report.roots
    assert c.status == "error" and report.failed
    assert c.head_error is not None
    assert c.head_error.startswith('rollwright.yaml:2: root "g/c" renders secret values')
    assert "`publish.secrets: sops`" in c.head_error
    assert_hidden([("markdown", report_markdown(report))], [SECRET_NEW])


def test_plaintext_never_reaches_error_messages(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    repo = init_repo(tmp_path / "fleet")
    boom = "templates/boom"
    make_fleet(
        repo,
        {
            f"{boom}/chart/Chart.yaml": "apiVersion: v2\nname: boom\nversion: 0.1.0\n",
            f"{boom}/chart/templates/cm.yaml": '{{ fail (printf "bad %s" .Values.password) }}\n',
            f"{boom}/helmfile.yaml.gotmpl": "releases:\n  - name: boom\n    chart: ./chart\n",
            "deployments/g/c/apps/d/deployment.yaml": one_app("echo"),
        },
    )
    commit_all(repo, "base")
    write_files(
        repo,
        {
            "deployments/g/c/apps/d/deployment.yaml": one_app("boom"),
            "deployments/global.values.sops.yaml": encrypt_yaml(
                {"password": SECRET_NEW}, [age_key.recipient]
            ),
        },
    )
    commit_all(repo, "boom")
    report, _ = preview(repo)
    assert report.failed and report.roots[0].head_error is not None
    assert "bad " in report.roots[0].head_error
    assert_hidden(
        [("markdown", report_markdown(report)), ("json", json.dumps(report_json(report)))],
        [SECRET_NEW],
    )


# --------------------------------------------------------------------------- repository


def test_the_repository_is_left_untouched_and_bare_repos_work(tmp_path: Path) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 2}})
    (repo / "deployments/g/c2/cluster.values.yaml").write_text("cluster: dirty\n")  # uncommitted
    git(repo, "checkout", "-q", "-b", "elsewhere", "HEAD~1")
    status = git(repo, "status", "--porcelain")
    index = (repo / ".git/index").read_bytes()
    report, _ = preview(repo, "main~1", "main")
    assert [r.root for r in report.roots] == ["g/c1"]
    assert git(repo, "status", "--porcelain") == status
    assert (repo / ".git/index").read_bytes() == index
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "elsewhere"
    assert git(repo, "worktree", "list").count("\n") == 0  # no worktree added

    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    from_bare = build_preview(bare, "main~1", "main")
    assert report_json(from_bare) == report_json(report)


def test_dimensions_example_one_region_then_every_root_of_a_type(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "fleet")
    shutil.copytree(EXAMPLES / "dimensions-fleet", repo, dirs_exist_ok=True)
    commit_all(repo, "base")
    app = repo / "config/management-cluster/hypershift-operator"
    region = app / "stage/stage-sector-1/europe-west1/values.yaml"
    region.write_text(region.read_text().replace('"0 2 * * *"', '"0 3 * * *"'))
    commit_all(repo, "region")
    report, _ = preview(repo)
    assert [(r.root, r.status) for r in report.roots] == [
        ("management-cluster/stage/stage-sector-1/europe-west1", "changed")
    ]
    defaults = repo / "config/management-cluster/application-defaults.yaml"
    defaults.write_text(defaults.read_text() + "\n# a comment only: affected, renders the same\n")
    commit_all(repo, "defaults")
    report, _ = preview(repo)
    assert len(report.roots) > 1
    assert all(r.root.startswith("management-cluster/") for r in report.roots)
    assert all(r.status == "unchanged" for r in report.roots) and not report.changed


def test_parallel_rendering_keeps_going_after_errors(tmp_path: Path) -> None:
    """With jobs > 1 (enough roots for worker processes), a failing root is reported and the
    roots after it still render, on both sides."""
    clusters = [f"g/c{i:02}" for i in range(66)]
    repo = init_repo(tmp_path / "fleet")
    make_fleet(repo, web_fleet_files(clusters), echo=False)
    broken = {"cluster": "x", "broken": True}
    write_files(repo, {"deployments/g/c05/cluster.values.yaml": broken})
    commit_all(repo, "base")
    write_files(
        repo,
        {
            "deployments/global.values.yaml": {"greeting": "bonjour"},
            "deployments/g/c05/cluster.values.yaml": {"cluster": "x"},
            "deployments/g/c40/cluster.values.yaml": broken,
        },
    )
    commit_all(repo, "change")
    report, seen = preview(repo, jobs=2)
    assert len(seen) == 2 * 66 and report.all_roots
    items = {r.root: r for r in report.roots}
    assert items["g/c05"].base_error and not items["g/c05"].head_error
    assert items["g/c40"].head_error and not items["g/c40"].base_error
    assert "broken on purpose" in (items["g/c40"].head_error or "")
    others = [r for r in report.roots if r.root not in ("g/c05", "g/c40")]
    assert all(
        r.status == "changed" and paths(report, r.root) == {CONFIGMAP: "changed"} for r in others
    )
    serial = build_preview(repo, "HEAD~1", "HEAD", jobs=1)
    assert report_json(serial) == report_json(report)

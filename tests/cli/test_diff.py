"""`rollwright diff`: exit status 0 / 1 / 2, the three formats, and `--check` of a checked-in
rendered tree."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.cli.main import main
from shared.review.report import WORKING_TREE, repro_command
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import make_fleet, one_app
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, git, init_repo
from tests.support.preview import CONFIGMAP, DEPLOYMENT, commit, web_repo
from tests.support.secrets import app_chart_files, assert_hidden


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["diff", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_0_without_changes_1_with_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"README.md": "docs\n"})
    code, out, _ = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo))
    assert code == 0 and "**No changes**" in out
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 4}})
    code, out, err = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo))
    assert code == 1 and err == ""
    assert out.startswith("### rollwright preview\n")
    assert "+  replicas: 4" in out


def test_noise_only_changes_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = web_repo(tmp_path / "fleet")
    chart = repo / "templates/web/chart/Chart.yaml"
    commit(repo, {"templates/web/chart/Chart.yaml": chart.read_text().replace("1.0.0", "1.0.1")})
    code, out, _ = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo), "--format", "unified")
    assert code == 0
    assert f"#   hidden as noise: {CONFIGMAP} (/0/metadata/labels/helm.sh~1chart)" in out


def test_head_error_exits_2_base_error_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = web_repo(tmp_path / "fleet")
    broken = {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "broken": True}}
    commit(repo, broken)
    code, out, err = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo))
    assert code == 2
    assert "error: root 'g/c1' does not render at" in err and "broken on purpose" in err
    assert "**Failed on the PR side**" in out  # the report is still printed

    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 2}})
    code, out, err = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo), "--format", "unified")
    assert code == 1
    assert "warning: root 'g/c1' does not render at the base revision" in err
    assert "#   base side failed to render (warning):" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "HEAD"], "error: revision 'nope' is not a commit of"),
        ([], "error: diff needs a revision: BASE compares it with the working tree"),
        (["HEAD", "--format", "text"], "error: --format text is for --check"),
        (["--check", "--format", "unified"], "error: --check prints text or json"),
        (["HEAD~1", "HEAD", "--check"], "error: --check compares the working tree"),
        (["HEAD~1", "HEAD", "--root", "x/y"], "error: unknown root 'x/y': neither revision"),
    ],
)
def test_usage_and_git_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"README.md": "x\n"})
    code, _, err = run(capsys, *args, "--repo", str(repo))
    assert code == 2 and message in err


def test_json_format_is_stable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(
        repo,
        {
            "deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "greeting": "hi"},
            "deployments/g/c2/cluster.values.yaml": {"cluster": "g/c2", "broken": True},
        },
    )
    code, out, _ = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo), "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert list(doc) == [
        "format", "base", "head", "all_roots", "failed", "changed", "warnings", "error",
        "counts", "roots", "working_tree",
    ]  # fmt: skip
    assert doc["working_tree"] is False
    assert doc["format"] == "rollwright.preview/v1"
    assert doc["head"] == git(repo, "rev-parse", "HEAD")
    assert doc["counts"] == {
        "roots": 2, "roots_added": 0, "roots_removed": 0, "roots_changed": 1, "roots_failed": 1,
        "added": 0, "removed": 0, "changed": 1, "hidden": 1,
    }  # fmt: skip
    c1, c2 = doc["roots"]
    assert list(c1) == [
        "root", "status", "base_error", "head_error", "added", "removed", "changed",
        "resources", "hidden", "policies", "policy_error",
    ]  # fmt: skip
    assert c1["status"] == "changed" and c1["head_error"] is None
    (resource,) = c1["resources"]
    assert list(resource) == ["path", "change", "diff", "redacted_changes"]
    assert resource["path"] == CONFIGMAP and resource["change"] == "changed"
    assert (
        '-  greeting: "hello"\n' in resource["diff"] or "-  greeting: hello\n" in resource["diff"]
    )
    assert c1["hidden"] == [
        {"path": DEPLOYMENT, "pointers": ["/0/spec/template/metadata/annotations/checksum~1config"]}
    ]
    assert c2["status"] == "error" and "broken on purpose" in c2["head_error"]
    assert c2["resources"] == [] and c2["hidden"] == []


def test_unified_paths_carry_the_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/g/c2/cluster.values.yaml": {"cluster": "g/c2", "replicas": 5}})
    code, out, _ = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo), "--format", "unified")
    assert code == 1
    assert f"--- a/g/c2/{DEPLOYMENT}\n+++ b/g/c2/{DEPLOYMENT}\n" in out
    assert "# root g/c2: changed (0 added, 0 removed, 1 changed)" in out


def test_merge_base_compares_with_the_branch_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = web_repo(tmp_path / "fleet")
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 2}})
    git(repo, "checkout", "-q", "main")
    commit(repo, {"deployments/g/c2/cluster.values.yaml": {"cluster": "g/c2", "replicas": 9}})
    _, plain, _ = run(capsys, "main", "feature", "--repo", str(repo), "--format", "json")
    assert [r["root"] for r in json.loads(plain)["roots"]] == ["g/c1", "g/c2"]
    _, merged, _ = run(
        capsys, "main", "feature", "--merge-base", "--repo", str(repo), "--format", "json"
    )
    assert [r["root"] for r in json.loads(merged)["roots"]] == ["g/c1"]


def test_limit_cuts_the_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/global.values.yaml": {"greeting": "x" * 3000}})
    code, out, _ = run(capsys, "HEAD~1", "HEAD", "--repo", str(repo), "--limit", "4000")
    assert code == 1 and len(out.encode()) <= 4000
    assert "**Diff exceeds the limit:**" in out and "for the full diff." in out
    with pytest.raises(SystemExit):
        main(["diff", "HEAD~1", "HEAD", "--repo", str(repo), "--limit", "100"])
    assert "--limit: a preview needs at least 1024 bytes" in capsys.readouterr().err


# --------------------------------------------------------------------------- --check


def rendered_repo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    repo = web_repo(tmp_path / "fleet")
    assert main(["render", "--repo", str(repo), "--out", str(repo / "rendered")]) == 0
    write_files(repo, {"rendered/README.md": "generated by rollwright render\n"})
    commit_all(repo, "rendered")
    capsys.readouterr()
    return repo


def test_check_up_to_date_and_out_of_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = rendered_repo(tmp_path, capsys)
    code, out, err = run(capsys, "--check", "--repo", str(repo))
    assert code == 0 and out == ""
    assert "rendered/ is up to date (2 root(s), 6 file(s))" in err

    write_files(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 3}})
    (repo / f"rendered/g/c2/{CONFIGMAP}").unlink()
    write_files(
        repo, {"rendered/g/c2/old/ConfigMap_gone.yaml": "x: 1\n", "rendered/g/c2/.keep": ""}
    )
    code, out, err = run(capsys, "--check", "--repo", str(repo))
    assert code == 1
    assert out.splitlines() == [
        f"rendered/g/c1/{DEPLOYMENT}: out of date",
        "rendered/g/c2/old/ConfigMap_gone.yaml: not rendered any more",
        f"rendered/g/c2/{CONFIGMAP}: missing",
    ]
    assert "3 file(s) of rendered/ out of date" in err

    code, out, _ = run(capsys, "--check", "--repo", str(repo), "--root", "g/c1")
    assert code == 1 and out.splitlines() == [f"rendered/g/c1/{DEPLOYMENT}: out of date"]

    assert main(["render", "--repo", str(repo), "--out", str(repo / "rendered")]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "--check", "--repo", str(repo))
    assert (code, out) == (0, "")  # render replaced each root's directory, stray file included


def test_check_render_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = rendered_repo(tmp_path, capsys)
    write_files(repo, {"deployments/g/c2/cluster.values.yaml": {"cluster": "g/c2", "broken": True}})
    code, _, err = run(capsys, "--check", "--repo", str(repo), "--rendered", "rendered/")
    assert code == 2 and "broken on purpose" in err


def test_check_compares_redacted_renders(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    age_key: AgeKey,
) -> None:
    repo = init_repo(tmp_path / "fleet")
    secret = "ch3ck-S3cret-value"
    make_fleet(
        repo,
        {
            **app_chart_files("templates/app/chart"),
            "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
            "deployments/g/c/apps/d/deployment.yaml": one_app("app"),
            "deployments/global.values.sops.yaml": encrypt_yaml(
                {"password": secret}, [age_key.recipient]
            ),
        },
        echo=False,
    )
    assert main(["render", "--repo", str(repo), "--out", str(repo / "rendered")]) == 0
    commit_all(repo, "base")
    assert run(capsys, "--check", "--repo", str(repo))[0] == 0
    assert_hidden([(str(p), p.read_bytes()) for p in (repo / "rendered").rglob("*.yaml")], [secret])
    rotated = "r0tated-S3cret-value"
    write_files(
        repo,
        {
            "deployments/global.values.sops.yaml": encrypt_yaml(
                {"password": rotated}, [age_key.recipient]
            )
        },
    )
    code, out, err = run(capsys, "--check", "--repo", str(repo))
    assert code == 1 and "Secret_app.yaml: out of date" in out  # its REDACTED:sha256 changed
    assert_hidden([("out", out), ("err", err)], [secret, rotated])


def test_the_console_script_runs_as_a_pre_commit_hook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = rendered_repo(tmp_path, capsys)
    script = Path(sys.executable).parent / "rollwright"
    proc = subprocess.run(
        [str(script), "diff", "--check"], cwd=repo, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    write_files(repo, {"deployments/global.values.yaml": {"greeting": "changed"}})
    proc = subprocess.run(
        [str(script), "diff", "--check"], cwd=repo, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        f"rendered/g/c1/{CONFIGMAP}: out of date",
        f"rendered/g/c1/{DEPLOYMENT}: out of date",
        f"rendered/g/c2/{CONFIGMAP}: out of date",
        f"rendered/g/c2/{DEPLOYMENT}: out of date",
    ]


def test_diff_rev_compares_the_working_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = web_repo(tmp_path / "fleet")
    code, out, _ = run(capsys, "HEAD", "--repo", str(repo), "--format", "unified")
    assert code == 0 and "# rollwright diff " in out and "..working tree" in out
    # Uncommitted (tracked) and untracked changes both count; nothing is committed.
    write_files(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 7}})
    write_files(repo, {"deployments/g/c2/apps/extra/deployment.yaml": one_app("web")})
    code, out, err = run(capsys, "main", "--repo", str(repo), "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["working_tree"] is True and doc["head"] == "working tree"
    assert doc["base"] == git(repo, "rev-parse", "main")
    assert {r["root"]: r["status"] for r in doc["roots"]} == {"g/c1": "changed", "g/c2": "changed"}
    assert "+  replicas: 7" in doc["roots"][0]["resources"][0]["diff"]
    code, out, _ = run(capsys, "main", "--repo", str(repo))
    assert "→ head `working tree`" in out
    assert repro_command("main", WORKING_TREE, "g/c1") == "rollwright diff main --root g/c1"
    assert git(repo, "status", "--porcelain") != ""  # the working tree was only read
    # A broken working tree fails like a broken head revision, naming the file.
    write_files(repo, {"deployments/g/c1/cluster.values.yaml": "a: [\n"})
    code, _, err = run(capsys, "main", "--repo", str(repo), "--format", "unified")
    assert code == 2 and "does not render at working tree" in err
    assert "deployments/g/c1/cluster.values.yaml" in err and str(repo) not in err


def test_terminal_gets_a_coloured_unified_diff(tmp_path: Path) -> None:
    """On a terminal (a real pty), no --format: unified and coloured; NO_COLOR turns the
    colour off; in a pipe, Markdown as before."""
    repo = web_repo(tmp_path / "fleet")
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 4}})
    script = str(Path(sys.executable).parent / "rollwright")

    def on_terminal(env: dict[str, str]) -> str:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [script, "diff", "HEAD~1", "HEAD"], cwd=repo, stdout=follower, env=env
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the other end closed
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=120) == 1
        os.close(leader)
        return b"".join(chunks).decode().replace("\r\n", "\n")

    plain_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    shown = on_terminal(plain_env)
    assert "\x1b[32m+  replicas: 4\x1b[m" in shown
    assert f"\x1b[1m--- a/g/c1/{DEPLOYMENT}\x1b[m" in shown
    assert "<details>" not in shown and "### rollwright preview" not in shown
    no_colour = on_terminal({**plain_env, "NO_COLOR": "1"})
    assert "\x1b[" not in no_colour and "+  replicas: 4" in no_colour
    piped = subprocess.run(
        [script, "diff", "HEAD~1", "HEAD"], cwd=repo, capture_output=True, text=True, check=False
    )
    assert piped.returncode == 1 and piped.stdout.startswith("### rollwright preview\n")
    forced = subprocess.run(
        [script, "diff", "HEAD~1", "HEAD", "--format", "unified", "--color", "always"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "\x1b[32m+  replicas: 4\x1b[m" in forced.stdout


def test_check_without_rendered_tree_is_one_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = web_repo(tmp_path / "fleet")
    code, out, err = run(capsys, "--check", "--repo", str(repo))
    assert code == 1 and out == ""
    assert err.splitlines() == [
        "error: rendered/ does not exist: create it with `rollwright render --out rendered` "
        f"in {repo} and commit it, or point --rendered at the rendered tree"
    ]
    code, out, _ = run(capsys, "--check", "--repo", str(repo), "--format", "json")
    assert code == 1 and json.loads(out)["exists"] is False


def test_check_collapses_a_missing_root_and_speaks_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = rendered_repo(tmp_path, capsys)
    shutil.rmtree(repo / "rendered/g/c2")
    code, out, _ = run(capsys, "--check", "--repo", str(repo))
    assert code == 1 and out.splitlines() == ["rendered/g/c2/: missing (3 files)"]
    code, out, _ = run(capsys, "--check", "--repo", str(repo), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["up_to_date"] is False and doc["roots"] == 2
    assert doc["problems"] == [{"path": "rendered/g/c2/", "problem": "missing (3 files)"}]

"""Every command block of the README runs as shown.

Each ```console block is preceded by a marker saying where it runs:
`<!-- run by tests/test_readme.py: in a directory holding examples/ and .venv/ -->` (a scratch
directory with `examples/` and `.venv/` linked in, so `out/` lands there), `<!-- run by
tests/test_readme.py: in a clone of examples/dimensions-fleet, on a branch -->` (a git clone
with an `origin`, a branch with a committed change and one uncommitted change, `.venv/bin`
on the PATH), or `<!-- not run by tests/test_readme.py: <why, and what tests it instead> -->`.
A block without a marker fails the test, so a new block cannot be skipped silently.

Each `$ ` line runs in bash in that directory, in order, with the environment the block's
`export` lines set. It must exit 0, or 0 or 1 when its comment says "exit 1 on changes"
(`rollwright diff`'s documented status), and never print a traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gitrepo import commit_all, git, init_repo

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
EXAMPLES_MARKER = "run by tests/test_readme.py: in a directory holding examples/ and .venv/"
CLONE_MARKER = "run by tests/test_readme.py: in a clone of examples/dimensions-fleet, on a branch"
SKIP_MARKER = "not run by tests/test_readme.py:"


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    marker: str
    commands: tuple[str, ...]


def blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip() != "```console":
            continue
        before = "\n".join(lines[max(0, i - 4) : i])
        markers = re.findall(r"<!--(.*?)-->", before, re.S)
        marker = " ".join(markers[-1].split()) if markers else ""
        commands = []
        for body in lines[i + 1 :]:
            if body.strip() == "```":
                break
            if body.startswith("$ ") and not body[2:].lstrip().startswith("#"):
                commands.append(body[2:])
        out.append(Block(i + 1, marker, tuple(commands)))
    return out


README_BLOCKS = blocks(README.read_text())


def test_every_block_says_where_it_runs() -> None:
    assert README_BLOCKS, "the README has command blocks"
    for block in README_BLOCKS:
        assert block.marker.startswith((EXAMPLES_MARKER, CLONE_MARKER, SKIP_MARKER)), (
            f"README.md:{block.line}: a command block needs a marker saying where it runs"
        )
        if block.marker.startswith(SKIP_MARKER):
            # A skipped block says why, and which test or job covers it instead.
            assert "test" in block.marker.removeprefix(SKIP_MARKER), block


def _venv_bin() -> Path:
    return Path(sys.executable).parent


def _scratch(tmp_path: Path) -> Path:
    """A directory holding `examples/` and `.venv/`, as the top of this repository does."""
    top = tmp_path / "top"
    top.mkdir()
    (top / "examples").symlink_to(REPO / "examples")
    (top / ".venv").symlink_to(_venv_bin().parent)
    return top


def _clone(tmp_path: Path) -> Path:
    """A clone of examples/dimensions-fleet with `origin`, on a branch with a committed change
    to one application's values and an uncommitted change to another's."""
    origin = init_repo(tmp_path / "origin")
    shutil.copytree(REPO / "examples/dimensions-fleet", origin, dirs_exist_ok=True)
    commit_all(origin, "fleet")
    clone = tmp_path / "fleet"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    git(clone, "config", "user.email", "readme@example.com")
    git(clone, "config", "user.name", "README")
    git(clone, "checkout", "-q", "-b", "change")
    committed = clone / "config/regional-cluster/log-collector/values.yaml"
    committed.write_text(committed.read_text().replace("0.34.0", "0.35.0", 1))
    commit_all(clone, "log-collector 0.35.0")
    pending = clone / "config/regional-cluster/prometheus/values.yaml"
    pending.write_text(pending.read_text().replace("25.21.0", "25.22.0", 1))
    return clone


def _run(block: Block, cwd: Path, env: dict[str, str]) -> None:
    for command in block.commands:
        export = re.fullmatch(r"export (\w+)=(\S+)", command.strip())
        if export:
            env[export[1]] = export[2]
            continue
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        allowed = {0, 1} if "exit 1 on changes" in command else {0}
        shown = f"README.md:{block.line}: `{command}` exited {done.returncode}:\n{done.stderr}"
        assert done.returncode in allowed, shown
        assert "Traceback" not in done.stderr, shown


@pytest.mark.parametrize(
    "block",
    [b for b in README_BLOCKS if not b.marker.startswith(SKIP_MARKER)],
    ids=lambda b: f"line{b.line}",
)
def test_readme_block_runs_as_shown(block: Block, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{_venv_bin()}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("SOPS_AGE_KEY_FILE", None)
    env.pop("SOPS_AGE_KEY", None)
    if block.marker.startswith(EXAMPLES_MARKER):
        top = _scratch(tmp_path)
        _run(block, top, env)
        if any("--out out/" in c for c in block.commands):
            assert any((top / "out").rglob("*.yaml")), "render wrote the example's files"
    else:
        clone = _clone(tmp_path)
        _run(block, clone, env)
        assert (clone / "rendered").is_dir()
        # `promote --no-commit` wrote the patch's copy at the next node, and left it uncommitted.
        [copy] = clone.glob("config/management-cluster/hypershift-operator/stage/**/patch-*.yaml")
        assert git(clone, "status", "--porcelain", "--", str(copy.relative_to(clone)))


def test_the_secrets_walkthrough_shows_no_secret(tmp_path: Path) -> None:
    """The README's secrets block on examples/secrets-fleet: values and render are redacted,
    and only `--reveal=force` shows the password."""
    [block] = [b for b in README_BLOCKS if any("secrets-fleet" in c for c in b.commands)]
    top = _scratch(tmp_path)
    env = {
        **os.environ,
        "SOPS_AGE_KEY_FILE": str(REPO / "examples/secrets-fleet/age-test-key.txt"),
    }
    rollwright = str(_venv_bin() / "rollwright")
    repo = str(REPO / "examples/secrets-fleet")

    def run(*args: str) -> str:
        done = subprocess.run(
            [rollwright, *args], cwd=top, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    redacted = run("values", "staging/cluster-b", "--repo", repo)
    assert "cluster-b-only-s3cret" not in redacted and "password: REDACTE" in redacted
    run("render", "--repo", repo, "--out", str(top / "out"))
    secret = next((top / "out/staging/cluster-b").rglob("Secret_*.yaml")).read_text()
    assert "s3cret" not in secret and "REDACTED:sha256:" in secret
    revealed = run("values", "staging/cluster-b", "--repo", repo, "--reveal=force")
    assert "password: cluster-b-only-s3cret" in revealed
    assert any("--reveal=force" in c for c in block.commands)

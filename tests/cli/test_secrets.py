"""`rollwright values` / `render` print and write the redacted form; `--reveal` only to a
terminal unless `--reveal=force`."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.cli.main import main
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import make_fleet, one_app
from tests.support.secrets import app_chart_files

ROOT = "g/c"
PASSWORD = "cli-secret-7Hq2Zp"


def fleet(base: Path, key: AgeKey) -> Path:
    files: dict[str, Any] = {
        **app_chart_files("templates/app/chart"),
        "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
        "deployments/g/c/apps/d/deployment.yaml": one_app("app"),
        "deployments/global.values.sops.yaml": encrypt_yaml(
            {"password": PASSWORD}, [key.recipient]
        ),
    }
    return make_fleet(base, files, echo=False)


def test_values_are_redacted_by_default(
    tmp_path: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = fleet(tmp_path, age_key)
    assert main(["values", ROOT, "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "password: RED-REDACT-REDACT" in out and PASSWORD not in out


@pytest.mark.parametrize("command", ["values", "render"])
def test_reveal_is_refused_when_stdout_is_not_a_terminal(
    tmp_path: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    repo = fleet(tmp_path, age_key)
    args = [ROOT] if command == "values" else ["--out", str(tmp_path / "out")]
    assert main([command, *args, "--repo", str(repo), "--reveal"]) == 2
    captured = capsys.readouterr()
    assert "stdout is not a terminal; use --reveal=force" in captured.err
    assert PASSWORD not in captured.out + captured.err
    assert not (tmp_path / "out").exists()


def test_reveal_force_shows_plaintext(
    tmp_path: Path,
    age_key: AgeKey,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = fleet(tmp_path, age_key)
    assert main(["values", ROOT, "--repo", str(repo), "--reveal=force"]) == 0
    assert f"password: {PASSWORD}" in capsys.readouterr().out


def test_render_writes_redacted_files_unless_revealed(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    repo = fleet(tmp_path, age_key)
    shown, plain = tmp_path / "shown", tmp_path / "plain"
    assert main(["render", "--repo", str(repo), "--out", str(shown)]) == 0
    assert main(["render", "--repo", str(repo), "--out", str(plain), "--reveal=force"]) == 0
    shown_bytes = b"".join(p.read_bytes() for p in sorted(shown.rglob("*.yaml")))
    plain_bytes = b"".join(p.read_bytes() for p in sorted(plain.rglob("*.yaml")))
    assert PASSWORD.encode() not in shown_bytes and b"REDACTED:sha256:" in shown_bytes
    assert PASSWORD.encode() in plain_bytes
    assert sorted(p.relative_to(shown) for p in shown.rglob("*")) == sorted(
        p.relative_to(plain) for p in plain.rglob("*")
    )


def test_reveal_on_a_terminal(tmp_path: Path, age_key: AgeKey) -> None:
    """A real pseudo-terminal as stdout: plain `--reveal` is allowed there."""
    repo = fleet(tmp_path, age_key)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.cli", "values", ROOT, "--repo", str(repo), "--reveal"],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert f"password: {PASSWORD}".encode() in b"".join(chunks)

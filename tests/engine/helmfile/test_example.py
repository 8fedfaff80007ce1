"""examples/helmfile-fleet through the CLI: roots, render and validate work on it."""

from __future__ import annotations

from pathlib import Path

from shared.cli.main import main
from tests.support.paths import EXAMPLES

FLEET = EXAMPLES / "helmfile-fleet"


def test_roots_render_and_validate(tmp_path: Path, capsys: object) -> None:
    assert main(["roots", "--repo", str(FLEET)]) == 0
    assert main(["render", "--repo", str(FLEET), "--out", str(tmp_path)]) == 0
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == [
        "apps/web/web/Deployment.apps_web.yaml",
        "apps/web/web/Service_web.yaml",
        "platform/cache/cache.yaml",
    ]
    deployment = (tmp_path / "apps/web/web/Deployment.apps_web.yaml").read_text()
    assert deployment.startswith("# Source: web/templates/deployment.yaml\napiVersion: apps/v1\n")
    assert "helm.sh/chart" not in deployment and 'value: "eu-1"\n' in deployment
    assert main(["validate", "--repo", str(FLEET)]) == 0
    assert main(["values", "--repo", str(FLEET), "apps/web"]) == 0

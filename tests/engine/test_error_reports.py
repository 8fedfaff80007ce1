"""Errors people can act on: every fleet error has a line (jsonPatch targets and operations
included), a mistake in a shared file is reported once with the roots it fails, "did you mean"
for templates, releases, keys and roots, Go template errors in plain words at the user's file
and line, and `render` renders every root it can, writing nothing of a failed root."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shared.cli.main import main
from shared.engine.errors import FleetError, Problem, by_root
from shared.engine.helm.errors import reword
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "atlas-fleet"
WEB = "templates/web/helmfile.yaml.gotmpl"
ROOTS = ["prod/eu-1", "staging/cluster-a", "staging/cluster-b", "standalone"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    return shutil.copytree(EXAMPLE, tmp_path / "fleet")


def edit(fleet: Path, rel: str, old: str, new: str) -> None:
    path = fleet / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1))


def test_render_renders_every_root_it_can(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(
        fleet,
        "deployments/standalone/apps/cert-operator/deployment.yaml",
        "template: cert-operator",
        "template: cert-operater",
    )
    out = tmp_path / "out"
    code, stdout, err = run(capsys, "render", "--repo", str(fleet), "--out", str(out))
    assert code == 1 and stdout == ""
    problem, summary = err.splitlines()
    assert problem == (
        "deployments/standalone/apps/cert-operator/deployment.yaml:2: apps[0]: template "
        "'cert-operater' not found (no templates/cert-operater/helmfile.yaml.gotmpl or "
        "helmfile.yaml) (did you mean 'cert-operator'?) (in root standalone)"
    )
    assert summary.startswith("rendered 3 of 4 root(s), ")
    assert summary.endswith("; 1 failed (standalone), nothing written for them")
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/*")) == ROOTS[:3]
    assert not (out / "standalone").exists()  # no partial tree of the failed root
    # With workers too, and as JSON.
    out2 = tmp_path / "out2"
    code, stdout, _ = run(
        capsys,
        "render",
        "--repo",
        str(fleet),
        "--out",
        str(out2),
        "--jobs",
        "2",
        "--format",
        "json",
    )
    doc = json.loads(stdout)
    assert code == 1 and doc["failed"] == ["standalone"] and doc["roots"] == ROOTS[:3]
    assert doc["problems"][0]["line"] == 2


def test_a_shared_mistake_is_reported_once_with_its_roots(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(
        fleet,
        "deployments/global.values.yaml.gotmpl",
        "{{ .Values.domain }}",
        "{{ .Values.domian }}",
    )
    code, _, err = run(capsys, "render", "--repo", str(fleet), "--out", str(tmp_path / "o"))
    assert code == 1
    problem, summary = err.splitlines()
    assert problem == (
        "deployments/global.values.yaml.gotmpl:2: Go template error in {{ .Values.domian }}: "
        f"key 'domian' is not set (did you mean 'domain'?) (in 4 roots: {', '.join(ROOTS)})"
    )
    assert "0 of 4 root(s)" in summary and not (tmp_path / "o").exists()
    code, out, _ = run(capsys, "validate", "--repo", str(fleet))
    assert code == 1 and out.splitlines() == [problem.rsplit(" (in 4 roots", 1)[0]]


def test_json_patch_errors_carry_the_line_of_the_target_and_the_operation(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit(fleet, WEB, "kind: Deployment", "kind: Deploymnt")
    code, _, err = run(
        capsys, "render", "--repo", str(fleet), "--out", str(tmp_path / "a"), "--root", "standalone"
    )
    assert code == 1
    assert err.splitlines()[0] == (
        f'{WEB}:15: release "web/api": jsonPatches[0]: no rendered object matches target '
        "{kind: Deploymnt} (did you mean kind 'Deployment'?)"
    )
    fleet2 = shutil.copytree(EXAMPLE, tmp_path / "fleet2")
    edit(fleet2, WEB, "path: /spec/template/metadata/annotations", "path: /spec/nope/x")
    code, _, err = run(
        capsys,
        "render",
        "--repo",
        str(fleet2),
        "--out",
        str(tmp_path / "b"),
        "--root",
        "standalone",
    )
    assert code == 1
    # The failing operation's own line, and no copy of the object it was applied to.
    assert err.splitlines()[0] == (
        f'{WEB}:18: release "web/api": jsonPatches[0]: patch[0] (add /spec/nope/x): applying '
        "to Deployment 'api': member 'nope' not found"
    )


def test_instance_json_patch_operation_line(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dep = "deployments/standalone/apps/cert-operator/deployment.yaml"
    (fleet / dep).write_text(
        "apps:\n"
        "  - template: cert-operator\n"
        "    jsonPatches:\n"
        "      - target: {kind: Deployment}\n"
        "        patch:\n"
        "          - {op: add, path: /metadata/x, value: 'y'}\n"
        "          - {op: remove, path: /spec/nothing}\n"
    )
    code, _, err = run(
        capsys, "render", "--repo", str(fleet), "--out", str(tmp_path / "o"), "--root", "standalone"
    )
    assert code == 1
    line = err.splitlines()[0]
    assert line.startswith(f"{dep}:7: apps[0].jsonPatches[0] (instance 'cert-operator'): ")
    assert "patch[1] (remove /spec/nothing)" in line


def test_did_you_mean_for_roots_releases_and_keys(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "values", "stagin/cluster-a", "--repo", str(fleet))
    assert (
        code == 1 and "unknown root 'stagin/cluster-a' (did you mean 'staging/cluster-a'?)" in err
    )
    code, _, err = run(
        capsys, "values", "staging/cluster-a", "--repo", str(fleet), "--release", "web/frontnd"
    )
    assert code == 1 and "no release 'web/frontnd' (did you mean 'web/frontend'?)" in err
    edit(fleet, WEB, "  - name: api", "  - nmae: api")
    code, out, _ = run(capsys, "validate", "--repo", str(fleet))
    assert code == 1 and f"{WEB}:4: unknown key 'releases/0/nmae' (did you mean 'name'?)" in out


def test_far_names_get_no_guess(fleet: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "values", "elsewhere", "--repo", str(fleet))
    assert code == 1 and "unknown root 'elsewhere'; " in err and "did you mean" not in err


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            'parse error at (x.gotmpl:2): function "toYml" not defined',
            "Go template syntax error: unknown function 'toYml' (did you mean 'toYaml'?)",
        ),
        (
            "parse error at (x.gotmpl:3): unexpected EOF",
            "Go template syntax error: the file ends inside an action or block: an {{ if }}, "
            "{{ range }}, {{ with }} or {{ define }} without its {{ end }}, or a '{{' without '}}'",
        ),
        (
            "rendering chart: execution error at (c/templates/a.yaml:4:3): image.tag is required",
            "rendering chart: the template stopped: image.tag is required",
        ),
        (
            'c/templates/a.yaml:9:22 executing "c/templates/a.yaml" at <.Values.img.tag>: '
            "nil pointer evaluating interface {}.tag",
            "Go template error in {{ .Values.img.tag }}: cannot read 'tag': .Values.img is not "
            "set (did you mean 'image'?)",
        ),
        (
            'template: t:1:3: executing "t" at <.a.b>: wrong number of args for b: want 1 got 2',
            "Go template error in {{ .a.b }}: b takes 1 argument(s), given 2",
        ),
        ("something Go said that nobody reworded", "something Go said that nobody reworded"),
    ],
)
def test_go_template_errors_reworded(message: str, expected: str) -> None:
    assert reword(message, {"Values": {"image": {"tag": "1"}}}) == expected


def test_by_root_names_a_few_roots_and_counts_the_rest() -> None:
    roots = [f"g/c{i:02}" for i in range(12)]
    failures: list[tuple[str, FleetError]] = [
        (root, FleetError("x", path="a.yaml", line=3).within(f'rendering root "{root}"'))
        for root in roots
    ]
    failures.append(("g/c00", FleetError("other", path="b.yaml")))
    assert by_root(failures) == [
        Problem("a.yaml", 3, f"x (in 12 roots: {', '.join(roots[:8])} and 4 more)"),
        Problem("b.yaml", None, "other (in root g/c00)"),
    ]
    assert by_root(failures[:1], name_roots=False) == [Problem("a.yaml", 3, "x")]


def test_strategic_merge_patch_and_release_errors_carry_their_lines(
    fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = "templates/debug-tools/helmfile.yaml.gotmpl"
    edit(fleet, tools, "name: netshoot", "name: netshot")
    code, _, err = run(
        capsys, "render", "--repo", str(fleet), "--out", str(tmp_path / "a"), "--root", ROOTS[1]
    )
    assert code == 1
    assert err.splitlines()[0] == (
        f'{tools}:8: release "debug-tools/debug-tools": strategicMergePatches[0]: no rendered '
        "object is apps/v1 Deployment 'netshot' (did you mean name 'netshoot'?)"
    )
    # Two files of a plain-manifests release defining one object: the release's own line.
    fleet2 = shutil.copytree(EXAMPLE, tmp_path / "fleet2")
    manifests = fleet2 / "templates/debug-tools/manifests"
    first = sorted(manifests.glob("*.yaml"))[0]
    shutil.copy(first, manifests / "zz-copy.yaml")
    code, _, err = run(
        capsys, "render", "--repo", str(fleet2), "--out", str(tmp_path / "b"), "--root", ROOTS[1]
    )
    assert code == 1
    line = err.splitlines()[0]
    assert line.startswith(f"{tools}:3: ") and "is rendered twice" in line, line

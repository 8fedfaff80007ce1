"""Atlas fleet mistakes: each one a `path:line: message` from `validate`, and a FleetError
(never a traceback) from render/values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shared.cli import main as cli
from shared.engine.errors import FleetError
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from tests.support.atlas import layout, make_fleet, one_app, render

DEP = "deployments/g/c/apps/d"


def problems(base: Path) -> list[str]:
    return [str(p) for p in validate_fleet(WorkTree(base))]


def fleet(tmp_path: Path, files: dict[str, Any]) -> Path:
    return make_fleet(tmp_path, {f"{DEP}/deployment.yaml": one_app(), **files})


def test_a_sound_fleet_has_no_problems(tmp_path: Path) -> None:
    assert problems(fleet(tmp_path, {})) == []


def test_unknown_key_in_deployment_yaml(tmp_path: Path) -> None:
    text = "apps:\n  - template: echo\n    nmae: web\n"
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    assert problems(base) == [
        f"{DEP}/deployment.yaml:3: unknown key 'apps/0/nmae' (did you mean 'name'?)"
    ]


def test_bad_name_style(tmp_path: Path) -> None:
    text = "nameStyle: infix\napps:\n  - template: echo\n"
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    [problem] = problems(base)
    assert problem.startswith(f"{DEP}/deployment.yaml:1: nameStyle: ")
    assert "'prefix' or 'suffix'" in problem


def test_yaml_syntax_error(tmp_path: Path) -> None:
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": "apps:\n  - template: [echo\n"})
    [problem] = problems(base)
    assert problem.startswith(f"{DEP}/deployment.yaml:3: YAML syntax error")


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("apps:\n\t- template: echo\n", 2, 1),  # a line indented with a tab
        ("apps:\n  - template: echo\n   \tname: web\n", 3, 4),  # a tab after spaces
        ("apps:\n  - template: echo\n\t\n", 3, 1),  # a blank line holding a tab
    ],
)
def test_a_yaml_tab_is_named_with_its_column(
    tmp_path: Path, text: str, line: int, column: int
) -> None:
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    assert problems(base) == [
        f"{DEP}/deployment.yaml:{line}: YAML syntax error: a tab character at column "
        f"{column}: YAML indents with spaces, never tabs"
    ]


def test_missing_template(tmp_path: Path) -> None:
    text = "apps:\n  - template: echo\n  - template: nope\n"
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    assert problems(base) == [
        f"{DEP}/deployment.yaml:3: apps[1]: template 'nope' not found "
        "(no templates/nope/helmfile.yaml.gotmpl or helmfile.yaml)"
    ]


def test_duplicate_instances(tmp_path: Path) -> None:
    text = "apps:\n  - template: echo\n    name: a\n  - template: echo\n    name: a\n"
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    assert problems(base) == [
        f"{DEP}/deployment.yaml:5: apps[1]: duplicate instance name 'a' (also apps[0]); "
        "give one of them a distinct `name`"
    ]


def test_two_unnamed_instances_of_one_template_are_duplicates(tmp_path: Path) -> None:
    text = "apps:\n  - template: echo\n  - template: echo\n"
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    [problem] = problems(base)
    assert problem.startswith(f"{DEP}/deployment.yaml:3: apps[1]: duplicate instance name 'echo'")


def test_deployment_directory_without_deployment_yaml(tmp_path: Path) -> None:
    base = fleet(tmp_path, {"deployments/apps/orphan/values.yaml": {"a": 1}})
    assert problems(base) == [
        "deployments/apps/orphan: deployment directory has no deployment.yaml "
        "(every directory under apps/ is a deployment)"
    ]
    # The render refuses with the problem as validate prints it.
    with pytest.raises(FleetError, match=r"^deployments/apps/orphan: deployment directory has no"):
        render(base, "g/c")


def test_duplicate_leaf_names_in_validate(tmp_path: Path) -> None:
    base = fleet(tmp_path, {"deployments/other/c/apps/.keep": ""})
    assert problems(base) == [
        "deployments/other/c: duplicate cluster name 'c': deployments/g/c and "
        "deployments/other/c (leaf cluster names must be unique)"
    ]


def test_cluster_values_without_apps_and_misplaced_level_files(tmp_path: Path) -> None:
    base = fleet(
        tmp_path,
        {
            "deployments/lonely/cluster.values.yaml": {"a": 1},
            "deployments/g/cluster.values.yaml": {"a": 1},
            "deployments/g/c/group.values.yaml": {"a": 1},
        },
    )
    assert problems(base) == [
        "deployments/g/c/group.values.yaml: group.values.yaml is never read: deployments/g/c "
        "is a leaf cluster (use cluster.values.*)",
        "deployments/g/cluster.values.yaml: cluster.values.yaml is never read: deployments/g "
        "is a group (it has clusters below it); use group.values.*",
        "deployments/lonely/cluster.values.yaml: deployments/lonely has cluster.values.yaml but "
        "no apps/ directory, so it is not a cluster and the file is never read",
    ]


def test_values_file_must_be_a_mapping(tmp_path: Path) -> None:
    base = fleet(tmp_path, {"deployments/g/c/cluster.values.yaml": "- a\n- b\n"})
    assert problems(base) == [
        "deployments/g/c/cluster.values.yaml:1: values file must be a mapping at the top "
        "level, found a list"
    ]


def test_values_file_syntax_error(tmp_path: Path) -> None:
    base = fleet(tmp_path, {"deployments/global.values.yaml": "a: 1\nb: [\n"})
    [problem] = problems(base)
    assert problem.startswith("deployments/global.values.yaml:3: YAML syntax error")


HELMFILE = "templates/echo/helmfile.yaml.gotmpl"


def test_missing_chart_directory(tmp_path: Path) -> None:
    text = "releases:\n  - name: echo\n    chart: ./nowhere\n"
    base = fleet(tmp_path, {HELMFILE: text})
    assert problems(base) == [
        f"{HELMFILE}:3: releases[0].chart: chart './nowhere' not found: no directory "
        "templates/echo/nowhere"
    ]


def test_unknown_repository(tmp_path: Path) -> None:
    text = (
        "repositories:\n  - name: bitnami\n    url: https://charts.example.com\n"
        "releases:\n  - name: echo\n    chart: stable/echo\n    version: 1.0.0\n"
    )
    base = fleet(tmp_path, {HELMFILE: text})
    assert problems(base) == [
        f"{HELMFILE}:6: releases[0].chart: chart 'stable/echo': no directory "
        "templates/echo/stable/echo and no repository named 'stable' in repositories: "
        "(known: bitnami)"
    ]


def test_missing_values_file_names_the_helmfile_line(tmp_path: Path) -> None:
    text = (
        "releases:\n  - name: echo\n    chart: ./chart\n"
        "    values:\n      - {{ .atlas.cluster.name }}.yaml\n"
    )
    base = fleet(tmp_path, {HELMFILE: text})
    # the line of the source file, although the rendered text differs
    assert problems(base) == [
        f"{HELMFILE}:5: releases[0].values[0]: values file 'c.yaml' not found "
        "(templates/echo/c.yaml)"
    ]


def test_unknown_key_in_helmfile(tmp_path: Path) -> None:
    text = "releases:\n  - name: echo\n    chart: ./chart\n    valuez: []\n"
    base = fleet(tmp_path, {HELMFILE: text})
    assert problems(base) == [
        f"{HELMFILE}:4: unknown key 'releases/0/valuez' (did you mean 'values'?)"
    ]


def test_template_without_helmfile(tmp_path: Path) -> None:
    base = fleet(tmp_path, {"templates/empty/README.md": "todo"})
    assert problems(base) == [
        "templates/empty: template without helmfile.yaml.gotmpl or helmfile.yaml"
    ]


def test_go_template_error_names_file_and_line(tmp_path: Path) -> None:
    base = fleet(
        tmp_path, {"deployments/g/c/cluster.values.yaml.gotmpl": "a: 1\nb: {{ .x | nosuchfunc }}\n"}
    )
    [problem] = problems(base)
    assert problem == (
        "deployments/g/c/cluster.values.yaml.gotmpl:2: Go template syntax error: "
        "unknown function 'nosuchfunc'"
    )


def test_instance_secrets_must_stay_in_the_deployment_directory(tmp_path: Path) -> None:
    text = "apps:\n  - template: echo\n    secrets:\n      - ../../common.sops.yaml\n"
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    assert problems(base) == [
        f"{DEP}/deployment.yaml:4: apps[0].secrets[0]: secrets file '../../common.sops.yaml' "
        f"must stay inside {DEP}/"
    ]


def test_missing_instance_secrets_file(tmp_path: Path) -> None:
    text = "apps:\n  - template: echo\n    secrets: [s.sops.yaml]\n"
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    assert problems(base) == [
        f"{DEP}/deployment.yaml:3: apps[0].secrets[0]: secrets file 's.sops.yaml' not found "
        f"({DEP}/s.sops.yaml)"
    ]


def test_templates_may_not_read_deployments(tmp_path: Path) -> None:
    text = (
        "releases:\n  - name: echo\n    chart: ./chart\n"
        "    values:\n      - ../../deployments/x.yaml\n"
    )
    base = fleet(tmp_path, {HELMFILE: text, "deployments/x.yaml": {"a": 1}})
    [problem] = problems(base)
    assert problem.startswith(f"{HELMFILE}:5: releases[0].values[0]: values file ")
    assert "templates may not read files under deployments/" in problem


def test_paths_may_not_leave_the_repository(tmp_path: Path) -> None:
    text = "releases:\n  - name: echo\n    chart: ../../../elsewhere\n"
    base = fleet(tmp_path, {HELMFILE: text})
    assert problems(base) == [
        f"{HELMFILE}:3: releases[0].chart: chart '../../../elsewhere' points outside the repository"
    ]


def test_instance_patch_matching_nothing(tmp_path: Path) -> None:
    text = (
        "apps:\n  - template: echo\n    strategicMergePatches:\n"
        "      - apiVersion: v1\n        kind: ConfigMap\n        metadata: {name: other}\n"
    )
    base = fleet(tmp_path, {f"{DEP}/deployment.yaml": text})
    assert problems(base) == [
        f"{DEP}/deployment.yaml:4: apps[0].strategicMergePatches[0] "
        "(instance 'echo'): no rendered object is v1 ConfigMap 'other' (in root g/c)"
    ]


def test_render_errors_name_root_and_release(tmp_path: Path) -> None:
    base = fleet(tmp_path, {"deployments/g/c/cluster.values.yaml.gotmpl": 'a: {{ fail "boom" }}\n'})
    with pytest.raises(FleetError) as caught:
        render(base, "g/c")
    text = str(caught.value)
    assert text.startswith('deployments/g/c/cluster.values.yaml.gotmpl:1: rendering root "g/c": ')
    assert "boom" in text
    with pytest.raises(FleetError, match="boom"):
        layout(base).values("g/c", None)


def test_cli_validate_prints_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": "apps:\n  - template: nope\n    nmae: x\n",
            "deployments/apps/orphan/values.yaml": {"a": 1},
        },
    )
    assert cli.main(["validate", "--repo", str(base)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "deployments/apps/orphan: deployment directory has no deployment.yaml (every "
        "directory under apps/ is a deployment)",
        f"{DEP}/deployment.yaml:3: unknown key 'apps/0/nmae' (did you mean 'name'?)",
    ]
    assert err == "1 root(s) checked: 2 problem(s) found\n"


@pytest.mark.parametrize(
    ("version", "refused"),
    [("0.1.0", False), ("~0.1", False), ("1.4.0", True), (">=2.0.0", True)],
)
def test_a_local_chart_must_have_the_version_asked_for(
    tmp_path: Path, version: str, refused: bool
) -> None:
    """A local chart renders as it is: a release `version` it does not meet would be
    ignored, so it is refused at the helmfile's line, in validate and in render alike."""
    helmfile = f"releases:\n  - name: echo\n    chart: ./chart\n    version: {version!r}\n"
    base = fleet(tmp_path, {"templates/echo/helmfile.yaml.gotmpl": helmfile})
    if not refused:
        assert problems(base) == []
        return
    expected = (
        f"templates/echo/helmfile.yaml.gotmpl:4: releases[0].version: '{version}' but the "
        "local chart templates/echo/chart is version '0.1.0' (its Chart.yaml): a local chart "
        "renders as it is, so the version would be ignored; make them agree or drop `version`"
    )
    assert [p.removesuffix(" (in root g/c)") for p in problems(base)] == [expected]
    with pytest.raises(FleetError) as info:
        render(base, "g/c")
    assert expected.split(": ", 1)[1] in str(info.value)

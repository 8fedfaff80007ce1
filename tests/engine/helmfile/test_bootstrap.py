"""kube-renderer's bootstrap templates (shared/engine/helmfile/bootstrap.py, gomplate.py): the
`bootstrap` case renders kube-renderer's tree (test_kube_renderer_cases); here its root, its
context, gomplate's functions and what is refused rather than rendered differently."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.helmfile import gomplate
from shared.engine.tree import WorkTree
from tests.support.helmfile import FIXTURES, build, rendered_tree


def test_the_bootstrap_files_are_one_root_without_releases(tmp_path: Path) -> None:
    fleet = Fleet.open(WorkTree(build("bootstrap", tmp_path)))
    assert fleet.roots() == [
        "fleet/one/svc-one",
        "fleet/one/svc-two",
        "fleet/two/svc-three",
        "seeds",
    ]
    assert fleet.releases("seeds") == []
    assert sorted(fleet.render("seeds").files) == [
        "fleet/one/svc-one.yaml",
        "fleet/one/svc-two.yaml",
        "fleet/two/svc-three.yaml",
        "seeds.yaml",
    ]
    context = fleet.values("seeds")
    assert sorted(context) == ["DirsMap", "Metadata", "Releases", "ReleasesMap", "StateValues"]
    assert context["DirsMap"] == {
        "svc-one": "fleet/one/svc-one",
        "svc-two": "fleet/one/svc-two",
        "svc-three": "fleet/two/svc-three",
    }
    assert context["ReleasesMap"] == {n: n for n in ("svc-one", "svc-two", "svc-three")}
    assert context["Metadata"]["helmfile_dir"] == "fleet"
    assert [r["name"] for r in context["Releases"]] == ["svc-one", "svc-two", "svc-three"]
    assert context["Releases"][1]["values"] == {
        "colour": "red",
        "size": "small",
        ".kube-renderer": {"target_dir": "one/svc-two"},
    }


SOURCE = ("manifests-a", "source/plain-a")


def _repo(tmp_path: Path, template: str, *, release: str = "", state: str = "") -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "boot.tmpl").write_text(template)
    (repo / "helmfile.yaml").write_text(
        "environments:\n  default:\n    values:\n"
        f"{state}"
        "      - .kube-renderer:\n"
        '          bootstrap_template: {{ readFile "boot.tmpl" | toJson }}\n'
        "releases:\n  - name: web\n    chart: ./source/plain-a\n"
        f"{release}"
    )
    shutil.copytree(FIXTURES / "sources" / SOURCE[0], repo / SOURCE[1])
    return repo


def _render(repo: Path) -> dict[str, str]:
    return {k: v.decode() for k, v in rendered_tree(repo).items() if not k.startswith("web/")}


def _error(repo: Path) -> str:
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    return str(err.value)


def test_documents_append_to_their_path_and_the_rest_is_dropped(tmp_path: Path) -> None:
    template = (
        "# no path: dropped\nkind: A\n---\n"
        "{{ range .Releases }}# Bootstrap: boot/all.yaml\nname: {{ .name }}\n---\n{{ end }}"
        "# Bootstrap: boot/all.yaml\n# Bootstrap: boot/sub/last.yaml\nname: last\n"
    )
    assert _render(_repo(tmp_path, template)) == {
        "boot/all.yaml": "# Bootstrap: boot/all.yaml\nname: web\n",
        "boot/sub/last.yaml": (
            "# Bootstrap: boot/all.yaml\n# Bootstrap: boot/sub/last.yaml\nname: last\n"
        ),
    }


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ upper .StateValues.x }}", "line 1, column 4: 'upper' is not one of the gomplate"),
        ("a: 1\n{{ coll.Keys . }}", "line 2, column 4: coll.Keys is not reproduced"),
        ('{{ printf "%x" 1 }}', "column 11: printf verb %x is not reproduced"),
        ("{{ .Values.x }}", ".Values is not in gomplate's context"),
        ('{{ index .StateValues "nope" }}', "prints a value that is not set"),
        ("{{ range .Releases }}{{ .chart }}{{ end }}", "prints the releases' 'chart'"),
        ("# Bootstrap: loose.yaml\na: 1\n", "'loose.yaml' of a `# Bootstrap:` comment has no"),
        ("# Bootstrap: web/x.yaml\na: 1\n", "starts with the release name 'web'"),
        ("# Bootstrap: ../x/y.yaml\na: 1\n", "leaves kube-renderer's output"),
        ("# Bootstrap: a/.x.yaml\na: 1\n", "has a hidden file"),
        (
            "# Bootstrap: a/x.yaml\na: 1\n---\n# Bootstrap: b/x.yaml\nb: 1\n",
            "writes under several top-level directories (a, b)",
        ),
        ("# nothing\na: 1\n", "renders no document with a `# Bootstrap: <path>` comment"),
        ("{{ .StateValues.missing }}", "line 1: "),
    ],
)
def test_what_is_not_reproduced_is_refused_with_its_place(
    tmp_path: Path, template: str, message: str
) -> None:
    found = _error(_repo(tmp_path, template, state="      - flag: 1\n"))
    assert found.startswith("helmfile.yaml: .kube-renderer.bootstrap_template"), found
    assert message in found, found


def test_a_root_nesting_a_release_directory_is_refused(tmp_path: Path) -> None:
    found = _error(
        _repo(
            tmp_path,
            "# Bootstrap: all/x.yaml\na: 1\n",
            release="    values:\n      - .kube-renderer: {target_dir: all/web}\n",
        )
    )
    assert "roots may not nest (releases web and the bootstrap files)" in found, found


def test_a_disabled_release_is_refused_with_a_bootstrap_template(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        "# Bootstrap: boot/x.yaml\na: 1\n",
        state="      - extra: {enabled: false}\n",
        release="  - name: spare\n    chart: ./source/plain-a\n    condition: extra.enabled\n",
    )
    assert "release 'spare' is disabled by its condition" in _error(repo)


CONTEXT: dict[str, Any] = {
    "Releases": [{"name": "a", "values": {"n": 3}}],
    "Metadata": {"list": ["x", "y"], "empty": ""},
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (
            '{{ has .Metadata "list" }} {{ has .Metadata.list "y" }} {{ has .Metadata.list "z" }}',
            "true true false",
        ),
        ('{{ coll.Has .Metadata "nope" }} {{ has "text" "t" }}', "false false"),
        (
            '{{ range (.Releases | coll.Append (`{"name": "b"}` | json)) }}{{ .name }}{{ end }}',
            "ab",
        ),
        ('{{ (data.JSON `{"k": {"v": 2}}`).k.v }} {{ len (data.JSON "null") }}', "2 0"),
        ('{{ .Metadata.empty | default "d" }} {{ default "d" "set" }}', "d set"),
        ("{{ range $r := .Releases }}{{ $.Metadata.list }} {{ $r.values.n }}{{ end }}", "[x y] 3"),
        (
            '{{- printf "%s=%d %v" "k" (len .Metadata.list) .Releases -}}',
            "k=2 [map[name:a values:map[n:3]]]",
        ),
    ],
)
def test_gomplate_functions_render_as_gomplate_prints_them(template: str, expected: str) -> None:
    assert gomplate.render(template, CONTEXT, source="t") == expected

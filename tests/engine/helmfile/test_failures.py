"""kube-renderer's two failing cases, and what the layout refuses rather than render
differently from kube-renderer: each error names the file and line that asked for it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from tests.support.helmfile import FIXTURES, build, rendered_tree


def _error(repo: Path) -> str:
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    return str(err.value)


def test_a_helm_binary_other_than_helm_is_refused(tmp_path: Path) -> None:
    message = _error(build("bad-helmbinary", tmp_path))
    assert message.startswith(
        "helmfile.yaml:1: helmBinary 'no_such_helm3': no_such_helm3: not found"
    )


def test_a_chart_whose_kube_version_is_not_met_fails(tmp_path: Path) -> None:
    message = _error(build("kube-version-ko", tmp_path))
    assert message.startswith("source/needs-new/Chart.yaml:7: ")
    assert "chart requires kubeVersion: 1.16.0 which is incompatible with Kubernetes v1.25.0" in (
        message
    )


def _repo(tmp_path: Path, helmfile: str, *sources: tuple[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "helmfile.yaml").write_text(helmfile)
    for source, target in sources:
        shutil.copytree(FIXTURES / "sources" / source, repo / target)
    return repo


PLAIN = ("manifests-a", "source/plain-a")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("render_filename_generator: files", "render_filename_generator 'files' is none of"),
        ('flags: {hooks: "on"}', "flags.hooks must be true or false"),
        ("target_dri: x", "unknown kube-renderer option .kube-renderer.target_dri"),
        ("remove_labels: ['a b']", "not a single label key"),
        ("helm_postrenderer: {type: jq}", "helm_postrenderer must be {type: kustomize"),
    ],
)
def test_options_kube_renderer_would_misread_are_refused(
    tmp_path: Path, options: str, message: str
) -> None:
    helmfile = (
        "releases:\n  - name: svc\n    chart: ./source/plain-a\n    values:\n"
        f"      - .kube-renderer: {{{options}}}\n"
    )
    assert message in _error(_repo(tmp_path, helmfile, PLAIN))


def test_a_pattern_outside_the_supported_yq_subset_names_its_column(tmp_path: Path) -> None:
    helmfile = (
        "environments:\n  default:\n    values:\n      - .kube-renderer:\n"
        "          render_filename_generator: yq\n"
        "          render_filename_pattern: '.metadata.name | ascii_downcase'\n"
        "releases:\n  - name: svc\n    chart: ./source/plain-a\n"
    )
    message = _error(_repo(tmp_path, helmfile, PLAIN))
    assert message.startswith("helmfile.yaml:8: ")
    assert "release 'svc': render_filename_pattern: " in message
    assert "'ascii_downcase' is not supported" in message and "(column 18)" in message


def test_a_comment_inside_a_document_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "releases:\n  - name: svc\n    chart: ./source/m\n")
    (repo / "source" / "m").mkdir(parents=True)
    (repo / "source" / "m" / "a.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x # why\n"
    )
    message = _error(repo)
    assert message.startswith("helmfile.yaml:2: ")
    assert "release 'svc': a comment inside a document ('# why')" in message


def test_a_release_that_renders_nothing_is_an_error(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "releases:\n  - name: svc\n    chart: ./source/m\n")
    (repo / "source" / "m").mkdir(parents=True)
    (repo / "source" / "m" / "a.yaml").write_text("# nothing here\n")
    assert "renders no object" in _error(repo)


def test_duplicate_release_names_and_bad_targets_are_refused(tmp_path: Path) -> None:
    release = "  - name: a\n    chart: ./source/plain-a\n"
    twice = "releases:\n" + release + release
    assert "declared twice" in _error(_repo(tmp_path, twice, PLAIN))
    unknown = (
        "releases:\n  - name: a\n    chart: ./source/plain-a\n    values:\n"
        "      - .kube-renderer: {target_release: b}\n"
    )
    other = tmp_path / "other"
    other.mkdir()
    assert "target_release 'b' is not a release that renders" in _error(
        _repo(other, unknown, PLAIN)
    )


def test_a_false_condition_skips_the_release(tmp_path: Path) -> None:
    helmfile = (
        "environments:\n  default:\n    values:\n      - extra: {enabled: false}\n"
        "releases:\n  - name: a\n    chart: ./source/plain-a\n"
        "  - name: b\n    chart: ./source/plain-a\n    condition: extra.enabled\n"
    )
    fleet = Fleet.open(WorkTree(_repo(tmp_path, helmfile, PLAIN)))
    assert fleet.roots() == ["a"]


def test_a_fleet_without_roots_fails_rather_than_render_nothing(tmp_path: Path) -> None:
    """`layout: atlas` on a helmfile repository finds no cluster: an error, not 0 roots."""
    repo = _repo(tmp_path, "releases:\n  - name: a\n    chart: ./source/plain-a\n", PLAIN)
    (repo / "rollwright.yaml").write_text("layout: atlas\n")
    fleet = Fleet.open(WorkTree(repo))
    with pytest.raises(FleetError) as err:
        fleet.require_roots()
    assert str(err.value).startswith(
        "rollwright.yaml: the atlas layout finds no root in this repository (it looks for "
        "deployments/ directory)"
    )
    problems = [str(p) for p in validate_fleet(WorkTree(repo))]
    assert problems == [str(err.value)]


def test_a_helmfile_repository_is_detected(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "releases:\n  - name: a\n    chart: ./source/plain-a\n", PLAIN)
    assert Fleet.open(WorkTree(repo)).layout_name == "helmfile"

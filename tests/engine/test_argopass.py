"""Argo CD's pass over a dimensions root's published chart, done before publishing
(shared.engine.dimensions.argopass): a chart Helm cannot render a second time, and an
ApplicationSet template that does not parse as the Go template its controller reads, refuse
the root at the user's values file and line, in `render` and `validate` alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shared.engine.dimensions.argopass import PLACEHOLDER, placeholders
from shared.engine.errors import FleetError, FleetErrors
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from shared.engine.validate import check_fleet
from tests.support.dimensions import base_files, layout_of
from tests.support.files import write_files
from tests.support.paths import FIXTURES

# The application's values as a team writes them: the vpcId line escapes the annotation
# lookup once where the ApplicationSet's pass needs it twice, so the published chart holds
# a live `{{ index .metadata.annotations … }}`.
MIS_ESCAPED = """applications:
  a:
    source:
      repoURL: https://charts.example.com/a
      chart: a
      targetRevision: v1.0.0
      helm:
        valuesObject:
          region: "{{`{{ .Values.cluster.region }}`}}"
          vpcId: '{{"{{"}} index .metadata.annotations "gcp-hcp/vpc-id" {{"}}"}}'
    destination:
      namespace: a
"""


def test_a_chart_helm_cannot_render_again_refuses_at_the_values_line(tmp_path: Path) -> None:
    files = base_files()
    del files["config/mc/a/values.yaml"]
    layout_of(tmp_path / "fleet", files)
    write_files(tmp_path / "fleet", {"config/mc/a/values.yaml": MIS_ESCAPED})
    with pytest.raises(FleetError) as info:
        Fleet.open(WorkTree(tmp_path / "fleet")).render("mc/e1/s1/r1")
    err = info.value
    assert (err.path, err.line) == ("config/mc/a/values.yaml", 10)
    assert err.problem.message.startswith(
        "rendering root \"mc/e1/s1/r1\": application 'a': Argo CD cannot render the published "
        "chart (templates/a.yaml line "
    )
    assert "cannot read 'annotations': .metadata is not set" in err.problem.message
    # validate says the same, once for every root of the type
    problems = [str(p) for p in check_fleet(WorkTree(tmp_path / "fleet")).problems]
    assert len(problems) == 1
    assert problems[0].startswith("config/mc/a/values.yaml:10: application 'a': Argo CD")
    assert problems[0].endswith("(in 4 roots: mc/e1/s1/r1, mc/e1/s1/r2, mc/e1/s2/r1, mc/e2/s3/r3)")


def test_escaping_it_twice_publishes(tmp_path: Path) -> None:
    fixed = MIS_ESCAPED.replace(
        """'{{"{{"}} index .metadata.annotations "gcp-hcp/vpc-id" {{"}}"}}'""",
        """'{{ "{{`{{ index .metadata.annotations \\"gcp-hcp/vpc-id\\" }}`}}" }}'""",
    )
    files = base_files()
    files["config/mc/a/values.yaml"] = fixed
    layout = layout_of(tmp_path / "fleet", files)
    published = layout.render_files("mc/e1/s1/r1")["templates/a.yaml"].decode()
    assert '{{`{{ index .metadata.annotations "gcp-hcp/vpc-id" }}`}}' in published


def test_keys_only_the_applicationset_fills_get_placeholders() -> None:
    chart = {
        "values.yaml": b"cluster:\n  type: mc\n  region: r1\n",
        "templates/a.yaml": (
            b"a: {{ .Values.cluster.region }}\nb: {{ .Values.cluster.name }}\n"
            b"c: {{ .Values.cluster.network.vpc }}\n"
        ),
    }
    assert placeholders(chart) == {
        "name": f"{PLACEHOLDER}-name",
        "network": {"vpc": f"{PLACEHOLDER}-vpc"},
    }


BOOTSTRAP = FIXTURES / "fleets" / "bootstrap-fleet"
SET_VALUES = "config/infra-cluster/management-cluster-root/values.yaml"
NAME_LINE = """        name: '{{ "{{`{{ .name }}`}}" }}-apps'\n"""


def bootstrap(tmp_path: Path, name_line: str) -> Path:
    fleet = Path(shutil.copytree(BOOTSTRAP, tmp_path / "fleet"))
    values = fleet / SET_VALUES
    text = values.read_text()
    assert NAME_LINE in text
    values.write_text(text.replace(NAME_LINE, name_line))
    return fleet


def test_an_applicationset_template_that_does_not_parse_refuses(tmp_path: Path) -> None:
    # Both Helm passes are fine; the controller gets `{{ if .name }}-apps` (no {{ end }}).
    fleet = bootstrap(tmp_path, """        name: '{{ "{{`{{ if .name }}`}}" }}-apps'\n""")
    root = "infra-cluster/production/europe-west1"
    with pytest.raises(FleetErrors) as info:
        Fleet.open(WorkTree(fleet)).render(root)
    [problem] = info.value.problems
    assert (problem.path, problem.line) == (SET_VALUES, 17)
    assert problem.message.startswith(
        f"rendering root \"{root}\": ApplicationSet 'management-cluster-root': "
        "spec.template.metadata.name "
        "does not parse as the Go template its controller reads (goTemplate: true): "
    )
    assert "{{ end }}" in problem.message
    found = [str(p) for p in check_fleet(WorkTree(fleet)).problems]
    assert len(found) == 1 and found[0].startswith(f"{SET_VALUES}:17: ApplicationSet")


def test_argo_cd_functions_parse(tmp_path: Path) -> None:
    fleet = bootstrap(tmp_path, """        name: '{{ "{{`{{ normalize .name }}`}}" }}-apps'\n""")
    opened = Fleet.open(WorkTree(fleet))
    for root in opened.roots():
        assert opened.render(root).files


def test_a_second_pass_that_is_not_yaml_refuses(tmp_path: Path) -> None:
    """A value Argo CD's pass turns into a document separator inside a quoted scalar."""
    values = MIS_ESCAPED.replace(
        """'{{"{{"}} index .metadata.annotations "gcp-hcp/vpc-id" {{"}}"}}'""",
        '''"{{`{{ \\"a\\\\n---\\\\nb\\" }}`}}"''',
    )
    assert "\\\\n---" in values
    files = base_files()
    files["config/mc/a/values.yaml"] = values
    layout = layout_of(tmp_path / "fleet", files)
    with pytest.raises(FleetError) as info:
        layout.render_files("mc/e1/s1/r1")
    assert info.value.path == "config/mc/a/values.yaml"
    assert info.value.problem.message.startswith(
        "application 'a': Argo CD's render of the published chart is not YAML: YAML syntax "
        "error: found unexpected document indicator"
    )

"""Rendered objects against the API server's schemas (shared.engine.conformance): a wrong type
from a values file refuses the root at that file's line, a custom resource is checked against
the CRD the render carries, a kind with no schema is named as unchecked, and rollwright.yaml
`schemas` turns the check into warnings or off per root. Real renders of small atlas and
helmfile fleets written here."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from activities.render import render_with_warnings
from shared.cli import main as cli
from shared.engine.errors import FleetErrors
from shared.engine.fleet import Fleet
from shared.engine.manifests.schema import Schemas, schema_version, structural, versions
from shared.engine.tree import WorkTree
from shared.engine.validate import check_fleet
from tests.support.atlas import make_fleet
from tests.support.paths import EXAMPLES

WEB_CHART = {
    "templates/web/helmfile.yaml.gotmpl": "releases:\n  - name: web\n    chart: ./chart\n",
    "templates/web/chart/Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    "templates/web/chart/values.yaml": "replicas: 1\nport: 80\n",
    "templates/web/chart/templates/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: registry.example.com/web:1.0
          ports:
            - containerPort: {{ .Values.port }}
""",
}

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              properties:
                size: {type: integer}
                colour: {type: string, enum: [red, blue]}
                port: {x-kubernetes-int-or-string: true}
                note: {type: string, nullable: true}
                extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""

WIDGETS = {
    "templates/widgets/helmfile.yaml.gotmpl": "releases:\n  - name: widgets\n    chart: ./chart\n",
    "templates/widgets/chart/Chart.yaml": "apiVersion: v2\nname: widgets\nversion: 0.1.0\n",
    "templates/widgets/chart/values.yaml": "size: 3\ncolour: red\n",
    "templates/widgets/chart/crds/widget.yaml": CRD,
    "templates/widgets/chart/templates/widget.yaml": """apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
spec:
  size: {{ .Values.size }}
  colour: {{ .Values.colour }}
  port: http
  note: null
  extra: {anything: [1, 2]}
""",
}

WIDGET = "templates/widgets/chart:widgets/templates/widget.yaml"

MONITOR = {
    "templates/monitor/helmfile.yaml.gotmpl": "releases:\n  - name: monitor\n    chart: ./chart\n",
    "templates/monitor/chart/Chart.yaml": "apiVersion: v2\nname: monitor\nversion: 0.1.0\n",
    "templates/monitor/chart/templates/sm.yaml": """{{- range list "a" "b" }}
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ . }}
spec: {}
{{- end }}
""",
}


def fleet_of(tmp_path: Path, files: dict[str, Any], apps: list[str]) -> Path:
    deployment = "apps:\n" + "".join(f"  - template: {app}\n" for app in apps)
    return make_fleet(
        tmp_path / "fleet", {**files, "deployments/g/c1/apps/d/deployment.yaml": deployment}
    )


def refusals(base: Path, root: str = "g/c1") -> list[str]:
    with pytest.raises(FleetErrors) as info:
        Fleet.open(WorkTree(base)).render(root)
    return [str(p) for p in info.value.problems]


def test_a_wrong_type_from_a_values_file_names_that_file_and_line(tmp_path: Path) -> None:
    base = fleet_of(
        tmp_path,
        {
            **WEB_CHART,
            "deployments/g/c1/apps/d/values.yaml": "# the team's override\nreplicas: two\n",
        },
        ["web"],
    )
    assert refusals(base) == [
        "deployments/g/c1/apps/d/values.yaml:2: rendering root \"g/c1\": release 'd/web' "
        "renders Deployment 'd/web' (templates/web/chart:web/templates/deployment.yaml): "
        "spec.replicas: must be an integer or null, not a string "
        "(the release is declared in templates/web/helmfile.yaml.gotmpl:2)"
    ]
    # validate finds it too, with its root; the render of another root is not touched
    problems = [str(p) for p in check_fleet(WorkTree(base)).problems]
    assert problems == [
        "deployments/g/c1/apps/d/values.yaml:2: release 'd/web' renders Deployment 'd/web' "
        "(templates/web/chart:web/templates/deployment.yaml): "
        "spec.replicas: must be an integer or null, not a string (the release is declared in "
        "templates/web/helmfile.yaml.gotmpl:2) (in root g/c1)"
    ]


def test_unknown_and_missing_fields_point_at_the_release(tmp_path: Path) -> None:
    chart = dict(WEB_CHART)
    template = chart["templates/web/chart/templates/deployment.yaml"]
    template = template.replace("          image: registry.example.com/web:1.0\n", "")
    chart["templates/web/chart/templates/deployment.yaml"] = template.replace(
        "  replicas:", "  replica: 2\n  replicas:"
    )
    base = fleet_of(tmp_path, chart, ["web"])
    found = refusals(base)
    assert found == [
        "templates/web/helmfile.yaml.gotmpl:2: rendering root \"g/c1\": release 'd/web' "
        "renders Deployment 'd/web' (templates/web/chart:web/templates/deployment.yaml): "
        "spec.replica: unknown field 'replica'"
    ]


def test_a_custom_resource_is_checked_against_the_crd_of_the_render(tmp_path: Path) -> None:
    files = {**WIDGETS}
    base = fleet_of(tmp_path, files, ["widgets"])
    assert Fleet.open(WorkTree(base)).render("g/c1").files  # conforms: int-or-string, null, …
    (base / "deployments/g/c1/apps/d/values.yaml").write_text("size: big\ncolour: green\n")
    assert refusals(base) == [
        "deployments/g/c1/apps/d/values.yaml:1: rendering root \"g/c1\": release 'd/widgets' "
        f"renders Widget 'd/w' ({WIDGET}): spec.size: must be an integer, not a string (the "
        "release is declared in templates/widgets/helmfile.yaml.gotmpl:2)",
        "deployments/g/c1/apps/d/values.yaml:2: rendering root \"g/c1\": release 'd/widgets' "
        f"renders Widget 'd/w' ({WIDGET}): spec.colour: must be one of 'red', 'blue' (the "
        "release is declared in templates/widgets/helmfile.yaml.gotmpl:2)",
    ]


def test_a_custom_resource_missing_a_required_field(tmp_path: Path) -> None:
    files = {**WIDGETS}
    widget = files["templates/widgets/chart/templates/widget.yaml"]
    files["templates/widgets/chart/templates/widget.yaml"] = widget.replace(
        "  size: {{ .Values.size }}\n", ""
    ).replace("  port: http\n", "  port: http\n  shape: round\n")
    base = fleet_of(tmp_path, files, ["widgets"])
    assert refusals(base) == [
        'templates/widgets/helmfile.yaml.gotmpl:2: rendering root "g/c1": release '
        f"'d/widgets' renders Widget 'd/w' ({WIDGET}): spec.shape: unknown field 'shape'",
        'templates/widgets/helmfile.yaml.gotmpl:2: rendering root "g/c1": release '
        f"'d/widgets' renders Widget 'd/w' ({WIDGET}): spec.size: required field is missing",
    ]


UNCHECKED = (
    'templates/monitor/helmfile.yaml.gotmpl:2: warning: rendering root "g/c1": 2 objects of '
    "kind ServiceMonitor (monitoring.coreos.com/v1, release 'd/monitor') not checked: no "
    "schema (Kubernetes {version} has no such kind and the render carries no CRD for it)"
)


def test_a_kind_without_schema_is_named_once_as_unchecked(tmp_path: Path) -> None:
    base = fleet_of(tmp_path, {**MONITOR}, ["monitor"])
    render, warnings = render_with_warnings(base, "g/c1")
    assert len(render.files) == 2
    assert len(warnings) == 1
    assert warnings[0].startswith(UNCHECKED.split("{version}")[0])
    assert warnings[0].endswith(UNCHECKED.split("{version}")[1])
    found = check_fleet(WorkTree(base)).problems
    assert [p.hygiene for p in found] == [True]


def test_the_root_kubernetes_version_picks_the_schemas(tmp_path: Path) -> None:
    """rollwright.yaml `schemas.kubeVersion` for roots that declare none; atlas
    capabilities for the roots they match. A kind that is gone in a newer version is
    unchecked there (flowcontrol v1beta3 was removed in 1.32)."""
    chart = {
        "templates/flow/helmfile.yaml.gotmpl": "releases:\n  - name: flow\n    chart: ./chart\n",
        "templates/flow/chart/Chart.yaml": "apiVersion: v2\nname: flow\nversion: 0.1.0\n",
        "templates/flow/chart/templates/pl.yaml": (
            "apiVersion: flowcontrol.apiserver.k8s.io/v1beta3\nkind: PriorityLevelConfiguration\n"
            "metadata:\n  name: p\nspec:\n  type: Exempt\n"
        ),
    }
    config = "schemas:\n  kubeVersion: '1.29'\natlas:\n  clusters:\n    - roots: [g/c2]\n"
    config += "      kubeVersion: v1.33.1\n"
    base = fleet_of(tmp_path, {**chart, "rollwright.yaml": config}, ["flow"])
    shutil.copytree(base / "deployments/g/c1", base / "deployments/g/c2")
    assert render_with_warnings(base, "g/c1")[1] == []
    warnings = render_with_warnings(base, "g/c2")[1]
    assert len(warnings) == 1 and "Kubernetes 1.33 has no such kind" in warnings[0]


@pytest.mark.parametrize("mode", ["warn", "off"])
def test_warn_and_off_modes_per_root(tmp_path: Path, mode: str) -> None:
    files = {
        **WEB_CHART,
        **MONITOR,
        "deployments/g/c1/apps/d/values.yaml": "replicas: two\n",
        "rollwright.yaml": f"schemas:\n  rules:\n    - roots: ['g/*']\n      mode: {mode}\n",
    }
    base = fleet_of(tmp_path, files, ["web", "monitor"])
    render, warnings = render_with_warnings(base, "g/c1")
    assert render.files
    if mode == "off":
        assert warnings == []
        assert check_fleet(WorkTree(base)).problems == []
        return
    assert len(warnings) == 2
    assert warnings[0].startswith(
        'deployments/g/c1/apps/d/values.yaml:1: warning: rendering root "g/c1": release '
        "'d/web' renders Deployment 'd/web' (templates/web/chart:web/templates/deployment.yaml): "
        "spec.replicas: must be an integer"
    )
    assert "ServiceMonitor" in warnings[1]
    problems = check_fleet(WorkTree(base)).problems
    assert len(problems) == 2 and all(p.hygiene for p in problems)
    # a later rule for the root puts it back to strict
    (base / "rollwright.yaml").write_text(
        f"schemas:\n  rules:\n    - roots: ['g/*']\n      mode: {mode}\n"
        "    - roots: ['g/c1']\n      mode: strict\n"
    )
    assert len(refusals(base)) == 1


def test_a_helmfile_fleet_is_checked_with_its_kubeversion(tmp_path: Path) -> None:
    fleet = Path(shutil.copytree(EXAMPLES / "helmfile-fleet", tmp_path / "fleet"))
    opened = Fleet.open(WorkTree(fleet))
    roots = opened.roots()
    for root in roots:
        opened.render(root)
        assert opened.render_warnings(root) == []
    template = fleet / "charts/web/templates/deployment.yaml"
    text = template.read_text()
    assert "spec:\n" in text
    template.write_text(text.replace("spec:\n", "spec:\n  paused: sometimes\n", 1))
    problems = [str(p) for p in check_fleet(WorkTree(fleet)).problems]
    assert problems and all(
        "spec.paused: must be a boolean or null, not a string" in p for p in problems
    )


def test_the_schemas_ship_in_the_wheel_and_cover_supported_versions() -> None:
    """Nothing is downloaded: the package's own files, from 1.25 on."""
    shipped = versions()
    assert shipped[0] == "1.25.0" and len(shipped) >= 13
    assert schema_version("v1.20.3").used == "1.25.0" and schema_version("v1.20.3").note
    assert schema_version("v1.31.7").used == "1.31.0" and not schema_version("1.31").note
    schemas = Schemas(schema_version("1.31"), [])
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "creationTimestamp": None},
        "spec": {"ports": [{"port": 80, "targetPort": "http"}]},
    }
    assert schemas.check(service) == []
    service["spec"]["ports"][0]["port"] = "80"  # type: ignore[index]
    assert [(v.path, v.value) for v in schemas.check(service) or []] == [
        (("spec", "ports", 0, "port"), "80")
    ]
    # a custom group that shares a built-in kind's file name is not taken for it
    assert schemas.check({"apiVersion": "apps.example.com/v1", "kind": "Deployment"}) is None


def test_structural_reading_of_a_crd_schema() -> None:
    schema = structural(
        {
            "type": "object",
            "properties": {
                "a": {"x-kubernetes-int-or-string": True},
                "b": {"type": "string", "nullable": True},
                "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        top=True,
    )
    assert schema["additionalProperties"] is False
    assert schema["properties"]["a"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert schema["properties"]["b"]["type"] == ["string", "null"]
    assert "additionalProperties" not in schema["properties"]["c"]
    assert schema["properties"]["metadata"] == {"type": "object"}


def test_the_cli_refuses_in_render_and_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = fleet_of(
        tmp_path, {**WEB_CHART, "deployments/g/c1/apps/d/values.yaml": "replicas: two\n"}, ["web"]
    )
    where = "deployments/g/c1/apps/d/values.yaml:1: "
    code = cli.main(["render", "--repo", str(base), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith(where) and "spec.replicas" in err
    assert not (tmp_path / "out" / "g/c1").exists()
    code = cli.main(["validate", "--repo", str(base)])
    out, err = capsys.readouterr()
    assert code == 1 and where in out + err


def test_a_crd_pattern_only_python_reads_is_still_checked() -> None:
    """`\\Z` is Python's end of text, which jsonschema-rs refuses to compile: the CRD's kind
    is checked by Python's jsonschema alone, not passed."""
    crd = yaml.safe_load(CRD)
    spec_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"]["colour"] = {"type": "string", "pattern": "^(red|blue)\\Z"}
    schemas = Schemas(schema_version("1.31"), [crd])
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert schemas.check({**widget, "spec": {"size": 1, "colour": "red"}}) == []
    found = schemas.check({**widget, "spec": {"size": 1, "colour": "green"}})
    assert [(v.path, v.value) for v in found or []] == [(("spec", "colour"), "green")]

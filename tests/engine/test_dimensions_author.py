"""The dimensions layout reads the generator's spelling (the design document's author's own
repository) as it is written, beside the document's (docs/formats/dimensions.md, "The
generator's spelling").

The fleets are written here: `AUTHOR` in the generator's spelling and `DOCUMENT`, the same
fleet in the design document's. Both render the same objects; each difference of the
spelling (C1 discovered components, C2 defaults.yaml, C3 ApplicationSets told by their
values, C4 override.yaml, C5 patch-NNN.yaml applied node by node) has its own test, and so
do a repository that mixes the two spellings and the `project` of the ApplicationSet
defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.cli import main as cli
from shared.engine.config.fleet import FleetConfig
from shared.engine.dimensions.layout import DimensionsLayout
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from shared.promotion.plan import rollout_status
from tests.support.files import write_files

SEQUENCE = """\
dimensions: [environments, regions]
sequence:
  environments:
    - name: dev
      regions: [{name: east}]
    - name: prod
      promotion: manual
      regions: [{name: east}, {name: west}]
"""

HUB = ["hub/dev/east", "hub/prod/east", "hub/prod/west"]
SPOKE = ["spoke/dev/east", "spoke/prod/east", "spoke/prod/west"]

SPOKE_DEFAULTS = """\
project: fleet
namespace: argocd
destination:
  name: "{{`{{ .Values.cluster.name }}`}}"
syncPolicy:
  automated: {selfHeal: true}
"""
HUB_APP_DEFAULTS = """\
project: fleet
namespace: argocd
destination: {name: in-cluster}
"""
HUB_SET_DEFAULTS = """\
project: fleet
namespace: argocd
syncPolicy: {preserveResourcesOnDeletion: true}
"""


def indent(text: str, n: int) -> str:
    return "".join(" " * n + line + "\n" for line in text.splitlines())


def app(name: str, body: str, section: str = "applications") -> str:
    return f"{section}:\n  {name}:\n" + indent(body, 4)


ALPHA = """\
source:
  repoURL: https://charts.example.com/alpha
  chart: alpha
  targetRevision: v1.0.0
  helm:
    valuesObject:
      region: "{{ .Values.cluster.region }}"
      replicas: 1
destination: {namespace: alpha}
"""
BETA = """\
source: {repoURL: https://charts.example.com/beta, chart: beta, targetRevision: v2.0.0}
destination: {namespace: beta}
"""
ARGOCD = """\
source: {repoURL: https://charts.example.com/argo, chart: argo-cd, targetRevision: 5.0.0}
destination: {namespace: argocd}
"""
SPOKE_ROOT = """\
goTemplate: true
generators:
  - clusters:
      selector:
        matchLabels: {type: spoke, environment: "{{ .Values.cluster.environment }}"}
template:
  metadata:
    name: '{{ "{{`{{ .name }}`}}" }}-apps'
  spec:
    project: fleet
    source:
      repoURL: https://git.example.com/rendered.git
      targetRevision: main
      path: "spoke/{{ .Values.cluster.environment }}/{{ .Values.cluster.region }}"
    destination: {server: '{{ "{{`{{ .server }}`}}" }}', namespace: argocd}
"""
PROD_OVERRIDE = "source:\n  helm:\n    valuesObject: {replicas: 3}\n"
UPGRADE = "source: {targetRevision: v1.1.0}\n"


def metadata(name: str) -> str:
    return f"name: {name}\ndescription: {name} for tests\nowners: [team@example.com]\n"


def shared_files() -> dict[str, str]:
    """What both spellings write alike: config.yaml's sequence, base values, metadata."""
    files = {
        "config/hub/argocd/values.yaml": app("argocd", ARGOCD),
        "config/hub/spoke-root/values.yaml": app("spoke-root", SPOKE_ROOT, "applicationsets"),
        "config/spoke/alpha/values.yaml": app("alpha", ALPHA),
        "config/spoke/beta/values.yaml": app("beta", BETA),
    }
    for rel in list(files):
        name = rel.split("/")[2]
        files[f"config/{rel.split('/')[1]}/{name}/metadata.yaml"] = metadata(name)
    return files


def author_files() -> dict[str, str]:
    """The generator's spelling: no lists in config.yaml, defaults.yaml per type,
    override.yaml at a node, patch-NNN.yaml staged beside values.yaml and copied to a node."""
    body = app("alpha", UPGRADE)
    return {
        **shared_files(),
        "config/config.yaml": SEQUENCE + "cluster_types:\n  - name: hub\n  - name: spoke\n",
        "config/hub/defaults.yaml": (
            "applications:\n  default:\n"
            + indent(HUB_APP_DEFAULTS, 4)
            + "applicationsets:\n  default:\n"
            + indent(HUB_SET_DEFAULTS, 4)
        ),
        "config/spoke/defaults.yaml": "applications:\n  default:\n" + indent(SPOKE_DEFAULTS, 4),
        "config/spoke/alpha/prod/override.yaml": app("alpha", PROD_OVERRIDE),
        # the copy's description says where it is: copies are compared without metadata
        "config/spoke/alpha/patch-001.yaml": "metadata: {description: Upgrade alpha}\n" + body,
        "config/spoke/alpha/dev/patch-001.yaml": "metadata: {description: In dev}\n" + body,
    }


def document_files() -> dict[str, str]:
    """The same fleet in the design document's spelling."""
    patch = "metadata:\n  id: alpha-v1.1\n  description: Upgrade alpha to v1.1.0\n"
    patch += "patch:\n  alpha:\n" + indent(UPGRADE, 4)
    return {
        **shared_files(),
        "config/config.yaml": SEQUENCE
        + "cluster_types:\n"
        + "  - {name: hub, applications: [argocd], applicationsets: [spoke-root]}\n"
        + "  - {name: spoke, applications: [alpha, beta]}\n",
        "config/hub/application-defaults.yaml": "defaults:\n" + indent(HUB_APP_DEFAULTS, 2),
        "config/hub/applicationset-defaults.yaml": "defaults:\n" + indent(HUB_SET_DEFAULTS, 2),
        "config/spoke/application-defaults.yaml": "defaults:\n" + indent(SPOKE_DEFAULTS, 2),
        "config/spoke/alpha/prod/values.yaml": app("alpha", PROD_OVERRIDE),
        "config/spoke/alpha/patches/alpha-v1.1.yaml": patch,
        "config/spoke/alpha/dev/patches/alpha-v1.1.yaml": patch,
    }


def layout_of(path: Path, files: dict[str, str]) -> DimensionsLayout:
    write_files(path, files)
    return DimensionsLayout(WorkTree(path), FleetConfig())


def objects(files: dict[str, bytes]) -> dict[str, Any]:
    return {
        rel: yaml.safe_load(data) for rel, data in files.items() if rel.startswith("templates/")
    }


def fields(layout: DimensionsLayout, root: str, name: str) -> dict[str, Any]:
    values = layout.values(root, name)
    section = "applications" if "applications" in values else "applicationsets"
    found: dict[str, Any] = values[section][name]
    return found


def messages(path: Path) -> list[str]:
    return [str(p) for p in validate_fleet(WorkTree(path))]


PROJECT_WARNING = (
    "config/hub/defaults.yaml:8: warning: project in the ApplicationSet defaults is ignored: "
    "an ApplicationSet has no project (the Applications it generates take theirs from "
    "template.spec.project) (in 3 roots: hub/dev/east, hub/prod/east, hub/prod/west)"
)


# --- both spellings, side by side ------------------------------------------------------------


def test_author_and_document_spellings_render_the_same(tmp_path: Path) -> None:
    author = layout_of(tmp_path / "author", author_files())
    document = layout_of(tmp_path / "document", document_files())
    assert (author.reading.spelling, document.reading.spelling) == ("generator", "document")
    assert author.roots() == document.roots() == sorted(HUB + SPOKE)
    for root in author.roots():
        assert objects(author.render_files(root)) == objects(document.render_files(root)), root
        # values.yaml as the generator writes it: the dimensions alone under `cluster`, and
        # the ApplicationSet defaults' project kept (no object uses it)
        ours, theirs = author.values(root, None), document.values(root, None)
        assert theirs["cluster"].pop("type") == root.split("/")[0]
        for name, appset in ours.get("applicationsets", {}).items():
            assert appset.pop("project") == "fleet", (root, name)
        assert ours == theirs, root
    # and what they render is what the fleet says
    dev = objects(author.render_files("spoke/dev/east"))["templates/alpha.yaml"]
    assert dev["spec"]["source"]["targetRevision"] == "v1.1.0"  # the active patch
    assert dev["spec"]["source"]["helm"]["valuesObject"] == {"region": "east", "replicas": 1}
    assert dev["spec"]["project"] == "fleet"  # from the defaults
    west = objects(author.render_files("spoke/prod/west"))["templates/alpha.yaml"]
    assert west["spec"]["source"]["targetRevision"] == "v1.0.0"  # staged only: not applied
    assert west["spec"]["source"]["helm"]["valuesObject"]["replicas"] == 3  # the override


def test_both_spellings_validate_with_the_project_warning_only(tmp_path: Path) -> None:
    write_files(tmp_path / "author", author_files())
    write_files(tmp_path / "document", document_files())
    assert messages(tmp_path / "author") == [PROJECT_WARNING]
    assert messages(tmp_path / "document") == [
        PROJECT_WARNING.replace("defaults.yaml:8", "applicationset-defaults.yaml:2")
    ]


def test_validate_and_render_pass_on_the_author_spelling_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_files(tmp_path / "fleet", author_files())
    assert cli.main(["validate", "--repo", str(tmp_path / "fleet")]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (PROJECT_WARNING + "\n", "6 root(s) checked: 1 warning(s) found\n")
    rendered = tmp_path / "out"
    assert cli.main(["render", "--repo", str(tmp_path / "fleet"), "--out", str(rendered)]) == 0
    assert sorted(p.name for p in (rendered / "hub/prod/west/templates").iterdir()) == [
        "argocd.yaml",
        "spoke-root.yaml",
    ]


# --- C1: components discovered -------------------------------------------------------------


def test_a_type_without_lists_discovers_its_directories(tmp_path: Path) -> None:
    layout = layout_of(tmp_path, author_files())
    assert [(r.id, r.template) for r in layout.releases("spoke/dev/east")] == [
        ("alpha", "config/spoke/alpha"),
        ("beta", "config/spoke/beta"),
    ]
    assert [r.id for r in layout.releases("hub/dev/east")] == ["argocd", "spoke-root"]


@pytest.mark.parametrize(
    ("rel", "text", "wanted"),
    [
        (
            "config/spoke/gamma/metadata.yaml",
            metadata("gamma"),
            "config/spoke/gamma: directory 'gamma' has no values.yaml: cluster type 'spoke' "
            "lists no applications (config/config.yaml cluster_types[1]), so each of its "
            "directories is an application or an ApplicationSet, and its values.yaml says "
            "which (applications.gamma or applicationsets.gamma)",
        ),
        (
            "config/spoke/gamma/values.yaml",
            "applications: {gamma: {}}\napplicationsets: {gamma: {}}\n",
            "config/spoke/gamma/values.yaml:1: values.yaml defines both applications: and "
            "applicationsets:",
        ),
        (
            "config/spoke/gamma/values.yaml",
            "{}\n",
            "config/spoke/gamma/values.yaml:1: values.yaml defines neither applications: nor",
        ),
    ],
)
def test_a_directory_that_is_no_component_refuses_its_types_roots(
    tmp_path: Path, rel: str, text: str, wanted: str
) -> None:
    files = author_files()
    files[rel] = text
    write_files(tmp_path, files)
    got = [m for m in messages(tmp_path) if "warning" not in m]
    assert len(got) == 1, got
    assert got[0].startswith(wanted.replace("neither applications: nor", "neither")), got
    fleet = Fleet.open(WorkTree(tmp_path))
    with pytest.raises(FleetError, match="gamma"):
        fleet.render("spoke/dev/east")
    fleet.render("hub/dev/east")  # the other type is untouched


# --- C2: defaults.yaml -----------------------------------------------------------------------


def test_defaults_yaml_lays_each_section_under_its_components(tmp_path: Path) -> None:
    layout = layout_of(tmp_path, author_files())
    assert fields(layout, "hub/dev/east", "argocd")["destination"] == {
        "name": "in-cluster",
        "namespace": "argocd",
    }
    spoke_root = fields(layout, "hub/dev/east", "spoke-root")
    assert spoke_root["syncPolicy"] == {"preserveResourcesOnDeletion": True}
    # kept in values.yaml as the generator writes it, used by no object, with a warning
    assert spoke_root["project"] == "fleet"


def test_defaults_yaml_keys_are_checked_with_their_line(tmp_path: Path) -> None:
    files = author_files()
    files["config/spoke/defaults.yaml"] = (
        "applications:\n  default:\n    project: fleet\n    syncPolcy: {}\n"
    )
    write_files(tmp_path, files)
    got = messages(tmp_path)
    assert [m for m in got if m.startswith("config/spoke/")] == [
        "config/spoke/defaults.yaml:4: unknown key 'applications/default/syncPolcy' "
        "(did you mean 'syncPolicy'?)"
    ]


# --- C3: an ApplicationSet is told by its values ----------------------------------------------


def test_a_directory_whose_values_define_applicationsets_is_an_applicationset(
    tmp_path: Path,
) -> None:
    layout = layout_of(tmp_path, author_files())
    values = layout.values("hub/prod/west", None)
    assert list(values["applications"]) == ["argocd"]
    assert list(values["applicationsets"]) == ["spoke-root"]
    rendered = objects(layout.render_files("hub/prod/west"))["templates/spoke-root.yaml"]
    assert rendered["kind"] == "ApplicationSet"
    assert rendered["spec"]["template"]["spec"]["source"]["path"] == "spoke/prod/west"
    assert "project" not in rendered["spec"]


# --- C4: override.yaml at a node --------------------------------------------------------------


def test_override_yaml_at_a_node_applies_below_it_only(tmp_path: Path) -> None:
    layout = layout_of(tmp_path, author_files())
    replicas = {
        root: fields(layout, root, "alpha")["source"]["helm"]["valuesObject"]["replicas"]
        for root in SPOKE
    }
    assert replicas == {"spoke/dev/east": 1, "spoke/prod/east": 3, "spoke/prod/west": 3}


def test_override_yaml_may_only_define_its_component(tmp_path: Path) -> None:
    files = author_files()
    files["config/spoke/alpha/prod/west/override.yaml"] = app("beta", "project: x\n")
    write_files(tmp_path, files)
    assert messages(tmp_path)[0] == (
        "config/spoke/alpha/prod/west/override.yaml:2: unknown key 'applications/beta': a "
        "values file under config/spoke/alpha/ may only define applications.alpha"
    )


# --- C5: patch-NNN.yaml, staged and active, applied node by node -----------------------------


def test_a_patch_applies_right_after_the_values_of_its_node(tmp_path: Path) -> None:
    """The generator's order: a node's override.yaml, then its patches, then the next node's
    override: a region's override wins over an environment's patch (in the design document's
    order the patch would win)."""
    files = author_files()
    files["config/spoke/alpha/prod/patch-001.yaml"] = files["config/spoke/alpha/patch-001.yaml"]
    files["config/spoke/alpha/prod/west/override.yaml"] = app(
        "alpha", "source: {targetRevision: v1.0.1-hotfix}\n"
    )
    layout = layout_of(tmp_path, files)
    revisions = {root: fields(layout, root, "alpha")["source"]["targetRevision"] for root in SPOKE}
    assert revisions == {
        "spoke/dev/east": "v1.1.0",
        "spoke/prod/east": "v1.1.0",
        "spoke/prod/west": "v1.0.1-hotfix",
    }
    outcomes = [o.patch.id for o in layout.state("spoke/prod/west").outcomes]
    assert outcomes == ["spoke/alpha/patch-001"]


def test_a_patch_overrides_the_override_of_its_own_node_with_a_warning(tmp_path: Path) -> None:
    files = author_files()
    files["config/spoke/alpha/prod/patch-001.yaml"] = files["config/spoke/alpha/patch-001.yaml"]
    files["config/spoke/alpha/prod/override.yaml"] = app(
        "alpha", PROD_OVERRIDE + "  targetRevision: v0.9.0\n"
    )
    layout = layout_of(tmp_path, files)
    assert fields(layout, "spoke/prod/east", "alpha")["source"]["targetRevision"] == "v1.1.0"
    assert (
        "config/spoke/alpha/prod/override.yaml:6: warning: /alpha/source/targetRevision set "
        "here is overridden by patch 'spoke/alpha/patch-001' "
        "(config/spoke/alpha/prod/patch-001.yaml:4), which applies after the values of its "
        "node, at spoke/prod/east, spoke/prod/west"
    ) in messages(tmp_path)


def test_an_active_copy_must_change_what_the_staged_patch_changes(tmp_path: Path) -> None:
    files = author_files()
    files["config/spoke/alpha/dev/patch-001.yaml"] = app("alpha", "source: {targetRevision: v9}\n")
    write_files(tmp_path, files)
    assert [m for m in messages(tmp_path) if "warning" not in m] == [
        "config/spoke/alpha/dev/patch-001.yaml:1: active copy of patch 'spoke/alpha/patch-001' "
        "differs from the staged config/spoke/alpha/patch-001.yaml; copies must be identical "
        "to it"
    ]
    fleet = Fleet.open(WorkTree(tmp_path))
    with pytest.raises(FleetError, match="differs from the staged"):
        fleet.render("spoke/dev/east")
    fleet.render("spoke/prod/east")


def test_a_patch_file_speaks_of_its_component_only(tmp_path: Path) -> None:
    files = author_files()
    files["config/spoke/alpha/dev/patch-002.yaml"] = (
        "metadata: {description: x}\n" + app("alpha", "project: x\n") + "  beta: {}\n"
    )
    write_files(tmp_path, files)
    assert [m for m in messages(tmp_path) if "warning" not in m] == [
        "config/spoke/alpha/dev/patch-002.yaml:5: unknown key 'applications/beta': a patch "
        "under config/spoke/alpha/ may only change applications.alpha"
    ]


def test_a_yml_patch_is_never_read_so_it_is_a_problem(tmp_path: Path) -> None:
    files = author_files()
    files["config/spoke/alpha/dev/patch-002.yml"] = "metadata: {description: x}\n"
    write_files(tmp_path, files)
    assert [m for m in messages(tmp_path) if "warning" not in m] == [
        "config/spoke/alpha/dev/patch-002.yml: unexpected file (expected override.yaml, "
        "patch-NNN.yaml or a region directory)"
    ]


# --- both spellings in one repository --------------------------------------------------------


def test_both_defaults_files_of_one_type_are_refused_naming_both(tmp_path: Path) -> None:
    files = author_files()
    files["config/spoke/application-defaults.yaml"] = "defaults:\n  project: fleet\n"
    write_files(tmp_path, files)
    conflict = (
        "config/spoke/application-defaults.yaml: both spellings in one repository: this is "
        "the design document's defaults file, while config/spoke/defaults.yaml is the "
        "generator's defaults file (applications.default, applicationsets.default); the "
        "repository is read in the generator's spelling (more of its files use it), so this "
        "is never read: write it as its sections in defaults.yaml (applications.default, "
        "applicationsets.default), or the whole repository in one spelling"
    )
    assert [m for m in messages(tmp_path) if "warning" not in m] == [conflict]
    fleet = Fleet.open(WorkTree(tmp_path))
    for root in SPOKE:
        with pytest.raises(FleetError) as err:
            fleet.render(root)
        assert conflict in str(err.value)
    fleet.render("hub/dev/east")  # the other type reads one spelling


def test_a_patches_directory_in_the_author_spelling_refuses_the_roots_it_reaches(
    tmp_path: Path,
) -> None:
    files = author_files()
    files["config/spoke/beta/prod/patches/beta-v2.1.yaml"] = (
        "metadata: {id: beta-v2.1}\npatch:\n  beta:\n    source: {targetRevision: v2.1.0}\n"
    )
    write_files(tmp_path, files)
    [problem] = [m for m in messages(tmp_path) if "warning" not in m]
    assert problem.startswith(
        "config/spoke/beta/prod/patches: both spellings in one repository: this is the design "
        "document's patches directory, while config/spoke/alpha/dev/patch-001.yaml is the "
        "generator's spelling of a patch (patch-NNN.yaml)"
    )
    fleet = Fleet.open(WorkTree(tmp_path))
    with pytest.raises(FleetError, match="both spellings"):
        fleet.render("spoke/prod/west")
    fleet.render("spoke/dev/east")  # not under prod: it renders


def test_an_override_in_the_document_spelling_is_refused_naming_a_values_file(
    tmp_path: Path,
) -> None:
    files = document_files()
    files["config/spoke/beta/prod/west/override.yaml"] = app("beta", "project: x\n")
    write_files(tmp_path, files)
    assert [m for m in messages(tmp_path) if "warning" not in m] == [
        "config/spoke/beta/prod/west/override.yaml: both spellings in one repository: this "
        "is the generator's spelling of a node's values (override.yaml), while "
        "config/spoke/alpha/prod/values.yaml is the design document's spelling of a node's "
        "values (values.yaml); the repository is read in the design document's spelling "
        "(more of its files use it), so this is never read: write it as values.yaml at the "
        "node, or the whole repository in one spelling"
    ]


# --- the project of the ApplicationSet defaults -----------------------------------------------


def test_the_ignored_project_is_a_render_warning_of_the_types_roots(tmp_path: Path) -> None:
    write_files(tmp_path, author_files())
    fleet = Fleet.open(WorkTree(tmp_path))
    fleet.render("hub/prod/east")
    [warning] = fleet.render_warnings("hub/prod/east")
    assert warning.hygiene
    assert (warning.path, warning.line) == ("config/hub/defaults.yaml", 8)
    assert "is ignored" in warning.message
    assert fleet.render_warnings("spoke/prod/east") == []  # its defaults set none


def test_a_project_elsewhere_in_an_applicationset_is_still_an_unknown_key(
    tmp_path: Path,
) -> None:
    files = author_files()
    files["config/hub/spoke-root/prod/override.yaml"] = app(
        "spoke-root", "project: fleet\n", "applicationsets"
    )
    write_files(tmp_path, files)
    assert [m for m in messages(tmp_path) if "warning" not in m] == [
        "config/hub/spoke-root/prod/override.yaml:3: unknown key "
        "'applicationsets/spoke-root/project'"
    ]


# --- affected roots and promotion -------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("config/spoke/defaults.yaml", set(SPOKE)),
        ("config/spoke/alpha/prod/override.yaml", {"spoke/prod/east", "spoke/prod/west"}),
        ("config/spoke/alpha/prod/west/patch-002.yaml", {"spoke/prod/west"}),
        ("config/spoke/alpha/patch-002.yaml", set(SPOKE)),
        ("config/spoke/gamma/values.yaml", set(SPOKE)),  # a new component, discovered
        # a file of the document's spelling may change how the repository is read
        ("config/spoke/alpha/prod/values.yaml", set(HUB + SPOKE)),
        ("config/spoke/alpha/patches/x.yaml", set(HUB + SPOKE)),
        ("config/hub/applicationset-defaults.yaml", set(HUB + SPOKE)),
    ],
)
def test_affected_roots_in_the_author_spelling(
    tmp_path: Path, path: str, expected: set[str]
) -> None:
    layout = layout_of(tmp_path, author_files())
    assert layout.affected({path}) == expected


def test_promotion_refuses_the_author_spelling_by_name(tmp_path: Path) -> None:
    write_files(tmp_path, author_files())
    with pytest.raises(FleetError, match="written in the generator's spelling"):
        rollout_status(WorkTree(tmp_path))

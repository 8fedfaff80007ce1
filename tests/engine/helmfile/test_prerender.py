"""kube-renderer's gomplate pre-render of 0.1.2 to 0.1.16 (shared/engine/helmfile/prerender.py):
with a root values.yaml, template files are rendered by gomplate over it and lose their suffix
(`.gotmpl` up to 0.1.10, `.tmpl` from 0.1.11; key `Values` up to 0.1.13, `StateValues` from
0.1.14), and values.yaml is the top-level state's values. Which kube-renderer reads a
repository is told from the repository (or pinned in rollwright.yaml); what two versions would
read differently, and what gomplate would print otherwise, is refused with its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.helmfile.layout import HelmfileLayout
from shared.engine.tree import WorkTree
from tests.support.helmfile import rendered_tree

CHART_YAML = "apiVersion: v2\nname: Shop\nversion: 0.1.0\n"
MAP = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
    "  namespace: {{{{ .{key}.namespace }}}}\n"
)
HELM_MAP = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: {{ .Values.target }}\n"
)
HELMFILE = "releases:\n- name: plain\n  chart: ./src/plain\n- name: shop\n  chart: ./src/shop\n"
KUSTOMIZATION = (
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- k.yaml\n"
)


def _write(repo: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    return repo


def _repo(
    tmp_path: Path,
    suffix: str,
    key: str,
    extra: dict[str, str] | None = None,
    *,
    kust: bool = False,
) -> Path:
    """A plain-manifest directory and a chart (and with `kust` a kustomization), with
    templates of `suffix` reading `.<key>.namespace`, and the root values.yaml that sets it."""
    kustomized = {
        "src/kust/kustomization.yaml": KUSTOMIZATION,
        f"src/kust/k.yaml{suffix}": MAP.format(name="k", key=key),
    }
    return _write(
        tmp_path / "repo",
        {
            "helmfile.yaml": HELMFILE + ("- name: kust\n  chart: ./src/kust\n" if kust else ""),
            **(kustomized if kust else {}),
            "values.yaml": "namespace: shelf\n",
            f"src/plain/one.yaml{suffix}": MAP.format(name="one", key=key),
            f"src/plain/two.yaml{suffix}": MAP.format(name="two", key=key),
            "src/shop/Chart.yaml": CHART_YAML,
            f"src/shop/templates/cm.yaml{suffix}": MAP.format(name="cm", key=key),
            **(extra or {}),
        },
    )


def _era(repo: Path) -> str:
    """The kube-renderer versions whose reading rollwright reproduces for `repo`."""
    layout = Fleet.open(WorkTree(repo)).layout
    assert isinstance(layout, HelmfileLayout)
    return layout.reading().era.versions


def _doc(source: str, name: str, namespace: str = "shelf") -> str:
    return (
        f"---\n# Source: {source}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
        f"  name: {name}\n  namespace: {namespace}\n"
    )


EXPECTED = {
    "plain/plain.yaml": (
        _doc("plain/templates/one.yaml", "one") + _doc("plain/templates/two.yaml", "two")
    ).encode(),
    "shop/shop.yaml": _doc("Shop/templates/cm.yaml", "cm").encode(),
}


@pytest.mark.parametrize(
    ("suffix", "key", "versions"),
    [
        (".tmpl", "StateValues", "0.1.14 to 0.1.16"),
        (".tmpl", "Values", "0.1.11 to 0.1.13"),
        (".gotmpl", "Values", "0.1.2 to 0.1.10"),
    ],
)
def test_each_era_renders_its_templates_over_values_yaml(
    tmp_path: Path, suffix: str, key: str, versions: str
) -> None:
    repo = _repo(tmp_path, suffix, key, kust=True)
    kustomized = _doc("kust/templates/kustomized.yaml", "k").encode()
    assert rendered_tree(repo) == {**EXPECTED, "kust/kust.yaml": kustomized}
    assert _era(repo) == versions
    # the state values follow values.yaml, and so does every template
    (repo / "values.yaml").write_text("namespace: attic\n")
    text = b"".join(rendered_tree(repo).values()).decode()
    assert text.count("namespace: attic\n") == 4 and "shelf" not in text
    assert not list(tmp_path.glob("repo/src/**/one.yaml"))  # the repository is not written


def test_the_state_values_reach_helmfile_and_kube_renderer_options(tmp_path: Path) -> None:
    """values.yaml is helmfile's --state-values-file: `.Values` in helmfile.yaml, and the
    `.kube-renderer` options, over the environment's values."""
    repo = _write(
        tmp_path / "repo",
        {
            "helmfile.yaml": (
                "environments:\n  default:\n    values:\n    - place: cellar\n      ns: nowhere\n"
                "---\nreleases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
                "  - place: {{ .Values.place }}\n    target: {{ .Values.ns }}\n"
            ),
            "values.yaml": "ns: shelf\n.kube-renderer:\n  render_filename_generator: helm\n",
            "src/shop/Chart.yaml": CHART_YAML,
            "src/shop/templates/cm.yaml.tmpl": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .StateValues.ns }}\n"
                "  namespace: {{ `{{ .Values.target }}` }}\n"
                "data:\n  place: {{ `{{ .Values.place }}` }}\n"
            ),
        },
    )
    assert rendered_tree(repo) == {
        "shop/Shop/templates/cm.yaml": (
            b"# Source: Shop/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n"
            b"  name: shelf\n  namespace: shelf\ndata:\n  place: cellar\n"
        )
    }


def test_a_state_values_file_alone_is_read_as_the_version_it_loads_with(tmp_path: Path) -> None:
    """Without templates, values.yaml only changes the state values: a helmfile that needs
    them is read as before 0.1.17, one that reads alike without them as 0.1.20."""
    repo = _write(
        tmp_path / "repo",
        {
            "helmfile.yaml": "releases:\n- name: shop\n  chart: ./src/shop\n"
            "  values:\n  - target: {{ .Values.ns }}\n",
            "values.yaml": "ns: shelf\n",
            "src/shop/Chart.yaml": CHART_YAML,
            "src/shop/templates/cm.yaml": HELM_MAP,
        },
    )
    text = rendered_tree(repo)["shop/shop.yaml"].decode()
    assert "  namespace: shelf\n" in text
    (repo / "helmfile.yaml").write_text(
        "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n  - values.yaml\n"
        "  - target: shelf\n"
    )
    assert _era(repo) == "0.1.17 to 0.1.20"
    assert "  namespace: shelf\n" in rendered_tree(repo)["shop/shop.yaml"].decode()


def test_values_yaml_that_changes_the_states_needs_the_pin(tmp_path: Path) -> None:
    repo = _write(
        tmp_path / "repo",
        {
            "helmfile.yaml": "releases:\n- name: shop\n  chart: ./src/shop\n",
            "values.yaml": ".kube-renderer:\n  render_filename_generator: yq\n",
            "src/shop/Chart.yaml": CHART_YAML,
            "src/shop/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
            "  name: cm\n",
        },
    )
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert str(err.value).startswith("values.yaml: kube-renderer before 0.1.17 passes it")
    assert "set helmfile.kubeRenderer in rollwright.yaml" in str(err.value)
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.16\n")
    assert sorted(rendered_tree(repo)) == ["shop/_cluster/ConfigMap_cm.yaml"]
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.20\n")
    assert sorted(rendered_tree(repo)) == ["shop/shop.yaml"]


def test_a_gotmpl_file_helmfile_reads_is_not_pre_rendered(tmp_path: Path) -> None:
    """0.1.10 would replace a templated values file by its gomplate render, and helmfile would
    not find it: such a repository is for a later version (pinned to 0.1.10, it fails so)."""
    repo = _write(
        tmp_path / "repo",
        {
            "helmfile.yaml": "releases:\n- name: shop\n  chart: ./src/shop\n"
            "  values:\n  - shop.yaml.gotmpl\n",
            "shop.yaml.gotmpl": "target: {{ .Values.ns }}\n",
            "values.yaml": "ns: shelf\n",
            "src/shop/Chart.yaml": CHART_YAML,
            "src/shop/templates/cm.yaml": HELM_MAP,
        },
    )
    assert "  namespace: shelf\n" in rendered_tree(repo)["shop/shop.yaml"].decode()
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.10\n")
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert str(err.value) == (
        "helmfile.yaml: read as kube-renderer 0.1.10 does (helmfile.kubeRenderer in "
        "rollwright.yaml: 0.1.10): helmfile shop.yaml.gotmpl not found (kube-renderer "
        "pre-renders shop.yaml.gotmpl into shop.yaml and deletes it)"
    )


def test_gotmpl_files_of_both_kinds_are_refused_with_the_setting(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        ".gotmpl",
        "Values",
        {
            "helmfile.yaml": HELMFILE + "  values:\n  - shop.yaml.gotmpl\n",
            "shop.yaml.gotmpl": "colour: {{ .Values.namespace }}\n",
        },
    )
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert str(err.value).startswith("src/plain/one.yaml.gotmpl: with values.yaml at the root")
    assert "shop.yaml.gotmpl, which a helmfile state reads" in str(err.value)
    assert "set helmfile.kubeRenderer in rollwright.yaml" in str(err.value)
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.12\n")
    # 0.1.11 on: the .gotmpl files are helmfile's and Helm's; the chart's renders as Helm's
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert "src/plain holds no *.yaml or *.yml manifest" in str(err.value)


def test_tmpl_and_unread_gotmpl_files_are_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, ".tmpl", "StateValues", {"src/shop/templates/x.yaml.gotmpl": "a: b\n"})
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert str(err.value).startswith("src/shop/templates/x.yaml.gotmpl: with values.yaml")
    assert "0.1.11 to 0.1.16 pre-render src/plain/one.yaml.tmpl and not it" in str(err.value)


def test_a_template_both_keys_render_differently_is_refused(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        ".tmpl",
        "StateValues",
        {
            "src/plain/one.yaml.tmpl": "a: b\n",
            "src/plain/two.yaml.tmpl": "{{ if has . `Values` }}a: b{{ else }}c: d{{ end }}\n",
            "src/shop/templates/cm.yaml.tmpl": "a: b\n",
        },
    )
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert str(err.value).startswith("src/plain/two.yaml.tmpl: kube-renderer 0.1.11 to 0.1.13")
    assert "render this template differently" in str(err.value)


def test_an_unsupported_function_is_refused_with_its_line(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        ".tmpl",
        "StateValues",
        {
            "src/shop/templates/cm.yaml.tmpl": (
                "a: b\nc: {{ .StateValues.namespace | strings.ToUpper }}\n"
            )
        },
    )
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    assert str(err.value) == (
        "src/shop/templates/cm.yaml.tmpl:2: kube-renderer 0.1.14 to 0.1.16 pre-renders it with "
        "gomplate (column 32): 'strings' is not one of the gomplate functions rollwright "
        "reproduces (docs/formats/helmfile.md, gomplate templates)"
    )


def test_a_template_no_version_renders_fails_with_its_line(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        ".tmpl",
        "StateValues",
        {"src/plain/two.yaml.tmpl": "a:\n  {{ .StateValues.nope }}\n"},
    )
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    message = str(err.value)
    assert message.startswith("src/plain/two.yaml.tmpl:2: read as kube-renderer 0.1.14 to 0.1.16")
    assert "key 'nope' is not set" in message


def test_without_values_yaml_nothing_is_pre_rendered(tmp_path: Path) -> None:
    """kube-renderer's condition: a `.tmpl` chart template is then Helm's, as in every version."""
    repo = _repo(tmp_path, ".tmpl", "Values")
    (repo / "values.yaml").unlink()
    (repo / "src/plain/one.yaml").write_text(
        MAP.format(name="one", key="x").replace("{{ .x.namespace }}", "raw")
    )
    tree = rendered_tree(repo)
    assert b"name: one\n  namespace: raw\n" in tree["plain/plain.yaml"]
    assert b"two" not in tree["plain/plain.yaml"]  # a .tmpl file is no manifest of chartify's
    assert tree["shop/shop.yaml"] == (
        b"---\n# Source: Shop/templates/cm.yaml.tmpl\napiVersion: v1\nkind: ConfigMap\n"
        b"metadata:\n  name: cm\n  namespace:\n"
    )


def test_every_root_reads_values_yaml_and_the_templates(tmp_path: Path) -> None:
    repo = _repo(tmp_path, ".tmpl", "StateValues")
    fleet = Fleet.open(WorkTree(repo))
    assert fleet.affected({"values.yaml"}) == {"plain", "shop"}
    assert fleet.affected({"src/shop/templates/cm.yaml.tmpl"}) == {"plain", "shop"}
    assert fleet.affected({"src/other/x.tmpl"}) == set()  # a new template: the other side's
    assert fleet.affected({"README.md"}) == set()


@pytest.mark.parametrize("version", ["0.1.1", "0.1.21", "0.2.0", "16"])
def test_a_pin_outside_the_helmfile_versions_is_refused(tmp_path: Path, version: str) -> None:
    repo = _repo(tmp_path, ".tmpl", "StateValues")
    (repo / "rollwright.yaml").write_text(f"helmfile:\n  kubeRenderer: '{version}'\n")
    with pytest.raises(FleetError) as err:
        Fleet.open(WorkTree(repo))
    assert "rollwright.yaml:2:" in str(err.value)
    assert "a kube-renderer version from 0.1.2 to 0.1.20" in str(err.value)


def test_a_values_yaml_helmfile_could_not_read_is_an_ordinary_file(tmp_path: Path) -> None:
    """A list is no state values file: before 0.1.17 helmfile would fail, so the repository is
    0.1.20's (pinned to 0.1.16, the error says so)."""
    repo = _repo(tmp_path, ".tmpl", "StateValues", {"values.yaml": "- a\n- b\n"})
    assert _era(repo) == "0.1.17 to 0.1.20"
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.16\n")
    with pytest.raises(FleetError) as err:
        Fleet.open(WorkTree(repo)).roots()
    assert str(err.value).startswith("values.yaml: kube-renderer before 0.1.17 passes the root")

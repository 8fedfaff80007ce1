"""A repository read as kube-renderer before 0.1.17 (shared/engine/helmfile/legacy.py): what
those versions did besides the gomplate pre-render is reproduced where it is a default (Helm's
hooks and tests, the yq generator's document order) and refused where it is not, never
rendered as 0.1.20 would."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.engine.errors import FleetError
from tests.support.helmfile import rendered_tree

CHART_YAML = "apiVersion: v2\nname: Shop\nversion: 0.1.0\n"


def _cm(name: str, annotations: str = "") -> str:
    meta = f"  annotations:\n    {annotations}\n" if annotations else ""
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{meta}"


def _repo(tmp_path: Path, files: dict[str, str | None], helmfile: str = "") -> Path:
    """One release of a chart with a root values.yaml and a `.tmpl` template reading
    `.StateValues` (0.1.14 to 0.1.16), and `files` (None: without that file)."""
    repo = tmp_path / "repo"
    base: dict[str, str | None] = {
        "helmfile.yaml": helmfile or "releases:\n- name: shop\n  chart: ./src/shop\n",
        "values.yaml": "name: plain\n",
        "src/shop/Chart.yaml": CHART_YAML,
        "src/shop/templates/plain.yaml.tmpl": _cm("{{ .StateValues.name }}"),
    }
    for path, text in {**base, **files}.items():
        if text is None:
            continue
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    return repo


def _error(repo: Path) -> str:
    with pytest.raises(FleetError) as err:
        rendered_tree(repo)
    return str(err.value)


HOOK = {"src/shop/templates/hook.yaml": _cm("job", "helm.sh/hook: post-install")}
TEST = {"src/shop/templates/test.yaml": _cm("probe", "helm.sh/hook: test")}


def test_before_0_1_14_hooks_and_tests_render(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        {**HOOK, **TEST, "src/shop/templates/plain.yaml.tmpl": _cm("{{ .Values.name }}")},
    )
    text = rendered_tree(repo)["shop/shop.yaml"].decode()
    assert "name: plain\n" in text and "name: job\n" in text and "name: probe\n" in text
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.20\n")
    # 0.1.20 renders hooks only with flags.hooks, and the template as Helm's (no .Values.name)
    text = rendered_tree(repo)["shop/shop.yaml"].decode()
    assert "job" not in text and "probe" not in text and "plain.yaml.tmpl" in text


def test_versions_rendering_a_release_differently_need_the_pin(tmp_path: Path) -> None:
    """0.1.14 renders tests along with hooks, 0.1.15 on only with flags.tests."""
    helmfile = (
        "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
        "  - .kube-renderer:\n      flags:\n        hooks: true\n"
    )
    repo = _repo(tmp_path, {**HOOK, **TEST}, helmfile)
    message = _error(repo)
    assert message.startswith('helmfile.yaml:2: rendering root "shop": ')
    assert (
        "read as kube-renderer 0.1.14 to 0.1.16 does (values.yaml and *.tmpl "
        "files at the root, templates reading .StateValues): release 'shop': kube-renderer "
        "0.1.14 to 0.1.16 renders it differently"
    ) in message
    assert "set helmfile.kubeRenderer in rollwright.yaml" in message
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.15\n")
    text = rendered_tree(repo)["shop/shop.yaml"].decode()
    assert "name: job\n" in text and "probe" not in text
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.14\n")
    assert "name: probe\n" in rendered_tree(repo)["shop/shop.yaml"].decode()


def test_a_state_values_reading_spanning_0_1_14_with_hooks_is_refused(tmp_path: Path) -> None:
    """values.yaml alone, read by 0.1.2 to 0.1.16: hooks render before 0.1.14, not after."""
    repo = _repo(
        tmp_path,
        {**HOOK, "src/shop/templates/plain.yaml.tmpl": ""},
        "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n  - n: {{ .Values.name }}\n",
    )
    (repo / "src/shop/templates/plain.yaml.tmpl").unlink()
    assert "read as kube-renderer 0.1.2 to 0.1.16 does" in _error(repo)
    (repo / "src/shop/templates/hook.yaml").unlink()
    (repo / "src/shop/templates/cm.yaml").write_text(_cm("{{ .Values.n }}"))
    assert b"  name: plain\n" in rendered_tree(repo)["shop/shop.yaml"]


@pytest.mark.parametrize(
    ("files", "helmfile", "expected"),
    [
        (
            {"bootstrap.yaml": "a: b\n"},
            "",
            "bootstrap.yaml: read as kube-renderer 0.1.14 to 0.1.16 does (values.yaml and *.tmpl "
            "files at the root, templates reading .StateValues): kube-renderer 0.1.14 to 0.1.16 "
            "renders bootstrap.yaml for every release with gomplate; not reproduced",
        ),
        (
            {},
            "environments:\n  default:\n    values:\n    - .kube-renderer:\n"
            "        bootstrap_template: 'x'\n---\nreleases:\n- name: shop\n  chart: ./src/shop\n",
            "helmfile.yaml: read as kube-renderer 0.1.14 to 0.1.16 does (values.yaml and *.tmpl "
            "files at the root, templates reading .StateValues): .kube-renderer.bootstrap_template "
            "is kube-renderer 0.1.17's (earlier versions ignore it)",
        ),
        (
            {"src/shop/templates/plain.yaml.tmpl": _cm("{{ .Values.name }}")},
            "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
            "  - .kube-renderer:\n      target_dir: shelf\n",
            "helmfile.yaml:2: read as kube-renderer 0.1.11 to 0.1.13 does (values.yaml and *.tmpl "
            "files at the root, templates reading .Values): release 'shop': kube-renderer 0.1.11 "
            "to 0.1.13 reads .kube-renderer.target_dir otherwise or not at all",
        ),
        (
            {
                "src/shop/templates/plain.yaml.tmpl": None,
                "src/shop/templates/plain.yaml.gotmpl": _cm("{{ .Values.name }}"),
            },
            "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
            "  - .kube-renderer:\n      render_filename_generator: helm\n",
            "release 'shop' sets .kube-renderer options, which kube-renderer 0.1.2 to 0.1.8 does "
            "not read (its options are in kube-renderer.yaml)",
        ),
        (
            {},
            "releases:\n- name: shop\n  chart: ./src/shop\n"
            "- name: depot\n  chart: ./src/shop\n  values:\n"
            "  - .kube-renderer:\n      render_filename_generator: helm\n",
            "helmfile.yaml:2: read as kube-renderer 0.1.14 to 0.1.16 does (values.yaml and *.tmpl "
            "files at the root, templates reading .StateValues): the releases set different "
            "render_filename_generator",
        ),
        (
            {},
            "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
            "  - .kube-renderer:\n      render_filename_generator: comment\n",
            "helmfile.yaml:2: read as kube-renderer 0.1.14 to 0.1.16 does (values.yaml and *.tmpl "
            "files at the root, templates reading .StateValues): release 'shop': the comment "
            "generator is kube-renderer 0.1.17's",
        ),
        (
            {},
            "environments:\n  default:\n    values:\n    - depot:\n        enabled: false\n"
            "---\nreleases:\n- name: shop\n  chart: ./src/shop\n"
            "- name: depot\n  chart: ./src/shop\n  condition: depot.enabled\n",
            "helmfile.yaml: read as kube-renderer 0.1.14 to 0.1.16 does (values.yaml and *.tmpl "
            "files at the root, templates reading .StateValues): release 'depot' is disabled by "
            "its condition, which kube-renderer before 0.1.20 does not read",
        ),
        (
            {},
            "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
            "  - .kube-renderer:\n      remove_labels: [a]\n",
            "release 'shop': remove_labels is kube-renderer 0.1.15's",
        ),
    ],
)
def test_what_earlier_versions_read_otherwise_is_refused(
    tmp_path: Path, files: dict[str, str | None], helmfile: str, expected: str
) -> None:
    message = _error(_repo(tmp_path, files, helmfile))
    assert expected in message
    assert message.endswith(
        "set helmfile.kubeRenderer in rollwright.yaml if it is for another version"
    )


def test_from_0_1_9_the_generator_options_are_read_as_0_1_20_reads_them(tmp_path: Path) -> None:
    repo = _repo(
        tmp_path,
        {"src/shop/templates/plain.yaml.tmpl": _cm("{{ .Values.name }}")},
        "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
        "  - .kube-renderer:\n      render_filename_generator: helm\n",
    )
    assert rendered_tree(repo) == {
        "shop/Shop/templates/plain.yaml": b"# Source: Shop/templates/plain.yaml\n"
        + _cm("plain").encode()
    }


def test_transformers_render_with_hooks_on_when_the_chart_has_none(tmp_path: Path) -> None:
    """Before 0.1.14 hooks are always on: a transformed chart renders when it has no hook,
    and is refused when it has one (Helm 3.10's first render would lose manifests)."""
    helmfile = (
        "releases:\n- name: shop\n  chart: ./src/shop\n  transformers:\n"
        "  - apiVersion: builtin\n    kind: NamespaceTransformer\n"
        "    metadata:\n      name: x\n      namespace: moved\n"
    )
    repo = _repo(
        tmp_path, {"src/shop/templates/plain.yaml.tmpl": _cm("{{ .Values.name }}")}, helmfile
    )
    text = rendered_tree(repo)["shop/shop.yaml"].decode()
    assert "Shop/templates/patched_resources.yaml" in text and "namespace: moved" in text
    (repo / "src/shop/templates/hook.yaml").write_text(HOOK["src/shop/templates/hook.yaml"])
    assert "transformers on a chart rendering hooks, with hooks enabled" in _error(repo)


def test_the_yq_generator_appends_documents_in_name_order_before_0_1_17(tmp_path: Path) -> None:
    """Twelve documents to one file: 0.1.16 appends them as their split files sort (0 1 10 11
    2 ...), 0.1.20 in number order."""
    docs = "".join(f"---\n{_cm(f'cm{i}').replace('ConfigMap', 'Thing')}" for i in range(12))
    repo = _repo(
        tmp_path,
        {
            "src/shop/templates/many.yaml": docs,
            "rollwright.yaml": "helmfile:\n  kubeRenderer: 0.1.16\n",
        },
        "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n  - .kube-renderer:\n"
        "      render_filename_generator: yq\n"
        "      render_filename_pattern: '.apiVersion + \".yaml\"'\n",
    )

    def order() -> list[str]:
        text = rendered_tree(repo)["shop/v1.yaml"].decode()
        return [line.split()[-1] for line in text.splitlines() if line.startswith("  name: cm")]

    assert order() == ["cm0", "cm1", "cm10", "cm11", *(f"cm{i}" for i in range(2, 10))]
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.20\n")
    (repo / "values.yaml").unlink()
    (repo / "src/shop/templates/plain.yaml.tmpl").unlink()
    assert order() == [f"cm{i}" for i in range(12)]


CRD = (
    "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n"
    "  name: things.example.com\nspec:\n  group: example.com\n  names:\n    kind: Thing\n"
    "    plural: things\n  scope: Namespaced\n  versions:\n    - name: v1\n      served: true\n"
    "      storage: true\n      schema:\n        openAPIV3Schema:\n          type: object\n"
)


def _crd_repo(tmp_path: Path, version: str, files: dict[str, str | None]) -> Path:
    return _repo(
        tmp_path,
        {
            "values.yaml": None,
            "src/shop/templates/plain.yaml.tmpl": None,
            "rollwright.yaml": f"helmfile:\n  kubeRenderer: {version}\n",
            **files,
        },
    )


@pytest.mark.parametrize("version", ["0.1.20", "0.1.19", "0.1.18", "0.1.16", "0.1.4"])
def test_a_file_starting_with_a_separator_is_refused_before_0_1_19(
    tmp_path: Path, version: str
) -> None:
    """Helm's Source line, then the file's own `---`: 0.1.19 deletes that `---`; before, yq
    printed the comment as its version did (a pinned 0.1.17 or 0.1.18 too)."""
    repo = _crd_repo(tmp_path, version, {"src/shop/crds/thing.yaml": CRD})
    if int(version.rsplit(".", 1)[1]) >= 19:
        text = rendered_tree(repo)["shop/shop.yaml"].decode()
        assert text.startswith("---\n# Source: Shop/crds/thing.yaml\napiVersion: ")
    else:
        assert "a `---` line follows a Source line in its rendered stream" in _error(repo)


def test_before_0_1_4_an_empty_document_is_refused(tmp_path: Path) -> None:
    note = {"src/shop/templates/note.yaml": "# nothing to render\n"}
    repo = _crd_repo(tmp_path, "0.1.3", {**note, "src/shop/templates/cm.yaml": _cm("cm")})
    assert (
        "Shop/templates/note.yaml holds an empty document, which kube-renderer before 0.1.4 keeps"
        in _error(repo)
    )


def test_the_yq_default_path_gains_its_segments_in_0_1_16(tmp_path: Path) -> None:
    helmfile = (
        "releases:\n- name: shop\n  chart: ./src/shop\n  values:\n"
        "  - .kube-renderer:\n      render_filename_generator: yq\n"
    )
    repo = _repo(tmp_path, {}, helmfile)
    assert sorted(rendered_tree(repo)) == ["shop/_cluster/ConfigMap_plain.yaml"]
    (repo / "src/shop/crds/thing.yaml").parent.mkdir()
    (repo / "src/shop/crds/thing.yaml").write_text(CRD.removeprefix("---\n"))
    message = _error(repo)
    assert "the yq generator's default path of _cluster/CustomResourceDefinition" in message
    assert "differs between the kube-renderer versions read" in message
    name = "CustomResourceDefinition.apiextensions.k8s.io_things.example.com.yaml"
    for version, path in {"0.1.15": "_cluster", "0.1.16": "_cluster/crds"}.items():
        (repo / "rollwright.yaml").write_text(f"helmfile:\n  kubeRenderer: {version}\n")
        assert f"shop/{path}/{name}" in rendered_tree(repo)


def test_0_1_17_bootstrap_values_without_the_key_are_refused(tmp_path: Path) -> None:
    helmfile = (
        "environments:\n  default:\n    values:\n    - boot.yaml\n"
        "---\nreleases:\n- name: shop\n  chart: ./src/shop\n"
    )
    files: dict[str, str | None] = {"values.yaml": None, "src/shop/templates/plain.yaml.tmpl": None}
    files["src/shop/templates/cm.yaml"] = _cm("cm")
    files["boot.yaml"] = (
        ".kube-renderer:\n  bootstrap_template: |\n"
        "    {{ range .Releases }}# Bootstrap: seeds/{{ .name }}.yaml\n"
        "    kind: Seed\n    n: {{ len .values }}\n    ---\n    {{ end }}\n"
    )
    repo = _repo(
        tmp_path, {**files, "rollwright.yaml": "helmfile:\n  kubeRenderer: 0.1.17\n"}, helmfile
    )
    assert "release 'shop' sets no .kube-renderer values: kube-renderer 0.1.17's" in _error(repo)
    (repo / "rollwright.yaml").write_text("helmfile:\n  kubeRenderer: 0.1.18\n")
    assert (
        rendered_tree(repo)["seeds/shop.yaml"]
        == b"# Bootstrap: seeds/shop.yaml\nkind: Seed\nn: 1\n"
    )

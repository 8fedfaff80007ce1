"""Helm fidelity of atlas releases: what `helm template` / `helmfile template` would
produce, or a clear refusal. Real charts from tests/fixtures/charts, the real Helm engine, and
chart repositories and registries on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from shared.engine.charts import access
from shared.engine.errors import FleetError
from shared.engine.helm.engine import RepositoryUnreachable
from tests.support.atlas import layout, make_fleet, one_app, render
from tests.support.chart_repo import ChartRepo
from tests.support.oci_registry import OciRegistry
from tests.support.paths import FIXTURES

CHARTS = FIXTURES / "charts"
ROOT = "g/c"
DEP = "deployments/g/c/apps/d"
HELMFILE = "templates/t/helmfile.yaml.gotmpl"
STABLE = "https://charts.example.test/stable"


def fleet(tmp_path: Path, helmfile: str, *charts: str, **files: Any) -> Path:
    """A fleet with template `t` (`helmfile`) instantiated by deployment `d` on `g/c`, and the
    fixture `charts` copied under charts/."""
    base = make_fleet(
        tmp_path / "fleet",
        {f"{DEP}/deployment.yaml": one_app("t"), HELMFILE: helmfile, **files},
        echo=False,
    )
    for name in charts:
        shutil.copytree(CHARTS / name, base / "charts" / name, dirs_exist_ok=True)
    return base


def release(chart: str, extra: str = "") -> str:
    return f"releases:\n  - name: r\n    chart: ../../charts/{chart}\n{extra}"


def docs(files: dict[str, bytes]) -> dict[str, Any]:
    return {path: yaml.safe_load(data) for path, data in files.items()}


# --- hooks --------------------------------------------------------------------------------------


def test_hooks_are_rendered_by_default_under_hooks(tmp_path: Path) -> None:
    files = render(fleet(tmp_path, release("hooked"), "hooked"), ROOT)
    assert sorted(files) == [
        "d/r/d/ConfigMap_r-config.yaml",
        "d/r/d/hooks/Job.batch_r-secret-init.yaml",
    ]


def test_hooks_false_drops_them(tmp_path: Path) -> None:
    files = render(fleet(tmp_path, release("hooked", "    hooks: false\n"), "hooked"), ROOT)
    assert sorted(files) == ["d/r/d/ConfigMap_r-config.yaml"]


# --- Chart.yaml dependencies --------------------------------------------------------------------


@pytest.fixture
def stable_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ChartRepo]:
    """The public-looking repository https://charts.example.test/stable, served on loopback
    through the worker's mirror mapping (as an air-gapped installation would)."""
    repo = ChartRepo(tmp_path / "stable")
    repo.add(CHARTS / "cache-lite")
    repo.add(CHARTS / "cache-lite", version="1.2.7")
    repo.add(CHARTS / "cache-lite", version="1.3.0")
    with repo:
        repo.index()
        monkeypatch.setenv(access.MIRRORS_ENV, json.dumps({STABLE: repo.url}))
        yield repo


def test_dependencies_are_built_like_helm_dependency_build(
    tmp_path: Path, stable_repo: ChartRepo
) -> None:
    base = fleet(tmp_path, release("umbrella"), "umbrella", "sidecar")
    files = docs(render(base, ROOT))
    assert sorted(files) == [
        "d/r/d/ConfigMap_r-sidecar.yaml",  # file:// dependency, its condition true
        "d/r/d/ConfigMap_r-umbrella.yaml",
        "d/r/d/StatefulSet.apps_r-cache.yaml",  # from the repository, through the mirror
    ]  # the alias `metrics` is off: its tag is false
    # import-values: the child's `exported` reached the parent
    assert files["d/r/d/ConfigMap_r-umbrella.yaml"]["data"] == {"sidecarPort": "9100"}
    # the newest version meeting ~1.2.0 (1.2.7, not 1.3.0), as `helm dependency update` picks
    assert any(p.endswith("cache-lite-1.2.7.tgz") for p in stable_repo.requests)
    assert not (base / "charts/umbrella/charts").exists()  # the fleet's files are untouched


def test_chart_lock_pins_the_dependency_version(tmp_path: Path, stable_repo: ChartRepo) -> None:
    lock = {
        "dependencies": [
            {"name": "sidecar", "repository": "file://../sidecar", "version": "0.3.0"},
            {"name": "sidecar", "repository": "file://../sidecar", "version": "0.3.0"},
            {"name": "cache-lite", "repository": STABLE, "version": "1.2.0"},
        ],
        "digest": "sha256:0",
        "generated": "2026-01-01T00:00:00Z",
    }
    base = fleet(
        tmp_path, release("umbrella"), "umbrella", "sidecar", **{"charts/umbrella/Chart.lock": lock}
    )
    render(base, ROOT)
    assert any(p.endswith("cache-lite-1.2.0.tgz") for p in stable_repo.requests)


def test_tags_and_aliases_and_vendored_dependencies(tmp_path: Path, stable_repo: ChartRepo) -> None:
    # `tags: {observability: true}` switches the aliased copy on; a vendored archive in
    # charts/ is used as it is (no download).
    vendored = helm_python.package(CHARTS / "cache-lite", destination=tmp_path)
    base = fleet(
        tmp_path,
        release("umbrella", "    values:\n      - tags: {observability: true}\n"),
        "umbrella",
        "sidecar",
    )
    (base / "charts/umbrella/charts").mkdir()
    shutil.copy(vendored, base / "charts/umbrella/charts/")
    files = render(base, ROOT)
    assert "d/r/d/ConfigMap_r-metrics.yaml" in files
    assert stable_repo.requests == []


def test_dependency_from_an_oci_registry_named_by_the_helmfile(
    tmp_path: Path, oci_registry: OciRegistry
) -> None:
    chart = {
        "apiVersion": "v2",
        "name": "wrapper",
        "version": "1.0.0",
        "dependencies": [{"name": "echo", "version": "0.2.0", "repository": "@reg"}],
    }
    helmfile = (
        f"repositories:\n  - name: reg\n    url: {oci_registry.host}/charts\n    oci: true\n"
        + release("wrapper")
    )
    base = fleet(tmp_path, helmfile, **{"charts/wrapper/Chart.yaml": chart})
    files = render(base, ROOT)
    assert list(files) == ["d/r/d/ConfigMap_r-values.yaml"]  # echo, as the subchart


def test_missing_dependency_is_an_error_naming_chart_and_dependency(tmp_path: Path) -> None:
    chart = {
        "apiVersion": "v2",
        "name": "wrapper",
        "version": "1.0.0",
        "dependencies": [{"name": "ghost", "version": "1.0.0", "repository": ""}],
    }
    base = fleet(tmp_path, release("wrapper"), **{"charts/wrapper/Chart.yaml": chart})
    with pytest.raises(FleetError) as caught:
        render(base, ROOT)
    assert "chart 'charts/wrapper': dependency 'ghost'" in str(caught.value)
    assert caught.value.path == HELMFILE


def test_skip_deps_refuses_to_fetch(tmp_path: Path) -> None:
    base = fleet(tmp_path, release("umbrella", "    skipDeps: true\n"), "umbrella", "sidecar")
    with pytest.raises(FleetError, match="not in charts/ and the release says skipDeps"):
        render(base, ROOT)


def test_file_dependency_version_must_match(tmp_path: Path) -> None:
    chart = {
        "apiVersion": "v2",
        "name": "wrapper",
        "version": "1.0.0",
        "dependencies": [
            {"name": "sidecar", "version": "^2.0.0", "repository": "file://../sidecar"}
        ],
    }
    base = fleet(tmp_path, release("wrapper"), "sidecar", **{"charts/wrapper/Chart.yaml": chart})
    with pytest.raises(FleetError, match=r"version 0\.3\.0, which does not meet '\^2\.0\.0'"):
        render(base, ROOT)


def test_unreachable_repository_is_an_infrastructure_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(access.MIRRORS_ENV, json.dumps({STABLE: "http://127.0.0.1:9"}))
    base = fleet(tmp_path, release("umbrella"), "umbrella", "sidecar")
    with pytest.raises(FleetError) as caught:
        render(base, ROOT)
    # the activity retries it (activities.errors reads `retryable`): not the fleet's fault
    assert caught.value.retryable
    assert "repository unreachable (will be retried)" in str(caught.value)
    assert RepositoryUnreachable.retryable


def test_repository_credentials_come_from_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = ChartRepo(tmp_path / "private", credentials=("ci", "s3cret-pass"))
    repo.add(CHARTS / "cache-lite")
    with repo:
        repo.index()
        monkeypatch.setenv(access.MIRRORS_ENV, json.dumps({STABLE: repo.url}))
        base = fleet(tmp_path, release("umbrella"), "umbrella", "sidecar")
        with pytest.raises(FleetError) as caught:
            render(base, ROOT)
        assert "401" in str(caught.value)
        monkeypatch.setenv(
            access.CREDENTIALS_ENV,
            json.dumps({repo.url: {"username": "ci", "password": "s3cret-pass"}}),
        )
        assert "d/r/d/StatefulSet.apps_r-cache.yaml" in render(base, ROOT)
        expected = "Basic " + base64.b64encode(b"ci:s3cret-pass").decode()
        assert expected in repo.authorizations


def test_credentials_in_the_repository_are_refused(tmp_path: Path) -> None:
    helmfile = (
        "repositories:\n  - name: p\n    url: https://charts.example.test\n"
        "    username: me\n    password: hunter2\n" + release("hooked")
    )
    with pytest.raises(FleetError, match="credentials never come from the fleet repository"):
        layout(fleet(tmp_path, helmfile, "hooked")).releases(ROOT)


# --- kubeVersion, library charts, schemas, Capabilities ----------------------------------------


def test_kube_version_constraint_is_enforced(tmp_path: Path) -> None:
    base = fleet(tmp_path, release("kubeversion", "    kubeVersion: v1.29.4\n"), "kubeversion")
    with pytest.raises(FleetError) as caught:
        render(base, ROOT)
    assert (
        "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.4"
        in (str(caught.value))
    )
    ok = fleet(tmp_path / "ok", release("kubeversion", "    kubeVersion: v1.31.0\n"), "kubeversion")
    assert list(render(ok, ROOT)) == ["d/r/d/ConfigMap_r.yaml"]


def test_library_chart_as_a_release_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="'library' is a library chart"):
        render(fleet(tmp_path, release("library"), "library"), ROOT)


def test_schema_validation_is_skipped_by_default_as_atlas_does(tmp_path: Path) -> None:
    # ATLAS injects `atlas` (and the hierarchy) into every release: a strict schema would
    # reject them, so ATLAS defaults skipSchemaValidation to true.
    base = fleet(tmp_path, release("strict-schema"), "strict-schema")
    assert list(render(base, ROOT)) == ["d/r/d/ConfigMap_r.yaml"]


@pytest.mark.parametrize(
    "setting",
    ["    skipSchemaValidation: false\n", "helmDefaults:\n  skipSchemaValidation: false\n"],
)
def test_explicit_false_validates_the_schema(tmp_path: Path, setting: str) -> None:
    helmfile = (
        release("strict-schema", setting)
        if setting.startswith(" ")
        else setting + release("strict-schema")
    )
    with pytest.raises(FleetError, match="additional properties 'atlas' not allowed"):
        render(fleet(tmp_path, helmfile, "strict-schema"), ROOT)


def caps(files: dict[str, bytes]) -> tuple[str, bool]:
    data = yaml.safe_load(files["d/r/d/ConfigMap_r-caps.yaml"])["data"]
    return data["kubeVersion"], any("ServiceMonitor" in p for p in files)


def test_capabilities_precedence_release_template_cluster_fleet(tmp_path: Path) -> None:
    config = {
        "atlas": {
            "capabilities": {"kubeVersion": "v1.28.0"},
            "clusters": [
                {
                    "roots": ["g/*"],
                    "kubeVersion": "v1.30.1",
                    "apiVersions": ["monitoring.coreos.com/v1"],
                }
            ],
        }
    }
    fleet_only = {"rollwright.yaml": {"atlas": {"capabilities": {"kubeVersion": "v1.28.0"}}}}
    base = fleet(tmp_path / "a", release("capabilities"), "capabilities", **fleet_only)
    assert caps(render(base, ROOT)) == ("v1.28.0", False)
    base = fleet(
        tmp_path / "b", release("capabilities"), "capabilities", **{"rollwright.yaml": config}
    )
    assert caps(render(base, ROOT)) == ("v1.30.1", True)
    template = "kubeVersion: v1.31.0\napiVersions: []\n" + release("capabilities")
    base = fleet(tmp_path / "c", template, "capabilities", **{"rollwright.yaml": config})
    assert caps(render(base, ROOT)) == ("v1.31.0", False)
    own = release(
        "capabilities", "    kubeVersion: v1.32.2\n    apiVersions: [monitoring.coreos.com/v1]\n"
    )
    base = fleet(
        tmp_path / "d",
        "kubeVersion: v1.31.0\n" + own,
        "capabilities",
        **{"rollwright.yaml": config},
    )
    assert caps(render(base, ROOT)) == ("v1.32.2", True)


def test_helm_default_capabilities_without_settings(tmp_path: Path) -> None:
    version, monitors = caps(render(fleet(tmp_path, release("capabilities"), "capabilities"), ROOT))
    assert version.startswith("v1.") and not monitors


# --- helmfile release keys ----------------------------------------------------------------------


def test_set_and_set_string_win_over_every_values_level(tmp_path: Path) -> None:
    helmfile = (
        "releases:\n  - name: echo\n    chart: ./chart\n"
        "    set:\n      - name: replicas\n        value: 3\n"
        "      - name: list\n        values: [a, b]\n"
        "      - name: nested.flag\n        value: true\n"
        "      - name: fromFile\n        file: note.txt\n"
        "    setString:\n      - name: version\n        value: 1.10\n"
    )
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(),
            "templates/echo/helmfile.yaml.gotmpl": helmfile,
            "templates/echo/note.txt": "a, {b}\n",
            f"{DEP}/values.yaml": {"replicas": 1, "nested": {"flag": False, "kept": 1}},
        },
    )
    values = layout(base).values(ROOT, None)
    assert values["replicas"] == 3
    assert values["list"] == ["a", "b"]
    assert values["nested"] == {"flag": True, "kept": 1}
    assert values["fromFile"] == "a, {b}\n"
    assert values["version"] == "1.1"  # YAML read 1.10 as a number; --set-string keeps text


def test_labels_take_any_scalar_and_common_labels_apply(tmp_path: Path) -> None:
    helmfile = "commonLabels:\n  team: core\n  tier: base\n" + release(
        "hooked", "    labels:\n      tier: 2\n"
    )
    base = fleet(
        tmp_path,
        helmfile,
        "hooked",
        **{f"{DEP}/deployment.yaml": {"apps": [{"template": "t", "labels": {"bootstrap": True}}]}},
    )
    [info] = layout(base).releases(ROOT)
    assert {k: info.labels[k] for k in ("team", "tier", "bootstrap")} == {
        "team": "core",
        "tier": "2",
        "bootstrap": "true",
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    postRenderer: ./redact.sh\n", "postRenderer is refused, as ATLAS refuses it"),
        ("    installed: false\n", "ATLAS strips installed/condition"),
        ("    hooks:\n      - events: [prepare]\n        command: echo\n", "lifecycle hooks"),
        ("    transformers: [x.yaml]\n", "transformers are not supported"),
        ("    verify: true\n", "signature verification is not supported"),
    ],
)
def test_helmfile_keys_rollwright_cannot_honour_are_refused(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(FleetError) as caught:
        layout(fleet(tmp_path, release("hooked", extra), "hooked")).releases(ROOT)
    assert message in str(caught.value)
    assert caught.value.path == HELMFILE and caught.value.line is not None


# --- Helm's Go log ------------------------------------------------------------------------------


def test_helm_go_log_goes_to_the_debug_log_only(
    tmp_path: Path,
    chart_repo: ChartRepo,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # `version: "0.2"` makes Helm's Go side log "WARN unable to find exact version ...".
    caplog.set_level(logging.DEBUG, logger="rollwright.helm")
    helmfile = (
        f"repositories:\n  - name: test\n    url: {chart_repo.url}\n"
        'releases:\n  - name: r\n    chart: test/echo\n    version: "0.2"\n'
    )
    assert list(render(fleet(tmp_path, helmfile), ROOT)) == ["d/r/d/ConfigMap_r-values.yaml"]
    out, err = capfd.readouterr()
    assert "unable to find exact version" not in out + err
    records = [r for r in caplog.records if r.name == "rollwright.helm"]
    assert any("unable to find exact version" in r.getMessage() for r in records)
    assert all(r.levelno == logging.DEBUG for r in records)


# --- ATLAS's entry helmfile -----------------------------------------------------------------------


def test_entry_helmfile_naming_other_directories_is_refused(tmp_path: Path) -> None:
    entry = (
        "helmfiles:\n  - path: git::https://github.com/max06/atlas.git@helmfile.yaml.gotmpl\n"
        "    values:\n      - atlas:\n          appTemplates: app-templates\n"
        "          deploymentDefinitions: deployments\n"
        '          cwd: {{ exec "pwd" (list) }}\n'
    )
    base = fleet(tmp_path, release("hooked"), "hooked", **{"helmfile.yaml.gotmpl": entry})
    with pytest.raises(FleetError) as caught:
        layout(base).roots()
    assert (caught.value.path, caught.value.line) == ("helmfile.yaml.gotmpl", 5)
    assert "atlas.appTemplates is 'app-templates': rollwright reads templates/" in str(caught.value)
    (base / "helmfile.yaml.gotmpl").write_text(entry.replace("app-templates", "templates"))
    assert layout(base).roots() == [ROOT]


def test_oci_registry_credentials_come_from_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo_archives: dict[str, Path]
) -> None:
    registry = OciRegistry(credentials=("robot", "oci-token-77"))
    registry.add_chart(echo_archives["0.2.0"])
    with registry:
        helmfile = (
            f"releases:\n  - name: r\n    chart: oci://{registry.host}/charts/echo\n"
            "    version: 0.2.0\n"
        )
        base = fleet(tmp_path, helmfile)
        with pytest.raises(FleetError):
            render(base, ROOT)
        monkeypatch.setenv(
            access.CREDENTIALS_ENV,
            json.dumps(
                {f"oci://{registry.host}": {"username": "robot", "password": "oci-token-77"}}
            ),
        )
        assert list(render(base, ROOT)) == ["d/r/d/ConfigMap_r-values.yaml"]


def test_templated_deployment_yaml_is_refused_not_read_as_text(tmp_path: Path) -> None:
    templated = (
        "# {{ comments may say anything }}\napps:\n  - template: t\n"
        '    namespace: "{{ .Values.ns }}"\n'
    )
    base = fleet(tmp_path, release("hooked"), "hooked", **{f"{DEP}/deployment.yaml": templated})
    with pytest.raises(FleetError) as caught:
        layout(base).releases(ROOT)
    assert (caught.value.path, caught.value.line) == (f"{DEP}/deployment.yaml", 4)
    assert "read as plain YAML: Go templates in it are not supported" in str(caught.value)
    (base / DEP / "deployment.yaml").write_text(templated.replace('"{{ .Values.ns }}"', "ns"))
    assert layout(base).releases(ROOT)[0].namespace == "ns"


def test_helmignore_is_honoured_when_the_chart_is_repacked(tmp_path: Path) -> None:
    # Skipping schema validation repacks the chart: as Helm packages it, .helmignore applied.
    ignored = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ignored\n"
    base = fleet(
        tmp_path,
        release("hooked"),
        "hooked",
        **{
            "charts/hooked/.helmignore": "templates/ignored.yaml\n",
            "charts/hooked/templates/ignored.yaml": ignored,
        },
    )
    assert not any("ignored" in p for p in render(base, ROOT))


def test_chart_lock_out_of_sync_is_refused(tmp_path: Path) -> None:
    lock = {
        "dependencies": [
            {"name": "sidecar", "repository": "file://../sidecar", "version": "0.3.0"},
            {"name": "cache-lite", "repository": STABLE, "version": "1.3.0"},  # not ~1.2.0
        ]
    }
    base = fleet(
        tmp_path, release("umbrella"), "umbrella", "sidecar", **{"charts/umbrella/Chart.lock": lock}
    )
    with pytest.raises(FleetError) as caught:
        render(base, ROOT)
    assert caught.value.path == "charts/umbrella/Chart.lock"
    assert "Chart.lock is out of sync with Chart.yaml for dependency 'cache-lite'" in str(
        caught.value
    )

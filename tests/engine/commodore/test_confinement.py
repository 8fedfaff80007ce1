"""A component's Jsonnet reads nothing outside the cluster's working directory: not the
worker's environment, not its files, neither by an absolute path, nor a `..`, nor a symlink in
the component. Each attempt is refused naming the component and the path, and what the file
holds never shows. These need no real Commodore."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore import publish, repo_with
from tests.support.commodore_tenant import DEMO_CLASS, DEMO_DEFAULTS, Tenant
from tests.support.gitrepo import git

SECRET = "worker-secret-7f3a9c"


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory of the worker's own, outside every working directory, and a secret in
    the environment."""
    monkeypatch.setenv("ROLLWRIGHT_TEST_WORKER_SECRET", SECRET)
    outside = tmp_path / "worker"
    outside.mkdir()
    (outside / "key.yaml").write_text(f"key: {SECRET}\n")
    (outside / "key.jsonnet").write_text(f"{{ leaked: '{SECRET}' }}\n")
    return outside


def component_at(
    tenant: Tenant, tmp_path: Path, files: dict[str, str], link: tuple[str, Path] | None = None
) -> Path:
    """The tenant with component demo replaced by one holding `files` (over the usual
    class, defaults and filter), optionally a symlink `link[0]` -> `link[1]`."""
    source = tmp_path / "src" / "component-demo"
    base = {
        "class/defaults.yml": DEMO_DEFAULTS,
        "class/demo.yml": DEMO_CLASS,
        "component/main.jsonnet": "{}\n",
        "postprocess/add-label.jsonnet": "{}\n",
    }
    repo_with(source, {**base, **files})
    if link is not None:
        os.symlink(link[1], source / link[0])
        git(source, "add", "-A")
        git(source, "commit", "-q", "-m", "link")
    git(source, "tag", "v1.0.0")
    remotes = tmp_path / "remotes"
    remotes.mkdir(exist_ok=True)
    url = publish(source, remotes)
    checkout = tmp_path / "t-acme"
    shutil.copytree(tenant.checkout, checkout, ignore=shutil.ignore_patterns(".git"))
    common = checkout / "common.yml"
    common.write_text(common.read_text() + f"  components:\n    demo:\n      url: {url}\n")
    return checkout


def render_error(checkout: Path) -> FleetError:
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout)).render("c-one")
    return caught.value


def refused(checkout: Path) -> str:
    message = str(render_error(checkout))
    assert SECRET not in message
    assert "component 'demo'" in message
    return message


def read_outside(secrets: Path) -> list[str]:
    key = secrets / "key.yaml"
    return [
        'importstr "/proc/self/environ"',
        f"importstr {json.dumps('../' * 40 + str(key).lstrip('/'))}",
        'std.native("file_read")("/proc/self/environ")',
        f"std.native('file_read')({json.dumps(str(key))})",
        f"std.native('file_read')({json.dumps('../' * 40 + str(key).lstrip('/'))})",
        f"std.native('file_exists')({json.dumps(str(key))})",
        f"std.native('yaml_load')({json.dumps(str(key))})",
        f"std.native('yaml_load_stream')({json.dumps(str(key))})",
        f"std.native('dir_files_read')({json.dumps(str(secrets))})",
        f"std.native('dir_files_list')({json.dumps(str(secrets))})",
        f"std.native('jinja2_render_file')({json.dumps(str(key))}, '{{}}')",
        f"std.native('file_exists')({json.dumps(str(secrets / 'no-such-file'))})",
    ]


@pytest.mark.parametrize("index", range(12))
def test_a_component_reads_nothing_outside_its_working_directory(
    tenant: Tenant, tmp_path: Path, secrets: Path, index: int
) -> None:
    expression = read_outside(secrets)[index]
    main = f"{{ leak: {{ data: {expression} }} }}\n"
    checkout = component_at(tenant, tmp_path, {"component/main.jsonnet": main})
    message = refused(checkout)
    assert "refused: it is outside the component's working directory" in message
    assert "component/main.jsonnet:1" in message
    assert "/proc/self/environ" in message or str(secrets.name) in message


@pytest.mark.parametrize("relative", [False, True])
def test_a_symlink_in_the_component_leads_nowhere(
    tenant: Tenant, tmp_path: Path, secrets: Path, relative: bool
) -> None:
    """Refused as the component is checked out, before any Jsonnet import, native or Jinja2
    include could follow it."""
    key = secrets / "key.yaml"
    target = Path("../" * 40 + str(key).lstrip("/")) if relative else key
    main = "{ leak: { data: importstr 'key.yaml' } }\n"
    checkout = component_at(
        tenant, tmp_path, {"component/main.jsonnet": main}, link=("component/key.yaml", target)
    )
    message = str(render_error(checkout))
    assert SECRET not in message
    assert "'component/key.yaml'" in message and "link" in message
    assert "links must stay inside the repository" in message


@pytest.mark.parametrize(
    "expression",
    [
        "std.native('yaml_load')('{key}')",
        "std.native('yaml_load_all')('{key}')",
        "std.native('list_dir')('{dir}', true)",
        "importstr '/proc/self/environ'",
    ],
)
def test_a_postprocessing_filter_reads_nothing_outside(
    tenant: Tenant, tmp_path: Path, secrets: Path, expression: str
) -> None:
    code = expression.format(key=secrets / "key.yaml", dir=secrets)
    checkout = component_at(
        tenant, tmp_path, {"postprocess/add-label.jsonnet": f"{{ leak: {{ data: {code} }} }}\n"}
    )
    message = refused(checkout)
    assert "postprocess.filters[0]: filter failed:" in message
    assert "refused: it is outside the component's working directory" in message


def test_an_input_path_outside_the_working_directory_is_refused(
    tenant: Tenant, tmp_path: Path, secrets: Path
) -> None:
    outside = str(secrets / "key.jsonnet")
    klass = DEMO_CLASS.replace("${_base_directory}/component/main.jsonnet", outside)
    checkout = component_at(tenant, tmp_path, {"class/demo.yml": klass})
    message = refused(checkout)
    assert "parameters.kapitan.compile[0].input_paths[0]:" in message
    assert outside in message


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("output_path: ${_instance}/", "output_path: ../../../../x", "compile[0].output_path"),
        ("  path: ${_instance}\n", "  path: ../../../../x\n", "filters[0].path"),
        ("filter: postprocess/add-label.jsonnet", "filter: ../../x.jsonnet", "filters[0].filter"),
    ],
)
def test_outputs_and_filters_stay_in_their_directories(
    tenant: Tenant, tmp_path: Path, old: str, new: str, key: str
) -> None:
    klass = DEMO_CLASS.replace(old, new)
    assert klass != DEMO_CLASS
    checkout = component_at(tenant, tmp_path, {"class/demo.yml": klass})
    err = render_error(checkout)
    assert isinstance(err, FleetError) and key in str(err)
    assert not (tmp_path / "x").exists()

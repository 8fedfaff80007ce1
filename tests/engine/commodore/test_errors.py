"""Bad input in a Commodore tenant: each refused with what is wrong and where (the tenant
file and line, the component's file and line), never a partial catalog; what the layout does
not support yet is refused by name. These need no real Commodore."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shared.cli.main import main
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore import publish, repo_with
from tests.support.commodore_tenant import DEMO_CLASS, DEMO_DEFAULTS, Tenant
from tests.support.gitrepo import git
from tests.support.paths import REPO_ROOT


def copy_of(tenant: Tenant, tmp_path: Path) -> Path:
    checkout = tmp_path / "t-acme"
    shutil.copytree(tenant.checkout, checkout, ignore=shutil.ignore_patterns(".git"))
    return checkout


def render_error(checkout: Path, cluster: str = "c-one") -> FleetError:
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout)).render(cluster)
    return caught.value


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_a_missing_class_names_the_file_and_line_that_includes_it(
    tenant: Tenant, tmp_path: Path
) -> None:
    checkout = copy_of(tenant, tmp_path)
    (checkout / "c-one.yml").write_text(
        "classes:\n  - .common\n  - .no-such-class\n" + "parameters: {}\n"
    )
    err = render_error(checkout)
    assert (err.path, err.line) == ("c-one.yml", 3)
    assert "class 't-acme.no-such-class' not found" in str(err)


def test_a_reference_that_resolves_to_nothing_names_its_file_and_line(
    tenant: Tenant, tmp_path: Path
) -> None:
    checkout = copy_of(tenant, tmp_path)
    append(checkout / "common.yml", "  broken: ${no:such:key}\n")
    err = render_error(checkout)
    assert (err.path, err.line) == ("common.yml", 7)
    assert "${no:such:key}" in str(err) and "resolves to nothing" in str(err)


def test_invalid_yaml_in_a_tenant_class_names_its_line(tenant: Tenant, tmp_path: Path) -> None:
    checkout = copy_of(tenant, tmp_path)
    (checkout / "common.yml").write_text("parameters:\n  demo: [1\n")
    err = render_error(checkout)
    assert err.path == "common.yml" and err.line is not None
    assert "invalid YAML" in str(err)


@pytest.mark.parametrize("missing", ["url", "version"])
def test_a_component_without_url_or_version_is_refused(
    tenant: Tenant, tmp_path: Path, missing: str
) -> None:
    checkout = copy_of(tenant, tmp_path)
    spec = {"url": tenant.urls["demo"], "version": "v1.0.0"}
    del spec[missing]
    body = {"applications": ["more"], "parameters": {"components": {"more": spec}}}
    (checkout / "c-one.yml").write_text(
        (checkout / "c-one.yml").read_text().replace("classes:\n", "classes:\n  - .more\n")
    )
    (checkout / "more.yml").write_text(yaml.safe_dump(body))
    err = render_error(checkout)
    assert f"component 'more' is missing field '{missing}'" in str(err)


def test_a_version_override_without_a_url_is_refused(tenant: Tenant, tmp_path: Path) -> None:
    checkout = copy_of(tenant, tmp_path)
    append(checkout / "common.yml", "  components:\n    unknown:\n      version: v1\n")
    err = render_error(checkout)
    assert "version override specified for component 'unknown' which has no URL" in str(err)


def test_a_version_that_does_not_exist_is_refused(tenant: Tenant, tmp_path: Path) -> None:
    checkout = copy_of(tenant, tmp_path)
    append(checkout / "common.yml", "  components:\n    demo:\n      version: v9.9.9\n")
    err = render_error(checkout)
    assert "component 'demo': version 'v9.9.9' is no branch, tag or commit" in str(err)


def broken_component(tmp_path: Path, main_jsonnet: str, class_text: str = DEMO_CLASS) -> str:
    repo = repo_with(
        tmp_path / "src" / "component-demo",
        {
            "class/defaults.yml": DEMO_DEFAULTS,
            "class/demo.yml": class_text,
            "component/main.jsonnet": main_jsonnet,
            "postprocess/add-label.jsonnet": "{}\n",
        },
        tag="v1.0.0",
    )
    remotes = tmp_path / "remotes"
    remotes.mkdir(exist_ok=True)
    return publish(repo, remotes)


def test_a_jsonnet_error_names_the_component_file_and_line(tenant: Tenant, tmp_path: Path) -> None:
    url = broken_component(tmp_path, "local x = 1;\n{\n  a: error 'the component broke',\n}\n")
    checkout = copy_of(tenant, tmp_path)
    append(checkout / "common.yml", f"  components:\n    demo:\n      url: {url}\n")
    err = render_error(checkout)
    message = str(err)
    assert "component 'demo': component/main.jsonnet:3: Jsonnet error:" in message
    assert "the component broke" in message
    assert str(tmp_path) not in message and "rollwright-commodore-" not in message


def test_kapitan_inputs_other_than_jsonnet_are_refused(tenant: Tenant, tmp_path: Path) -> None:
    helm_class = DEMO_CLASS.replace("input_type: jsonnet", "input_type: helm")
    url = broken_component(tmp_path, "{}\n", helm_class)
    checkout = copy_of(tenant, tmp_path)
    append(checkout / "common.yml", f"  components:\n    demo:\n      url: {url}\n")
    err = render_error(checkout)
    assert "input_type 'helm' is not supported by the commodore layout" in str(err)


def test_no_cluster_is_an_error_not_an_empty_success(
    tenant: Tenant, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = copy_of(tenant, tmp_path)
    config = yaml.safe_load((checkout / "rollwright.yaml").read_text())
    config["commodore"]["clusters"] = []
    (checkout / "rollwright.yaml").write_text(yaml.safe_dump(config))
    code = main(["render", "--repo", str(checkout), "--out", str(tmp_path / "out")])
    assert code != 0
    assert "commodore.clusters lists no cluster" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_cluster_without_the_required_facts_is_refused_at_its_line(
    tenant: Tenant, tmp_path: Path
) -> None:
    checkout = copy_of(tenant, tmp_path)
    config = yaml.safe_load((checkout / "rollwright.yaml").read_text())
    del config["commodore"]["clusters"][1]["facts"]["cloud"]
    (checkout / "rollwright.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(FleetError) as caught:
        Fleet.open(WorkTree(checkout))
    assert "required fact 'cloud' not set" in str(caught.value)
    assert "rollwright.yaml" in str(caught.value)


def test_a_cluster_whose_applications_are_all_removed_is_refused(
    tenant: Tenant, tmp_path: Path
) -> None:
    checkout = copy_of(tenant, tmp_path)
    (checkout / "c-one.yml").write_text(
        "classes:\n  - .common\napplications:\n  - ~demo\n  - ~extra\n"
    )
    err = render_error(checkout)
    assert "'applications' names no component" in str(err)


def test_a_reference_in_a_component_class_names_the_component_file_and_line(
    tenant: Tenant, tmp_path: Path
) -> None:
    repo = repo_with(
        tmp_path / "src" / "component-demo",
        {
            "class/defaults.yml": DEMO_DEFAULTS + "    broken: ${no:such:key}\n",
            "class/demo.yml": DEMO_CLASS,
            "component/main.jsonnet": "{}\n",
        },
        tag="v1.0.0",
    )
    git(repo, "tag", "v2.0.0")  # the version c-two pins
    (tmp_path / "remotes").mkdir()
    url = publish(repo, tmp_path / "remotes")
    checkout = copy_of(tenant, tmp_path)
    append(checkout / "common.yml", f"  components:\n    demo:\n      url: {url}\n")
    err = render_error(checkout, "c-two")  # a cluster without instances of demo
    lines = DEMO_DEFAULTS.count("\n") + 1
    assert f"component 'demo' class/defaults.yml:{lines}: reference ${{no:such:key}}" in str(err)


def test_without_the_extra_the_layout_says_how_to_install_it(tenant: Tenant) -> None:
    script = (
        "import sys\n"
        "sys.modules['reclass_rs'] = None  # as if the extra were not installed\n"
        "from shared.engine.errors import FleetError\n"
        "from shared.engine.fleet import Fleet\n"
        "from shared.engine.tree import WorkTree\n"
        "try:\n"
        f"    Fleet.open(WorkTree(__import__('pathlib').Path({str(tenant.checkout)!r})))\n"
        "except FleetError as err:\n"
        "    print(err)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert "needs the rollwright[commodore] extra (reclass_rs is not installed)" in done.stdout
    assert "pip install 'rollwright[commodore]'" in done.stdout


def test_an_instance_of_a_component_without_multi_instance_is_refused(
    tenant: Tenant, tmp_path: Path
) -> None:
    checkout = copy_of(tenant, tmp_path)
    (checkout / "c-one.yml").write_text(
        "classes:\n  - .common\napplications:\n  - extra as extra-two\n"
    )
    err = render_error(checkout)
    assert "component 'extra' with alias 'extra-two' does not support instantiation" in str(err)


def test_two_components_under_one_alias_are_refused(tenant: Tenant, tmp_path: Path) -> None:
    checkout = copy_of(tenant, tmp_path)
    (checkout / "c-one.yml").write_text(
        "classes:\n  - .common\napplications:\n  - demo as twin\n  - extra as twin\n"
    )
    err = render_error(checkout)
    assert "duplicate component alias 'twin'" in str(err)


def test_a_reference_in_the_global_repository_names_its_file_and_line(
    tenant: Tenant, tmp_path: Path
) -> None:
    source = tmp_path / "src" / "global"
    subprocess.run(["git", "clone", "-q", tenant.urls["global"], str(source)], check=True)
    git(source, "config", "user.email", "test@rollwright.invalid")
    git(source, "config", "user.name", "rollwright tests")
    common = (source / "common.yml").read_text()
    repo_with(source, {"common.yml": common + "  broken: ${no:such:key}\n"})
    (tmp_path / "remotes").mkdir()
    url = publish(source, tmp_path / "remotes")
    checkout = copy_of(tenant, tmp_path)
    config = yaml.safe_load((checkout / "rollwright.yaml").read_text())
    config["commodore"]["global"]["url"] = url
    (checkout / "rollwright.yaml").write_text(yaml.safe_dump(config))
    err = render_error(checkout)
    line = common.count("\n") + 1
    assert f"global repository {url} common.yml:{line}: reference ${{no:such:key}}" in str(err)


def test_a_package_nobody_configured_is_refused(tenant: Tenant, tmp_path: Path) -> None:
    checkout = copy_of(tenant, tmp_path)
    (checkout / "c-one.yml").write_text(
        "classes:\n  - .common\n  - nope.common\napplications:\n  - pkg.nope\n"
    )
    err = render_error(checkout)
    assert "unknown package 'nope': applications names it" in str(err)

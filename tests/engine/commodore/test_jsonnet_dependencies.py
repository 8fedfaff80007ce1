"""Components' jsonnet-bundler dependencies (tests/support/commodore_jb_tenant.py): the
catalog against the real Commodore 1.35.1's, whose vendor/ is laid out by the jb
re-enactment of tests/support/jsonnet_bundler.py; the vendor/ tree rollwright builds against
that re-enactment's and against the layout read from jb's source; bad input refused with the
component, the file and the key."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from shared.engine.commodore import vendor
from shared.engine.commodore.repos import Mirrors, RepoError
from shared.engine.commodore.workdir import Workdir
from shared.engine.errors import FleetError
from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.support.commodore import publish, repo_with
from tests.support.commodore_jb_tenant import (
    CLUSTER,
    HOST,
    JbTenant,
    git_dep,
    jsonnetfile,
    lib_remote,
)
from tests.support.commodore_tenant import needs_commodore
from tests.support.gitrepo import git
from tests.support.jsonnet_bundler import jb_install


@pytest.fixture(autouse=True)
def _git_reaches_the_libraries(jb_tenant: JbTenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(jb_tenant.gitconfig))


def render(checkout: Path) -> dict[str, bytes]:
    return Fleet.open(WorkTree(checkout)).layout.render_files(CLUSTER)


@needs_commodore
def test_catalog_equals_commodores(jb_tenant: JbTenant, commodore_jb_run: dict[str, bytes]) -> None:
    theirs = commodore_jb_run
    ours = render(jb_tenant.checkout)
    assert sorted(ours) == sorted(theirs)
    for path, data in theirs.items():
        assert ours[path] == data, f"{path}\ncommodore:\n{data!r}\nrollwright:\n{ours[path]!r}"
    # what the fixture is built for shows in Commodore's own output
    libraries = theirs["manifests/jbdemo/00_libraries.yaml"].decode()
    assert "a: 1.0.0" in libraries and "a_legacy: 1.0.0" in libraries  # lib-b's v2.0.0 lost
    assert "b sees a 1.0.0 and d" in libraries  # lib-b, its own lib-d, transitively
    assert "mono: mono part" in libraries and "mono_full: mono part" in libraries
    assert "alpha: c" in libraries and "helpers: hello jbdemo" in libraries
    assert b"a: 1.0.0" in theirs["manifests/jbother/00_libraries.yaml"]  # jbother's v2.0.0 lost


def workdir_with_components(tmp_path: Path, tenant: JbTenant) -> Workdir:
    """A working directory holding the fixture's two components at v1.0.0, as
    compile_catalog links them."""
    workdir = Workdir(tmp_path / "rollwright")
    workdir.create()
    mirrors = Mirrors()
    for name in ("jbdemo", "jbother"):
        url = publish(tenant.sources[name], tenant.remotes)
        mirror, sha = mirrors.commit(url, "v1.0.0", what=name)
        workdir.link(mirror.tree(sha), workdir.component_dir(name))
    return workdir


def jb_workdir(tmp_path: Path, tenant: JbTenant) -> Path:
    """Commodore's working directory with the same components (checkouts) and the
    jsonnetfile.json Commodore writes, vendored by the jb re-enactment."""
    work = tmp_path / "jb"
    for name in ("jbdemo", "jbother"):
        checkout = work / "dependencies" / name
        shutil.copytree(tenant.sources[name], checkout, ignore=shutil.ignore_patterns(".git"))
    (work / "dependencies" / "lib").mkdir()
    deps = [
        {"source": {"local": {"directory": f"dependencies/{d}"}}}
        for d in ("jbdemo", "jbother", "lib")
    ]
    data = {"version": 1, "dependencies": deps, "legacyImports": True}
    (work / "jsonnetfile.json").write_text(json.dumps(data, indent=4) + "\n")
    jb_install(work, dict(os.environ))
    return work


def vendor_tree(root: Path) -> dict[str, Any]:
    """vendor/ below `root`: files by content, symlinks by where they lead (relative to
    `root`, whether jb wrote them absolute or rollwright relative)."""
    tree: dict[str, Any] = {}
    base = root / "vendor"
    for dirpath, dirnames, filenames in os.walk(base):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(base).as_posix()
            if path.is_symlink():
                target = os.path.normpath(os.path.join(dirpath, os.readlink(path)))
                tree[rel] = ("link", os.path.relpath(target, root))
            elif path.is_file():
                tree[rel] = path.read_bytes()
    return tree


def test_vendor_is_laid_out_as_jb_lays_it_out(jb_tenant: JbTenant, tmp_path: Path) -> None:
    workdir = workdir_with_components(tmp_path, jb_tenant)
    packages = vendor.install(workdir, Mirrors(), ["jbother", "jbdemo"])
    ours = vendor_tree(workdir.root)
    assert ours == vendor_tree(jb_workdir(tmp_path, jb_tenant))
    # the layout read from jb's source, named here
    links = {k: v[1] for k, v in ours.items() if isinstance(v, tuple)}
    assert links == {
        "jbdemo": "dependencies/jbdemo",
        "jbother": "dependencies/jbother",
        "lib": "dependencies/lib",
        "helpers": "dependencies/jbdemo/vendored/helpers",
        "lib-a": f"vendor/{HOST}/acme/lib-a",
        "lib-b": f"vendor/{HOST}/acme/lib-b",
        "lib-d": f"vendor/{HOST}/acme/lib-d",
        "mono": f"vendor/{HOST}/acme/lib-mono/jsonnet/mono",
        "alpha": f"vendor/{HOST}/acme/lib-c",
    }
    files = sorted(k for k, v in ours.items() if isinstance(v, bytes))
    assert files == [
        f"{HOST}/acme/lib-a/a.libsonnet",
        f"{HOST}/acme/lib-b/b.libsonnet",
        f"{HOST}/acme/lib-b/jsonnetfile.json",
        f"{HOST}/acme/lib-c/c.libsonnet",
        f"{HOST}/acme/lib-d/d.libsonnet",
        f"{HOST}/acme/lib-mono/jsonnet/mono/mono.libsonnet",
        f"{HOST}/acme/lib-mono/jsonnet/mono/part.libsonnet",
    ]
    assert ours[f"{HOST}/acme/lib-a/a.libsonnet"] == b"{ version: '1.0.0' }\n"
    # jb's order: Commodore's own, each component's, then their libraries'
    assert [p.name for p in packages] == [
        "jbdemo",
        "jbother",
        "lib",
        f"{HOST}/acme/lib-a",
        f"{HOST}/acme/lib-b",
        f"{HOST}/acme/lib-mono/jsonnet/mono",
        f"{HOST}/acme/lib-c",
        "helpers",
        f"{HOST}/acme/lib-d",
    ]
    v1 = git(jb_tenant.sources["lib-a"], "rev-parse", "v1.0.0^{commit}")
    assert packages[3].commit == v1


# --- bad input ----------------------------------------------------------------------------


def with_component(
    tenant: JbTenant, tmp_path: Path, files: dict[str, str], name: str = "jbdemo"
) -> Path:
    """A copy of the tenant whose cluster takes component `name` from a repository holding
    `files` over the fixture's own."""
    source = tmp_path / "src" / f"component-{name}"
    shutil.copytree(tenant.sources[name], source)
    repo_with(source, files, tag="v9.0.0")
    remotes = tmp_path / "remotes"
    remotes.mkdir(exist_ok=True)
    url = publish(source, remotes)
    checkout = tmp_path / "tenant"
    shutil.copytree(tenant.checkout, checkout, ignore=shutil.ignore_patterns(".git"))
    (checkout / f"{CLUSTER}.yml").write_text(
        f"parameters:\n  components:\n    {name}:\n      url: {url}\n      version: v9.0.0\n"
    )
    return checkout


def library(tenant: JbTenant, name: str, files: dict[str, str]) -> str:
    """A library repository (branch main) at https://git.example.com/acme/<name>.git."""
    publish(repo_with(tenant.remotes.parent / "src" / name, files), tenant.remotes)
    return lib_remote(name)


def render_error(checkout: Path) -> FleetError:
    with pytest.raises(FleetError) as caught:
        render(checkout)
    return caught.value


def test_a_remote_that_cannot_be_fetched_names_the_component_file_and_key(
    jb_tenant: JbTenant, tmp_path: Path
) -> None:
    checkout = with_component(
        jb_tenant,
        tmp_path,
        {"jsonnetfile.json": jsonnetfile(git_dep(lib_remote("no-such-lib"), "main"))},
    )
    err = render_error(checkout)
    assert isinstance(err, RepoError) and err.retryable
    message = str(err)
    assert message.startswith(
        f"component 'jbdemo': jsonnetfile.json: dependencies[0] ({HOST}/acme/no-such-lib): "
        f"cannot fetch https://{HOST}/acme/no-such-lib.git"
    ), message


def test_a_version_that_does_not_exist_is_named(jb_tenant: JbTenant, tmp_path: Path) -> None:
    deps = jsonnetfile(git_dep(lib_remote("lib-c"), "main"), git_dep(lib_remote("lib-a"), "v7"))
    err = render_error(with_component(jb_tenant, tmp_path, {"jsonnetfile.json": deps}))
    assert str(err) == (
        f"component 'jbdemo': jsonnetfile.json: dependencies[1] ({HOST}/acme/lib-a): version "
        f"'v7' is no branch, tag or commit of https://{HOST}/acme/lib-a.git"
    )


def test_invalid_json_names_the_line(jb_tenant: JbTenant, tmp_path: Path) -> None:
    text = '{\n  "version": 1,\n  "dependencies": [\n    {"source": }\n  ]\n}\n'
    err = render_error(with_component(jb_tenant, tmp_path, {"jsonnetfile.json": text}))
    assert str(err).startswith("component 'jbdemo': jsonnetfile.json:4: not valid JSON:")


def test_invalid_json_of_a_library_names_the_library_and_who_needs_it(
    jb_tenant: JbTenant, tmp_path: Path
) -> None:
    remote = library(jb_tenant, "lib-broken", {"jsonnetfile.json": "{\n  nope\n}\n"})
    deps = jsonnetfile(git_dep(remote, "main"))
    err = render_error(with_component(jb_tenant, tmp_path, {"jsonnetfile.json": deps}))
    assert str(err).startswith(
        f"{HOST}/acme/lib-broken (https://{HOST}/acme/lib-broken.git main, required by "
        "component 'jbdemo', jsonnetfile.json dependencies[0]): jsonnetfile.json:2: not valid "
        "JSON"
    ), str(err)


def test_a_missing_subdir_is_named(jb_tenant: JbTenant, tmp_path: Path) -> None:
    deps = jsonnetfile(git_dep(lib_remote("lib-mono"), "v1.0.0", subdir="jsonnet/nothing"))
    err = render_error(with_component(jb_tenant, tmp_path, {"jsonnetfile.json": deps}))
    assert str(err) == (
        "component 'jbdemo': jsonnetfile.json: dependencies[0].source.git.subdir: "
        f"'jsonnet/nothing' is no directory of https://{HOST}/acme/lib-mono.git at v1.0.0"
    )


@pytest.mark.parametrize(
    ("deps", "expected"),
    [
        (  # a legacy name two packages go by
            [
                git_dep(lib_remote("lib-a"), "v1.0.0"),
                git_dep(lib_remote("lib-c"), "main", name="lib-a"),
            ],
            f"{HOST}/acme/lib-c (https://{HOST}/acme/lib-c.git main, required by component "
            f"'jbdemo', jsonnetfile.json dependencies[1]): its legacy name vendor/lib-a is "
            f"already {HOST}/acme/lib-a (https://{HOST}/acme/lib-a.git v1.0.0, required by "
            "component 'jbdemo', jsonnetfile.json dependencies[0])",
        ),
        (  # a legacy name taken by Commodore's own local dependency
            [git_dep(lib_remote("lib-c"), "main", name="jbother")],
            f"{HOST}/acme/lib-c (https://{HOST}/acme/lib-c.git main, required by component "
            "'jbdemo', jsonnetfile.json dependencies[0]): its legacy name vendor/jbother is "
            "already jbother (Commodore's local dependency dependencies/jbother)",
        ),
        (  # a package inside another's directory
            [
                git_dep(lib_remote("lib-mono"), "v1.0.0"),
                git_dep(lib_remote("lib-mono"), "v1.0.0", subdir="jsonnet/mono"),
            ],
            "component 'jbdemo': jsonnetfile.json: dependencies[1] "
            f"({HOST}/acme/lib-mono/jsonnet/mono): vendor/{HOST}/acme/lib-mono/jsonnet/mono "
            f"clashes with vendor/{HOST}/acme/lib-mono of",
        ),
        (  # a local directory named as another component
            [{"source": {"local": {"directory": "vendored/jbother"}}}],
            "component 'jbdemo': jsonnetfile.json: dependencies[0].source.local: "
            "vendor/jbother is already jbother (Commodore's local dependency dependencies/jbother)",
        ),
    ],
    ids=["legacy-name", "legacy-name-of-a-component", "nested-directory", "local-name"],
)
def test_a_name_clash_in_vendor_is_refused(
    jb_tenant: JbTenant, tmp_path: Path, deps: list[dict[str, Any]], expected: str
) -> None:
    files = {"jsonnetfile.json": jsonnetfile(*deps), "vendored/jbother/x.libsonnet": "{}\n"}
    err = render_error(with_component(jb_tenant, tmp_path, files))
    assert str(err).startswith(expected), str(err)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {"jsonnetfile.jsonnet": "{}\n"},
            "component 'jbdemo': jsonnetfile.jsonnet: not supported by the commodore layout",
        ),
        (
            {
                "jsonnetfile.json": jsonnetfile(
                    {"source": {"http": {"url": "https://x.example.com/a"}}, "version": "1"}
                )
            },
            "component 'jbdemo': jsonnetfile.json: dependencies[0].source: 'http': "
            "jsonnet-bundler fetches exactly one 'git' or 'local' source",
        ),
        (
            {"jsonnetfile.json": jsonnetfile(git_dep("file:///srv/git/lib.git", "main"))},
            "component 'jbdemo': jsonnetfile.json: dependencies[0].source.git.remote: "
            "'file:///srv/git/lib.git' is no git remote jsonnet-bundler can parse",
        ),
        (
            {"jsonnetfile.json": jsonnetfile(git_dep(lib_remote("lib-a"), ""))},
            "component 'jbdemo': jsonnetfile.json: dependencies[0].version: missing",
        ),
        (
            {"jsonnetfile.json": jsonnetfile(git_dep(lib_remote("lib-a"), "v1.0.0", sub="x"))},
            "component 'jbdemo': jsonnetfile.json: dependencies[0].sub: not a key "
            "jsonnet-bundler reads",
        ),
        (
            {
                "jsonnetfile.json": jsonnetfile(
                    git_dep(lib_remote("lib-mono"), "v1.0.0", subdir="../x")
                )
            },
            "component 'jbdemo': jsonnetfile.json: dependencies[0].source.git.subdir: '../x' "
            "must be a path inside the repository",
        ),
        (
            {"jsonnetfile.json": jsonnetfile({"source": {"local": {"directory": "../../.."}}})},
            "component 'jbdemo': jsonnetfile.json: dependencies[0].source.local.directory: "
            "'../../..' must be a relative path naming a directory",
        ),
        (
            {"jsonnetfile.json": jsonnetfile({"source": {"local": {"directory": "../../../x"}}})},
            "component 'jbdemo': jsonnetfile.json: dependencies[0].source.local.directory: "
            "'../../../x' refused: it is outside the component's working directory",
        ),
        (
            {"jsonnetfile.json": '{"version": 2, "dependencies": []}\n'},
            "component 'jbdemo': jsonnetfile.json: version: 2 is no jsonnetfile version",
        ),
    ],
    ids=[
        "jsonnetfile.jsonnet",
        "http-source",
        "file-remote",
        "no-version",
        "unknown-key",
        "subdir-out",
        "local-dot-dot",
        "local-outside",
        "file-version",
    ],
)
def test_unsupported_shapes_are_refused_by_file_and_key(
    jb_tenant: JbTenant, tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    err = render_error(with_component(jb_tenant, tmp_path, files))
    assert str(err).startswith(expected), str(err)


def test_a_dependency_cycle_is_refused(jb_tenant: JbTenant, tmp_path: Path) -> None:
    x, y = lib_remote("lib-cycle-x"), lib_remote("lib-cycle-y")
    library(jb_tenant, "lib-cycle-x", {"jsonnetfile.json": jsonnetfile(git_dep(y, "main"))})
    library(jb_tenant, "lib-cycle-y", {"jsonnetfile.json": jsonnetfile(git_dep(x, "main"))})
    deps = jsonnetfile(git_dep(x, "main"))
    err = render_error(with_component(jb_tenant, tmp_path, {"jsonnetfile.json": deps}))
    assert (
        f"jsonnet dependencies form a cycle ({HOST}/acme/lib-cycle-x -> "
        f"{HOST}/acme/lib-cycle-y -> {HOST}/acme/lib-cycle-x)"
    ) in str(err)


def test_a_library_reading_outside_its_package_through_a_link_is_refused(
    jb_tenant: JbTenant, tmp_path: Path
) -> None:
    """The confinement holds for vendored libraries: a link leading out of the library's
    repository is refused as the repository is checked out."""
    source = repo_with(tmp_path / "src" / "lib-link", {"x.libsonnet": "{}\n"})
    os.symlink("/etc/passwd", source / "secret.libsonnet")
    git(source, "add", "-A")
    git(source, "commit", "-qm", "link")
    publish(source, jb_tenant.remotes)
    deps = jsonnetfile(git_dep(lib_remote("lib-link"), "main"))
    err = render_error(with_component(jb_tenant, tmp_path, {"jsonnetfile.json": deps}))
    assert "refused: links must stay inside the repository" in str(err)


def test_export_attributes_outside_github_are_refused(jb_tenant: JbTenant, tmp_path: Path) -> None:
    """jb checks such a repository out, which ignores export-ignore; the cache's trees are
    `git archive`'s, which honours it: the vendored files would differ."""
    remote = library(
        jb_tenant,
        "lib-attributes",
        {
            ".gitattributes": "tests/ export-ignore\n",
            "x.libsonnet": "{}\n",
            "tests/t.jsonnet": "{}\n",
        },
    )
    deps = jsonnetfile(git_dep(remote, "main"))
    err = render_error(with_component(jb_tenant, tmp_path, {"jsonnetfile.json": deps}))
    assert str(err).startswith(
        f"component 'jbdemo': jsonnetfile.json: dependencies[0] ({HOST}/acme/lib-attributes): "
        ".gitattributes sets export-ignore or export-subst"
    ), str(err)


def test_github_versions_resolve_as_ls_remote_lists_them(
    jb_tenant: JbTenant, tmp_path: Path
) -> None:
    """jb resolves a version of an https://github.com/ repository with `git ls-remote --heads
    --tags <version>` (the first ref listed, by name: a branch before a tag, `a/main` before
    `main`) and checks out any other repository's version (a tag before a branch)."""
    twin = repo_with(tmp_path / "src" / "lib-twin", {"twin.libsonnet": "'tag v1'\n"}, tag="v1")
    for branch, text in (("v1", "branch v1"), ("a/main", "branch a/main"), ("main", "main")):
        if branch != "main":
            git(twin, "switch", "-q", "-c", branch, "main")
        else:
            git(twin, "switch", "-q", "main")
        repo_with(twin, {"twin.libsonnet": f"'{text}'\n"})
    remote = publish(twin, jb_tenant.remotes)
    listed = git(tmp_path, "ls-remote", "--heads", "--tags", "--refs", remote, "main")
    assert [line.split("\t")[1] for line in listed.splitlines()] == [
        "refs/heads/a/main",
        "refs/heads/main",
    ]
    deps = jsonnetfile(
        git_dep("https://github.com/acme/lib-twin.git", "v1", name="gh-v1"),
        git_dep(f"https://{HOST}/acme/lib-twin.git", "v1", name="ex-v1"),
    )
    main = """\
{
  '00_twins': {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'twins' },
    data: {
      gh: import 'github.com/acme/lib-twin/twin.libsonnet',
      ex: import 'git.example.com/acme/lib-twin/twin.libsonnet',
    },
  },
}
"""
    files = {"jsonnetfile.json": deps, "component/main.jsonnet": main}
    out = render(with_component(jb_tenant, tmp_path, files))["manifests/jbdemo/00_twins.yaml"]
    # github.com: the branch v1; elsewhere: the tag v1
    assert b"gh: branch v1\n" in out and b"ex: tag v1\n" in out
    deps = jsonnetfile(
        git_dep("https://github.com/acme/lib-twin.git", "v1"),
        git_dep("https://github.com/acme/lib-twin.git", "main"),  # the same package: it wins
    )
    files = {
        "jsonnetfile.json": deps,
        "component/main.jsonnet": main.replace(
            "      ex: import 'git.example.com/acme/lib-twin/twin.libsonnet',\n", ""
        ),
    }
    out = render(with_component(jb_tenant, tmp_path / "2", files))["manifests/jbdemo/00_twins.yaml"]
    assert b"gh: branch a/main\n" in out


def install_for(tmp_path: Path, files: dict[str, str]) -> tuple[list[str], Path]:
    """vendor/ for one component `solo` holding `files`: the packages' names and vendor/."""
    component = tmp_path / "solo"
    for rel, text in files.items():
        (component / rel).parent.mkdir(parents=True, exist_ok=True)
        (component / rel).write_text(text)
    workdir = Workdir(tmp_path / "work")
    workdir.create()
    workdir.link(component, workdir.component_dir("solo"))
    packages = vendor.install(workdir, Mirrors(), ["solo"])
    return [p.name for p in packages], workdir.vendor


def test_a_single_dependency_brings_none_of_its_own(tmp_path: Path) -> None:
    deps = jsonnetfile(git_dep(f"https://{HOST}/acme/lib-b", "main", single=True))
    names, _ = install_for(tmp_path, {"jsonnetfile.json": deps})
    assert names == ["solo", "lib", f"{HOST}/acme/lib-b"]
    deps = jsonnetfile(git_dep(f"https://{HOST}/acme/lib-b", "main"))
    names, _ = install_for(tmp_path / "2", {"jsonnetfile.json": deps})
    assert names == [
        "solo",
        "lib",
        f"{HOST}/acme/lib-b",
        f"{HOST}/acme/lib-a",
        f"{HOST}/acme/lib-d",
    ]


def test_a_local_dependency_of_a_local_dependency_is_relative_to_its_file(
    tmp_path: Path,
) -> None:
    """jb resolves a nested local directory from the file naming it, not from the top."""
    files = {
        "jsonnetfile.json": jsonnetfile({"source": {"local": {"directory": "libs/outer"}}}),
        "libs/outer/jsonnetfile.json": jsonnetfile(
            {"source": {"local": {"directory": "../inner"}}}
        ),
        "libs/outer/o.libsonnet": "{}\n",
        "libs/inner/i.libsonnet": "{}\n",
    }
    names, vendored = install_for(tmp_path, files)
    assert names == ["solo", "lib", "outer", "inner"]
    assert os.readlink(vendored / "inner") == "../dependencies/solo/libs/inner"
    assert (vendored / "inner" / "i.libsonnet").is_file()


def compare_with_jb(tmp_path: Path, components: dict[str, dict[str, str]]) -> dict[str, Any]:
    """vendor/ for `components` (name -> files) by rollwright and by the jb re-enactment,
    which must be the same tree; returned."""
    workdir = Workdir(tmp_path / "rollwright")
    workdir.create()
    work = tmp_path / "jb"
    (work / "dependencies" / "lib").mkdir(parents=True)
    for name, files in components.items():
        for rel, text in files.items():
            for root in (tmp_path / "src" / name, work / "dependencies" / name):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text)
        workdir.link(tmp_path / "src" / name, workdir.component_dir(name))
    vendor.install(workdir, Mirrors(), list(components))
    deps = [
        {"source": {"local": {"directory": f"dependencies/{d}"}}}
        for d in [*sorted(components), "lib"]
    ]
    data = {"version": 1, "dependencies": deps, "legacyImports": True}
    (work / "jsonnetfile.json").write_text(json.dumps(data, indent=4) + "\n")
    jb_install(work, dict(os.environ))
    ours = vendor_tree(workdir.root)
    assert ours == vendor_tree(work)
    return ours


A = f"{HOST}/acme/lib-a/a.libsonnet"


def test_a_components_whole_tree_comes_before_the_next_component(tmp_path: Path) -> None:
    """jb goes depth first by component: lib-a v2.0.0, which `alpha` needs through lib-b,
    wins over the v1.0.0 `beta` asks for directly."""
    tree = compare_with_jb(
        tmp_path,
        {
            "beta": {"jsonnetfile.json": jsonnetfile(git_dep(lib_remote("lib-a"), "v1.0.0"))},
            "alpha": {
                "jsonnetfile.json": jsonnetfile(git_dep(f"https://{HOST}/acme/lib-b", "main"))
            },
        },
    )
    assert tree[A] == b"{ version: '2.0.0' }\n"


def test_within_a_file_the_last_entry_of_a_package_wins(tmp_path: Path) -> None:
    deps = jsonnetfile(
        git_dep(lib_remote("lib-a"), "v1.0.0"),
        git_dep(lib_remote("lib-c"), "main"),
        git_dep(f"git@{HOST}:acme/lib-a.git", "v2.0.0", name="second"),
    )
    tree = compare_with_jb(tmp_path, {"solo": {"jsonnetfile.json": deps}})
    assert tree[A] == b"{ version: '2.0.0' }\n"
    assert tree["second"] == ("link", f"vendor/{HOST}/acme/lib-a")


def test_single_and_nested_local_dependencies_as_jb(tmp_path: Path) -> None:
    files = {
        "jsonnetfile.json": jsonnetfile(
            git_dep(f"https://{HOST}/acme/lib-b", "main", single=True),
            {"source": {"local": {"directory": "libs/outer"}}},
        ),
        "libs/outer/jsonnetfile.json": jsonnetfile(
            {"source": {"local": {"directory": "../inner"}}},
            git_dep(lib_remote("lib-d"), "v1.0.0"),
        ),
        "libs/inner/i.libsonnet": "{}\n",
    }
    tree = compare_with_jb(tmp_path, {"solo": files})
    assert f"{HOST}/acme/lib-d/d.libsonnet" in tree and A not in tree
    assert tree["inner"] == ("link", "dependencies/solo/libs/inner")

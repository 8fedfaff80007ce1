"""A Project Syn tenant whose components have jsonnet-bundler dependencies, as real git
repositories of our own, and its catalog as the real Commodore 1.35.1 compiles it.

The libraries live at `https://git.example.com/acme/<lib>.git` (what jsonnetfile.json names;
jb fetches only https and ssh remotes); git reaches them, and `https://github.com/acme/<lib>`
too, through `url.<file>.insteadOf` in the `gitconfig` the tenant brings, for rollwright's
mirrors and for the jb stand-in alike:

- `lib-a`, tagged v1.0.0 and v2.0.0: `a.libsonnet` says its version;
- `lib-b` (branch main, a version 0 jsonnetfile.json): needs lib-a v2.0.0 and lib-d, and
  imports both by their legacy names;
- `lib-d`: only a dependency of lib-b;
- `lib-mono`: the library is the subdirectory `jsonnet/mono` (fetched by an ssh remote);
- `lib-c`: installed with `name: alpha` (the legacy symlink vendor/alpha).

Component `jbdemo` needs lib-a v1.0.0, lib-b, lib-mono, lib-c and a local directory of its
own, and imports them by full path and by legacy name; component `jbother` needs lib-a
v2.0.0. jb's first wins: every import of lib-a reads v1.0.0."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.commodore import (
    FakeLieutenant,
    compile_with_commodore,
    publish,
    repo_with,
    tree_bytes,
)
from tests.support.commodore_tenant import VAULT
from tests.support.jsonnet_bundler import jb_install

HOST = "git.example.com"
CLUSTER = "c-jb"
TENANT = "t-jb"


def lib_remote(name: str) -> str:
    return f"https://{HOST}/acme/{name}.git"


def jsonnetfile(*deps: dict[str, Any], version: int = 1) -> str:
    data: dict[str, Any] = {"version": version, "dependencies": list(deps)}
    if version == 0:
        data.pop("version")
    else:
        data["legacyImports"] = True
    return json.dumps(data, indent=2) + "\n"


def git_dep(remote: str, version: str, subdir: str = "", **extra: Any) -> dict[str, Any]:
    return {"source": {"git": {"remote": remote, "subdir": subdir}}, "version": version, **extra}


JBDEMO_MAIN = """\
local a = import 'git.example.com/acme/lib-a/a.libsonnet';
local aLegacy = import 'lib-a/a.libsonnet';
local b = import 'lib-b/b.libsonnet';
local bFull = import 'git.example.com/acme/lib-b/b.libsonnet';
local mono = import 'mono/mono.libsonnet';
local monoFull = import 'git.example.com/acme/lib-mono/jsonnet/mono/mono.libsonnet';
local alpha = import 'alpha/c.libsonnet';
local helpers = import 'helpers/helpers.libsonnet';
local kap = import 'lib/kapitan.libjsonnet';
local inv = kap.inventory();
{
  '00_libraries': {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'libraries', namespace: 'syn-jbdemo' },
    data: {
      a: a.version,
      a_legacy: aLegacy.version,
      b: b.describe,
      b_full: bFull.describe,
      mono: mono.name,
      mono_full: monoFull.name,
      alpha: alpha.name,
      helpers: helpers.greet(inv.parameters._instance),
    },
  },
}
"""

JBOTHER_MAIN = """\
local a = import 'lib-a/a.libsonnet';
{
  '00_libraries': {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'other-libraries', namespace: 'syn-jbother' },
    data: { a: a.version },
  },
}
"""


def component_class(name: str) -> str:
    return f"""\
parameters:
  kapitan:
    compile:
      - input_paths:
          - ${{_base_directory}}/component/main.jsonnet
        input_type: jsonnet
        output_path: {name}/
"""


@dataclass
class JbTenant:
    checkout: Path  # the tenant repository (the fleet repository)
    remotes: Path
    gitconfig: Path  # url.<file>.insteadOf for git.example.com
    clusters: dict[str, Any]
    tenants: dict[str, Any]
    sources: dict[str, Path]  # library and component working copies, by name


def write_gitconfig(path: Path, remotes: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'[url "{remotes.as_uri()}/"]\n'
        f"\tinsteadOf = https://{HOST}/acme/\n"
        f"\tinsteadOf = ssh://git@{HOST}/acme/\n"
        "\tinsteadOf = https://github.com/acme/\n"
        '[protocol "file"]\n\tallow = always\n'
    )
    return path


def build_jb_tenant(base: Path) -> JbTenant:
    src, remotes = base / "src", base / "remotes"
    remotes.mkdir(parents=True)
    sources: dict[str, Path] = {}
    lib_a = repo_with(src / "lib-a", {"a.libsonnet": "{ version: '1.0.0' }\n"}, tag="v1.0.0")
    repo_with(lib_a, {"a.libsonnet": "{ version: '2.0.0' }\n"}, tag="v2.0.0")
    sources["lib-a"] = lib_a
    sources["lib-d"] = repo_with(src / "lib-d", {"d.libsonnet": "{ name: 'd' }\n"}, tag="v1.0.0")
    sources["lib-b"] = repo_with(
        src / "lib-b",
        {
            "b.libsonnet": "local a = import 'lib-a/a.libsonnet';\n"
            "local d = import 'lib-d/d.libsonnet';\n"
            "{ describe: 'b sees a ' + a.version + ' and ' + d.name }\n",
            "jsonnetfile.json": json.dumps(
                {
                    "dependencies": [
                        {"name": "lib-a", **git_dep(lib_remote("lib-a"), "v2.0.0")},
                        {"name": "lib-d", **git_dep(f"https://{HOST}/acme/lib-d", "v1.0.0")},
                    ]
                },
                indent=2,
            ),
        },
    )
    sources["lib-mono"] = repo_with(
        src / "lib-mono",
        {
            "README.md": "# mono\n",
            "jsonnet/mono/mono.libsonnet": "{ name: 'mono ' + (import 'part.libsonnet') }\n",
            "jsonnet/mono/part.libsonnet": "'part'\n",
            "jsonnet/other/other.libsonnet": "{}\n",
        },
        tag="v1.0.0",
    )
    sources["lib-c"] = repo_with(src / "lib-c", {"c.libsonnet": "{ name: 'c' }\n"})
    for name in ("lib-a", "lib-b", "lib-c", "lib-d", "lib-mono"):
        publish(sources[name], remotes)
    sources["jbdemo"] = repo_with(
        src / "component-jbdemo",
        {
            "class/defaults.yml": "parameters:\n  jbdemo:\n    namespace: syn-jbdemo\n",
            "class/jbdemo.yml": component_class("jbdemo"),
            "component/main.jsonnet": JBDEMO_MAIN,
            "vendored/helpers/helpers.libsonnet": "{ greet(t): 'hello ' + t }\n",
            "jsonnetfile.json": jsonnetfile(
                git_dep(lib_remote("lib-a"), "v1.0.0"),
                git_dep(f"https://{HOST}/acme/lib-b", "main"),
                git_dep(f"git@{HOST}:acme/lib-mono.git", "v1.0.0", subdir="jsonnet/mono"),
                git_dep(lib_remote("lib-c"), "main", name="alpha"),
                {"source": {"local": {"directory": "vendored/helpers"}}, "version": ""},
            ),
        },
        tag="v1.0.0",
    )
    sources["jbother"] = repo_with(
        src / "component-jbother",
        {
            "class/defaults.yml": "parameters:\n  jbother:\n    namespace: syn-jbother\n",
            "class/jbother.yml": component_class("jbother"),
            "component/main.jsonnet": JBOTHER_MAIN,
            "jsonnetfile.json": jsonnetfile(git_dep(lib_remote("lib-a"), "v2.0.0")),
        },
        tag="v1.0.0",
    )
    urls = {name: publish(sources[name], remotes) for name in ("jbdemo", "jbother")}
    common = f"""\
applications:
  - jbdemo
  - jbother
parameters:
  components:
    jbdemo:
      url: {urls["jbdemo"]}
      version: v1.0.0
    jbother:
      url: {urls["jbother"]}
      version: v1.0.0
{VAULT}"""
    commodore_yml = "classes:\n  - global.common\n  - ${cluster:tenant}.${cluster:name}\n"
    urls["global"] = publish(
        repo_with(src / "global", {"commodore.yml": commodore_yml, "common.yml": common}),
        remotes,
    )
    urls["catalog"] = publish(repo_with(src / "catalog", {"README.md": "# c-jb\n"}), remotes)
    facts = {"distribution": "k3s", "cloud": "local"}
    dynamic = {"kubernetes_version": {"major": "1", "minor": "30"}}
    config = {
        "layout": "commodore",
        "commodore": {
            "global": {"url": urls["global"]},
            "tenant": {"id": TENANT, "displayName": "JB Corp"},
            "clusters": [
                {
                    "id": CLUSTER,
                    "displayName": "Cluster c-jb",
                    "catalogUrl": urls["catalog"],
                    "facts": facts,
                    "dynamicFacts": dynamic,
                }
            ],
        },
    }
    tenant_repo = repo_with(
        src / TENANT,
        {f"{CLUSTER}.yml": "parameters: {}\n", "rollwright.yaml": yaml.safe_dump(config)},
    )
    urls["tenant"] = publish(tenant_repo, remotes)
    clusters = {
        CLUSTER: {
            "id": CLUSTER,
            "tenant": TENANT,
            "displayName": "Cluster c-jb",
            "gitRepo": {"url": urls["catalog"]},
            "facts": facts,
            "dynamicFacts": dynamic,
        }
    }
    tenants = {
        TENANT: {
            "id": TENANT,
            "displayName": "JB Corp",
            "gitRepo": {"url": urls["tenant"]},
            "globalGitRepoURL": urls["global"],
        }
    }
    gitconfig = write_gitconfig(base / "gitconfig", remotes)
    return JbTenant(tenant_repo, remotes, gitconfig, clusters, tenants, sources)


def commodore_jb_catalog(venv: Path, tenant: JbTenant, base: Path) -> dict[str, bytes]:
    """The catalog Commodore compiles for c-jb (manifests/ and refs/). A first run (against
    the fake Lieutenant) clones the repositories and lays out the working directory; its jb,
    the stand-in of tests/support/commodore.py, links only Commodore's local dependencies, so
    Kapitan fails on the first import of a library. Then
    vendor/ is laid out as jb would (tests/support/jsonnet_bundler.py) and Commodore compiles
    again with `--local --no-fetch-dependencies`."""
    home, work = base / "home", base / "work"
    write_gitconfig(home / ".gitconfig", tenant.remotes)
    with FakeLieutenant(tenant.clusters, tenant.tenants) as lieutenant:
        first = compile_with_commodore(venv, work, CLUSTER, lieutenant.url, home)
    # It must have laid out the working directory and stopped in the compile. Which import
    # stops it is not asked: the Jsonnet binding Kapitan calls sometimes garbles the message of
    # a missing import (a UnicodeDecodeError instead of the path), so only the stage is checked.
    output = first.stdout + first.stderr
    assert first.returncode != 0 and "Compiling catalog" in output, (
        f"the first run was to stop at the libraries:\n{first.stdout}\n{first.stderr}"
    )
    assert "Error compiling jb" in output, output
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    env.pop("GIT_CONFIG_GLOBAL", None)
    jb_install(work, env)
    done = compile_with_commodore(venv, work, CLUSTER, "", home, local=True)
    assert done.returncode == 0, f"commodore --local failed:\n{done.stdout}\n{done.stderr}"
    files = {f"manifests/{k}": v for k, v in tree_bytes(work / "catalog/manifests").items()}
    files |= {f"refs/{k}": v for k, v in tree_bytes(work / "catalog/refs").items()}
    return files

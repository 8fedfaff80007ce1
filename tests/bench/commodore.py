"""`--only commodore`: the commodore layout on a generated tenant of 100 clusters × 10
components, rendered by `rollwright render`, against the real Commodore 1.35.1 compiling a few
of the same clusters (when `make commodore-venv` built it).

The tenant: a global repository with a distribution and cloud hierarchy pinning ten
components (each its own git repository: a Namespace, a Deployment, a vaultkv-referencing
Secret and a list of two ConfigMaps from Jsonnet with kube-libsonnet, a Jsonnet filter on
half of them), and a tenant repository with one class per cluster.
"""

from __future__ import annotations

import contextlib
import os
import resource
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from shared.engine.fleet import Fleet
from shared.engine.tree import WorkTree
from tests.bench.common import RenderRun, run_render, section_header
from tests.support.commodore import (
    FakeLieutenant,
    commodore_venv,
    compile_with_commodore,
    publish,
    repo_with,
    tree_bytes,
)

MARKER = "## commodore layout"
CLUSTERS = 100
COMPONENTS = 10
COMMODORE_SAMPLE = 3

DEFAULTS = """\
parameters:
  {key}:
    =_metadata: {{}}
    namespace: syn-{name}
    replicas: 1
    password: '?{{vaultkv:${{cluster:tenant}}/${{cluster:name}}/{name}/password}}'
"""

CLASS = """\
parameters:
  kapitan:
    compile:
      - input_paths:
          - ${{_base_directory}}/component/main.jsonnet
        input_type: jsonnet
        output_path: {name}/
  commodore:
    postprocess:
      filters:
        - type: jsonnet
          path: {name}
          filter: postprocess/label.jsonnet
          enabled: {filtered}
"""

MAIN = """\
local kap = import 'lib/kapitan.libjsonnet';
local kube = import 'lib/kube.libjsonnet';
local inv = kap.inventory();
local params = inv.parameters['{key}'];
{{
  '00_namespace': kube.Namespace(params.namespace),
  '10_deployment': kube.Deployment('{name}') {{
    metadata+: {{ namespace: params.namespace }},
    spec+: {{
      replicas: params.replicas,
      template+: {{ spec+: {{ containers_+: {{
        app: kube.Container('app') {{ image: 'registry.example.invalid/{name}:1.0' }},
      }} }} }},
    }},
  }},
  '20_secret': kube.Secret('{name}') {{
    metadata+: {{ namespace: params.namespace }},
    stringData: {{ password: params.password }},
  }},
  '30_configmaps': [
    kube.ConfigMap('{name}-%d' % i) {{
      metadata+: {{ namespace: params.namespace }},
      data: {{
        cluster: inv.parameters.cluster.name,
        distribution: inv.parameters.facts.distribution,
      }},
    }}
    for i in [1, 2]
  ],
}}
"""

FILTER = """\
local com = import 'lib/commodore.libjsonnet';
local file = std.extVar('output_path') + '/00_namespace.yaml';
{ '00_namespace': com.yaml_load(file) { metadata+: { labels+: { filtered: 'true' } } } }
"""

VAULT = """\
  kapitan:
    secrets:
      vaultkv:
        VAULT_ADDR: https://vault.example.invalid
        auth: token
        engine: kv-v2
        mount: clusters/kv
"""


def generate(base: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """The tenant checkout, and Lieutenant's cluster and tenant answers."""
    src, remotes = base / "src", base / "remotes"
    remotes.mkdir(parents=True)
    names = [f"comp{i:02d}" for i in range(COMPONENTS)]
    urls = {}
    for index, name in enumerate(names):
        key = name
        repo = repo_with(
            src / f"component-{name}",
            {
                "class/defaults.yml": DEFAULTS.format(name=name, key=key),
                "class/" + f"{name}.yml": CLASS.format(name=name, filtered=str(index % 2 == 0)),
                "component/main.jsonnet": MAIN.format(name=name, key=key),
                "postprocess/label.jsonnet": FILTER,
            },
            tag="v1.0.0",
        )
        urls[name] = publish(repo, remotes)
    components = "".join(f"    {n}:\n      url: {urls[n]}\n      version: v1.0.0\n" for n in names)
    common = (
        "applications:\n"
        + "".join(f"  - {n}\n" for n in names)
        + f"parameters:\n  components:\n{components}{VAULT}"
    )
    hierarchy = {
        "commodore.yml": "classes:\n  - global.common\n"
        "  - global.distribution.${facts:distribution}\n"
        "  - global.cloud.${facts:cloud}\n  - ${cluster:tenant}.${cluster:name}\n",
        "common.yml": common,
    }
    for distribution in ("k3s", "openshift4"):
        hierarchy[f"distribution/{distribution}.yml"] = (
            f"parameters:\n  comp00:\n    replicas: {2 if distribution == 'k3s' else 3}\n"
        )
    for cloud in ("cloudscale", "exoscale"):
        hierarchy[f"cloud/{cloud}.yml"] = f"parameters:\n  comp01:\n    namespace: {cloud}-one\n"
    global_url = publish(repo_with(src / "global", hierarchy), remotes)
    # One catalog repository for every cluster: Commodore clones it, nothing is pushed.
    catalog_url = publish(repo_with(src / "catalog", {"README.md": "# catalog\n"}), remotes)
    clusters: dict[str, Any] = {}
    tenant_files: dict[str, str] = {}
    for c in range(CLUSTERS):
        cid = f"c-{c:03d}"
        clusters[cid] = {
            "id": cid,
            "tenant": "t-bench",
            "displayName": f"Cluster {c}",
            "gitRepo": {"url": catalog_url},
            "facts": {
                "distribution": ("k3s", "openshift4")[c % 2],
                "cloud": ("cloudscale", "exoscale")[c // 2 % 2],
            },
            "dynamicFacts": {},
        }
        tenant_files[f"{cid}.yml"] = f"parameters:\n  comp02:\n    replicas: {1 + c % 4}\n"
    config = {
        "layout": "commodore",
        "commodore": {
            "global": {"url": global_url},
            "tenant": {"id": "t-bench", "displayName": "Bench"},
            "clusters": [
                {
                    "id": cid,
                    "displayName": body["displayName"],
                    "catalogUrl": body["gitRepo"]["url"],
                    "facts": body["facts"],
                }
                for cid, body in clusters.items()
            ],
        },
    }
    tenant_files["rollwright.yaml"] = yaml.safe_dump(config)
    checkout = repo_with(src / "t-bench", tenant_files)
    tenants = {
        "t-bench": {
            "id": "t-bench",
            "displayName": "Bench",
            "gitRepo": {"url": publish(checkout, remotes)},
            "globalGitRepoURL": global_url,
        }
    }
    return checkout, clusters, tenants


def _commodore(base: Path, clusters: dict[str, Any], tenants: dict[str, Any]) -> dict[str, Any]:
    """The real Commodore on the first clusters: seconds each, and their catalogs."""
    venv = commodore_venv()
    if venv is None:
        return {}
    seconds: list[float] = []
    catalogs: dict[str, dict[str, bytes]] = {}
    with FakeLieutenant(clusters, tenants) as api:
        for cid in sorted(clusters)[:COMMODORE_SAMPLE]:
            work = base / "commodore" / cid
            start = time.perf_counter()
            done = compile_with_commodore(venv, work, cid, api.url, base / "home")
            seconds.append(time.perf_counter() - start)
            assert done.returncode == 0, done.stderr
            catalogs[cid] = {
                f"manifests/{k}": v for k, v in tree_bytes(work / "catalog/manifests").items()
            } | {f"refs/{k}": v for k, v in tree_bytes(work / "catalog/refs").items()}
    return {"seconds": seconds, "catalogs": catalogs}


@contextlib.contextmanager
def _cache(work: Path) -> Iterator[None]:
    """rollwright's git cache in `work`: the first render starts from an empty one."""
    previous = os.environ.get("ROLLWRIGHT_CACHE_DIR")
    os.environ["ROLLWRIGHT_CACHE_DIR"] = str(work / "cache")
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("ROLLWRIGHT_CACHE_DIR", None)
        else:
            os.environ["ROLLWRIGHT_CACHE_DIR"] = previous


def measure(work: Path) -> dict[str, Any]:
    checkout, clusters, tenants = generate(work / "fleet")
    load_before = os.getloadavg()[0]
    jobs = os.cpu_count() or 1
    runs: dict[str, RenderRun] = {}
    largest: dict[str, float] = {}
    with _cache(work):
        for name, out, count in (
            ("cold", "out-cold", jobs),
            ("default", "out", jobs),
            ("one", "out-1", 1),
        ):
            runs[name] = run_render(checkout, work / out, count)
            # the largest single process so far (the sum over processes counts every git too)
            largest[name] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    files = sorted(p for p in (work / "out").rglob("*") if p.is_file())
    commodore = _commodore(work, clusters, tenants)
    equal = None
    if commodore:
        # The plaintext files (`render` writes Secrets' data hashed without --reveal).
        layout = Fleet.open(WorkTree(checkout)).layout
        with _cache(work):
            equal = all(
                layout.render_files(cid) == catalog
                for cid, catalog in commodore["catalogs"].items()
            )
    return {
        "files": len(files),
        "jobs": jobs,
        "runs": runs,
        "largest": largest,
        "commodore": commodore.get("seconds"),
        "equal": equal,
        "load": (load_before, os.getloadavg()[0]),
    }


def report(found: dict[str, Any]) -> str:
    jobs = found["jobs"]
    runs: dict[str, RenderRun] = found["runs"]
    where = {
        "cold": f"`--jobs {jobs}` (the default), empty git cache (clones 11 repositories)",
        "default": f"`--jobs {jobs}` (the default), warm git cache",
        "one": "`--jobs 1`, warm git cache",
    }
    rows = []
    for name, run in runs.items():
        rows.append(
            (
                f"{CLUSTERS} clusters × {COMPONENTS} components, {where[name]}",
                f"{run.seconds:.1f} s ({run.seconds / CLUSTERS * 1000:.0f} ms a cluster; CPU "
                f"{run.user:.1f} s user, {run.system:.1f} s system; largest process "
                f"{found['largest'][name]:.0f} MiB)",
            )
        )
    seconds = found["commodore"]
    if seconds:
        rows.append(
            (
                f"the real Commodore 1.35.1, `catalog compile` of {len(seconds)} of the clusters "
                "(fake Lieutenant on 127.0.0.1, file:// remotes), one after another",
                f"median {statistics.median(seconds):.2f} s a cluster (max {max(seconds):.2f} s); "
                f"catalogs byte-equal to rollwright's: {'yes' if found['equal'] else 'NO'}",
            )
        )
    else:
        rows.append(("the real Commodore 1.35.1", "not measured: `make commodore-venv` first"))
    table = "\n".join(f"| {a} | {b} |" for a, b in rows)
    load = found["load"]
    header = section_header("commodore")
    return f"""{MARKER}

{header}- Load: 1-minute load average {load[0]:.1f} before, {load[1]:.1f} after (the machine
  is shared: other processes' work lowers every rate measured here)

Generated Project Syn tenant: a global repository (distribution and cloud hierarchy) pinning
{COMPONENTS} components, each its own git repository (Jsonnet with kube-libsonnet: a Namespace,
a Deployment, a Secret with a vaultkv reference, two ConfigMaps as one multi-document file;
a Jsonnet postprocessing filter on half of them), and {CLUSTERS} clusters, one class each.
`rollwright render` compiles every cluster's catalog ({found["files"]} files): wall clock of
the whole command (process start, fetching, inventories, Jsonnet, filters, writing); CPU of
the command and its children (git included); the largest single process's peak RSS
(getrusage; the cold run is the first, so later rows show the largest so far).

| measure | result |
|---|---|
{table}
"""


def run(work: Path) -> str:
    return report(measure(work))

"""The commodore layout's test tenant, a Project Syn tenant of our own as real git
repositories: a global repository with a distribution and cloud hierarchy, a tenant repository
with three clusters, two components (`demo` at v1.0.0 and v2.0.0, `extra` with a library), and
a catalog repository per cluster; the same clusters as Lieutenant would answer for them and
in the tenant's rollwright.yaml; the catalogs the real Commodore compiles from it.

What the clusters exercise: a configuration package (c-three), component instances
(`demo as demo-two`; `demo as demo-next` at a version of its own), hierarchy precedence
(component defaults < global < distribution < cloud < tenant < cluster), dict merge and list
append, `~` (override, removal from `applications`) and `=` (constants), a relative class, an
escaped `\\${}`, facts and dynamic facts, a global version pin with a per-cluster override,
`_base_directory` and `_instance`, list outputs, the builtin `helm_namespace` and a Jsonnet
filter switched per cluster, and vaultkv references."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.commodore import (
    COMMODORE_VERSION,
    FakeLieutenant,
    commodore_venv,
    compile_with_commodore,
    publish,
    repo_with,
    tree_bytes,
)

VAULT = """\
  kapitan:
    secrets:
      vaultkv:
        VAULT_ADDR: https://vault.example.invalid
        VAULT_SKIP_VERIFY: 'false'
        auth: token
        engine: kv-v2
        mount: clusters/kv
"""

DEMO_DEFAULTS = """\
parameters:
  demo:
    =_metadata:
      multi_instance: true
      multi_version: true
    namespace: syn-demo
    replicas: 1
    label_filter: true
    labels:
      app: demo
      level: defaults
    args:
      - --from-defaults
    password: changeme
    literal: plain
    =owner_team: platform
    distribution: ${facts:distribution}
    kubernetes: ${dynamic_facts:kubernetes_version:major}.${dynamic_facts:kubernetes_version:minor}
"""

DEMO_CLASS = """\
parameters:
  kapitan:
    compile:
      - input_paths:
          - ${_base_directory}/component/main.jsonnet
        input_type: jsonnet
        output_path: ${_instance}/
  commodore:
    postprocess:
      filters:
        - type: jsonnet
          path: ${_instance}
          filter: postprocess/add-label.jsonnet
          enabled: ${demo:label_filter}
          filterargs:
            label_value: postprocessed
"""

DEMO_MAIN = """\
local kap = import 'lib/kapitan.libjsonnet';
local kube = import 'lib/kube.libjsonnet';
local inv = kap.inventory();
local params = inv.parameters.demo;
local cm(i) = kube.ConfigMap('demo-%d' % i) {
  metadata+: { namespace: params.namespace, labels+: params.labels },
  data: {
    instance: inv.parameters._instance,
    args: std.join(' ', params.args),
    literal: params.literal,
    distribution: params.distribution,
    kubernetes: params.kubernetes,
    owner: params.owner_team,
    multiline: 'first line\\nsecond line\\n',
    trailing: 'no trailing newline\\nend',
    spaces: 'trailing spaces  \\nnext',
    long: std.join(' ', ['a long value the YAML dumper folds at eighty columns'] + params.args),
    unicode: 'caf\u00e9 \u2713',
    yes: 'on',
    zero: '0123',
  },
  // not a ConfigMap field kube-libsonnet checks: values of every JSON type
  values: {
    nothing: null,
    empty: {},
    list: [[1, 2], { b: 1, a: 2 }, []],
    number: 1.5,
    base: std.endsWith(inv.parameters._base_directory, '/dependencies/demo'),
  },
};
{
  '00_namespace': kube.Namespace(params.namespace),
  '10_secret': kube.Secret('demo') {
    metadata+: { namespace: params.namespace },
    stringData: { password: params.password },
  },
  '20_configmaps': [cm(i) for i in std.range(1, params.replicas)],
  '30_nothing': {},
}
"""

DEMO_MAIN_V2 = DEMO_MAIN.replace(
    "  '30_nothing': {},\n",
    "  '30_nothing': {},\n  '40_version': kube.ConfigMap('demo-version') { data: { v: '2' } },\n",
)

DEMO_FILTER = """\
local com = import 'lib/commodore.libjsonnet';
local inv = com.inventory();
local file = std.extVar('output_path') + '/00_namespace.yaml';
local ns = com.yaml_load(file);
{
  '00_namespace': ns {
    metadata+: {
      labels+: {
        postprocessed: std.extVar('label_value'),
        instance: inv.parameters._instance,
      },
    },
  },
}
"""

EXTRA_DEFAULTS = """\
parameters:
  extra:
    =_metadata: {}
    namespace: syn-extra
    namespace_filter: true
"""

EXTRA_CLASS = """\
parameters:
  kapitan:
    compile:
      - input_paths:
          - ${_base_directory}/component/main.jsonnet
        input_type: jsonnet
        output_path: extra/chart/
  commodore:
    postprocess:
      filters:
        - type: builtin
          filter: helm_namespace
          path: extra/chart
          enabled: ${extra:namespace_filter}
          filterargs:
            namespace: ${extra:namespace}
            create_namespace: true
            exclude_objects:
              - kind: ClusterRole
                name: extra-reader
"""

EXTRA_MAIN = """\
local images = import 'lib/extra.libsonnet';
{
  deployment: {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'extra' },
    spec: { replicas: 1, template: { spec: {
      containers: [{ name: 'extra', image: images.extra }],
    } } },
  },
  rbac: [
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole',
      metadata: { name: 'extra-reader' }, rules: [] },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'extra' } },
  ],
}
"""

# A configuration package: its classes are `monitoring.*` (the repository's classes/ folder).
PACKAGE_COMMON = """\
parameters:
  demo:
    args:
      - --from-package
    labels:
      package: monitoring
"""

GLOBAL_FILES = {
    "commodore.yml": """\
classes:
  - global.common
  - global.distribution.${facts:distribution}
  - global.cloud.${facts:cloud}
  - ${cluster:tenant}.${cluster:name}
""",
    "distribution/k3s.yml": """\
parameters:
  demo:
    labels:
      level: distribution
      distribution: k3s
    args:
      - --k3s
""",
    "distribution/openshift4.yml": """\
parameters:
  demo:
    labels:
      level: distribution
      distribution: openshift4
    ~args:
      - --only-openshift
""",
    "cloud/local.yml": """\
parameters:
  demo:
    labels:
      level: cloud
      cloud: local
""",
    "cloud/cloudscale.yml": """\
parameters:
  demo:
    labels:
      level: cloud
      region: ${facts:region}
""",
}

TENANT_FILES = {
    "common.yml": """\
parameters:
  demo:
    namespace: acme-demo
    labels:
      level: tenant
      tenant: ${cluster:tenant}
""",
    "c-one.yml": """\
classes:
  - .common
applications:
  - demo as demo-two
parameters:
  demo_two:
    namespace: second-demo
    label_filter: false
    password: '?{vaultkv:${cluster:tenant}/${cluster:name}/demo-two/password}'
  demo:
    replicas: 2
    labels:
      level: cluster
    password: '?{vaultkv:${cluster:tenant}/${cluster:name}/demo/password}'
    literal: '\\${escaped:reference}'
""",
    "c-two.yml": """\
classes:
  - .common
applications:
  - ~extra
parameters:
  components:
    demo:
      version: v2.0.0
  demo:
    label_filter: false
    ~labels:
      only: cluster
    password: '?{vaultkv:${cluster:tenant}/${cluster:name}/demo/other}'
""",
    "c-three.yml": """\
classes:
  - .common
  - monitoring.common
applications:
  - demo as demo-next
  - pkg.monitoring
parameters:
  components:
    demo-next:
      version: v2.0.0
  demo_next:
    replicas: 3
  demo:
    args:
      - --three
  extra:
    namespace_filter: false
    namespace: three-extra
""",
}


@dataclass
class Tenant:
    """The fixture tenant: its checkout (the fleet repo), Lieutenant's answers, the URLs."""

    checkout: Path
    remotes: Path
    clusters: dict[str, Any]  # Lieutenant's GET /clusters/<id> bodies
    tenants: dict[str, Any]  # Lieutenant's GET /tenants/<id> bodies
    urls: dict[str, str]


CLUSTERS = {
    "c-one": {
        "facts": {"distribution": "k3s", "cloud": "local"},
        "dynamicFacts": {"kubernetes_version": {"major": "1", "minor": "30"}},
    },
    "c-two": {
        "facts": {"distribution": "openshift4", "cloud": "cloudscale", "region": "rma"},
        "dynamicFacts": {"kubernetes_version": {"major": "1", "minor": "29"}},
    },
    "c-three": {
        "facts": {"distribution": "k3s", "cloud": "cloudscale", "region": "lpg"},
        "dynamicFacts": {"kubernetes_version": {"major": "1", "minor": "31"}},
    },
}


def build_tenant(base: Path) -> Tenant:
    src, remotes = base / "src", base / "remotes"
    remotes.mkdir(parents=True)
    demo = repo_with(
        src / "component-demo",
        {
            "class/defaults.yml": DEMO_DEFAULTS,
            "class/demo.yml": DEMO_CLASS,
            "component/main.jsonnet": DEMO_MAIN,
            "postprocess/add-label.jsonnet": DEMO_FILTER,
        },
        tag="v1.0.0",
    )
    repo_with(demo, {"component/main.jsonnet": DEMO_MAIN_V2}, tag="v2.0.0")
    extra = repo_with(
        src / "component-extra",
        {
            "class/defaults.yml": EXTRA_DEFAULTS,
            "class/extra.yml": EXTRA_CLASS,
            "component/main.jsonnet": EXTRA_MAIN,
            "lib/extra.libsonnet": "{ extra: 'registry.example.invalid/extra:1.0' }\n",
        },
        tag="v1.0.0",
    )
    monitoring = repo_with(
        src / "package-monitoring",
        {"classes/common.yml": PACKAGE_COMMON, "README.md": "# monitoring\n"},
        tag="v1.0.0",
    )
    urls = {
        "demo": publish(demo, remotes),
        "extra": publish(extra, remotes),
        "monitoring": publish(monitoring, remotes),
    }
    common = f"""\
applications:
  - demo
  - extra
parameters:
  packages:
    monitoring:
      url: {urls["monitoring"]}
      version: v1.0.0
      path: classes
  components:
    demo:
      url: {urls["demo"]}
      version: v1.0.0
    extra:
      url: {urls["extra"]}
      version: v1.0.0
{VAULT}  demo:
    labels:
      level: global
      owner: platform
    args:
      - --from-global
"""
    urls["global"] = publish(
        repo_with(src / "global", {**GLOBAL_FILES, "common.yml": common}), remotes
    )
    for cluster in CLUSTERS:
        urls[f"catalog-{cluster}"] = publish(
            repo_with(src / f"catalog-{cluster}", {"README.md": f"# {cluster}\n"}), remotes
        )
    clusters = {
        cid: {
            "id": cid,
            "tenant": "t-acme",
            "displayName": f"Cluster {cid}",
            "gitRepo": {"url": urls[f"catalog-{cid}"]},
            **facts,
        }
        for cid, facts in CLUSTERS.items()
    }
    config = {
        "layout": "commodore",
        "commodore": {
            "global": {"url": urls["global"]},
            "tenant": {"id": "t-acme", "displayName": "Acme Corp"},
            "clusters": [
                {
                    "id": cid,
                    "displayName": body["displayName"],
                    "catalogUrl": body["gitRepo"]["url"],
                    "facts": body["facts"],
                    "dynamicFacts": body["dynamicFacts"],
                }
                for cid, body in clusters.items()
            ],
        },
    }
    tenant_repo = repo_with(
        src / "t-acme",
        {**TENANT_FILES, "rollwright.yaml": yaml.safe_dump(config, sort_keys=False)},
    )
    urls["tenant"] = publish(tenant_repo, remotes)
    tenants = {
        "t-acme": {
            "id": "t-acme",
            "displayName": "Acme Corp",
            "gitRepo": {"url": urls["tenant"]},
            "globalGitRepoURL": urls["global"],
        }
    }
    return Tenant(tenant_repo, remotes, clusters, tenants, urls)


VENV = commodore_venv()
if VENV is None:
    warnings.warn(
        f"THE REAL COMMODORE {COMMODORE_VERSION} IS MISSING: the differential tests of the "
        "commodore layout are skipped; run `make commodore-venv`",
        stacklevel=1,
    )
needs_commodore = pytest.mark.skipif(
    VENV is None,
    reason=f"the real Commodore {COMMODORE_VERSION} is missing: run `make commodore-venv` "
    "(make test builds it)",
)


def commodore_catalogs(tenant: Tenant, base: Path) -> dict[str, dict[str, bytes]]:
    """Each cluster's catalog as Commodore compiles it: manifests/ and refs/ files."""
    assert VENV is not None
    catalogs: dict[str, dict[str, bytes]] = {}
    with FakeLieutenant(tenant.clusters, tenant.tenants) as lieutenant:
        for cluster in CLUSTERS:
            work = base / cluster
            done = compile_with_commodore(VENV, work, cluster, lieutenant.url, base / "home")
            assert done.returncode == 0, f"commodore failed for {cluster}:\n{done.stderr}"
            files = {f"manifests/{k}": v for k, v in tree_bytes(work / "catalog/manifests").items()}
            files |= {f"refs/{k}": v for k, v in tree_bytes(work / "catalog/refs").items()}
            catalogs[cluster] = files
    return catalogs

"""The atlas layout: discovery, the ten values levels, naming, labels and namespaces.

Values are asserted through the real Helm engine: the echo chart writes the `.Values` it saw
into a ConfigMap, which `echo()` reads back from the rendered files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.engine.errors import FleetError
from shared.engine.secrets import sops
from tests.support.age import AgeKey, encrypt_yaml, generate_key
from tests.support.atlas import echo, layout, make_fleet, one_app

# --- discovery -------------------------------------------------------------------------------


def test_roots_are_leaf_clusters_with_groups_and_standalone(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            "deployments/apps/web/deployment.yaml": one_app(),
            "deployments/staging/apps/tools/deployment.yaml": one_app(),
            "deployments/staging/cluster-a/apps/.keep": "",
            "deployments/staging/cluster-b/apps/x/deployment.yaml": one_app(),
            "deployments/eu/prod/p1/apps/.keep": "",
            "deployments/standalone/apps/.keep": "",
            # a directory without apps/ below is neither a group nor a cluster
            "deployments/docs/README.md": "notes",
        },
    )
    assert layout(base).roots() == [
        "eu/prod/p1",
        "staging/cluster-a",
        "staging/cluster-b",
        "standalone",
    ]


def test_only_global_apps_means_no_roots(tmp_path: Path) -> None:
    base = make_fleet(tmp_path, {"deployments/apps/web/deployment.yaml": one_app()})
    assert layout(base).roots() == []


def test_duplicate_leaf_names_fail_naming_both_paths(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {"deployments/eu/edge/apps/.keep": "", "deployments/us/edge/apps/.keep": ""},
    )
    with pytest.raises(FleetError) as caught:
        layout(base).roots()
    assert "deployments/eu/edge" in str(caught.value)
    assert "deployments/us/edge" in str(caught.value)
    assert "duplicate cluster name 'edge'" in str(caught.value)


def test_group_with_apps_is_not_a_root_but_its_apps_reach_its_clusters(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            "deployments/g/apps/groupwide/deployment.yaml": one_app(),
            "deployments/g/c/apps/.keep": "",
        },
    )
    lay = layout(base)
    assert lay.roots() == ["g/c"]
    assert [r.id for r in lay.releases("g/c")] == ["groupwide/echo"]


def test_most_specific_deployment_wins_wholesale(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            "deployments/apps/d/deployment.yaml": one_app(variant="global"),
            "deployments/apps/d/values.yaml": {"fromGlobalDir": True, "who": "global"},
            "deployments/g/apps/d/deployment.yaml": one_app(variant="group"),
            "deployments/g/apps/d/values.yaml": {"who": "group"},
            "deployments/g/c/apps/d/deployment.yaml": one_app(variant="cluster"),
            "deployments/g/c/apps/d/values.yaml": {"who": "cluster"},
            "deployments/g/other/apps/.keep": "",
            "deployments/solo/apps/.keep": "",
        },
    )
    lay = layout(base)
    seen = {root: echo(base, root) for root in ("g/c", "g/other", "solo")}
    assert {r: v["who"] for r, v in seen.items()} == {
        "g/c": "cluster",
        "g/other": "group",
        "solo": "global",
    }
    assert "fromGlobalDir" not in seen["g/c"] and "fromGlobalDir" not in seen["g/other"]
    assert seen["solo"]["fromGlobalDir"] is True
    assert lay.releases("g/c")[0].labels["variant"] == "cluster"
    assert seen["g/c"]["atlas"]["deployment"]["deploymentPath"] == f"{DEP}/deployment.yaml"


NESTED = {
    "deployments/eu/group.values.yaml": {"who": "outer", "outerOnly": 1},
    "deployments/eu/apps/outer/deployment.yaml": one_app(),
    "deployments/eu/prod/group.values.yaml": {"who": "inner"},
    "deployments/eu/prod/p1/apps/d/deployment.yaml": one_app(),
}


def test_nested_groups_read_the_parent_directory_only_as_atlas_does(tmp_path: Path) -> None:
    # ATLAS's group is `dir cluster`: eu/prod's values and apps, not eu's.
    base = make_fleet(tmp_path, NESTED)
    values = echo(base, "eu/prod/p1")
    assert values["who"] == "inner" and "outerOnly" not in values
    assert [r.id for r in layout(base).releases("eu/prod/p1")] == ["d/echo"]
    assert values["atlas"]["deployment"]["clusterGroup"] == "eu/prod"
    assert values["atlas"]["cluster"] == {"id": "eu/prod/p1", "name": "p1", "group": "eu/prod"}


def test_nested_groups_all_levels_when_rollwright_yaml_asks(tmp_path: Path) -> None:
    base = make_fleet(tmp_path, {**NESTED, "rollwright.yaml": {"atlas": {"groupValues": "all"}}})
    values = echo(base, "eu/prod/p1", "d/ConfigMap_echo-values.yaml")
    assert (values["who"], values["outerOnly"]) == ("inner", 1)
    assert [r.id for r in layout(base).releases("eu/prod/p1")] == ["d/echo", "outer/echo"]


# --- the ten levels ----------------------------------------------------------------------------

ROOT = "g/c"
DEP = "deployments/g/c/apps/d"
PLAIN_LEVELS = ["chart", "template", "instance", "global", "group", "cluster", "deployment"]


def level_files(
    upto: str, levels: list[str], secret: dict[str, str] | None = None
) -> dict[str, Any]:
    """Files that set `level` at every level up to and including `upto`."""
    active = levels[: levels.index(upto) + 1]
    instance: dict[str, Any] = {"template": "echo"}
    release: dict[str, Any] = {"name": "echo", "chart": "./chart"}
    files: dict[str, Any] = {f"{DEP}/deployment.yaml": {"apps": [instance]}}
    if "template" in active:
        release["values"] = ["values.yaml"]
        files["templates/echo/values.yaml"] = {"level": "template"}
    if "instance" in active:
        instance["values"] = {"level": "instance"}
    if "template-secrets" in active:
        release["secrets"] = ["secrets.sops.yaml"]
        files["templates/echo/secrets.sops.yaml"] = (secret or {})["template-secrets"]
    if "instance-secrets" in active:
        instance["secrets"] = ["secrets.sops.yaml"]
        files[f"{DEP}/secrets.sops.yaml"] = (secret or {})["instance-secrets"]
    if "global" in active:
        files["deployments/global.values.yaml"] = {"level": "global"}
    if "group" in active:
        files["deployments/g/group.values.yaml"] = {"level": "group"}
    if "cluster" in active:
        files["deployments/g/c/cluster.values.yaml"] = {"level": "cluster"}
    if "deployment" in active:
        files[f"{DEP}/values.yaml"] = {"level": "deployment"}
    files["templates/echo/helmfile.yaml.gotmpl"] = {"releases": [release]}
    return files


@pytest.mark.parametrize("upto", PLAIN_LEVELS)
def test_each_plain_level_beats_every_level_below_it(tmp_path: Path, upto: str) -> None:
    base = make_fleet(tmp_path, level_files(upto, PLAIN_LEVELS))
    assert echo(base, ROOT)["level"] == upto


@pytest.fixture
def age_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgeKey:
    """A throwaway age key as the only key sops can use."""
    for name in ("SOPS_AGE_KEY", "SOPS_AGE_KEY_CMD", "SOPS_AGE_SSH_PRIVATE_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    key = generate_key(tmp_path / "keys")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(key.key_file))
    sops.clear_cache()
    return key


ALL_LEVELS = [
    "chart",
    "template",
    "instance",
    "template-secrets",
    "instance-secrets",
    "global",
    "group",
    "cluster",
    "deployment",
]


def test_secret_levels_sit_between_instance_values_and_the_hierarchy(
    tmp_path: Path, age_key: AgeKey
) -> None:
    secret = {
        level: encrypt_yaml({"level": level, f"only-{level}": level}, [age_key.recipient])
        for level in ("template-secrets", "instance-secrets")
    }
    for upto in ALL_LEVELS:
        base = make_fleet(tmp_path / upto, level_files(upto, ALL_LEVELS, secret))
        assert echo(base, ROOT)["level"] == upto, upto
    # the full stack: every layer present, secrets flagged by origin
    lay = layout(tmp_path / "deployment")
    layers = lay.layers(ROOT, None)
    assert [layer.level for layer in layers] == [*ALL_LEVELS, "atlas"]
    assert [layer.source for layer in layers if layer.secret] == [
        "templates/echo/secrets.sops.yaml",
        f"{DEP}/secrets.sops.yaml",
    ]
    values = lay.values(ROOT, None)
    assert values["only-template-secrets"] == "template-secrets"
    assert values["only-instance-secrets"] == "instance-secrets"


@pytest.mark.parametrize(
    ("directory", "stem"),
    [
        ("deployments", "global.values"),
        ("deployments/g", "group.values"),
        ("deployments/g/c", "cluster.values"),
        (DEP, "values"),
    ],
)
def test_within_a_level_gotmpl_beats_yaml(tmp_path: Path, directory: str, stem: str) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(),
            f"{directory}/{stem}.yaml": {"kind": "yaml", "onlyYaml": 1},
            f"{directory}/{stem}.yaml.gotmpl": "kind: gotmpl\nsawYaml: {{ .Values.onlyYaml }}\n",
        },
    )
    values = echo(base, ROOT)
    assert (values["kind"], values["onlyYaml"], values["sawYaml"]) == ("gotmpl", 1, 1)


def test_within_a_level_sops_is_lowest(tmp_path: Path, age_key: AgeKey) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(),
            "deployments/g/c/cluster.values.sops.yaml": encrypt_yaml(
                {"kind": "sops", "onlySops": "s", "plainWins": "sops"}, [age_key.recipient]
            ),
            "deployments/g/c/cluster.values.yaml": {"plainWins": "yaml", "kind": "yaml"},
            "deployments/g/c/cluster.values.yaml.gotmpl": "kind: gotmpl-{{ .onlySops }}\n",
        },
    )
    values = echo(base, ROOT)
    assert (values["kind"], values["onlySops"], values["plainWins"]) == ("gotmpl-s", "s", "yaml")


def test_gotmpl_sees_earlier_values_as_dot_values_and_bare(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(),
            "deployments/global.values.yaml": {"fromGlobal": "gl"},
            "deployments/g/group.values.yaml": {"fromGroup": "gr"},
            "deployments/g/c/cluster.values.yaml.gotmpl": (
                'seen: "{{ .Values.fromGlobal }}/{{ .fromGroup }}"\n'
                'chart: {{ hasKey .Values "chartDefault" }}\n'
                'cwd: "{{ .atlas.cwd }}"\n'
            ),
        },
    )
    values = echo(base, ROOT)
    # as in ATLAS, a hierarchy gotmpl sees the hierarchy before it, not the chart's defaults
    assert values["seen"] == "gl/gr"
    assert values["chart"] is False
    assert values["cwd"] == "."


def test_template_values_list_is_progressive_and_sees_the_environment(tmp_path: Path) -> None:
    helmfile = {
        "releases": [
            {
                "name": "echo",
                "chart": "./chart",
                "values": [
                    "a.yaml",
                    "b.yaml.gotmpl",
                    {"x": 3, "inline": True},
                    "c.yaml.gotmpl",
                ],
            }
        ]
    }
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(),
            "deployments/global.values.yaml": {"domain": "example.com"},
            "templates/echo/helmfile.yaml.gotmpl": helmfile,
            "templates/echo/a.yaml": {"x": 1, "y": "a"},
            "templates/echo/b.yaml.gotmpl": (
                'y: "b-{{ .Values.x }}"\nhost: "api.{{ .domain }}"\ncwd: "{{ .atlas.cwd }}"\n'
            ),
            "templates/echo/c.yaml.gotmpl": 'w: "{{ .Values.x }}-{{ .Values.y }}"\n',
        },
    )
    values = echo(base, ROOT)
    assert values["x"] == 3  # later entries win
    assert values["y"] == "b-1"  # b saw a
    assert values["w"] == "3-b-1"  # c saw the inline map and b
    assert values["host"] == "api.example.com"  # template gotmpl sees the environment
    assert values["cwd"] == "."


def test_template_gotmpl_sees_instance_values_under_the_hierarchy(tmp_path: Path) -> None:
    # ATLAS's loader: hierarchy < template values so far < instance inline values < hierarchy.
    helmfile = {"releases": [{"name": "echo", "chart": "./chart", "values": ["v.yaml.gotmpl"]}]}
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(values={"fromInstance": "i", "port": 1}),
            "templates/echo/helmfile.yaml.gotmpl": helmfile,
            "templates/echo/v.yaml.gotmpl": (
                'combined: "{{ .fromInstance }}-{{ .Values.port }}"\n'
                'sawChart: {{ hasKey .Values "chartDefault" }}\n'
            ),
            "deployments/g/c/cluster.values.yaml": {"port": 2},
        },
    )
    values = echo(base, ROOT)
    assert values["combined"] == "i-2"
    assert values["sawChart"] is False


def test_hierarchy_gotmpl_does_not_see_release_values(tmp_path: Path) -> None:
    # helmfile's missingkey=error: a key the file cannot see is an error, not "".
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(values={"fromInstance": "i"}),
            f"{DEP}/values.yaml.gotmpl": 'x: "{{ .fromInstance }}"\n',
        },
    )
    with pytest.raises(FleetError) as caught:
        echo(base, ROOT)
    assert caught.value.path == f"{DEP}/values.yaml.gotmpl"
    assert caught.value.line == 1
    assert "Go template error in {{ .fromInstance }}: key 'fromInstance' is not set" in str(
        caught.value
    )


def test_helmfile_is_rendered_with_the_environment_and_atlas(tmp_path: Path) -> None:
    helmfile = """releases:
  - name: {{ .Values.releaseName }}
    chart: ./chart
    namespace: {{ .atlas.deployment.clusterName }}-{{ .Values.suffix }}
    values:
      - fromHelmfile: {{ .Values.suffix | upper }}
        helmfileCwd: {{ .atlas.cwd }}
        fromInstance: {{ .Values.instanceOnly }}
"""
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(values={"instanceOnly": "inst"}),
            "templates/echo/helmfile.yaml.gotmpl": helmfile,
            "deployments/global.values.yaml": {"releaseName": "named-by-env"},
            "deployments/g/c/cluster.values.yaml.gotmpl": "suffix: sfx-{{ .Values.releaseName }}\n",
        },
    )
    lay = layout(base)
    [info] = lay.releases(ROOT)
    assert (info.id, info.namespace) == ("d/named-by-env", "c-sfx-named-by-env")
    values = echo(base, ROOT)
    assert values["fromHelmfile"] == "SFX-NAMED-BY-ENV"
    assert values["helmfileCwd"] == "."
    assert values["fromInstance"] == "inst"  # ATLAS renders templates with inline values too


def test_atlas_key_is_atlas_s_and_user_keys_merge_beside_it(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(name="blue", namespace="ns1", variant="v2"),
            "deployments/global.values.yaml": {"atlas": {"repoURL": "https://git.example/x"}},
            f"{DEP}/values.yaml": {"atlas": {"revision": "main", "deployment": {"extra": 1}}},
        },
    )
    values = echo(base, ROOT)
    assert values["atlas"] == {
        "repoURL": "https://git.example/x",
        "revision": "main",
        "cwd": ".",
        "appTemplates": "templates",
        "deploymentDefinitions": "deployments",
        "deployment": {
            "extra": 1,
            "cluster": "g/c",
            "clusterName": "c",
            "clusterGroup": "g",
            "deploymentName": "d",
            "deploymentPath": f"{DEP}/deployment.yaml",
        },
        "cluster": {"id": "g/c", "name": "c", "group": "g"},
        "instance": {"name": "blue", "template": "echo", "variant": "v2", "namespace": "ns1"},
        "labels": {
            "cluster": "g/c",
            "clusterName": "c",
            "clusterGroup": "g",
            "deploymentName": "d",
            "template": "echo",
            "instance": "blue",
            "variant": "v2",
        },
    }
    assert layout(base).values(ROOT, None)["atlas"] == values["atlas"]


@pytest.mark.parametrize(
    ("file", "data", "message"),
    [
        ("deployments/global.values.yaml", {"atlas": {"cwd": "/evil"}}, "atlas.cwd is set by"),
        (
            f"{DEP}/values.yaml",
            {"atlas": {"deployment": {"clusterName": "x"}}},
            "atlas.deployment.clusterName is set by",
        ),
        ("deployments/g/c/cluster.values.yaml", {"atlas": "text"}, "`atlas` must be a mapping"),
    ],
)
def test_atlas_metadata_cannot_be_overridden(
    tmp_path: Path, file: str, data: dict[str, Any], message: str
) -> None:
    base = make_fleet(tmp_path, {f"{DEP}/deployment.yaml": one_app(), file: data})
    with pytest.raises(FleetError) as caught:
        layout(base).values(ROOT, None)
    assert caught.value.path == file
    assert message in str(caught.value)


def test_standalone_cluster_has_no_cluster_group_key(tmp_path: Path) -> None:
    base = make_fleet(tmp_path, {"deployments/solo/apps/d/deployment.yaml": one_app()})
    deployment = echo(base, "solo")["atlas"]["deployment"]
    assert "clusterGroup" not in deployment
    assert deployment["cluster"] == "solo"


def test_lists_are_replaced_and_maps_merged(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(values={"l": [1, 2, 3], "m": {"a": 1, "b": 1}}),
            "deployments/g/c/cluster.values.yaml": {"l": [9], "m": {"b": 2}},
        },
    )
    values = echo(base, ROOT)
    assert values["l"] == [9]
    assert values["m"] == {"a": 1, "b": 2}


def test_instance_values_may_be_a_list_of_mappings(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {f"{DEP}/deployment.yaml": one_app(values=[{"a": 1, "b": 1}, {"b": 2}])},
    )
    values = echo(base, ROOT)
    assert (values["a"], values["b"]) == (1, 2)


# --- naming, labels, namespaces ------------------------------------------------------------------

TWO_RELEASES = {
    "releases": [
        {"name": "api", "chart": "./chart"},
        {"name": "worker", "chart": "./chart"},
    ]
}


def release_ids(base: Path, root: str = ROOT) -> list[str]:
    return [r.id for r in layout(base).releases(root)]


@pytest.mark.parametrize(
    ("deployment", "expected"),
    [
        ({"apps": [{"template": "web"}]}, ["d/api", "d/worker"]),
        ({"apps": [{"template": "web", "name": "web"}]}, ["d/api", "d/worker"]),
        ({"apps": [{"template": "web", "name": "blue"}]}, ["d/blue-api", "d/blue-worker"]),
        (
            {"nameStyle": "suffix", "apps": [{"template": "web", "name": "blue"}]},
            ["d/api-blue", "d/worker-blue"],
        ),
        (
            {
                "nameStyle": "suffix",
                "apps": [
                    {"template": "web", "name": "blue"},
                    {"template": "web", "name": "green", "nameStyle": "prefix"},
                ],
            },
            ["d/api-blue", "d/green-api", "d/green-worker", "d/worker-blue"],
        ),
        # an instance named like a release keeps that release's name
        ({"apps": [{"template": "web", "name": "api"}]}, ["d/api", "d/api-worker"]),
    ],
)
def test_instance_naming(tmp_path: Path, deployment: dict[str, Any], expected: list[str]) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": deployment,
            "templates/web/helmfile.yaml.gotmpl": TWO_RELEASES,
        },
    )
    (base / "templates/web/chart").symlink_to(base / "templates/echo/chart")
    assert release_ids(base) == expected


def test_rendered_objects_carry_the_final_release_name(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {f"{DEP}/deployment.yaml": {"nameStyle": "suffix", "apps": [one_app(name="x")["apps"][0]]}},
    )
    files = layout(base).render_files(ROOT)
    assert list(files) == ["d/echo-x/d/ConfigMap_echo-x-values.yaml"]


def test_labels_on_every_release(tmp_path: Path) -> None:
    helmfile = {
        "releases": [{"name": "echo", "chart": "./chart", "labels": {"team": "t", "cluster": "no"}}]
    }
    base = make_fleet(
        tmp_path,
        {
            "templates/echo/helmfile.yaml.gotmpl": helmfile,
            "deployments/apps/d/deployment.yaml": one_app(
                name="blue", labels={"tier": "web", "instance": "no"}
            ),
            "deployments/g/c/apps/.keep": "",
            "deployments/solo/apps/.keep": "",
        },
    )
    lay = layout(base)
    [grouped] = lay.releases("g/c")
    assert grouped.labels == {
        "team": "t",
        "tier": "web",
        "cluster": "g/c",
        "clusterName": "c",
        "clusterGroup": "g",
        "deploymentName": "d",
        "template": "echo",
        "instance": "blue",
        "variant": "default",
    }
    [solo] = lay.releases("solo")
    assert "clusterGroup" not in solo.labels
    assert (solo.labels["cluster"], solo.labels["clusterName"]) == ("solo", "solo")
    # release labels are metadata for selection, never injected into Kubernetes objects
    for data in lay.render_files("solo").values():
        assert "labels" not in yaml.safe_load(data)["metadata"]


@pytest.mark.parametrize(
    ("release_ns", "instance_ns", "deployment_ns", "expected"),
    [
        # ATLAS: apps[].namespace, then settings.namespace, then the template release's
        ("from-release", "from-instance", "from-deployment", "from-instance"),
        ("from-release", None, "from-deployment", "from-deployment"),
        ("from-release", None, None, "from-release"),
        (None, None, None, "d"),
    ],
)
@pytest.mark.parametrize("spelling", ["settings", "namespace"])
def test_namespace_precedence(
    tmp_path: Path,
    release_ns: str | None,
    instance_ns: str | None,
    deployment_ns: str | None,
    expected: str,
    spelling: str,
) -> None:
    release: dict[str, Any] = {"name": "echo", "chart": "./chart"}
    if release_ns:
        release["namespace"] = release_ns
    instance: dict[str, Any] = {"template": "echo"}
    if instance_ns:
        instance["namespace"] = instance_ns
    deployment: dict[str, Any] = {"apps": [instance]}
    if deployment_ns and spelling == "settings":
        deployment["settings"] = {"namespace": deployment_ns, "autosync": "false"}
    elif deployment_ns:
        deployment["namespace"] = deployment_ns  # rollwright's spelling of the same
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": deployment,
            "templates/echo/helmfile.yaml.gotmpl": {"releases": [release]},
        },
    )
    [info] = layout(base).releases(ROOT)
    assert info.namespace == expected
    [path] = layout(base).render_files(ROOT)
    assert path == f"d/echo/{expected}/ConfigMap_echo-values.yaml"


def test_template_first_namespaces_when_rollwright_yaml_asks(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            "rollwright.yaml": {"atlas": {"namespaces": "template-first"}},
            f"{DEP}/deployment.yaml": one_app(namespace="from-instance"),
            "templates/echo/helmfile.yaml.gotmpl": {
                "releases": [{"name": "echo", "chart": "./chart", "namespace": "pinned"}]
            },
        },
    )
    assert layout(base).releases(ROOT)[0].namespace == "pinned"


def test_settings_and_namespace_may_not_disagree(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {f"{DEP}/deployment.yaml": {**one_app(), "namespace": "a", "settings": {"namespace": "b"}}},
    )
    with pytest.raises(FleetError, match="are the same setting"):
        layout(base).releases(ROOT)


def test_disabled_instances_are_skipped(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": {
                "apps": [
                    {"template": "echo", "name": "on"},
                    {"template": "echo", "name": "off", "disabled": True},
                ]
            }
        },
    )
    assert release_ids(base) == ["d/on-echo"]


def test_values_needs_a_release_when_the_root_has_several(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": {
                "apps": [{"template": "echo", "name": "a"}, {"template": "echo", "name": "b"}]
            }
        },
    )
    lay = layout(base)
    with pytest.raises(
        FleetError, match=r"has 2 releases; choose one with --release: d/a-echo, d/b-echo"
    ):
        lay.values(ROOT, None)
    with pytest.raises(
        FleetError, match=r"has no release 'd/zzz'; its releases: d/a-echo, d/b-echo"
    ):
        lay.values(ROOT, "d/zzz")
    assert lay.values(ROOT, "d/b-echo")["atlas"]["instance"]["name"] == "b"


def test_yaml_timestamps_and_binary_reach_helm_as_text(tmp_path: Path) -> None:
    base = make_fleet(
        tmp_path,
        {
            f"{DEP}/deployment.yaml": one_app(values={"released": "2024-01-01"}),
            "deployments/global.values.yaml": "day: 2024-05-01\nblob: !!binary aGVsbG8=\n",
            "deployments/g/c/cluster.values.yaml.gotmpl": "seen: {{ .Values.day }}\n",
        },
    )
    values = echo(base, ROOT)
    assert (values["day"], values["blob"], values["seen"]) == (
        "2024-05-01",
        "aGVsbG8=",
        "2024-05-01",
    )

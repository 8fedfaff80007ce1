"""Typos caught before they ship: values keys the fleet sets that no template reads (atlas),
with file, line and "did you mean"; warnings, or errors under rollwright.yaml `strict`; and on
the deployment's check run. Real fleets, real charts, the real Helm engine and git."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml
from temporalio.testing import ActivityEnvironment

from activities.git import GitActivities
from activities.joblog import JobLog
from activities.render import RenderActivities
from shared.cli.main import main
from shared.contracts.deploy import CheckoutRequest, DiffRequest, RenderRequest, RepoRef
from shared.engine.errors import FleetErrors
from shared.engine.fleet import Fleet
from shared.engine.helm.reads import chart_template, values_template
from shared.engine.suggest import closest
from shared.engine.tree import WorkTree
from shared.engine.validate import validate_fleet
from shared.settings import Settings
from shared.stores.blob import FileBlobStore
from shared.stores.gitmirror import GitMirror
from tests.support.files import write_files
from tests.support.gitrepo import commit_all, init_repo, local_remote
from tests.support.paths import EXAMPLES, FIXTURES, REPO_ROOT

ATLAS = EXAMPLES / "atlas-fleet"


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    return Path(shutil.copytree(ATLAS, tmp_path / "fleet"))


def lines(fleet: Path) -> list[str]:
    return [str(p) for p in validate_fleet(WorkTree(fleet))]


def test_the_example_fleet_has_no_unread_keys(fleet: Path) -> None:
    # Keys only Go templates read (domain, webHost) and maps read whole (env) are read.
    assert lines(fleet) == []


def test_typos_at_any_depth_are_warnings_with_line_and_suggestion(fleet: Path) -> None:
    web = fleet / "deployments/apps/web/values.yaml"
    web.write_text(web.read_text().replace("image:", "imgae:"))
    (fleet / "deployments/prod/eu-1/apps/web/values.yaml").write_text(
        'replicaCount: 3\nimage:\n  tga: "2.4.0"\n'
    )
    with (fleet / "deployments/global.values.yaml").open("a") as f:
        f.write("domian: example.org\n")
    assert lines(fleet) == [
        "deployments/apps/web/values.yaml:1: warning: values key 'imgae' is not read by any "
        "template of the 2 releases it reaches: web/api, web/frontend (did you mean 'image'?)",
        "deployments/global.values.yaml:5: warning: values key 'domian' is not read by any "
        "template of the 7 releases it reaches: cert-operator/cert-operator, "
        "debug-tools/debug-tools, monitoring/node-metrics and 4 more (did you mean 'domain'?)",
        "deployments/prod/eu-1/apps/web/values.yaml:3: warning: values key 'image.tga' is not "
        "read by any template of the 2 releases it reaches: web/api-shop, web/frontend-shop "
        "(did you mean 'image.tag'?)",
    ]


def test_inline_values_of_templates_and_instances_are_checked(fleet: Path) -> None:
    helmfile = fleet / "templates/web/helmfile.yaml.gotmpl"
    helmfile.write_text(helmfile.read_text().replace("        port: 9000", "        prot: 9000"))
    deployment = fleet / "deployments/prod/eu-1/apps/web/deployment.yaml"
    deployment.write_text(deployment.read_text().replace("      env:", "      evn:"))
    assert lines(fleet) == [
        "deployments/prod/eu-1/apps/web/deployment.yaml:8: warning: values key 'evn' is not "
        "read by any template of the 2 releases it reaches: web/api-shop, web/frontend-shop "
        "(did you mean 'env'?)",
        "templates/web/helmfile.yaml.gotmpl:13: warning: values key 'prot' is not read by any "
        "template of the 2 releases it reaches: web/api, web/api-shop (did you mean 'port'?)",
    ]


def test_strict_makes_them_errors_that_refuse_the_roots_they_reach(
    fleet: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (fleet / "rollwright.yaml").write_text("strict: true\n")
    cluster = fleet / "deployments/staging/cluster-a/cluster.values.yaml"
    cluster.write_text("evn:\n  REGION: eu-west-1\n")
    assert main(["validate", "--repo", str(fleet)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(
        "deployments/staging/cluster-a/cluster.values.yaml:1: values key 'evn' is not read"
    )
    with pytest.raises(FleetErrors) as info:
        Fleet.open(WorkTree(fleet)).render("staging/cluster-a")
    assert "'evn'" in str(info.value)
    Fleet.open(WorkTree(fleet)).render("staging/cluster-b")  # not reached: renders


def test_strict_is_in_the_rollwright_yaml_schema() -> None:
    schema = yaml.safe_load((REPO_ROOT / "docs/schemas/rollwright.json").read_text())
    assert schema["properties"]["strict"]["type"] == "boolean"


def test_subcharts_aliases_conditions_and_library_charts(tmp_path: Path) -> None:
    base = tmp_path / "fleet"
    chart = base / "templates/app/chart"
    write_files(
        base,
        {
            "templates/app/helmfile.yaml": "releases:\n  - name: app\n    chart: ./chart\n",
            "templates/app/chart/Chart.yaml": yaml.safe_dump(
                {
                    "apiVersion": "v2",
                    "name": "app",
                    "version": "1.0.0",
                    "dependencies": [
                        {"name": "sub", "version": "1.0.0", "condition": "sub.enabled"},
                        {"name": "sub", "alias": "other", "version": "1.0.0", "tags": ["x"]},
                        {"name": "library", "version": "1.0.0"},
                    ],
                }
            ),
            "templates/app/chart/templates/cm.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                '  name: {{ include "library.fullname" . }}\n'
                "data:\n  a: {{ .Values.own | quote }}\n"
            ),
            "templates/app/chart/charts/sub/Chart.yaml": (
                "apiVersion: v2\nname: sub\nversion: 1.0.0\n"
            ),
            "templates/app/chart/charts/sub/templates/cm.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                "  name: {{ .Release.Name }}-{{ .Chart.Name }}\n"
                "data:\n  b: {{ .Values.size | quote }}\n  c: {{ .Values.global.zone | quote }}\n"
            ),
            "deployments/one/apps/app/deployment.yaml": "apps:\n  - template: app\n",
            "deployments/one/cluster.values.yaml": (
                "own: 1\nglobal:\n  zone: z\n  zoen: z\nsub:\n  enabled: true\n  size: 2\n"
                "other:\n  sise: 3\ntags:\n  x: true\n"
            ),
        },
    )
    shutil.copytree(FIXTURES / "charts/library", chart / "charts/library")
    assert lines(base) == [
        "deployments/one/cluster.values.yaml:4: warning: values key 'global.zoen' is not read "
        "by any template of release app/app (did you mean 'global.zone'?)",
        "deployments/one/cluster.values.yaml:9: warning: values key 'other.sise' is not read "
        "by any template of release app/app (did you mean 'other.size'?)",
    ]


def test_a_chart_that_reads_its_values_whole_reads_every_key(tmp_path: Path) -> None:
    base = tmp_path / "fleet"
    write_files(
        base,
        {
            "templates/app/helmfile.yaml": "releases:\n  - name: app\n    chart: ./chart\n",
            "templates/app/chart/Chart.yaml": "apiVersion: v2\nname: app\nversion: 1.0.0\n",
            "templates/app/chart/templates/cm.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
                "data:\n  all: {{ toYaml .Values | quote }}\n"
            ),
            "deployments/one/apps/app/deployment.yaml": "apps:\n  - template: app\n",
            "deployments/one/cluster.values.yaml": "anything: 1\n",
        },
    )
    assert lines(base) == []


@pytest.mark.parametrize(
    ("text", "paths", "whole"),
    [
        ("{{ .Values.a.b }}{{ $.Values.c }}", {("a", "b"), ("c",)}, False),
        ('{{- $root := . }}{{ $root.Values.d }}{{ include "x" . }}', {("d",)}, False),
        (
            '{{ index .Values "e" "f" }}{{ with .Values.g }}{{ .h }}{{ end }}',
            {("e", "f"), ("g",)},
            False,
        ),
        ("{{ toYaml .Values }}", set(), True),
        ("{{ range $k, $v := .Values }}{{ $k }}{{ end }}", set(), True),
        ("{{ with .Values.i }}{{ toYaml . }}{{ end }}", {("i",)}, False),
        ("{{ .Values.j", set(), True),
    ],
)
def test_chart_template_reads(text: str, paths: set[tuple[str, ...]], whole: bool) -> None:
    reads = chart_template(text)
    assert (set(reads.paths), reads.whole) == (paths, whole)


@pytest.mark.parametrize(
    ("text", "paths", "whole"),
    [
        ("{{ .a }}{{ .Values.b }}{{ range .c }}{{ .d }}{{ end }}", {("a",), ("b",), ("c",)}, False),
        ('{{ get "e.f" "default" . }}{{ .Values | get "g" }}', {("e", "f"), ("g",)}, False),
        ("{{ with .h }}{{ .i }}{{ else }}{{ .j }}{{ end }}", {("h",), ("j",)}, False),
        ("{{ toYaml . }}", set(), True),
    ],
)
def test_values_template_reads(text: str, paths: set[tuple[str, ...]], whole: bool) -> None:
    reads = values_template(text)
    assert (set(reads.paths), reads.whole) == (paths, whole)


@pytest.mark.parametrize(
    ("word", "known", "found"),
    [
        ("imgae", ["image", "port"], "image"),
        ("tga", ["tag", "repository"], "tag"),
        ("targetRevison", ["targetRevision", "repoURL"], "targetRevision"),
        ("Image", ["image"], "image"),
        ("replicas", ["image", "port"], None),
    ],
)
def test_did_you_mean(word: str, known: list[str], found: str | None) -> None:
    assert closest(word, known) == found


def test_the_check_run_shows_the_warnings(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "origin")
    shutil.copytree(ATLAS, repo, dirs_exist_ok=True)
    values = repo / "deployments/staging/cluster-a/cluster.values.yaml"
    values.write_text("evn:\n  REGION: eu-west-1\n")
    revision = commit_all(repo, "typo")
    settings = Settings(data_dir=tmp_path / "state", public_url="http://rollwright.test")
    blobs = FileBlobStore(tmp_path / "state" / "blobs")
    git = GitActivities(GitMirror(settings.git_dir, remote_for=local_remote), JobLog(blobs))
    render = RenderActivities(settings, blobs)
    env = ActivityEnvironment()
    ref = RepoRef(owner="acme", name="fleet", clone_url=str(repo))
    checkout = asyncio.run(env.run(git.checkout, CheckoutRequest(repo=ref, revision=revision)))
    summary = asyncio.run(
        env.run(
            render.render_root,
            RenderRequest(
                repo=ref,
                root="staging/cluster-a",
                revision=revision,
                checkout_path=checkout.path,
                deployment_id="dep-1",
            ),
        )
    )
    diff = asyncio.run(
        env.run(
            render.diff_render,
            DiffRequest(
                repo=ref,
                root="staging/cluster-a",
                new_prefix=summary.blob_prefix,
                old_prefix=None,
                deployment_id="dep-1",
            ),
        )
    )
    warning = (
        "deployments/staging/cluster-a/cluster.values.yaml:1: warning: values key 'evn' is not "
        "read by any template of the 5 releases it reaches"
    )
    assert "**1 warning(s)** in the fleet for this root" in diff.text
    assert warning in diff.text
    assert warning in (blobs.get(diff.full_key) or b"").decode()  # the job page's full diff

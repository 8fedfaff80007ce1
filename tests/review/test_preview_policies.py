"""Policy sets in previews: build_preview on real git repositories runs the PR side's policy
sets (regopy, CEL) on each affected root's redacted render; the findings reach the Markdown
report and its JSON, a policy file that does not compile fails the preview at its file and
line, and a policy quoting a secret quotes only its redacted form."""

from __future__ import annotations

import json
from pathlib import Path

from shared.review.markdown import report_markdown
from shared.review.preview import build_preview
from shared.review.report import report_json
from tests.support.age import AgeKey, encrypt_yaml
from tests.support.atlas import make_fleet, one_app
from tests.support.gitrepo import commit_all, init_repo
from tests.support.preview import DEPLOYMENT, commit, web_repo
from tests.support.secrets import app_chart_files, assert_hidden

LIMITS = """package main

import rego.v1

deny contains msg if {
  input.kind == "Deployment"
  input.spec.replicas > 2
  msg := sprintf("%s asks for %d replicas; at most 2", [input.metadata.name, input.spec.replicas])
}

warn contains msg if {
  input.kind == "ConfigMap"
  msg := sprintf("ConfigMap %s has no owner label", [input.metadata.name])
}
"""

CONFIG = """policies:
  - name: capacity
    path: policies/capacity
    owners: ["@acme/sre"]
    roots: ["g/*"]
"""


def test_findings_of_the_pr_side_are_in_the_report(tmp_path: Path) -> None:
    repo = web_repo(
        tmp_path / "fleet",
        {"rollwright.yaml": CONFIG, "policies/capacity/limits.rego": LIMITS},
    )
    commit(repo, {"deployments/g/c1/cluster.values.yaml": {"cluster": "g/c1", "replicas": 3}})
    report = build_preview(repo, "HEAD~1", "HEAD")
    (item,) = report.roots
    assert not report.failed and item.policy_error is None
    assert [(f.level, f.subject(), f.message) for f in item.policies] == [
        ("deny", f"Deployment default/web ({DEPLOYMENT})", "web asks for 3 replicas; at most 2"),
        ("warn", "ConfigMap default/web (web/web/default/ConfigMap_web.yaml)",
         "ConfigMap web has no owner label"),
    ]  # fmt: skip
    markdown = report_markdown(report, limit=None)
    assert (
        "**Policy checks** on `g/c1`: 1 denied (the deployment will wait for an owner of each "
        "set), 1 warning(s)."
    ) in markdown
    assert (
        f"- ❌ deny `capacity` Deployment default/web ({DEPLOYMENT}): web asks for 3 replicas"
        in markdown
    )
    document = report_json(report)["roots"][0]
    assert document["policy_error"] is None
    assert [p["message"] for p in document["policies"]] == [
        "web asks for 3 replicas; at most 2",
        "ConfigMap web has no owner label",
    ]


def test_a_policy_file_that_does_not_compile_fails_the_preview(tmp_path: Path) -> None:
    repo = web_repo(
        tmp_path / "fleet",
        {"rollwright.yaml": CONFIG, "policies/capacity/limits.rego": LIMITS},
    )
    broken = LIMITS.replace("input.spec.replicas > 2", "input.spec.replicas > > 2")
    commit(repo, {"policies/capacity/limits.rego": broken})
    report = build_preview(repo, "HEAD~1", "HEAD", roots=["g/c1"])
    (item,) = report.roots
    assert report.failed
    assert item.policy_error is not None
    assert item.policy_error.startswith(
        "policies/capacity/limits.rego:7: policy set 'capacity': Rego:"
    )
    assert "the policy sets of root `g/c1` cannot run" in report_markdown(report, limit=None)


SECRET = "Pol1cy-s3cret-Zq9"
QUOTER = """package main

import rego.v1

deny contains msg if {
  input.kind == "Secret"
  msg := sprintf("secret %s holds %v", [input.metadata.name, input.data])
}
"""


def test_a_policy_sees_secrets_redacted_only(tmp_path: Path, age_key: AgeKey) -> None:
    repo = init_repo(tmp_path / "fleet")
    make_fleet(
        repo,
        {
            **app_chart_files("templates/app/chart"),
            "templates/app/helmfile.yaml.gotmpl": "releases:\n  - name: app\n    chart: ./chart\n",
            "deployments/g/c/apps/d/deployment.yaml": one_app("app"),
            "deployments/global.values.sops.yaml": encrypt_yaml(
                {"password": SECRET}, [age_key.recipient]
            ),
            "rollwright.yaml": CONFIG.replace("policies/capacity", "policies/quoter"),
            "policies/quoter/quote.rego": QUOTER,
        },
        echo=False,
    )
    commit_all(repo, "base")
    report = build_preview(repo, "HEAD", None, roots=["g/c"])
    (item,) = report.roots
    (finding,) = [f for f in item.policies if f.level == "deny"]
    assert "REDACTED:sha256:" in finding.message
    outputs = [
        ("markdown", report_markdown(report, limit=None)),
        ("json", json.dumps(report_json(report))),
        ("message", finding.message),
    ]
    assert_hidden(outputs, [SECRET])

"""Policy sets on rendered objects, with the real engines: regopy for Rego, the
`common-expression-language` CEL for ValidatingAdmissionPolicy objects."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shared.engine.config.fleet import FleetConfig
from shared.engine.errors import FleetError
from shared.engine.policies.sets import check_files, check_root
from shared.engine.tree import WorkTree

ROOT_POLICY = """package main

import rego.v1

deny contains msg if {
  input.kind == "Deployment"
  not input.spec.template.spec.securityContext.runAsNonRoot
  msg := sprintf("%s %s must run as non-root", [input.kind, input.metadata.name])
}

warn contains msg if {
  input.kind == "Deployment"
  not input.metadata.labels.team
  msg := sprintf("%s has no team label", [input.metadata.name])
}
"""

V0_POLICY = """package lb

deny[msg] {
  input.kind == "Service"
  input.spec.type == "LoadBalancer"
  msg := "no LoadBalancer services"
}
"""

VAP = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: max-replicas
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: ["apps"]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["deployments"]
  variables:
    - name: limit
      expression: "5"
  validations:
    - expression: "object.spec.replicas <= variables.limit"
      messageExpression: >-
        'replicas ' + string(object.spec.replicas) + ' > ' + string(variables.limit)
        + ' for ' + object.metadata.name.upperAscii()
    - expression: "object.metadata.name.split('-').size() < 4"
      message: name has too many parts
"""

BINDING = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: max-replicas
spec:
  policyName: max-replicas
  validationActions: [Warn]
"""

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "labels": {"team": "a"}},
    "spec": {"replicas": 7, "template": {"spec": {"containers": [{"name": "c"}]}}},
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"type": "LoadBalancer"},
}


def _repo(tmp_path: Path, files: dict[str, str], config: dict[str, object]) -> WorkTree:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "rollwright.yaml").write_text(yaml.safe_dump(config))
    return WorkTree(tmp_path)


def _render(*docs: dict[str, object]) -> dict[str, bytes]:
    return {f"{d['kind']}-{i}.yaml".lower(): yaml.safe_dump(d).encode() for i, d in enumerate(docs)}


def _check(tree: WorkTree, root: str, files: dict[str, bytes]) -> list[tuple[str, str, str, str]]:
    config = FleetConfig.load(tree)
    found = check_root(tree, config, root, files)
    return sorted((f.policy_set, f.level, f.subject, f.message) for f in found)


def test_rego_deny_and_warn_with_object_and_file(tmp_path: Path) -> None:
    tree = _repo(
        tmp_path,
        {"policies/sec/pods.rego": ROOT_POLICY, "policies/sec/svc/lb.rego": V0_POLICY},
        {
            "policies": [
                {
                    "name": "security",
                    "path": "policies/sec",
                    "owners": ["sec-lead"],
                    "packages": ["main", "lb"],
                }
            ]
        },
    )
    bare = {**DEPLOYMENT, "metadata": {"name": "api", "namespace": "shop"}}
    got = _check(tree, "prod/eu", _render(bare, SERVICE))
    assert got == [
        ("security", "deny", "Deployment shop/api (deployment-0.yaml)",
         "Deployment api must run as non-root"),
        ("security", "deny", "Service shop/web (service-1.yaml)", "no LoadBalancer services"),
        ("security", "warn", "Deployment shop/api (deployment-0.yaml)", "api has no team label"),
    ]  # fmt: skip


def test_sets_apply_to_their_roots_only(tmp_path: Path) -> None:
    tree = _repo(
        tmp_path,
        {"policies/sec/pods.rego": ROOT_POLICY},
        {
            "policies": [
                {"name": "sec", "path": "policies/sec", "owners": ["a"], "roots": ["prod/*"]}
            ]
        },
    )
    assert _check(tree, "staging/eu", _render(DEPLOYMENT)) == []
    assert [g[1] for g in _check(tree, "prod/eu", _render(DEPLOYMENT))] == ["deny"]


def test_named_packages(tmp_path: Path) -> None:
    policy = (
        "package k8s.limits\n\nimport rego.v1\n\n"
        'violation_replicas contains "too many" if input.spec.replicas > 3\n'
    )
    tree = _repo(
        tmp_path,
        {"p/limits.rego": policy},
        {
            "policies": [
                {"name": "limits", "path": "p", "owners": ["a"], "packages": ["k8s.limits"]}
            ]
        },
    )
    assert [g[3] for g in _check(tree, "r", _render(DEPLOYMENT))] == ["too many"]


def test_admission_policy_in_the_set_folder(tmp_path: Path) -> None:
    tree = _repo(
        tmp_path,
        {"policies/vap/max.yaml": VAP},
        {"policies": [{"name": "capacity", "path": "policies/vap", "owners": ["@acme/sre"]}]},
    )
    many = {**DEPLOYMENT, "metadata": {"name": "a-b-c-d", "labels": {}}}
    got = _check(tree, "r", _render(many, SERVICE))
    assert got == [
        ("capacity", "deny", "Deployment a-b-c-d (deployment-0.yaml)", "name has too many parts"),
        ("capacity", "deny", "Deployment a-b-c-d (deployment-0.yaml)",
         "replicas 7 > 5 for A-B-C-D"),
    ]  # fmt: skip


def test_admission_policy_the_render_carries_with_its_binding(tmp_path: Path) -> None:
    tree = _repo(
        tmp_path, {}, {"policies": [{"name": "cluster", "rendered": True, "owners": ["a"]}]}
    )
    files = _render(DEPLOYMENT)
    files["vap.yaml"] = VAP.encode()
    assert [g[1] for g in _check(tree, "r", files)] == ["deny"]  # unbound: Deny
    files["vap.yaml"] = (VAP + "---\n" + BINDING).encode()
    got = _check(tree, "r", files)
    assert got == [
        ("cluster", "warn", "Deployment shop/web (deployment-0.yaml)", "replicas 7 > 5 for WEB")
    ]


def test_admission_failure_policy_and_missing_fields(tmp_path: Path) -> None:
    vap = VAP.replace("failurePolicy: Fail", "failurePolicy: Ignore")
    tree = _repo(
        tmp_path, {"v/p.yaml": vap}, {"policies": [{"name": "c", "path": "v", "owners": ["a"]}]}
    )
    no_replicas = {**DEPLOYMENT, "spec": {}}
    assert _check(tree, "r", _render(no_replicas)) == []
    tree = _repo(
        tmp_path, {"v/p.yaml": VAP}, {"policies": [{"name": "c", "path": "v", "owners": ["a"]}]}
    )
    got = _check(tree, "r", _render(no_replicas))
    assert len(got) == 1 and got[0][1] == "deny"
    assert "failed: no such key: replicas" in got[0][3]


def test_rego_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = "package main\n\nimport rego.v1\n\ndeny contains msg if {\n  input.x ==\n}\n"
    tree = _repo(
        tmp_path,
        {"policies/sec/bad.rego": bad},
        {"policies": [{"name": "s", "path": "policies/sec", "owners": ["a"]}]},
    )
    with pytest.raises(FleetError) as caught:
        check_root(tree, FleetConfig.load(tree), "r", _render(DEPLOYMENT))
    assert caught.value.path == "policies/sec/bad.rego"
    assert caught.value.line == 6
    assert str(caught.value).startswith("policies/sec/bad.rego:6: policy set 's': Rego:")
    assert [str(e) for e in check_files(tree, FleetConfig.load(tree))] == [str(caught.value)]


def test_rego_compile_error_names_file(tmp_path: Path) -> None:
    bad = (
        "package main\n\nimport rego.v1\n\n"
        "deny contains msg if {\n  msg := no_such_function(input)\n}\n"
    )
    tree = _repo(
        tmp_path, {"p/bad.rego": bad}, {"policies": [{"name": "s", "path": "p", "owners": ["a"]}]}
    )
    with pytest.raises(FleetError) as caught:
        check_root(tree, FleetConfig.load(tree), "r", _render(DEPLOYMENT))
    assert caught.value.path == "p/bad.rego"


def test_cel_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = VAP.replace('"object.spec.replicas <= variables.limit"', '"object.spec.replicas <="')
    tree = _repo(
        tmp_path, {"v/p.yaml": bad}, {"policies": [{"name": "c", "path": "v", "owners": ["a"]}]}
    )
    with pytest.raises(FleetError) as caught:
        check_root(tree, FleetConfig.load(tree), "r", _render(DEPLOYMENT))
    assert caught.value.path == "v/p.yaml"
    assert caught.value.line == 17
    assert "does not compile" in str(caught.value)


def test_empty_or_missing_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    tree = _repo(tmp_path, {}, {"policies": [{"name": "c", "path": "empty", "owners": ["a"]}]})
    with pytest.raises(FleetError, match=r"has no \.rego file"):
        check_root(tree, FleetConfig.load(tree), "r", _render(DEPLOYMENT))
    tree = _repo(tmp_path, {}, {"policies": [{"name": "c", "path": "gone", "owners": ["a"]}]})
    with pytest.raises(FleetError, match="is not in the repository"):
        check_root(tree, FleetConfig.load(tree), "r", _render(DEPLOYMENT))


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"name": "x", "path": "p"}, "owners"),
        ({"name": "x", "path": "p", "owners": []}, "at least one owner"),
        ({"name": "X y", "path": "p", "owners": ["a"]}, "lowercase"),
        ({"name": "x", "owners": ["a"]}, "neither a path nor rendered"),
        ({"name": "x", "path": "../up", "owners": ["a"]}, "inside the fleet repo"),
    ],
)
def test_bad_policy_sets_are_refused(tmp_path: Path, entry: dict[str, object], words: str) -> None:
    tree = _repo(tmp_path, {}, {"policies": [entry]})
    with pytest.raises(FleetError, match=words):
        FleetConfig.load(tree)


def test_a_set_named_twice_is_refused(tmp_path: Path) -> None:
    entry = {"name": "x", "path": "p", "owners": ["a"]}
    tree = _repo(tmp_path, {}, {"policies": [entry, entry]})
    with pytest.raises(FleetError, match="named twice"):
        FleetConfig.load(tree)


SELECTIVE = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: labelled
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["*"]
        apiVersions: ["*"]
        operations: ["*"]
        resources: ["*"]
    excludeResourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["services"]
    objectSelector:
      matchExpressions:
        - {key: team, operator: Exists}
  matchConditions:
    - name: not-web
      expression: "object.metadata.name != 'skip'"
  validations:
    - expression: "false"
      message: always fails
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: audit-shop
spec:
  policyName: labelled
  validationActions: [Audit]
  matchResources:
    objectSelector:
      matchLabels: {team: a}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: with-params
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
      - {apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}
  validations:
    - expression: "object.spec.replicas <= params.data.max"
"""


def test_admission_matching_conditions_bindings_and_parameters(tmp_path: Path) -> None:
    tree = _repo(
        tmp_path,
        {"v/p.yaml": SELECTIVE},
        {"policies": [{"name": "c", "path": "v", "owners": ["a"]}]},
    )
    other_team = {**DEPLOYMENT, "metadata": {"name": "b", "labels": {"team": "b"}}}
    unlabelled = {**DEPLOYMENT, "metadata": {"name": "c"}}
    skipped = {**DEPLOYMENT, "metadata": {"name": "skip", "labels": {"team": "a"}}}
    service = {**SERVICE, "metadata": {"name": "s", "labels": {"team": "a"}}}
    got = _check(tree, "r", _render(DEPLOYMENT, other_team, unlabelled, skipped, service))
    assert got == [
        ("c", "warn", "(the policy itself)",
         "ValidatingAdmissionPolicy with-params takes parameters (paramKind): rollwright "
         "does not evaluate it"),
        # Audit: a warning; only the binding's team-a object, and not the excluded Service,
        # the unlabelled object or the one its match condition leaves out.
        ("c", "warn", "Deployment shop/web (deployment-0.yaml)", "always fails"),
    ]  # fmt: skip

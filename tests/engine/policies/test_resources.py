"""The resource names admission rules match on: the render's CRDs for custom kinds, the API
server's rule for built-in kinds (checked against every resource of Kubernetes' API as
`lightkube-models` lists it), and a warning, never a guess, for any other kind."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import yaml

from shared.engine.config.fleet import FleetConfig
from shared.engine.policies.objects import manifests
from shared.engine.policies.resources import ResourceNames
from shared.engine.policies.sets import check_root
from shared.engine.tree import WorkTree


def _kubernetes_resources() -> list[tuple[str, str, str]]:
    """(group, kind, plural) of each top-level resource `lightkube-models` generates from
    Kubernetes' OpenAPI (its `lightkube/resources/*.py`: `res.ApiInfo(resource=
    res.ResourceDef(group, version, kind), plural=…)`), read without importing the client."""
    spec = importlib.util.find_spec("lightkube")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations))) / "resources"
    found = set()
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "ApiInfo"):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            if "parent" in keywords:  # a subresource (status, scale)
                continue
            resource, plural = keywords["resource"], keywords["plural"]
            assert isinstance(resource, ast.Call) and isinstance(plural, ast.Constant)
            group, _, kind = (ast.literal_eval(a) for a in resource.args)
            found.add((group, kind, plural.value))
    return sorted(found)


def test_every_built_in_resource_is_named_as_kubernetes_serves_it() -> None:
    names = ResourceNames({})
    served = _kubernetes_resources()
    assert len(served) > 70  # the whole API, not an empty folder
    assert ("apps", "Deployment", "deployments") in served
    assert ("", "Endpoints", "endpoints") in served
    assert [(g, k, names.plural(g, k)) for g, k, _ in served] == served


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gateways.gateway.networking.k8s.io"},
    "spec": {
        "group": "gateway.networking.k8s.io",
        "names": {"kind": "Gateway", "plural": "gateways", "singular": "gateway"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": True, "storage": True}],
    },
}
GATEWAY = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "Gateway",
    "metadata": {"name": "public", "namespace": "edge"},
    "spec": {"gatewayClassName": "open"},
}
POLICY = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: gateway-class
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: ["gateway.networking.k8s.io"]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["gateways"]
  validations:
    - expression: "object.spec.gatewayClassName == 'internal'"
      message: gateways use the internal class
"""


def _found(tmp_path: Path, *docs: dict[str, object]) -> list[tuple[str, str, str]]:
    (tmp_path / "v").mkdir(exist_ok=True)
    (tmp_path / "v" / "p.yaml").write_text(POLICY)
    config = {"policies": [{"name": "edge", "path": "v", "owners": ["a"]}]}
    (tmp_path / "rollwright.yaml").write_text(yaml.safe_dump(config))
    tree = WorkTree(tmp_path)
    files = {f"{i}.yaml": yaml.safe_dump(d).encode() for i, d in enumerate(docs)}
    found = check_root(tree, FleetConfig.load(tree), "r", files)
    return [(f.level, f.subject, f.message) for f in found]


def test_a_custom_kind_is_matched_by_its_crd_plural(tmp_path: Path) -> None:
    """Kubernetes' guess would be `gatewaies`: the rule naming `gateways` would never match."""
    got = _found(tmp_path, CRD, GATEWAY)
    assert got == [("deny", "Gateway edge/public (1.yaml)", "gateways use the internal class")]
    crds = ResourceNames.of(manifests({"c.yaml": yaml.safe_dump(CRD).encode()}))
    assert crds.plural("gateway.networking.k8s.io", "Gateway") == "gateways"


def test_a_kind_without_a_known_plural_is_a_warning_naming_it(tmp_path: Path) -> None:
    other = {**GATEWAY, "metadata": {"name": "private", "namespace": "edge"}}
    got = _found(tmp_path, GATEWAY, other)
    assert got == [
        (
            "warn",
            "(the policy itself)",
            "ValidatingAdmissionPolicy gateway-class is not evaluated on kind Gateway "
            "(gateway.networking.k8s.io/v1): its resource name is not known (no "
            "CustomResourceDefinition in the render names its plural, and it is not a built-in "
            "kind), so the policy's resource rules cannot be matched",
        )
    ]

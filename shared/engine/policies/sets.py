"""A root's policy sets (rollwright.yaml `policies`) read at a revision and run over its
rendered, redacted files: every finding, deny or warn, of every set whose `roots` match.

Policies only ever see the redacted render (secret values are `REDACTED:…` markers there), so
no message they produce can quote a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.engine import yamldoc
from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.config.policies import PolicySet
from shared.engine.errors import FleetError
from shared.engine.policies import admission
from shared.engine.policies.objects import Finding, Manifest, manifests
from shared.engine.policies.rego import RegoPolicies
from shared.engine.tree import Tree


@dataclass
class LoadedSet:
    """One policy set's files, parsed and compiled."""

    config: PolicySet
    rego: RegoPolicies | None
    admission: list[admission.AdmissionPolicy]


def load_set(tree: Tree, policy_set: PolicySet) -> LoadedSet:
    """The set's folder read and compiled: a mistake in any file is a FleetError naming it."""
    if policy_set.path is None:
        return LoadedSet(policy_set, None, [])
    if not tree.is_dir(policy_set.path):
        raise FleetError(
            f"policies: policy set {policy_set.name!r}: folder {policy_set.path!r} is not in "
            "the repository",
            path=CONFIG_FILE,
        )
    rego_files: list[tuple[str, str]] = []
    objects: list[Manifest] = []
    sources: dict[str, str] = {}
    for path in _walk(tree, policy_set.path):
        if path.endswith(".rego"):
            rego_files.append((path, tree.read_text(path)))
        elif path.endswith((".yaml", ".yml")):
            text = tree.read_text(path)
            for doc in yamldoc.loads_all(text, path):
                if isinstance(doc, dict) and (
                    admission.is_policy(doc) or admission.is_binding(doc)
                ):
                    objects.append(Manifest(path, doc))
                    sources[path] = text
    policies = admission.collect(objects, sources)
    if not rego_files and not policies:
        raise FleetError(
            f"policies: policy set {policy_set.name!r}: folder {policy_set.path!r} has no "
            ".rego file and no ValidatingAdmissionPolicy",
            path=CONFIG_FILE,
        )
    rego = RegoPolicies(policy_set.name, rego_files, policy_set.packages) if rego_files else None
    return LoadedSet(policy_set, rego, policies)


def sets_for(config: FleetConfig, root: str) -> list[PolicySet]:
    return [s for s in config.policies if s.applies_to(root)]


def check_root(
    tree: Tree, config: FleetConfig, root: str, files: Mapping[str, bytes]
) -> list[Finding]:
    """Every finding of the root's policy sets on its rendered (redacted) files."""
    chosen = sets_for(config, root)
    if not chosen:
        return []
    objects = list(manifests(files))
    rendered: list[admission.AdmissionPolicy] | None = None
    found: list[Finding] = []
    for policy_set in chosen:
        loaded = load_set(tree, policy_set)
        policies = list(loaded.admission)
        if policy_set.rendered:
            if rendered is None:
                texts = {
                    p: files[p].decode("utf-8") for p in files if p.endswith((".yaml", ".yml"))
                }
                rendered = admission.collect(objects, texts)
            policies += rendered
        for policy in policies:
            skipped = admission.not_evaluated(policy, policy_set.name)
            if skipped is not None:
                found.append(skipped)
        for manifest in objects:
            if loaded.rego is not None:
                found += loaded.rego.evaluate(manifest)
            for policy in policies:
                if not policy.spec.get("paramKind"):
                    found += admission.evaluate(policy, manifest, policy_set.name)
    return found


def check_files(tree: Tree, config: FleetConfig) -> list[FleetError]:
    """Each policy set's files compiled, for validation: the mistakes, one per set."""
    errors = []
    for policy_set in config.policies:
        try:
            load_set(tree, policy_set)
        except FleetError as err:
            errors.append(err)
    return errors


def _walk(tree: Tree, folder: str) -> list[str]:
    out = []
    for entry in tree.listdir(folder):
        path = f"{folder}/{entry}"
        if tree.is_dir(path):
            out += _walk(tree, path)
        elif tree.is_file(path):
            out.append(path)
    return out

"""Kubernetes ValidatingAdmissionPolicy objects evaluated on rendered objects, with the CEL
of PyPI's `common-expression-language`: `spec.matchConstraints` (resource rules, exclusions,
object selector), `matchConditions`, `variables`, `validations[].expression` with
`message` / `messageExpression`, `failurePolicy`, and the `validationActions` of the
ValidatingAdmissionPolicyBinding objects that name the policy (none: Deny).

Each object is checked as the API server would check its creation: `object` is it,
`oldObject`, `params` and `namespaceObject` are null, `request` names its kind, namespace and
name with operation CREATE. A namespace selector cannot be judged without the cluster's
namespaces: it is taken to match (the safe side: more checks, not fewer). A policy that takes
parameters (`paramKind`) is reported as not evaluated, as a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from shared.engine.errors import FleetError
from shared.engine.policies.objects import Finding, Level, Manifest

KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
GROUP = "admissionregistration.k8s.io"


def _cel() -> ModuleType:
    # The `cel` package imports its interactive shell (prompt_toolkit), some 0.1 s for every
    # command; only ValidatingAdmissionPolicy checks load it (start-up time).
    import cel  # noqa: PLC0415

    return cel


def _index_of(value: Any, item: Any) -> int:
    return value.index(item) if item in value else -1


def _last_index_of(value: Any, item: Any) -> int:
    if isinstance(value, str):
        return value.rfind(item)
    return len(value) - 1 - value[::-1].index(item) if item in value else -1


# Kubernetes' CEL libraries beyond the standard ones that policies use most (the strings and
# lists extensions); an expression calling another fails as "undefined function".
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "lowerAscii": lambda s: s.lower(),
    "upperAscii": lambda s: s.upper(),
    "trim": lambda s: s.strip(),
    "split": lambda s, sep: s.split(sep),
    "join": lambda items, sep="": sep.join(items),
    "replace": lambda s, old, new: s.replace(old, new),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "isSorted": lambda items: list(items) == sorted(items),
    "sum": lambda items: sum(items),
    "min": lambda items: min(items),
    "max": lambda items: max(items),
}


@dataclass
class AdmissionPolicy:
    """One ValidatingAdmissionPolicy, its expressions compiled, and its bindings' actions."""

    name: str
    file: str
    spec: dict[str, Any]
    bindings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def policy(self) -> str:
        return f"{KIND} {self.name}"


def is_policy(body: dict[str, Any]) -> bool:
    return body.get("kind") == KIND and str(body.get("apiVersion", "")).startswith(GROUP)


def is_binding(body: dict[str, Any]) -> bool:
    return body.get("kind") == BINDING_KIND and str(body.get("apiVersion", "")).startswith(GROUP)


def collect(
    manifests: Iterable[Manifest], sources: dict[str, str] | None = None
) -> list[AdmissionPolicy]:
    """The policies among `manifests` with the bindings naming them, every expression
    compiled: a mistake is a FleetError at the file (and line, when `sources` has the file's
    text) of the policy."""
    policies: dict[str, AdmissionPolicy] = {}
    bindings: list[dict[str, Any]] = []
    for manifest in manifests:
        if is_policy(manifest.body):
            spec = manifest.body.get("spec") or {}
            if not isinstance(spec, dict):
                raise FleetError(
                    f"{KIND} {manifest.name!r}: spec is not a mapping", path=manifest.file
                )
            policies[manifest.name] = AdmissionPolicy(manifest.name, manifest.file, spec)
        elif is_binding(manifest.body):
            spec = manifest.body.get("spec") or {}
            bindings.append(spec if isinstance(spec, dict) else {})
    for binding in bindings:
        target = policies.get(str(binding.get("policyName") or ""))
        if target is not None:
            target.bindings.append(binding)
    for policy in policies.values():
        for expression in _expressions(policy.spec):
            try:
                _cel().compile(expression)
            except (ValueError, RuntimeError) as err:
                text = (sources or {}).get(policy.file)
                raise FleetError(
                    f"{policy.policy}: CEL expression {expression!r} does not compile: "
                    + " ".join(str(err).split()),
                    path=policy.file,
                    line=_line_of(text, expression) if text else None,
                ) from None
    return [policies[name] for name in sorted(policies)]


def evaluate(policy: AdmissionPolicy, manifest: Manifest, policy_set: str) -> list[Finding]:
    """What `policy` says of one object: a finding per failing validation and action."""
    spec = policy.spec
    if not _matches(spec.get("matchConstraints") or {}, manifest):
        return []
    actions = _actions(policy, manifest)
    if not actions:
        return []
    fail = spec.get("failurePolicy", "Fail") != "Ignore"
    cel = _cel()
    context = cel.Context()
    for name, function in FUNCTIONS.items():
        context.add_function(name, function)
    context.add_variable("object", manifest.body)
    context.add_variable("oldObject", None)
    context.add_variable("params", None)
    context.add_variable("namespaceObject", None)
    group, version = manifest.group_version
    context.add_variable(
        "request",
        {
            "kind": {"group": group, "version": version, "kind": manifest.kind},
            "resource": {"group": group, "version": version, "resource": _resource(manifest)},
            "name": manifest.name,
            "namespace": manifest.namespace,
            "operation": "CREATE",
        },
    )
    found: list[Finding] = []

    def failed(message: str, where: str) -> None:
        for level in actions:
            found.append(
                Finding.on(manifest, policy_set, level, message, f"{policy.policy}: {where}")
            )

    for index, condition in enumerate(spec.get("matchConditions") or []):
        try:
            if cel.evaluate(str(condition.get("expression")), context) is not True:
                return []
        except Exception as err:  # CEL and the functions it calls fail with many types
            if fail:
                failed(f"match condition error: {_why(err)}", f"matchConditions[{index}]")
            return found
    variables: dict[str, Any] = {}
    for entry in spec.get("variables") or []:
        try:
            context.add_variable("variables", variables)
            variables[str(entry.get("name"))] = cel.evaluate(str(entry.get("expression")), context)
        except Exception:  # a variable no validation reads may fail; one that is read fails there
            continue
    context.add_variable("variables", variables)
    for index, validation in enumerate(spec.get("validations") or []):
        expression = str(validation.get("expression"))
        where = f"validations[{index}]"
        try:
            result = cel.evaluate(expression, context)
        except Exception as err:  # as above
            if fail:
                failed(f"expression {expression!r} failed: {_why(err)}", where)
            continue
        if result is True:
            continue
        if result is not False:
            if fail:
                failed(f"expression {expression!r} is not a bool", where)
            continue
        failed(_message(validation, expression, context), where)
    return found


def not_evaluated(policy: AdmissionPolicy, policy_set: str) -> Finding | None:
    """A warning for a policy rollwright cannot evaluate (it takes parameters)."""
    if policy.spec.get("paramKind"):
        return Finding.on(
            None,
            policy_set,
            "warn",
            f"{policy.policy} takes parameters (paramKind): rollwright does not evaluate it",
            f"{policy.policy} ({policy.file})",
        )
    return None


def _message(validation: dict[str, Any], expression: str, context: Any) -> str:
    if validation.get("messageExpression"):
        try:
            text = _cel().evaluate(str(validation["messageExpression"]), context)
            if isinstance(text, str) and text.strip():
                return text
        except Exception:  # the API server falls back to `message` too
            pass
    return str(validation.get("message") or f"failed expression: {expression}")


def _why(err: Exception) -> str:
    """A CEL runtime error in words (a missing field comes back as a bare KeyError)."""
    if isinstance(err, KeyError):
        return f"no such key: {err.args[0] if err.args else ''}"
    return " ".join(str(err).split()) or type(err).__name__


def _expressions(spec: dict[str, Any]) -> list[str]:
    out = []
    for key in ("matchConditions", "variables", "validations"):
        for entry in spec.get(key) or []:
            if isinstance(entry, dict) and entry.get("expression"):
                out.append(str(entry["expression"]))
    for entry in spec.get("validations") or []:
        if isinstance(entry, dict) and entry.get("messageExpression"):
            out.append(str(entry["messageExpression"]))
    return out


def _actions(policy: AdmissionPolicy, manifest: Manifest) -> list[Level]:
    """The levels a failure reports at: from the bindings that name the policy and match
    the object (Deny → deny; Warn and Audit → warn); no binding at all: deny."""
    if not policy.bindings:
        return ["deny"]
    levels: list[Level] = []
    for binding in policy.bindings:
        if not _matches(binding.get("matchResources") or {}, manifest, everything=True):
            continue
        for action in binding.get("validationActions") or []:
            level: Level = "deny" if action == "Deny" else "warn"
            if level not in levels:
                levels.append(level)
    return levels


def _matches(constraints: dict[str, Any], manifest: Manifest, *, everything: bool = False) -> bool:
    """Whether match constraints select the object; `everything`: no resource rules match
    every object (a binding's matchResources) rather than none (a policy's)."""
    rules = constraints.get("resourceRules")
    if rules is None and not everything:
        return False
    if rules is not None and not any(_rule_matches(r, manifest) for r in rules):
        return False
    if any(_rule_matches(r, manifest) for r in constraints.get("excludeResourceRules") or []):
        return False
    return _selects(constraints.get("objectSelector") or {}, manifest.labels)


def _rule_matches(rule: dict[str, Any], manifest: Manifest) -> bool:
    group, version = manifest.group_version
    operations = rule.get("operations") or []
    if not any(op in ("*", "CREATE", "UPDATE") for op in operations):
        return False
    if not _among(group, rule.get("apiGroups")) or not _among(version, rule.get("apiVersions")):
        return False
    resources = [r for r in rule.get("resources") or [] if "/" not in r or r == "*/*"]
    if not any(r in ("*", "*/*", _resource(manifest)) for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or manifest.name in names


def _among(value: str, allowed: list[str] | None) -> bool:
    return allowed is not None and ("*" in allowed or value in allowed)


def _resource(manifest: Manifest) -> str:
    """The resource of a kind as Kubernetes guesses it (meta.UnsafeGuessKindToResource)."""
    kind = manifest.kind.lower()
    if not kind or kind == "endpoints":
        return kind
    if kind.endswith("s"):
        return kind + "es"
    if kind.endswith("y"):
        return kind[:-1] + "ies"
    return kind + "s"


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(str(key)) != str(value):
            return False
    for requirement in selector.get("matchExpressions") or []:
        key = str(requirement.get("key"))
        values = [str(v) for v in requirement.get("values") or []]
        operator = requirement.get("operator")
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _line_of(text: str, expression: str) -> int | None:
    """The line of a file where an expression starts (its first line, as written)."""
    first = expression.strip().splitlines()[0] if expression.strip() else ""
    for number, line in enumerate(text.splitlines(), 1):
        if first and first in line:
            return number
    return None

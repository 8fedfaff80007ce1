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

import yaml

from shared.engine.errors import FleetError
from shared.engine.policies.objects import Finding, Level, Manifest
from shared.engine.policies.resources import ResourceNames

KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
GROUP = "admissionregistration.k8s.io"
# A binding's validationActions, as the API server accepts them.
ACTIONS = ("Deny", "Warn", "Audit")
_NAME = ("metadata", "name")


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
    compiled. What the API server would refuse is a FleetError at the file (and line, when
    `sources` has the file's text) of the object: an expression that does not compile, two
    objects of a kind with one name (the second would replace the first), a binding whose
    `validationActions` is empty or holds something but Deny, Warn and Audit."""
    texts = sources or {}
    policies: dict[str, AdmissionPolicy] = {}
    bindings: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], tuple[str, int]] = {}  # (kind, name) → (file, nth there)
    count: dict[tuple[str, str, str], int] = {}
    for manifest in manifests:
        if not (is_policy(manifest.body) or is_binding(manifest.body)):
            continue
        kind = manifest.kind
        nth = count.get((manifest.file, kind, manifest.name), 0)
        count[(manifest.file, kind, manifest.name)] = nth + 1
        text = texts.get(manifest.file)
        first = seen.get((kind, manifest.name))
        if first is not None:
            # Lines are looked up only for a mistake: composing a file is the cost.
            at = _object_line(texts.get(first[0]), kind, manifest.name, first[1], _NAME)
            raise FleetError(
                f"{kind} {manifest.name!r} is defined twice (first at "
                f"{first[0]}{f':{at}' if at else ''}): the API server keeps one object per "
                "name, the second would replace the first",
                path=manifest.file,
                line=_object_line(text, kind, manifest.name, nth, _NAME),
            )
        seen[(kind, manifest.name)] = (manifest.file, nth)
        spec = manifest.body.get("spec") or {}
        if not isinstance(spec, dict):
            raise FleetError(
                f"{kind} {manifest.name!r}: spec is not a mapping",
                path=manifest.file,
                line=_object_line(text, kind, manifest.name, nth, ("spec",)),
            )
        if is_policy(manifest.body):
            policies[manifest.name] = AdmissionPolicy(manifest.name, manifest.file, spec)
        else:
            problem = _actions_problem(spec.get("validationActions"))
            if problem:
                raise FleetError(
                    f"{kind} {manifest.name!r}: spec.validationActions {problem}",
                    path=manifest.file,
                    line=_object_line(
                        text, kind, manifest.name, nth, ("spec", "validationActions")
                    ),
                )
            bindings.append(spec)
    for binding in bindings:
        target = policies.get(str(binding.get("policyName") or ""))
        if target is not None:
            target.bindings.append(binding)
    for policy in policies.values():
        for expression in _expressions(policy.spec):
            try:
                _cel().compile(expression)
            except (ValueError, RuntimeError) as err:
                text = texts.get(policy.file)
                raise FleetError(
                    f"{policy.policy}: CEL expression {expression!r} does not compile: "
                    + " ".join(str(err).split()),
                    path=policy.file,
                    line=_line_of(text, expression) if text else None,
                ) from None
    return [policies[name] for name in sorted(policies)]


def _actions_problem(actions: Any) -> str:
    """Why the API server refuses a binding's `validationActions` ("" when it does not)."""
    if not actions:
        return f"is empty: a binding needs at least one of {', '.join(ACTIONS)}"
    if not isinstance(actions, list):
        return f"is not a list of {', '.join(ACTIONS)}"
    for action in actions:
        if action not in ACTIONS:
            return f"has {action!r}: each is one of {', '.join(ACTIONS)} (case matters)"
    if len(set(actions)) < len(actions):
        return "names an action twice"
    if "Deny" in actions and "Warn" in actions:
        return "has both Deny and Warn (the API server allows one of them)"
    return ""


def _object_line(
    text: str | None, kind: str, name: str, nth: int, keys: tuple[str, ...]
) -> int | None:
    """The line of `keys` (as deep as they go) in the `nth` document of `text` that is a `kind`
    named `name`."""
    if not text:
        return None
    try:
        documents = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return None
    found = [
        doc
        for doc in documents
        if _child(doc, "kind") is not None
        and getattr(_child(doc, "kind"), "value", None) == kind
        and getattr(_child(_child(doc, "metadata"), "name"), "value", None) == name
    ]
    if nth >= len(found):
        return None
    node: yaml.Node | None = found[nth]
    line = found[nth].start_mark.line + 1
    for key in keys:
        node = _child(node, key)
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v  # type: ignore[no-any-return]
    return None


def evaluate(
    policy: AdmissionPolicy, manifest: Manifest, policy_set: str, names: ResourceNames
) -> list[Finding]:
    """What `policy` says of one object: a finding per failing validation and action, or a
    warning that the object's resource name (which the rules match on) is not known."""
    spec = policy.spec
    group, version = manifest.group_version
    resource = names.plural(group, manifest.kind)
    matched = _matches(spec.get("matchConstraints") or {}, manifest, resource)
    if matched is False:
        return []
    actions = _actions(policy, manifest, resource) if matched else None
    if actions is None:
        return [_unknown_resource(policy, manifest, policy_set)]
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
    context.add_variable(
        "request",
        {
            "kind": {"group": group, "version": version, "kind": manifest.kind},
            "resource": {"group": group, "version": version, "resource": resource},
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


def _unknown_resource(policy: AdmissionPolicy, manifest: Manifest, policy_set: str) -> Finding:
    """The warning for an object whose kind's resource name is unknown: a rule naming
    resources can be judged neither way, and rollwright does not guess it."""
    api = str(manifest.body.get("apiVersion") or "")
    return Finding.on(
        None,
        policy_set,
        "warn",
        f"{policy.policy} is not evaluated on kind {manifest.kind} ({api}): its resource name "
        "is not known (no CustomResourceDefinition in the render names its plural, and it is "
        "not a built-in kind), so the policy's resource rules cannot be matched",
        f"{policy.policy} ({policy.file})",
    )


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


def _actions(
    policy: AdmissionPolicy, manifest: Manifest, resource: str | None
) -> list[Level] | None:
    """The levels a failure reports at: from the bindings that name the policy and match
    the object (Deny → deny; Warn and Audit → warn); no binding at all: deny. None: some
    binding's resource rules cannot be judged (the resource name is unknown)."""
    if not policy.bindings:
        return ["deny"]
    levels: list[Level] = []
    for binding in policy.bindings:
        matched = _matches(binding.get("matchResources") or {}, manifest, resource, everything=True)
        if matched is None:
            return None
        if not matched:
            continue
        for action in binding.get("validationActions") or []:
            level: Level = "deny" if action == "Deny" else "warn"
            if level not in levels:
                levels.append(level)
    return levels


def _matches(
    constraints: dict[str, Any],
    manifest: Manifest,
    resource: str | None,
    *,
    everything: bool = False,
) -> bool | None:
    """Whether match constraints select the object; `everything`: no resource rules match
    every object (a binding's matchResources) rather than none (a policy's). None: it turns
    on a rule naming resources, and the object's resource name is unknown."""
    rules = constraints.get("resourceRules")
    if rules is None and not everything:
        return False
    unknown = False
    if rules is not None:
        results = [_rule_matches(r, manifest, resource) for r in rules]
        if True not in results:
            if None not in results:
                return False
            unknown = True
    excluded = [
        _rule_matches(r, manifest, resource) for r in constraints.get("excludeResourceRules") or []
    ]
    if True in excluded:
        return False
    if not _selects(constraints.get("objectSelector") or {}, manifest.labels):
        return False
    return None if unknown or None in excluded else True


def _rule_matches(rule: dict[str, Any], manifest: Manifest, resource: str | None) -> bool | None:
    """Whether one resource rule selects the object (None: it names resources, and the
    object's resource name is unknown)."""
    group, version = manifest.group_version
    operations = rule.get("operations") or []
    if not any(op in ("*", "CREATE", "UPDATE") for op in operations):
        return False
    if not _among(group, rule.get("apiGroups")) or not _among(version, rule.get("apiVersions")):
        return False
    names = rule.get("resourceNames") or []
    if names and manifest.name not in names:
        return False
    resources = [r for r in rule.get("resources") or [] if "/" not in r or r == "*/*"]
    if any(r in ("*", "*/*") for r in resources):
        return True
    if not resources:
        return False
    if resource is None:
        return None
    return resource in resources


def _among(value: str, allowed: list[str] | None) -> bool:
    return allowed is not None and ("*" in allowed or value in allowed)


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

"""What a root's policy sets found, as reviewers read it (docs/governance.md, "Policy sets"):
the findings as payloads, denies first, within MAX_FINDINGS for the check run, and one
approval requirement per set with a failing `deny`."""

from __future__ import annotations

from collections.abc import Iterable

from shared.contracts.governance import (
    MAX_FINDINGS,
    POLICY_SET_PREFIX,
    PolicyChecks,
    PolicyFinding,
    PolicySetRequirement,
)
from shared.engine.config.fleet import FleetConfig
from shared.engine.policies.objects import Finding
from shared.engine.policies.sets import sets_for


def findings_of(found: Iterable[Finding]) -> list[PolicyFinding]:
    """Every finding once, denies first, then by set, file and object."""
    unique = {
        (f.level != "deny", f.policy_set, f.file, f.kind, f.namespace, f.name, f.policy, f.message)
        for f in found
    }
    return [
        PolicyFinding(
            policy_set=policy_set,
            level="warn" if warn else "deny",
            message=message,
            policy=policy,
            kind=kind,
            namespace=namespace,
            name=name,
            file=file,
        )
        for warn, policy_set, file, kind, namespace, name, policy, message in sorted(unique)
    ]


def policy_checks(
    config: FleetConfig, root: str, findings: list[PolicyFinding]
) -> tuple[PolicyChecks, list[PolicySetRequirement]]:
    """The check run's view of the findings, and the requirements their denies make."""
    sets = sets_for(config, root)
    checks = PolicyChecks(
        sets=[s.name for s in sets],
        denies=sum(1 for f in findings if f.level == "deny"),
        warnings=sum(1 for f in findings if f.level == "warn"),
        findings=findings[:MAX_FINDINGS],
    )
    requirements = []
    for policy_set in sets:
        denies = sum(1 for f in findings if f.level == "deny" and f.policy_set == policy_set.name)
        if denies:
            requirements.append(
                PolicySetRequirement(
                    name=POLICY_SET_PREFIX + policy_set.name,
                    policy_set=policy_set.name,
                    owners=list(policy_set.owners),
                    denies=denies,
                )
            )
    return checks, requirements

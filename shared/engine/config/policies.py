"""rollwright.yaml `policies`: policy sets over the rendered manifests, each owned by people
who may let its failing `deny` results through (docs/governance.md, "Policy sets")."""

from __future__ import annotations

import fnmatch
import re

from pydantic import Field, field_validator, model_validator

from shared.engine.config.parsing import StrictModel
from shared.engine.config.review import check_logins

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class PolicySet(StrictModel):
    """One team's policies: Rego files and ValidatingAdmissionPolicy objects in a folder of
    the fleet repo, and (`rendered`) the ValidatingAdmissionPolicy objects the render
    carries."""

    name: str = Field(
        description="The set's name (lowercase, digits, `.`, `_`, `-`): the "
        "approval requirement and the check runs name it."
    )
    path: str | None = Field(
        default=None,
        description="A folder of the fleet repo: its `*.rego` files (conftest's `deny`, "
        "`violation` and `warn` rules) and its `*.yaml` ValidatingAdmissionPolicy and "
        "ValidatingAdmissionPolicyBinding objects (CEL), subfolders included.",
    )
    owners: list[str] = Field(
        description="Who may let a failing `deny` through: GitHub logins and teams "
        "(`@org/team-slug`), with write access to the repository.",
    )
    roots: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Globs of the root ids the set checks (`prod/*`; `*` matches across `/`). "
        "Default: every root.",
    )
    packages: list[str] = Field(
        default_factory=lambda: ["main"],
        description="The Rego packages whose rules are read (conftest's namespaces). "
        "Default: `main`.",
    )
    rendered: bool = Field(
        default=False,
        description="Also check the ValidatingAdmissionPolicy objects (and their bindings) "
        "the root's own render carries.",
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"{value!r}: a policy set's name is lowercase letters, digits, '.', '_', '-'"
            )
        return value

    @field_validator("owners")
    @classmethod
    def _check_owners(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("a policy set needs at least one owner")
        return check_logins(value)

    @field_validator("packages")
    @classmethod
    def _check_packages(cls, value: list[str]) -> list[str]:
        for package in value:
            if not _PACKAGE.match(package):
                raise ValueError(f"{package!r} is not a Rego package name (main, k8s.security)")
        return value

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str | None) -> str | None:
        if value is None:
            return value
        clean = value.strip("/")
        if not clean or value.startswith("/") or ".." in clean.split("/"):
            raise ValueError(f"{value!r}: a folder inside the fleet repo (policies/security)")
        return clean

    @model_validator(mode="after")
    def _has_policies(self) -> PolicySet:
        if self.path is None and not self.rendered:
            raise ValueError(f"policy set {self.name!r} has neither a path nor rendered: true")
        return self

    def applies_to(self, root: str) -> bool:
        return any(fnmatch.fnmatchcase(root, glob) for glob in self.roots)


def check_unique(sets: list[PolicySet]) -> list[PolicySet]:
    seen: set[str] = set()
    for policy_set in sets:
        if policy_set.name in seen:
            raise ValueError(f"policy set {policy_set.name!r} is named twice")
        seen.add(policy_set.name)
    return sets

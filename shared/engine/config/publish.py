"""rollwright.yaml `publish`: where approved renders go (docs/publishing.md), and where a
root's files land under a target."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from shared.engine.config.parsing import StrictModel

_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$")
# No credentials in https URLs (the URL shows in messages); ssh users are not secrets.
_REMOTE_URL = re.compile(r"^https://[^\s@]+$|^ssh://\S+$|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+$")
_BRANCH = re.compile(r"^(?!/|-)(?!.*(?:\.\.|//|@\{|\.lock$|/$|\.$))[A-Za-z0-9._/-]+$")
ROOT_FIELD = "{root}"


def target_path(template: str, root: str) -> str:
    """Where a root's files go under a publish target: the template with `{root}` filled
    in, as a directory (`prod/eu/`), or "" for the target's top level."""
    path = template.replace(ROOT_FIELD, root).strip("/")
    return f"{path}/" if path else ""


def _check_template(value: str) -> str:
    """A `{root}` path template: relative, no `..`, `{root}` its only field."""
    if ROOT_FIELD not in value:
        raise ValueError(
            "must contain {root}: without it every root would replace the others' files"
        )
    rest = value.replace(ROOT_FIELD, "")
    if "{" in rest or "}" in rest:
        raise ValueError("{root} is the only field a publish path may use")
    if value.startswith("/") or "\\" in value:
        raise ValueError("must be a relative POSIX path (no leading '/')")
    if any(part in (".", "..") for part in value.split("/")):
        raise ValueError("must not contain '.' or '..' segments")
    return value


class GitPublishSettings(StrictModel):
    repository: str = Field(
        default="",
        description="Repository to publish to: empty for the fleet repo itself, `owner/name` "
        "on the same GitHub (same owner as the fleet repo; pushed with the installation "
        "token), or an `https://` / `ssh://` / `git@host:path` URL pushed with the worker's "
        "own git credentials (never the installation token).",
    )
    branch: str = Field(default="rendered", description="Branch that receives the renders.")
    path: str = Field(
        default="{root}/",
        description="Where a root's tree goes in that branch; `{root}` is the root id. Only "
        "this subtree is replaced.",
    )

    @field_validator("repository")
    @classmethod
    def _check_repository(cls, value: str) -> str:
        if value and not (_REPOSITORY.match(value) or _REMOTE_URL.match(value)):
            raise ValueError(
                "expected `owner/name` or an https://, ssh:// or git@host:path URL (local "
                "paths are not publish targets)"
            )
        return value

    @field_validator("branch")
    @classmethod
    def _check_branch(cls, value: str) -> str:
        if not _BRANCH.match(value):
            raise ValueError(f"{value!r} is not a valid branch name")
        return value

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        return _check_template(value)


class S3PublishSettings(StrictModel):
    bucket: str = Field(default="", description="Bucket (the worker's S3 endpoint and keys).")
    prefix: str = Field(
        default="{root}/", description="Key prefix per root; `{root}` is the root id."
    )

    @field_validator("prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        return _check_template(value)


class CatalogPublishSettings(StrictModel):
    """Where a commodore cluster's catalog goes in its catalog repository."""

    mode: Literal["commit", "pull-request"] = Field(
        default="commit",
        description="`commit`: to the catalog repository's default branch, as Commodore "
        "pushes; `pull-request`: to `branch`, with a pull request into the default branch "
        "(catalog repositories on the configured GitHub only).",
    )
    branch: str = Field(
        default="rollwright/catalog",
        description="The branch of the pull request (mode pull-request).",
    )

    @field_validator("branch")
    @classmethod
    def _check_branch(cls, value: str) -> str:
        if not _BRANCH.match(value):
            raise ValueError(f"{value!r} is not a valid branch name")
        return value


class PublishSettings(StrictModel):
    """Where approved renders go (docs/publishing.md)."""

    target: Literal["blob", "git", "s3", "catalog"] = Field(
        default="blob",
        description="`blob`: the service's blob store (embedded stack); `git`: a branch or "
        "repository Argo CD / Flux syncs; `s3`: a prefix for Flux Bucket sources; `catalog` "
        "(layout commodore): each cluster's catalog repository, as Commodore pushes it.",
    )
    secrets: Literal["refuse", "sops"] = Field(
        default="refuse",
        description="A render with secret values, published to git or S3: `refuse` to "
        "publish it, or `sops` to re-encrypt each file holding secret values for the "
        "recipients of the fleet's .sops.yaml creation rules.",
    )
    git: GitPublishSettings = Field(default_factory=GitPublishSettings)
    s3: S3PublishSettings = Field(default_factory=S3PublishSettings)
    catalog: CatalogPublishSettings = Field(default_factory=CatalogPublishSettings)

    @model_validator(mode="after")
    def _check_target(self) -> PublishSettings:
        if self.target == "s3" and not self.s3.bucket:
            raise ValueError("target s3 needs s3.bucket")
        return self

"""rollwright.yaml `commodore`: the repositories and clusters of a Commodore (Project Syn)
tenant (docs/formats/commodore.md).

The fleet repository is the tenant repository. What Commodore reads from the Lieutenant API
(the global repository, the tenant, each cluster's facts) comes from Lieutenant
(`lieutenant`), or is given here in Lieutenant's own field names, for teams without it."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from shared.engine.config.parsing import StrictModel


class GlobalRepo(StrictModel):
    """The global defaults repository (Lieutenant's tenant `globalGitRepoURL`)."""

    url: str = Field(description="Git URL of the global repository (https, ssh or file://).")
    revision: str | None = Field(
        default=None,
        description="Branch, tag or commit (Lieutenant's `globalGitRepoRevision`); default: "
        "the repository's default branch.",
    )


class Tenant(StrictModel):
    """The tenant whose repository this is (Lieutenant's `GET /tenants/<id>`)."""

    id: str = Field(
        description="Tenant id (`t-acme`): the classes of this repository are `<id>.*`."
    )
    display_name: str = Field(default="", alias="displayName")


class Cluster(StrictModel):
    """One cluster (Lieutenant's `GET /clusters/<id>`): a root of the fleet."""

    id: str = Field(description="Cluster id (`c-demo`): the root and `parameters.cluster.name`.")
    display_name: str = Field(default="", alias="displayName")
    catalog_url: str = Field(
        default="",
        alias="catalogUrl",
        description="The catalog repository (Lieutenant's `gitRepo.url`): "
        "`parameters.cluster.catalog_url`.",
    )
    facts: dict[str, Any] = Field(
        description="`parameters.facts`; `distribution` and `cloud` are required, as with "
        "Commodore."
    )
    dynamic_facts: dict[str, Any] = Field(default_factory=dict, alias="dynamicFacts")
    global_revision: str | None = Field(
        default=None,
        alias="globalGitRepoRevision",
        description="This cluster's revision of the global repository, over `global.revision`.",
    )

    @field_validator("facts")
    @classmethod
    def _required_facts(cls, facts: dict[str, Any]) -> dict[str, Any]:
        for fact in ("distribution", "cloud"):
            if not facts.get(fact):
                raise ValueError(f"required fact {fact!r} not set (Commodore requires it)")
        return facts


class Lieutenant(StrictModel):
    """The Lieutenant API the clusters and the tenant are read from, as Commodore reads them;
    its token is `$COMMODORE_API_TOKEN`, as with Commodore."""

    url: str | None = Field(
        default=None,
        description="The API's URL; default: `$COMMODORE_API_URL`. With that set, only the "
        "same URL is accepted (the token goes nowhere else); without it, this URL is asked "
        "without a token.",
    )


class CommodoreSettings(StrictModel):
    """How the commodore layout reads a tenant repository (docs/formats/commodore.md)."""

    lieutenant: Lieutenant | None = None
    global_repo: GlobalRepo | None = Field(
        default=None,
        alias="global",
        description="The global repository; with Lieutenant, default: the tenant's.",
    )
    tenant: Tenant | None = None
    clusters: list[Cluster | str] = Field(
        default_factory=list,
        description="The tenant's clusters, one root each: a cluster with its facts, or (with "
        "Lieutenant) a cluster id. With Lieutenant and no list: every cluster of the tenant.",
    )

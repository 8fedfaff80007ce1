"""What Commodore reports of a compile: the commits of the component instances, packages, global
and tenant repositories it compiled from, as the catalog commit's message and as the
`compileMeta` body it POSTs to Lieutenant (Commodore's `CompileMeta`).

    record = CompileRecord()
    compile_catalog(tree, cluster, record=record)   # fills instances, packages, global
    meta = record.meta(tenant=VersionInfo(url, "main", sha, sha[:6]), timestamp=now)
    meta.commit_message()     # "Automated catalog update from Commodore\\n\\n…"
    meta.as_dict()            # the compileMeta body
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

COMMIT_TITLE = "Automated catalog update from Commodore"
TIMESTAMP_LINE = "Compilation timestamp: "


@dataclass(frozen=True)
class VersionInfo:
    """A repository at the commit a compile used (Commodore's `VersionInfo`)."""

    url: str
    version: str
    git_sha: str
    short_sha: str
    path: str = ""
    component: str = ""  # instances only: the component the instance is of

    def as_dict(self) -> dict[str, str]:
        info = {"gitSha": self.git_sha, "url": self.url, "version": self.version}
        if self.path:
            info["path"] = self.path
        if self.component:
            info["component"] = self.component
        return info

    def pretty(self, name: str) -> str:
        if self.component and self.component != name:
            name = f"{name} ({self.component})"
        path = f"\n   path: {self.path}" if self.path else ""
        return f" * {name}: {self.version} ({self.short_sha})\n   url: {self.url}{path}"


@dataclass
class CompileRecord:
    """Filled in by `compile_catalog`: the repositories the catalog was compiled from."""

    instances: dict[str, VersionInfo] = field(default_factory=dict)
    packages: dict[str, VersionInfo] = field(default_factory=dict)
    global_repo: VersionInfo | None = None

    def meta(self, *, tenant: VersionInfo, timestamp: datetime) -> CompileMeta:
        if self.global_repo is None:
            raise ValueError("the compile recorded no global repository")
        return CompileMeta(
            instances=dict(self.instances),
            packages=dict(self.packages),
            global_repo=self.global_repo,
            tenant=tenant,
            timestamp=timestamp,
        )


@dataclass(frozen=True)
class CompileMeta:
    instances: dict[str, VersionInfo]
    packages: dict[str, VersionInfo]
    global_repo: VersionInfo
    tenant: VersionInfo
    timestamp: datetime  # timezone-aware

    @property
    def last_compile(self) -> str:
        return self.timestamp.isoformat(timespec="milliseconds")

    def commit_message(self) -> str:
        """Commodore's `render_catalog_commit_message`, byte for byte."""
        instances = "\n".join(i.pretty(n) for n, i in sorted(self.instances.items()))
        packages = "\n".join(p.pretty(n) for n, p in sorted(self.packages.items()))
        configs = "\n".join((self.global_repo.pretty("global"), self.tenant.pretty("tenant")))
        return (
            f"{COMMIT_TITLE}\n\n"
            f"Component instance commits:\n{instances}\n\n"
            f"Package commits:\n{packages}\n\n"
            f"Configuration commits:\n{configs}\n\n"
            f"{TIMESTAMP_LINE}{self.last_compile}\n"
        )

    def as_dict(self, build_info: dict[str, str]) -> dict[str, Any]:
        """The `compileMeta` body (Lieutenant's `ClusterCompileMeta`), keys as Commodore
        orders them. `build_info` stands where Commodore puts its own version."""
        return {
            "commodoreBuildInfo": build_info,
            "global": self.global_repo.as_dict(),
            "instances": {a: i.as_dict() for a, i in sorted(self.instances.items())},
            "lastCompile": self.last_compile,
            "packages": {p: i.as_dict() for p, i in sorted(self.packages.items())},
            "tenant": self.tenant.as_dict(),
        }


def timestamp_of(message: str) -> datetime | None:
    """The compilation timestamp of a catalog commit's message: what a retry reports to
    Lieutenant for a commit an earlier attempt made."""
    for line in message.splitlines():
        if line.startswith(TIMESTAMP_LINE):
            try:
                return datetime.fromisoformat(line[len(TIMESTAMP_LINE) :].strip())
            except ValueError:
                return None
    return None

"""A `Tree` with some files written or deleted: a fleet as a planned change would leave it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from shared.engine.errors import FleetError
from shared.engine.tree import Tree, join


class Overlay:
    """A `Tree` with some files written or deleted (what a plan would commit)."""

    def __init__(self, base: Tree, writes: dict[str, bytes], deletes: Iterable[str] = ()) -> None:
        self.base = base
        self.writes = {k: v.decode() for k, v in writes.items()}
        self.deletes = set(deletes)

    def is_file(self, rel: str) -> bool:
        if rel in self.writes:
            return True
        return rel not in self.deletes and self.base.is_file(rel)

    def is_dir(self, rel: str) -> bool:
        prefix = f"{rel}/"
        return self.base.is_dir(rel) or any(p.startswith(prefix) for p in self.writes)

    def listdir(self, rel: str) -> list[str]:
        prefix = f"{rel}/" if rel else ""
        names = {n for n in self.base.listdir(rel) if join(rel, n) not in self.deletes}
        names |= {p[len(prefix) :].split("/", 1)[0] for p in self.writes if p.startswith(prefix)}
        return sorted(names)

    def read_text(self, rel: str) -> str:
        if rel in self.writes:
            return self.writes[rel]
        if rel in self.deletes:
            raise FileNotFoundError(rel)
        return self.base.read_text(rel)

    def local_path(self, rel: str) -> Path:
        raise FleetError(f"{rel}: a planned change is not on disk")

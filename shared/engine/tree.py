"""A fleet repo's files at one revision: a checkout on disk, or git objects read in place.

Discovery, values and affected-root computation read through `Tree`, so they work on a git
revision without a checkout. Rendering charts and kustomizations needs real directories and
therefore a `WorkTree` (`local_path`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path, PurePosixPath
from typing import Protocol

from shared.process import run


class Tree(Protocol):
    """Read-only view of a repository; paths are POSIX, relative to the repo root."""

    def is_file(self, rel: str) -> bool: ...

    def is_dir(self, rel: str) -> bool: ...

    def listdir(self, rel: str) -> list[str]:
        """Sorted entry names of directory `rel` ('' is the root); [] when it is missing."""
        ...

    def read_text(self, rel: str) -> str: ...

    def local_path(self, rel: str) -> Path:
        """A real filesystem path for `rel` (charts, kustomize); WorkTree only."""
        ...


def join(*parts: str) -> str:
    return str(PurePosixPath(*[p for p in parts if p])) if any(parts) else ""


class WorkTree:
    """A checkout (or any directory) on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def __repr__(self) -> str:
        return f"WorkTree({str(self.root)!r})"

    def _p(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else str(self.root)

    def is_file(self, rel: str) -> bool:
        return os.path.isfile(self._p(rel))

    def is_dir(self, rel: str) -> bool:
        return os.path.isdir(self._p(rel))

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self._p(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read_text(self, rel: str) -> str:
        with open(self._p(rel), encoding="utf-8") as fh:
            return fh.read()

    def local_path(self, rel: str) -> Path:
        return Path(self._p(rel))


class GitError(RuntimeError):
    """git itself failed (not a fleet mistake)."""


def git(repo: Path, *args: str, input_text: str | None = None) -> str:
    # Local object-store reads and writes: no deadline (a big repository is not a fault).
    proc = run(["git", "-C", str(repo), *args], input=input_text, timeout=None)
    if not proc.ok:
        raise GitError(f"git {' '.join(args)}: {proc.err.strip() or proc.out.strip()}")
    return proc.out


class GitTree:
    """The tree of one git revision, read from the object store on demand (no checkout)."""

    def __init__(self, repo: Path, revision: str) -> None:
        self.repo = repo
        self.revision = git(repo, "rev-parse", "--verify", f"{revision}^{{commit}}").strip()
        self._dirs: dict[str, dict[str, str]] = {}  # dir → {name: "blob"|"tree"}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GitTree({str(self.repo)!r}, {self.revision[:12]!r})"

    def _entries(self, rel: str) -> dict[str, str]:
        with self._lock:
            cached = self._dirs.get(rel)
        if cached is not None:
            return cached
        entries: dict[str, str] = {}
        parent, _, name = rel.rpartition("/")
        if rel and name not in self._entries(parent):
            pass  # missing directory: no git call needed
        elif rel and self._entries(parent).get(name) != "tree":
            pass
        else:
            spec = f"{self.revision}:{rel}" if rel else self.revision
            out = git(self.repo, "ls-tree", "-z", spec)
            for record in out.split("\0"):
                if not record:
                    continue
                meta, _, entry = record.partition("\t")
                kind = meta.split()[1]
                entries[entry] = "tree" if kind == "tree" else "blob"
        with self._lock:
            self._dirs[rel] = entries
        return entries

    def prefetch(self, rel: str) -> None:
        """List every directory under `rel` with one `git ls-tree -r` instead of one call per
        directory (discovering a 10,000-cluster fleet would otherwise take minutes)."""
        if not self.is_dir(rel):
            return
        spec = f"{self.revision}:{rel}" if rel else self.revision
        out = git(self.repo, "ls-tree", "-r", "-t", "-z", spec)
        listing: dict[str, dict[str, str]] = {rel: {}}
        for record in out.split("\0"):
            if not record:
                continue
            meta, _, path = record.partition("\t")
            kind = "tree" if meta.split()[1] == "tree" else "blob"
            parent, _, name = join(rel, path).rpartition("/")
            listing.setdefault(parent, {})[name] = kind
            if kind == "tree":
                listing.setdefault(join(rel, path), {})
        with self._lock:
            self._dirs.update(listing)

    def is_file(self, rel: str) -> bool:
        parent, _, name = rel.rpartition("/")
        return self._entries(parent).get(name) == "blob"

    def is_dir(self, rel: str) -> bool:
        if not rel:
            return True
        parent, _, name = rel.rpartition("/")
        return self._entries(parent).get(name) == "tree"

    def listdir(self, rel: str) -> list[str]:
        return sorted(self._entries(rel)) if self.is_dir(rel) else []

    def read_text(self, rel: str) -> str:
        if not self.is_file(rel):
            raise FileNotFoundError(rel)
        return git(self.repo, "show", f"{self.revision}:{rel}")

    def local_path(self, rel: str) -> Path:
        raise GitError(f"{rel}: rendering needs a checkout of {self.revision[:12]}")


def changed_files(repo: Path, base: str, head: str) -> set[str]:
    """Paths added, modified, deleted or renamed (both names) between two revisions."""
    out = git(repo, "diff", "--name-only", "--no-renames", "-z", base, head)
    return {p for p in out.split("\0") if p}

"""Which tenant files a cluster's inventory reads, without compiling it: the classes reachable
from `global.commodore`, their names' references to `cluster`, `facts` and `dynamic_facts`
resolved from what Commodore knows before it renders, relative names resolved against the
including class. A class name that needs anything else (a reference to other parameters,
a parent-relative `..name`) makes the cluster read every file: over-rendering is safe,
missing a cluster is not.

    reads = ClassReader(tree, mirrors).tenant_files(spec)   # {"common.yml", "c-one.yml", …}
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from shared.engine.commodore.clusters import ClusterSpec
from shared.engine.commodore.repos import Mirrors
from shared.engine.tree import Tree

_REFERENCE = re.compile(r"\$\{([^}]*)\}")
SUFFIXES = (".yml", ".yaml", "/init.yml", "/init.yaml")


class Unresolvable(Exception):
    """A class name that only a full inventory render could resolve."""


def _interpolate(name: str, context: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        found: Any = context
        for key in match.group(1).split(":"):
            if not isinstance(found, dict) or key not in found:
                raise Unresolvable(name)
            found = found[key]
        if isinstance(found, dict | list) or found is None:
            raise Unresolvable(name)
        return str(found)

    return _REFERENCE.sub(value, name)


class ClassReader:
    def __init__(self, tree: Tree, mirrors: Mirrors | None = None) -> None:
        self.tree = tree
        self.mirrors = mirrors or Mirrors()
        self._global: dict[tuple[str, str], str | None] = {}
        self._shas: dict[tuple[str, str | None], str] = {}

    def tenant_files(self, spec: ClusterSpec) -> set[str] | None:
        """The tenant files (paths in the fleet repository) the cluster's classes may come
        from, found or not; None: every file (a class name it cannot resolve)."""
        context = {
            "cluster": spec.parameters(),
            "facts": spec.facts,
            "dynamic_facts": spec.dynamic_facts,
        }
        reads: set[str] = set()
        seen: set[str] = set()
        todo = ["global.commodore"]
        try:
            while todo:
                name = todo.pop()
                if name in seen:
                    continue
                seen.add(name)
                text = self._class_text(spec, name, reads)
                if not text:
                    continue
                todo += self._includes(name, text, context)
        except Unresolvable:
            return None
        return reads

    def _class_text(self, spec: ClusterSpec, name: str, reads: set[str]) -> str | None:
        head, _, rest = name.partition(".")
        if not rest:
            return None
        path = rest.replace(".", "/")
        if head == spec.tenant_id:
            reads.update(path + suffix for suffix in SUFFIXES)
            for suffix in SUFFIXES:
                if self.tree.is_file(path + suffix):
                    return self.tree.read_text(path + suffix)
            return None
        if head == "global":
            for suffix in SUFFIXES:
                text = self._global_file(spec, path + suffix)
                if text is not None:
                    return text
        return None  # params, components, defaults: not the tenant's files

    def _global_file(self, spec: ClusterSpec, rel: str) -> str | None:
        key = (spec.global_url, spec.global_revision)
        if key not in self._shas:
            _, self._shas[key] = self.mirrors.commit(
                spec.global_url, spec.global_revision, what="global repository"
            )
        sha = self._shas[key]
        if (sha, rel) not in self._global:
            self._global[(sha, rel)] = self.mirrors.mirror(spec.global_url).read_text(sha, rel)
        return self._global[(sha, rel)]

    def _includes(self, name: str, text: str, context: dict[str, Any]) -> list[str]:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError:
            raise Unresolvable(name) from None
        classes = data.get("classes") if isinstance(data, dict) else None
        found = []
        for entry in classes or []:
            if not isinstance(entry, str):
                raise Unresolvable(name)
            entry = _interpolate(entry, context)
            if entry.startswith(".."):
                raise Unresolvable(name)
            if entry.startswith("."):
                entry = name.rsplit(".", 1)[0] + entry
            found.append(entry)
        return found

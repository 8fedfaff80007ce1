"""Which atlas roots can render differently when some paths change.

The rules, per changed path (docs/formats/atlas.md, "Affected roots"):

- `deployments/global.values.*` and anything under `deployments/apps/` → every root;
- `<dir>/group.values.*`, `<dir>/cluster.values.*` and anything under `<dir>/apps/` → the
  roots at or below `<dir>`, or the leaf cluster containing `<dir>` when there is none (a root
  turning into a group, or back, is reported on both sides by `shared.engine.affected`);
- `templates/<t>/**` → the roots instantiating template `t`;
- a template whose helmfile, kustomizations or charts' `file://` dependencies reference paths
  outside its directory (`../`) is also affected by changes there: under the other
  template's directory, or under the top-level directory reached (`charts/`), followed
  transitively through what is found there; by any change at all when a reference cannot be
  resolved statically or one of its Go templates calls a file function (`readFile`, ...);
- a values template under deployments/ that calls a file function makes its roots affected
  by every change outside deployments/;
- anything else → no root: the engine never reads it. Instance `secrets:` stay inside their
  deployment directory and templates may not read `deployments/`, which is what makes the
  rules above complete.

A one-file change to a cluster reads only that cluster's directories; the template index
(every deployment.yaml) is built only when a template or a path a template references changed.
"""

from __future__ import annotations

import posixpath
import re

from shared.engine import yamldoc
from shared.engine.atlas.discovery import (
    Cluster,
    deployment_defs,
    dpath,
    has_apps,
    has_cluster_below,
    survey,
)
from shared.engine.atlas.files import (
    APPS,
    CLUSTER_FILES,
    DEPLOYMENT_FILE,
    DEPLOYMENTS,
    GLOBAL_FILES,
    GROUP_FILES,
    HELMFILES,
    TEMPLATES,
    join,
)
from shared.engine.atlas.values import ValueFiles
from shared.engine.errors import FleetError
from shared.engine.tree import Tree

ANYWHERE = ""  # an escape prefix matching every path
KUSTOMIZATIONS = frozenset({"kustomization.yaml", "kustomization.yml", "Kustomization"})


def affected_roots(tree: Tree, files: ValueFiles, changed: set[str]) -> set[str]:
    out: set[str] = set()
    elsewhere: list[str] = []
    for path in sorted(changed):
        if path.startswith(DEPLOYMENTS + "/"):
            scope = deployment_scope(path[len(DEPLOYMENTS) + 1 :])
            if scope == "":
                return set(survey(tree).leaves)
            if scope is not None:
                out |= roots_at(tree, scope)
        else:
            elsewhere.append(path)
    if elsewhere:
        templates = touched_templates(tree, elsewhere)
        if templates:
            out |= roots_using(tree, files, templates)
        # A hierarchy values template that reads files (readFile, ...) may read any of them.
        for scope in file_reading_scopes(tree):
            if scope == "":
                return set(survey(tree).leaves)
            out |= roots_at(tree, scope)
    return out


# helmfile's file functions (shared.engine.helm.gotmpl): a template using them may read any file.
FILE_FUNCTIONS = re.compile(r"\b(?:readFile|isFile|isDir|readDir|listDir)\b")


def file_reading_scopes(tree: Tree) -> set[str]:
    """Deployments-relative directories whose values templates (`*.gotmpl` of the directory
    itself or of its deployments) call a file function."""
    out: set[str] = set()
    for here in survey(tree).dirs:
        base = dpath(here)
        dirs = [base]
        apps = join(base, APPS)
        if tree.is_dir(apps):
            dirs += [join(apps, n) for n in tree.listdir(apps) if tree.is_dir(join(apps, n))]
        for directory in dirs:
            for name in tree.listdir(directory):
                path = join(directory, name)
                if name.endswith(".gotmpl") and FILE_FUNCTIONS.search(tree.read_text(path)):
                    out.add(here)
    return out


def deployment_scope(rel: str) -> str | None:
    """The deployments-relative directory a changed file applies to ("" = every cluster), or
    None when the engine never reads the file."""
    parts = rel.split("/")
    for i, part in enumerate(parts[:-1]):
        if part == APPS:
            return "/".join(parts[:i])
    name, directory = parts[-1], "/".join(parts[:-1])
    if name in GLOBAL_FILES:
        return "" if not directory else None
    if name in GROUP_FILES or name in CLUSTER_FILES:
        # Read only in the right kind of directory, but a file in the wrong one still marks
        # its scope: cheaper to over-report than to classify here.
        return directory or None
    return None


def roots_at(tree: Tree, scope: str) -> set[str]:
    """Leaf clusters at or below `deployments/<scope>`, else the leaf that contains it."""
    found = survey(tree, scope)
    if found.with_apps:
        return set(found.leaves)
    parts = scope.split("/")
    skip = scope
    for i in range(len(parts) - 1, 0, -1):
        ancestor = "/".join(parts[:i])
        below = has_cluster_below(tree, ancestor, skip=skip)
        if has_apps(tree, ancestor):
            return set() if below else {ancestor}
        if below:
            return set()
        skip = ancestor
    return set()


# A `../` chain starting a path: at the start of the text or after a delimiter (whitespace,
# quotes, brackets, `,`, `:`, `=`, a YAML list dash). Anything else before it (`}}/../x`,
# `a/../b`) makes the reference dynamic.
_CHAIN = re.compile(r"(?:\.\./)+")
_STATIC_BEFORE = frozenset(" \t\n\"'[(,:=-")
_TOKEN_END = re.compile(r"[\s\"'\],}{)]")


def escape_prefixes(text: str, directory: str, boundary: str) -> set[str]:
    """Where the `../` references in `text` (a file in `directory`) lead outside `boundary`:
    `templates/<name>` for another template, else the top-level directory (or file) of the
    repo; ANYWHERE when a reference cannot be resolved statically."""
    out: set[str] = set()
    for match in _CHAIN.finditer(text):
        start = match.start()
        if start and text[start - 1] == ".":
            continue  # the tail of a longer chain, e.g. `.../`
        if start and text[start - 1] not in _STATIC_BEFORE:
            out.add(ANYWHERE)
            continue
        end = _TOKEN_END.search(text, match.end())
        token = text[start : end.start() if end else len(text)]
        resolved = posixpath.normpath(posixpath.join(directory, token))
        if resolved == ".." or resolved.startswith("../"):
            out.add(ANYWHERE)
        elif resolved == boundary or resolved.startswith(boundary + "/"):
            continue
        elif resolved.startswith(TEMPLATES + "/"):
            out.add("/".join(resolved.split("/")[:2]))
        else:
            out.add(resolved.split("/", 1)[0])
    return out


def prefetch(tree: Tree, rel: str) -> None:
    """One git call for a whole subtree when reading a git revision in place."""
    load = getattr(tree, "prefetch", None)
    if load is not None:
        load(rel)


def _texts(tree: Tree, directory: str) -> list[tuple[str, str]] | None:
    """(directory, text) of the files below `directory` that may reference other paths:
    helmfiles, kustomizations and Chart.yaml (`file://../x` dependencies). None when a Go
    template there calls a file function: it may read anything."""
    out = []
    prefetch(tree, directory)
    pending = [directory]
    while pending:
        here = pending.pop()
        for name in tree.listdir(here):
            path = join(here, name)
            if tree.is_dir(path):
                pending.append(path)
            elif name in KUSTOMIZATIONS or name in HELMFILES:
                out.append((here, tree.read_text(path)))
            elif name == "Chart.yaml":
                out.append((here, tree.read_text(path).replace("file://", " ")))
            if name.endswith(".gotmpl") and FILE_FUNCTIONS.search(tree.read_text(path)):
                return None
    return out


def template_inputs(tree: Tree, template: str) -> set[str]:
    """Paths outside `templates/<template>/` that the template may read, followed through
    the files it reaches (a kustomization referencing `../base`, ...). {ANYWHERE} when a
    reference is dynamic or leaves the repository."""
    own = join(TEMPLATES, template)
    reached: set[str] = set()
    pending = [own]
    while pending:
        directory = pending.pop()
        texts = _texts(tree, directory)
        if texts is None:
            return {ANYWHERE}
        for here, text in texts:
            for prefix in escape_prefixes(text, here, directory) - reached:
                if prefix == ANYWHERE:
                    return {ANYWHERE}
                if prefix == own or prefix.startswith(own + "/"):
                    continue
                reached.add(prefix)
                pending.append(prefix)
    return reached


def touched_templates(tree: Tree, paths: list[str]) -> set[str]:
    """Templates whose inputs include one of `paths` (none under deployments/)."""
    out = {p.split("/")[1] for p in paths if p.startswith(TEMPLATES + "/") and p.count("/") >= 2}
    for template in tree.listdir(TEMPLATES):
        if template in out or not tree.is_dir(join(TEMPLATES, template)):
            continue
        inputs = template_inputs(tree, template)
        if ANYWHERE in inputs or any(
            path == prefix or path.startswith(prefix + "/") for path in paths for prefix in inputs
        ):
            out.add(template)
    return out


def roots_using(tree: Tree, files: ValueFiles, templates: set[str]) -> set[str]:
    """Roots whose winning deployments instantiate one of `templates`. A deployment.yaml
    that cannot be read counts as using every template: over-rendering is safe."""
    used: dict[str, set[str] | None] = {}
    out = set()
    for leaf in survey(tree).leaves:
        for defn in deployment_defs(tree, Cluster(leaf)).values():
            if defn.dir not in used:
                used[defn.dir] = _templates_of(files, join(defn.dir, DEPLOYMENT_FILE))
            names = used[defn.dir]
            if names is None or names & templates:
                out.add(leaf)
                break
    return out


def _templates_of(files: ValueFiles, path: str) -> set[str] | None:
    try:
        data = yamldoc.loads(files.text(path), path)
    except FleetError:
        return None
    apps = data.get("apps") if isinstance(data, dict) else None
    if not isinstance(apps, list):
        return None
    names = set()
    for app in apps:
        if not isinstance(app, dict) or not isinstance(app.get("template"), str):
            return None
        names.add(app["template"])
    return names

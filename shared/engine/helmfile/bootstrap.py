"""kube-renderer's bootstrap files: `bootstrap_template` of the top-level helmfile's state
values, rendered once by gomplate over every release, its documents routed to the paths their
`# Bootstrap: <path>` comments name (relative to kube-renderer's TARGET).

    found = render(states, placements)   # None when no bootstrap_template is set
    found.root                            # "bootstrap": the directory holding every file
    found.files                           # {"helmfile/part1/svc-one.yaml": "# Bootstrap: ..."}

The template sees (kube-renderer 0.1.20):
- `StateValues`: the top-level state's values without the keys that start with `.`;
- `Releases`: every release of every state in `helmfile build` order (sub-helmfiles first),
  `name`, `namespace` when set and `values` (its `values` entries merged, `.kube-renderer`
  always present); the other keys of helmfile's serialisation are marked and a template that
  prints one is refused (their spelling in `helmfile build` is not reproduced);
- `Metadata`: the top-level `.kube-renderer` map;
- `ReleasesMap`: release → the release whose directory it writes to; `DirsMap`: release →
  `<helmfile_dir>/<target_dir or release>` as kube-renderer writes it (not normalised).

Each rendered document is split out as yq splits it and appended to its path; documents
without a `Bootstrap:` comment are dropped. rollwright publishes the files as **one root**:
the deepest directory holding all of them (`bootstrap` for `bootstrap/...` paths).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from shared.engine import yamldoc
from shared.engine.errors import FleetError
from shared.engine.helmfile import gomplate, options, pipeline, yqdoc
from shared.engine.helmfile.states import Release, State

# What `helmfile build` prints of a release besides name, namespace and values: present (as
# helmfile omits empty ones) but not reproduced, so printing one is refused.
UNREPRODUCED = "rollwright-bootstrap-unreproduced:"
LABEL = "Bootstrap"


@dataclass(frozen=True)
class Placement:
    """Where kube-renderer puts an enabled release: `target` is ReleasesMap's value,
    `directory` DirsMap's (None for a release merged into another one's)."""

    release: str
    target: str
    directory: str | None


@dataclass
class Bootstrap:
    root: str
    files: dict[str, str]  # path below `root` → text
    context: dict[str, Any] = field(repr=False)


def template_of(top: State) -> str | None:
    try:
        template = options.section(top.values).get("bootstrap_template")
    except options.OptionError as err:
        raise FleetError(str(err), path=top.path) from None
    if template is None or template == "":
        return None
    if not isinstance(template, str):
        raise FleetError(f"{options.KEY}.bootstrap_template must be text", path=top.path)
    return template


def render(states: list[State], placements: list[Placement]) -> Bootstrap | None:
    top = states[-1]
    template = template_of(top)
    if template is None:
        return None
    _refuse_disabled(states, {p.release for p in placements}, top.path)
    ctx = context(states, placements)
    try:
        # yq prints the option's text and a newline into the file gomplate reads.
        out = gomplate.render(template + "\n", ctx, source=top.path)
    except gomplate.Unsupported as err:
        raise FleetError(
            f"{options.KEY}.bootstrap_template{err.where()}: {err.message}", path=top.path
        ) from None
    except FleetError as err:
        raise FleetError(
            f"{options.KEY}.bootstrap_template line {err.line}: {err.problem.message}",
            path=top.path,
        ) from None
    if UNREPRODUCED in out:
        key = out.split(UNREPRODUCED, 1)[1].split()[0]
        raise FleetError(
            f"{options.KEY}.bootstrap_template prints the releases' {key!r}, whose spelling in "
            "helmfile's build output is not reproduced (name, namespace and values are)",
            path=top.path,
        )
    files = route(out, {p.release for p in placements}, top.path)
    if not files:
        raise FleetError(
            f"{options.KEY}.bootstrap_template renders no document with a `# {LABEL}: <path>` "
            "comment: kube-renderer would write no bootstrap file",
            path=top.path,
        )
    root = _root(sorted(files), top.path)
    below = {posixpath.relpath(path, root): text for path, text in files.items()}
    return Bootstrap(root, dict(sorted(below.items())), ctx)


def _refuse_disabled(states: list[State], enabled: set[str], path: str) -> None:
    for state in states:
        for release in state.releases:
            if release.name not in enabled:
                raise FleetError(
                    f"release {release.name!r} is disabled by its condition: whether "
                    f"kube-renderer's bootstrap template lists it is not settled, so "
                    f"{options.KEY}.bootstrap_template is refused with it",
                    path=release.state,
                    line=release.line,
                )


# --- the context -----------------------------------------------------------------------------


def context(states: list[State], placements: list[Placement]) -> dict[str, Any]:
    top = states[-1]
    return {
        "StateValues": {k: v for k, v in top.values.items() if not str(k).startswith(".")},
        "Releases": [_release(r) for state in states for r in state.releases],
        "Metadata": options.section(top.values),
        "ReleasesMap": {p.release: _scalar(p.target, top.path) for p in placements},
        "DirsMap": {p.release: _scalar(p.directory, top.path) for p in placements if p.directory},
    }


def _release(release: Release) -> dict[str, Any]:
    out: dict[str, Any] = {"name": release.name}
    if release.namespace:
        out["namespace"] = release.namespace
    for key, value in release.raw.items():
        if key not in ("name", "namespace", "values") and value not in (None, "", [], {}):
            out[key] = f"{UNREPRODUCED}{key} "
    values = dict(release.listed)
    values[options.KEY] = values.get(options.KEY) or {}
    out["values"] = values
    return out


def _scalar(text: str, path: str) -> str:
    """A name or directory as kube-renderer's `echo "<release>: <value>"` map reads back."""
    if yamldoc.loads(f"{text}: {text}\n", path) != {text: text}:
        raise FleetError(
            f"{options.KEY}.bootstrap_template: {text!r} would not read back as text in "
            "kube-renderer's ReleasesMap and DirsMap; not reproduced",
            path=path,
        )
    return text


# --- routing ---------------------------------------------------------------------------------


def route(out: str, releases: set[str], path: str) -> dict[str, str]:
    """The rendered documents by the (normalised) path of their `# Bootstrap:` comment."""
    files: dict[str, str] = {}
    try:
        for doc in yqdoc.read(out):
            if yqdoc.data(doc.node) is None:  # the empty document after a final `---`
                if pipeline.labelled(yqdoc.head_comment(doc), LABEL):
                    raise FleetError(
                        f"{options.KEY}.bootstrap_template: a `# {LABEL}:` comment heads an "
                        "empty document (not reproduced)",
                        path=path,
                    )
                continue
            piece = pipeline.split_text(doc)
            target = pipeline.labelled(yqdoc.head_comment(yqdoc.read(piece)[0]), LABEL)
            if not target:
                continue
            name = _checked(target, releases, path)
            files[name] = pipeline.append(files.get(name, ""), piece)
    except yqdoc.NotReproduced as err:
        line = f" (line {err.line} of its output)" if err.line else ""
        raise FleetError(
            f"{options.KEY}.bootstrap_template: {err.message}{line}", path=path
        ) from None
    return files


def _checked(target: str, releases: set[str], path: str) -> str:
    """The bootstrap path as a file below TARGET, or an error where kube-renderer would lose
    the file, mix it with a release's files or write outside its output."""
    clean = posixpath.normpath(target)
    parts = clean.split("/")
    why = ""
    if target != target.strip() or target.endswith("/"):
        why = "is not a file name"
    elif target.startswith("/") or clean == ".." or clean.startswith("../"):
        why = "leaves kube-renderer's output"
    elif "/" not in target:
        why = "has no directory (kube-renderer creates a directory of that name and no file)"
    elif posixpath.dirname(clean) == "":
        why = "is at the top of the output (kube-renderer copies its whole work tree there)"
    elif parts[0] in releases:
        why = f"starts with the release name {parts[0]!r} (kube-renderer mixes their files)"
    elif any(part.startswith(".") for part in parts):
        why = "has a hidden file or directory (kube-renderer's copy leaves it out)"
    if why:
        raise FleetError(
            f"{options.KEY}.bootstrap_template: the path {target!r} of a `# {LABEL}:` "
            f"comment {why}",
            path=path,
        )
    return clean


def _root(paths: list[str], path: str) -> str:
    common = posixpath.commonpath([posixpath.dirname(p) for p in paths])
    if not common:
        tops = sorted({p.split("/", 1)[0] for p in paths})
        raise FleetError(
            f"{options.KEY}.bootstrap_template writes under several top-level directories "
            f"({', '.join(tops)}): rollwright publishes the bootstrap files as one root, the "
            "directory holding them all; put them under one directory",
            path=path,
        )
    return common

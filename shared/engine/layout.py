"""What every fleet layout provides (`Layout`), what it says about a release (`ReleaseInfo`),
and which layouts rollwright knows (`LAYOUTS`): each one's name, the rule that detects it and
where its `Layout` is built.

The layouts (`shared.engine.atlas`, `shared.engine.dimensions`, `shared.engine.helmfile`,
`shared.engine.commodore`)
implement `Layout`;
`shared.engine.fleet` detects and builds one and adds what is common to all. rollwright.yaml's
`layout` key accepts the names registered here (`LayoutName`). Adding a layout is a folder
beside `atlas/` and `dimensions/` plus one `LayoutKind` in `LAYOUTS` (docs/architecture.md,
"Adding a fleet layout").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.tree import Tree


@dataclass(frozen=True)
class ReleaseInfo:
    """What `rollwright values --release` and listings show about one release."""

    id: str  # "<deployment>/<release>" (atlas) or the root's chart name (dimensions)
    template: str
    namespace: str
    labels: dict[str, str]


class Layout(Protocol):
    """A fleet layout as the engine sees it: roots, their releases, values and renders, the
    roots a change affects, and the fleet's problems. Built from a `Tree` and the fleet's
    `FleetConfig` by the factory its `LayoutKind` names."""

    name: str  # its `LayoutKind.name`

    def roots(self) -> list[str]:
        """Root ids, sorted."""
        ...

    def releases(self, root: str) -> list[ReleaseInfo]: ...

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        """Merged values of one release (atlas) or of the root (dimensions)."""
        ...

    def render_files(self, root: str) -> dict[str, bytes]:
        """Every output file of the root, path relative to the root directory (plaintext)."""
        ...

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """(plaintext, redacted) output files of the root: secrets and what derives from
        them redacted by origin, `v1` `Secret` data hashed (docs/secrets.md)."""
        ...

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        """`values()` with every leaf that holds or derives from a secret redacted."""
        ...

    def secret_values(self) -> list[Any]:
        """Every decrypted SOPS tree read so far, to keep plaintext out of error messages."""
        ...

    def affected(self, changed: set[str]) -> set[str]:
        """Roots (of this tree) whose render may change when `changed` paths change."""
        ...

    def validate(self) -> list[Problem]:
        """Every problem, content and hygiene (`Problem.hygiene`)."""
        ...

    def unread_values(self, root: str | None) -> list[Problem]:
        """Values keys the fleet sets that no template reads, those reaching `root` (None:
        all): warnings, or content problems under rollwright.yaml `strict`."""
        ...

    def render_warnings(self, root: str) -> list[Problem]:
        """Warnings (hygiene problems) the last render of `root` found: a release that
        renders no object, which can be intended (a chart whose templates a value switches
        off) but is never silent; [] before `root` was rendered."""
        ...

    def refusals(self, root: str) -> list[Problem]:
        """The content problems that touch `root`: its render and values refuse with them
        rather than drop, ignore or change what the fleet asked for
        (docs/formats/problems.md)."""
        ...


@dataclass(frozen=True)
class Marker:
    """A path whose presence in a fleet repo tells its layout: a file, or a directory; `also`
    names other paths that tell it as well (a trailing `/` marks a directory)."""

    path: str
    directory: bool = False
    also: tuple[str, ...] = ()

    def found(self, tree: Tree) -> bool:
        if tree.is_dir(self.path) if self.directory else tree.is_file(self.path):
            return True
        return any(
            tree.is_dir(p.rstrip("/")) if p.endswith("/") else tree.is_file(p) for p in self.also
        )

    def describe(self) -> str:
        """The path as the "cannot tell the fleet layout" message names it."""
        first = f"{self.path}/ directory" if self.directory else self.path
        if not self.also:
            return first
        others = [f"{p} directory" if p.endswith("/") else p for p in self.also]
        return ", ".join([first, *others[:-1]]) + f" or {others[-1]}"


@dataclass(frozen=True)
class LayoutKind:
    """One fleet layout: its rollwright.yaml name, how it is detected, what builds it.

    `factory` is `module:Class`, a `Layout` built as `Class(tree, config)`. It is named by
    import path because every layout reads rollwright.yaml, whose model takes its `layout`
    names from this registry: importing the layouts here would close that loop.
    `shared.engine.fleet` imports the factory of the layout it opens."""

    name: str
    marker: Marker
    factory: str
    # False: chosen only by rollwright.yaml's `layout`, never detected by its marker.
    detected: bool = True


# Detection order: the first layout whose marker a repo has is its layout.
LAYOUTS: tuple[LayoutKind, ...] = (
    LayoutKind(
        "dimensions",
        Marker("config/config.yaml"),
        "shared.engine.dimensions.layout:DimensionsLayout",
    ),
    LayoutKind(
        "atlas",
        Marker("deployments", directory=True),
        "shared.engine.atlas.layout:AtlasLayout",
    ),
    # After atlas: an atlas repo may keep a helmfile.yaml at its root too.
    LayoutKind(
        "helmfile",
        Marker("helmfile.yaml", also=("helmfile.yaml.gotmpl", "helmfile.d/")),
        "shared.engine.helmfile.layout:HelmfileLayout",
    ),
    # A tenant repository has no file of its own to tell it: `layout: commodore` selects it.
    LayoutKind(
        "commodore",
        Marker("rollwright.yaml"),
        "shared.engine.commodore.layout:CommodoreLayout",
        detected=False,
    ),
)
LAYOUT_NAMES: tuple[str, ...] = tuple(sorted(kind.name for kind in LAYOUTS))

if TYPE_CHECKING:
    # mypy reads a literal type only when it is spelt out; at run time pydantic validates
    # (and the JSON Schema lists) the Literal the registry's names make.
    LayoutName = str
else:
    LayoutName = Literal[LAYOUT_NAMES]


def render_problems(layout: Layout, context: Callable[[str], str] | None = None) -> list[Problem]:
    """`validate` of a layout whose checks are its renders: the problem of listing its roots,
    else every root's (all of a FleetErrors; one FleetError within `context(root)`)."""
    try:
        roots = layout.roots()
    except FleetError as err:
        return [err.problem]
    problems: list[Problem] = []
    for root in roots:
        try:
            layout.render_files(root)
        except FleetErrors as err:
            problems += err.problems
        except FleetError as err:
            problems.append((err.within(context(root)) if context else err).problem)
    return problems

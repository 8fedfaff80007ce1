"""The fleet model: a repo at one revision, its layout, its roots and their renders.

    fleet = Fleet.open(WorkTree(Path("examples/atlas-fleet")))
    fleet.roots()                      # ['prod/eu-1', 'staging/cluster-a', 'standalone']
    fleet.render("staging/cluster-a")  # Render: files (redacted), digest, reveal()

Each layout (`shared.engine.atlas.layout`, `shared.engine.dimensions.layout`) implements `Layout`;
this module detects which one a fleet uses (`detect_layout`, by the registry of
`shared.engine.layout`), builds it and adds what is common: output files, digests, extra affected
inputs and validation runs.
"""

from __future__ import annotations

import fnmatch
import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from shared.engine import suggest
from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.layout import LAYOUTS, Layout, LayoutKind, ReleaseInfo
from shared.engine.secrets.redact import Redactor
from shared.engine.tree import Tree

if TYPE_CHECKING:
    from shared.engine.render import Render

T = TypeVar("T")
LayoutFactory = Callable[[Tree, FleetConfig], Layout]


def detect_layout(tree: Tree, config: FleetConfig) -> str:
    """The name of the fleet's layout: rollwright.yaml's `layout`, else the first registered
    layout whose marker the repo has."""
    if config.layout:
        return config.layout
    detected = [kind for kind in LAYOUTS if kind.detected]
    for kind in detected:
        if kind.marker.found(tree):
            return kind.name
    missing = [f"no {kind.marker.describe()} ({kind.name})" for kind in detected]
    listed = ", ".join(missing[:-1]) + " and " + missing[-1] if len(missing) > 1 else missing[0]
    raise FleetError(
        f"cannot tell the fleet layout: no rollwright.yaml 'layout', {listed}", path=CONFIG_FILE
    )


def open_layout(tree: Tree, config: FleetConfig) -> Layout:
    """The fleet's layout, built by the factory its registry entry names."""
    name = detect_layout(tree, config)
    kind = next(kind for kind in LAYOUTS if kind.name == name)
    return layout_factory(kind)(tree, config)


def layout_factory(kind: LayoutKind) -> LayoutFactory:
    """What builds a layout: the class its `factory` names (`module:Class`), imported now."""
    module, _, name = kind.factory.partition(":")
    factory: LayoutFactory = getattr(importlib.import_module(module), name)
    return factory


class Fleet:
    def __init__(self, tree: Tree, config: FleetConfig, layout: Layout) -> None:
        self.tree = tree
        self.config = config
        self.layout = layout
        # the roots `check_root` last saw and their set: a fleet render checks every root, and
        # a set built per check made that quadratic in the number of roots (comparing the
        # lists is cheap: the same strings)
        self._known: tuple[list[str], frozenset[str]] | None = None

    @classmethod
    def open(cls, tree: Tree) -> Fleet:
        config = FleetConfig.load(tree)
        return cls(tree, config, open_layout(tree, config))

    @property
    def layout_name(self) -> str:
        return self.layout.name

    def roots(self) -> list[str]:
        return self.layout.roots()

    def require_roots(self) -> list[str]:
        """The roots, or an error when the layout finds none: a fleet that renders nothing
        is a mistake (a wrong `layout`, a misplaced directory), never an empty success."""
        roots = self.roots()
        if not roots:
            raise FleetError(no_roots_message(self.layout_name), path=CONFIG_FILE)
        return roots

    def check_root(self, root: str) -> None:
        roots = self.roots()
        known = self._known
        if known is None or known[0] != roots:
            known = self._known = (roots, frozenset(roots))
        if root not in known[1]:
            hint = suggest.hint(root, roots)
            raise FleetError(f"unknown root {root!r}{hint}; `rollwright roots` lists them")

    def releases(self, root: str) -> list[ReleaseInfo]:
        self.check_root(root)
        return self._guarded(lambda: self.layout.releases(root))

    def values(
        self, root: str, release: str | None = None, *, reveal: bool = False
    ) -> dict[str, Any]:
        """Merged values of a release (atlas) or root (dimensions): redacted by origin,
        unless `reveal` asks for the plaintext."""
        self.check_root(root)

        def compute() -> dict[str, Any]:
            self._refuse(root)
            if reveal:
                return self.layout.values(root, release)
            return self.layout.redacted_values(root, release)

        return self._guarded(compute)

    def render(self, root: str) -> Render:
        """The root's render: `files` redacted, plaintext only through `reveal()`."""
        self.check_root(root)

        # The renderer (the Helm engine, chart fetching) loads with the first render, not for
        # what only reads the fleet (`roots --changed`, `values`): start-up time.
        from shared.engine.render import Render  # noqa: PLC0415

        def compute() -> Render:
            self._refuse(root)
            try:
                plain, redacted = self.layout.render_redacted(root)
            except FleetErrors:
                raise
            except FleetError as err:
                raise err.within(f'rendering root "{root}"') from None
            return Render.of(root, plain, redacted)

        return self._guarded(compute)

    def _refuse(self, root: str) -> None:
        """A render or the values of a root that would drop, ignore or change something the
        fleet asked for fail with the problems `validate` prints, never succeed partially."""
        problems = self.layout.refusals(root)
        if problems:
            raise FleetErrors(problems)

    def _guarded(self, compute: Callable[[], T]) -> T:
        """`compute()`, with every secret value (4+ characters) cut out of the messages of
        the fleet errors it raises: a Go template's `fail`, a JSON patch `test`, a YAML error
        can quote values. The new error does not chain the original (its traceback and
        message could hold plaintext)."""
        try:
            return compute()
        except FleetError as err:
            safe = self._redact_error(err)
            if safe is err:
                raise
        raise safe

    def _redact_error(self, err: FleetError) -> FleetError:
        secrets = self.layout.secret_values()
        if not secrets:
            return err
        redactor = Redactor(secrets)
        if isinstance(err, FleetErrors):
            problems = [p.with_message(redactor.redact_text(p.message)) for p in err.problems]
            return err if problems == err.problems else FleetErrors(problems)
        message = redactor.redact_text(err.problem.message)
        if message == err.problem.message:
            return err
        return FleetError(message, path=err.path, line=err.line)

    def render_all(self, roots: list[str] | None = None) -> Iterator[Render]:
        for root in roots if roots is not None else self.roots():
            yield self.render(root)

    def affected(self, changed: set[str]) -> set[str]:
        """Roots of this tree affected by `changed` paths (layout rules + extra inputs)."""
        out = self.layout.affected(changed)
        extra = self.config.affected.extra_inputs
        if extra:
            roots = self.roots()
            for rule in extra:
                if any(_glob(path, rule.path) for path in changed):
                    out |= {r for r in roots if any(fnmatch.fnmatchcase(r, g) for g in rule.roots)}
        if CONFIG_FILE in changed:
            out |= set(self.roots())
        return out

    def unread_values(self, root: str | None = None) -> list[Problem]:
        """Values keys the fleet sets that no template reads (reaching `root`; None: all)."""
        if root is not None:
            self.check_root(root)
        return self._guarded(lambda: self.layout.unread_values(root))

    def render_warnings(self, root: str) -> list[Problem]:
        """Warnings the last render of `root` found (a release that renders no object)."""
        return self._guarded(lambda: self.layout.render_warnings(root))

    def validate(self) -> list[Problem]:
        problems = self._guarded(self.layout.validate)
        secrets = self.layout.secret_values()
        if secrets:
            redactor = Redactor(secrets)
            problems = [p.with_message(redactor.redact_text(p.message)) for p in problems]
        return sorted(set(problems))


def no_roots_message(layout: str) -> str:
    kind = next((k for k in LAYOUTS if k.name == layout), None)
    where = f" (it looks for {kind.marker.describe()})" if kind is not None else ""
    return (
        f"the {layout} layout finds no root in this repository{where}: nothing would render; "
        "check rollwright.yaml's layout and where the fleet's files are"
    )


def _glob(path: str, pattern: str) -> bool:
    if "**" in pattern:
        prefix = pattern.split("**", 1)[0]
        return path.startswith(prefix) and fnmatch.fnmatchcase(path, pattern.replace("**", "*"))
    return fnmatch.fnmatchcase(path, pattern)

"""`rollwright validate`: every problem in a fleet repo, one `path:line: message` each.

Structural checks come from the layout (schemas, references, names, patches); then each root
is rendered so template and chart errors surface too, and so do renders holding secret values
that the publishing target would refuse (`publish.secrets: refuse` with git or S3). Problems
are collected, not raised, so one run shows everything that needs fixing. Content problems
are errors, hygiene problems warnings (`Problem.hygiene`; docs/formats/problems.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.engine.config.fleet import CONFIG_FILE
from shared.engine.errors import FleetError, FleetErrors, Problem, by_root
from shared.engine.fleet import Fleet, no_roots_message
from shared.engine.policies.sets import check_files
from shared.engine.publish_secrets import publish_refuses, secret_files, unpublishable_roots
from shared.engine.tree import Tree


@dataclass(frozen=True)
class Validation:
    """What `validate` found: the problems, sorted, and how many roots the fleet has (None
    when the fleet could not be opened at all)."""

    problems: list[Problem]
    roots: int | None


def validate_fleet(tree: Tree, *, render: bool = True) -> list[Problem]:
    return check_fleet(tree, render=render).problems


def check_fleet(tree: Tree, *, render: bool = True) -> Validation:
    try:
        fleet = Fleet.open(tree)
    except FleetErrors as err:
        return Validation(list(err.problems), None)
    except FleetError as err:
        return Validation([err.problem], None)
    problems = set(fleet.validate())
    # Policy files that do not compile fail every deployment of the roots their set checks.
    problems.update(err.problem for err in check_files(fleet.tree, fleet.config))
    try:
        roots: list[str] | None = fleet.roots()
    except FleetError:
        roots = None  # validate() reported why (duplicate cluster names, ...)
    if roots == [] and not problems:
        problems.add(Problem(CONFIG_FILE, None, no_roots_message(fleet.layout_name)))
    if render and roots is not None and not any(not p.hygiene for p in problems):
        # Rendering a fleet with content problems would repeat them once per root.
        failures: list[tuple[str, FleetError]] = []
        warnings: list[tuple[str, FleetError]] = []
        unpublishable: list[str] = []  # renders the publishing target would refuse
        for root in roots:
            try:
                rendered = fleet.render(root)
            except FleetError as err:
                failures.append((root, err))
                continue
            found = fleet.render_warnings(root)
            if found:
                warnings.append((root, FleetErrors(found)))
            if publish_refuses(fleet.config) and secret_files(rendered):
                unpublishable.append(root)
        # A shared file's mistake (or a template's empty release) once, with its roots.
        problems.update(by_root(failures) + by_root(warnings))
        refused = unpublishable_roots(fleet.tree, fleet.config, unpublishable)
        if refused is not None:
            problems.add(refused)
    ordered = sorted(problems, key=lambda p: (p.path, p.line or 0, p.message))
    return Validation(ordered, len(roots) if roots is not None else None)

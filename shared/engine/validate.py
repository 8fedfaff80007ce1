"""`rollwright validate`: every problem in a fleet repo, one `path:line: message` each.

Structural checks come from the layout (schemas, references, names, patches); then each root
is rendered so template and chart errors surface too. Problems are collected, not raised, so
one run shows everything that needs fixing. Content problems are errors, hygiene problems
warnings (`Problem.hygiene`; docs/formats/problems.md).
"""

from __future__ import annotations

from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.fleet import Fleet
from shared.engine.tree import Tree


def validate_fleet(tree: Tree, *, render: bool = True) -> list[Problem]:
    try:
        fleet = Fleet.open(tree)
    except FleetErrors as err:
        return list(err.problems)
    except FleetError as err:
        return [err.problem]
    problems = set(fleet.validate())
    if render and not any(not p.hygiene for p in problems):
        # Rendering a fleet with content problems would repeat them once per root.
        for root in fleet.roots():
            try:
                fleet.render(root)
            except FleetErrors as err:
                problems.update(err.problems)
            except FleetError as err:
                problems.add(err.problem)
    return sorted(problems, key=lambda p: (p.path, p.line or 0, p.message))

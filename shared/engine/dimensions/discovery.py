"""The components of a cluster type that lists none: its directories, found the generator's
way.

A cluster type of `config/config.yaml` without `applications:` and `applicationsets:` (the
generator's config.yaml lists none) takes each directory `config/<type>/<name>/` as a
component, and its base `values.yaml` says which kind: `applications: {<name>: ...}` makes it
an application, `applicationsets: {<name>: ...}` an ApplicationSet. A directory that says
neither (or both, or has no values.yaml) is a problem of the type's roots, not a directory
skipped: the generator skips one without values.yaml, which would drop what it holds without a
word.
"""

from __future__ import annotations

import re

from shared.engine.dimensions.files import FleetFiles
from shared.engine.dimensions.models import (
    CONFIG_FILE,
    NAME_PATTERN,
    VALUES_FILE,
    ClusterTypeSpec,
)
from shared.engine.errors import FleetError, FleetErrors, Problem
from shared.engine.tree import join

SECTIONS = ("applications", "applicationsets")


def discover(
    files: FleetFiles, spec: ClusterTypeSpec, index: int
) -> tuple[ClusterTypeSpec, list[Problem]]:
    """`spec` with its components filled in from its directories (sorted by name), and the
    problems of the directories that are no component; a type that lists its components is
    returned as it is."""
    if spec.lists:
        return spec, []
    found: dict[str, list[str]] = {section: [] for section in SECTIONS}
    problems: list[Problem] = []
    tdir = join("config", spec.name)
    why = (
        f"cluster type {spec.name!r} lists no applications ({CONFIG_FILE} "
        f"cluster_types[{index}]), so each of its directories is an application or an "
        "ApplicationSet"
    )
    for entry in files.tree.listdir(tdir):
        rel = join(tdir, entry)
        if not files.tree.is_dir(rel):
            continue
        values = join(rel, VALUES_FILE)
        if not re.match(NAME_PATTERN, entry):
            message = (
                f"directory {entry!r} is not a valid name ({why}, named by its directory: "
                "lowercase letters, digits, '-' and '.')"
            )
            problems.append(Problem(rel, None, message))
            continue
        if not files.tree.is_file(values):
            message = (
                f"directory {entry!r} has no {VALUES_FILE}: {why}, and its {VALUES_FILE} says "
                f"which (applications.{entry} or applicationsets.{entry})"
            )
            problems.append(Problem(rel, None, message))
            continue
        try:
            _, data = files.mapping(values)
        except FleetErrors as err:
            problems += err.problems
            continue
        except FleetError as err:
            problems.append(err.problem)
            continue
        sections = [section for section in SECTIONS if section in data]
        if len(sections) != 1:
            said = "both" if sections else "neither"
            message = (
                f"{VALUES_FILE} defines {said} applications: and applicationsets: ({why}: "
                f"one of applications.{entry} or applicationsets.{entry})"
            )
            problems.append(Problem(values, 1, message))
            continue
        found[sections[0]].append(entry)
    return spec.model_copy(update=found), problems

"""The output of a dimensions-layout root: a Helm chart of Argo CD Applications and
ApplicationSets.

    Chart.yaml                 apiVersion v2, name <type>-<n1>-…-<nk>, the design document's
                               description, type application, version, appVersion when set
    values.yaml                the root's merged values, raw (escaped templating as written)
    templates/<name>.yaml      one Application or ApplicationSet each, rendered with Helm's
                               engine from rollwright's built-in templates (templates/)

Every field from the fleet goes through `tpl (toYaml …) $`: one level of template escaping is
removed here, so escaped cluster templating survives for the Helm pass over the published
chart (docs/formats/dimensions.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from shared.engine import yamldoc
from shared.engine.dimensions.models import (
    VALUES_FILE,
    ClusterTypeSpec,
    Component,
    Section,
)
from shared.engine.dimensions.sequence import Place
from shared.engine.errors import FleetError
from shared.engine.helm.engine import render_template
from shared.engine.helm.errors import reword
from shared.engine.manifests import argocd
from shared.engine.tree import join

CHART_VERSION = "0.1.0"
TEMPLATES = {
    "applications": ("argocd-application.yaml", "application"),
    "applicationsets": ("argocd-applicationset.yaml", "applicationset"),
}


@cache
def template(name: str) -> str:
    return (resources.files("shared.engine.dimensions") / "templates" / name).read_text(
        encoding="utf-8"
    )


def chart_files(
    spec: ClusterTypeSpec,
    place: Place,
    values: dict[str, Any],
    defaults: Callable[[Section], str],
) -> dict[str, bytes]:
    """The chart of root `<spec.name>/<place>` from its merged `values`; `defaults` names the
    defaults file of a section (for messages)."""
    chart: dict[str, Any] = {
        "apiVersion": "v2",
        "name": "-".join((spec.name, *place)),
        "description": f"ArgoCD applications for {spec.name} in {'/'.join(place)}",
        "type": "application",
        "version": CHART_VERSION,
    }
    if spec.appVersion is not None:
        chart["appVersion"] = spec.appVersion
    files = {
        "Chart.yaml": yamldoc.dumps(chart).encode(),
        "values.yaml": yamldoc.dumps(values).encode(),
    }
    for comp in spec.components():
        fields = values[comp.section][comp.name]
        _check(comp, fields, defaults(comp.section))
        name, key = TEMPLATES[comp.section]
        try:
            text = render_template(
                template(name), {**values, "rollwright": {key: comp.name}}, source=comp.dir
            )
        except FleetError as err:
            raise FleetError(
                f"{comp.kind} {comp.name!r}: templating in its values failed: "
                + _template_reason(err.problem.message),
                path=comp.dir,
            ) from None
        _check_rendered(comp, text)
        files[f"templates/{comp.name}.yaml"] = (text.strip("\n") + "\n").encode()
    return files


def _check_rendered(comp: Component, text: str) -> None:
    """The rendered object against Argo CD's schema: the fields were checked where they are
    written (`argofields`), so this holds what only the merge and the templating make (a
    value templated into the wrong type); the render refuses rather than ship it."""
    problems = []
    for doc in yamldoc.loads_all(text, join(comp.dir, VALUES_FILE)):
        if argocd.is_argocd(doc):
            problems += [argocd.describe(m) for m in argocd.check_object(doc)]
    if problems:
        raise FleetError(
            f"{comp.kind} {comp.name!r} renders fields Argo CD does not accept: "
            + "; ".join(problems),
            path=comp.dir,
        )


def _check(comp: Component, fields: dict[str, Any], defaults: str) -> None:
    """The fields Argo CD needs, set somewhere in the merged values."""
    where = join(comp.dir, VALUES_FILE)
    if comp.section == "applications":
        if not isinstance(fields.get("destination"), dict):
            raise FleetError(
                f"application {comp.name!r} has no destination (set it in values.yaml or "
                f"{defaults})",
                path=where,
            )
        if not fields.get("source") and not fields.get("sources"):
            raise FleetError(f"application {comp.name!r} has no source or sources", path=where)
        return
    for key in ("generators", "template"):
        if not fields.get(key):
            raise FleetError(
                f"ApplicationSet {comp.name!r} has no {key} (set it in values.yaml or {defaults})",
                path=where,
            )


def _template_reason(message: str) -> str:
    """The useful tail of a `tpl` error: the failing expression, not the built-in template's
    internals, and not the whole value (which could be a secret)."""
    marker = "template: gotpl:"
    if marker in message:
        tail = message.split(marker, 1)[1]
        return reword(re.sub(r"^\d+(:\d+)?: ", "", tail.strip()))
    return message

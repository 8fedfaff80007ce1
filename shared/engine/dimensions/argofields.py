"""The fields of an application or ApplicationSet, checked against Argo CD's own schema.

The models (`models.py`) name the fields a values file, a defaults file or a patch may set and
check the ones rollwright reads itself; what lies below (`source`, `syncPolicy`, a generator,
the template's spec, ...) is Argo CD's, and is checked here against Argo CD's API
(`shared.engine.manifests.argocd`): `targetRevison` under `source` is an unknown key with its
line and the closest name, not a field Argo CD silently drops. `PLACES` says where each field
lands in the rendered object (the chart's templates/ write them there).
"""

from __future__ import annotations

from typing import Any

from shared.engine import yamldoc
from shared.engine.dimensions.models import Section
from shared.engine.errors import Problem
from shared.engine.manifests import argocd

_METADATA = {
    "namespace": ("metadata", "namespace"),
    "additionalAnnotations": ("metadata", "annotations"),
    "additionalLabels": ("metadata", "labels"),
    "finalizers": ("metadata", "finalizers"),
}
_APPLICATION_SPEC = (
    "project",
    "source",
    "sources",
    "destination",
    "syncPolicy",
    "ignoreDifferences",
    "revisionHistoryLimit",
    "info",
)
_APPLICATIONSET_SPEC = (
    "goTemplate",
    "goTemplateOptions",
    "generators",
    "strategy",
    "syncPolicy",
    "template",
    "templatePatch",
    "ignoreApplicationDifferences",
    "preservedFields",
    "applyNestedSelectors",
)
PLACES: dict[Section, dict[str, tuple[str, ...]]] = {
    "applications": {**_METADATA, **{f: ("spec", f) for f in _APPLICATION_SPEC}},
    "applicationsets": {**_METADATA, **{f: ("spec", f) for f in _APPLICATIONSET_SPEC}},
}
KIND: dict[Section, str] = {"applications": "Application", "applicationsets": "ApplicationSet"}


def problems(
    section: Section,
    fields: dict[str, Any],
    *,
    keys: tuple[str | int, ...],
    text: str,
    source: str,
) -> list[Problem]:
    """What Argo CD would not accept among `fields` (one component's, found at `keys` in the
    file `source` whose text is `text`), as `path:line` problems naming the keys."""
    obj: dict[str, Any] = {"metadata": {}, "spec": {}}
    back: dict[tuple[str, ...], str] = {}
    for name, value in fields.items():
        place = PLACES[section].get(name)
        if place is None or value is None:
            continue  # the model has reported a key it does not know
        obj[place[0]][place[1]] = value
        back[place] = name
    out: list[Problem] = []
    for found in argocd.check_object(
        {"apiVersion": argocd.API_VERSION, "kind": KIND[section], **obj}
    ):
        field = back.get(tuple(str(p) for p in found.path[:2]))
        if field is None:
            continue
        rest = found.path[2:]
        at = (*keys, field, *rest)
        message = argocd.describe(
            argocd.Mismatch(rest, found.message, found.unknown), (*keys, field)
        )
        out.append(Problem(source, yamldoc.key_line(text, at), message))
    return out

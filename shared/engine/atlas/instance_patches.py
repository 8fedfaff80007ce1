"""An atlas instance's own patches: `apps[].jsonPatches` / `strategicMergePatches` of
deployment.yaml, applied to the rendered objects of all the instance's releases at once."""

from __future__ import annotations

from shared.engine.atlas.plans import InstancePlan, ReleasePlan
from shared.engine.errors import FleetError
from shared.engine.manifests import patches
from shared.engine.manifests.documents import Resource


def apply_instance_patches(
    inst: InstancePlan, rendered: list[tuple[ReleasePlan, list[Resource]]]
) -> None:
    """`apps[].jsonPatches` / `strategicMergePatches`, after the template's own patches.

    They see the objects of all the instance's releases at once: a patch applies wherever
    it matches, and matching nothing in the whole instance is an error.
    """
    model = inst.instance
    if not model.jsonPatches and not model.strategicMergePatches:
        return
    objects = [res for _, resources in rendered for res in resources]
    for kind, entries in (
        ("jsonPatches", model.jsonPatches),
        ("strategicMergePatches", model.strategicMergePatches),
    ):
        strategic = kind == "strategicMergePatches"
        for j, entry in enumerate(entries):
            keys = ("apps", inst.index, kind, j)
            ops = entry.get("patch") if isinstance(entry, dict) else None
            place = patches.PatchOrigin(
                inst.deployment.path,
                inst.deployment.line(*keys),
                tuple(inst.deployment.line(*keys, "patch", k) for k in range(len(ops)))
                if isinstance(ops, list)
                else (),
            )
            try:
                patches.apply_release_patches(
                    objects,
                    [] if strategic else [entry],
                    [entry] if strategic else [],
                    origin=inst.deployment.path,
                    json_origins=[place],
                    strategic_origins=[place],
                )
            except FleetError as err:
                # "jsonPatches[0]: ..." from patching names the entry in a one-item list
                message = err.problem.message.split(": ", 1)[-1]
                raise FleetError(
                    f"{inst.where}.{kind}[{j}] (instance {model.instance_name!r}): {message}",
                    path=inst.deployment.path,
                    line=err.line or place.line,  # the failing operation's line, if known
                ) from None
    kept = {id(res) for res in objects}  # `$patch: delete` removes objects
    for _, resources in rendered:
        resources[:] = [res for res in resources if id(res) in kept]

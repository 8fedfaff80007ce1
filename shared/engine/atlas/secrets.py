"""Which values of an atlas release are secret, and the perturbed run that tells.

A release has secrets when one of its value layers was decrypted from a SOPS file (levels
4–9: template and instance `secrets:`, `*.values.sops.yaml` in the hierarchy). For such a
release the values are computed a second time with every decrypted leaf perturbed
(`shared.engine.secrets.origin.perturb`): every gotmpl is rendered again, and so is the template's
helmfile.yaml.gotmpl when the environment it sees holds secrets. The leaves that differ,
plus the leaves whose last layer is a secret, are the release's secret paths; the second
values also render the release a second time (in `AtlasLayout`) to find secret-derived
output. Releases without secret layers pay nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from shared.engine import render
from shared.engine.atlas.instance_patches import apply_instance_patches
from shared.engine.atlas.planner import Planner, helmfile_context
from shared.engine.atlas.plans import ReleasePlan
from shared.engine.atlas.values import Layer, default_decrypt, environment, with_atlas
from shared.engine.errors import FleetError
from shared.engine.helm import gotmpl
from shared.engine.manifests.documents import Resource
from shared.engine.release import ReleaseSpec
from shared.engine.secrets import origin
from shared.engine.secrets.redact import Path, Redactor, redact_tree
from shared.engine.tree import Tree
from shared.engine.yamldoc import walk_leaves

log = logging.getLogger(__name__)


def taint_decrypt(tree: Tree, rel: str) -> dict[str, Any]:
    """SOPS decryption with every leaf perturbed. One module-level function: the values file
    cache keys decrypted files by the decrypt function's identity."""
    data: dict[str, Any] = origin.perturb(default_decrypt(tree, rel))
    return data


@dataclass
class ReleaseSecrets:
    """The secret side of one release. `fake_plan` / `fake_values` (the perturbed run) are
    None when that run could not be made; redaction then goes by value."""

    paths: set[Path]  # every secret leaf: set by a secret layer, or derived from one
    origin: set[Path]  # leaves whose last layer is a secret one
    redactor: Redactor
    fake_plan: ReleasePlan | None
    fake_values: dict[str, Any] | None


def has_secrets(layers: list[Layer]) -> bool:
    return any(layer.secret for layer in layers)


def release_secrets(
    planner: Planner, plan: ReleasePlan, layers: list[Layer], values: dict[str, Any]
) -> ReleaseSecrets | None:
    """Secret paths, redactor and perturbed values of a release; None without secrets."""
    if not has_secrets(layers):
        return None
    # The `atlas` key is replaced wholesale at the end: never secret, whatever set it before.
    paths = {
        p
        for p in origin.origin_paths((layer.data, layer.secret) for layer in layers)
        if p[:1] != ("atlas",)
    }
    paths = origin.existing(values, paths)
    from_layers = set(paths)
    fake_plan: ReleasePlan | None = None
    fake_values: dict[str, Any] | None = None
    try:
        fake_plan = _taint_plan(planner, plan)
        fake_values = planner.resolve_values(fake_plan, taint_decrypt)[1]
    except (FleetError, origin.ShapeDiffers):
        # Never shown: the perturbed run's messages carry perturbed (reversible) secrets.
        log.debug("release %s: the perturbed values failed; redacting by value", plan.id)
        fake_plan = None
    if fake_values is not None:
        paths |= set(origin.changed_paths(values, fake_values))
    else:
        by_value = Redactor(origin.leaves_at(values, paths))
        paths |= {
            path
            for path, leaf in _string_leaves(values)
            if by_value.redact_text(leaf) != leaf and path[:1] != ("atlas",)
        }
    redactor = Redactor(origin.leaves_at(values, paths))
    return ReleaseSecrets(paths, from_layers, redactor, fake_plan, fake_values)


def redacted_values(found: ReleaseSecrets | None, values: dict[str, Any]) -> dict[str, Any]:
    """The release's values as shown (see `shared.engine.secrets.origin.redact_values`)."""
    if found is None:
        return values
    if found.fake_values is None:
        shown: dict[str, Any] = redact_tree(values, found.paths)
    else:
        shown = origin.redact_values(values, found.fake_values, found.origin, found.redactor)
    return shown


def _string_leaves(tree: Any) -> list[tuple[Path, str]]:
    return [(path, leaf) for path, leaf in walk_leaves(tree) if isinstance(leaf, str)]


def _taint_plan(planner: Planner, plan: ReleasePlan) -> ReleasePlan:
    """The plan as the perturbed environment makes it: the same plan unless the template's
    helmfile.yaml.gotmpl renders differently with perturbed secrets, in which case its
    values sources and patches come from that rendering. Raises `ShapeDiffers` when the
    release itself changes (another chart, name or namespace)."""
    inst = plan.instance
    hf = inst.helmfile
    if not hf.path.endswith(".gotmpl") or not has_secrets(inst.env_layers):
        return plan
    env, _ = environment(planner.files, inst.levels, inst.atlas, taint_decrypt)
    text = gotmpl.render(
        hf.source_text,
        with_atlas(helmfile_context(inst.instance, env), inst.atlas),
        source=hf.path,
        host=planner.files.host(taint_decrypt),
    )
    if text == hf.text:
        return plan
    fake_hf = planner.parse_helmfile(hf.template, hf.path, hf.source_text, text)
    if len(fake_hf.model.releases) != len(hf.model.releases):
        raise origin.ShapeDiffers
    release = fake_hf.model.releases[plan.index]
    parts = planner.release_parts(fake_hf, plan.index)
    if (
        parts.source != plan.source
        or release.name != plan.release.name
        or planner.namespace(inst, release) != plan.namespace
    ):
        raise origin.ShapeDiffers
    return dataclasses.replace(
        plan,
        release=release,
        instance=dataclasses.replace(inst, helmfile=fake_hf),
        template_values=parts.template_values,
        template_secrets=parts.template_secrets,
        json_patches=parts.json_patches,
        strategic_merge_patches=parts.strategic_merge_patches,
        json_patch_origins=parts.json_patch_origins,
        strategic_patch_origins=parts.strategic_patch_origins,
        overrides=parts.overrides,
    )


Rendered = tuple[ReleasePlan, list[Layer], dict[str, Any], list[Resource]]
Twin = tuple[ReleaseSecrets, dict[str, bytes] | None]


def taint_instance(planner: Planner, root: str, rendered: list[Rendered]) -> dict[str, Twin]:
    """The perturbed render of one instance's releases, before its instance patches run on
    the real objects: release id → (its secrets, its perturbed files or None).

    The instance's releases without secrets take part as copies (instance patches see all
    the instance's objects at once); only releases with secrets are rendered again.
    """
    secrets = {
        plan.id: release_secrets(planner, plan, layers, values)
        for plan, layers, values, _ in rendered
    }
    if not any(secrets.values()):
        return {}
    fake: list[tuple[ReleasePlan, list[Resource]]] = []
    specs: dict[str, ReleaseSpec] = {}
    files: dict[str, dict[str, bytes]] = {}
    failed = False
    try:
        for plan, _, _, resources in rendered:
            found = secrets[plan.id]
            if found is None:
                fake.append((plan, copy.deepcopy(resources)))
                continue
            if found.fake_plan is None or found.fake_values is None:
                raise origin.ShapeDiffers
            spec = planner.spec(root, found.fake_plan, found.fake_values)
            specs[plan.id] = spec
            fake.append(
                (
                    found.fake_plan,
                    render.render_release(spec, planner.tree, planner.config, planner.resolver),
                )
            )
        apply_instance_patches(rendered[0][0].instance, fake)
        for plan, resources in fake:
            if plan.id in specs:
                files[plan.id] = render.release_files(specs[plan.id], resources, planner.config)
    except (FleetError, origin.ShapeDiffers):
        log.debug("instance %s: the perturbed render failed", rendered[0][0].instance.where)
        failed = True
    return {
        pid: (found, None if failed else files.get(pid))
        for pid, found in secrets.items()
        if found is not None
    }


def redacted_files(out: dict[str, bytes], twin: Twin | None, label: str) -> dict[str, bytes]:
    """A release's files as shown: redacted by origin when it has secrets, else with only
    `v1` `Secret` data hashed."""
    if twin is None:
        # Only `kind: Secret` objects change then. `out` comes from yamldoc.dumps, which
        # writes that word as is: files without it need no second parse (a third of a
        # fleet render otherwise).
        if not any(b"Secret" in data for data in out.values()):
            return dict(out)
        return origin.hash_secret_objects(out)
    found, fake = twin
    return origin.redact_release_files(out, fake, found.redactor, label=label)

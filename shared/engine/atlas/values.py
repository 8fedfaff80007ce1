"""Atlas values: the precedence levels, three file kinds per level, and their layers.

Lowest precedence first:

     1 chart        chart defaults (values.yaml of the chart)
     2 template     the template release's `values:` list, in order
     3 instance     `apps[].values` of deployment.yaml
     4 template-secrets   the template release's `secrets:`
     5 instance-secrets   `apps[].secrets`
     6 global       deployments/global.values.*
     7 group        group.values.* of the parent directory (atlas.groupValues: all: of
                    every group directory above, outermost first)
     8 cluster      <cluster>/cluster.values.*
     9 deployment   values.* in the winning deployment directory
    10 set          the template release's `set:` / `setString:` (helm `--set`, over the files)
    11 atlas        the `atlas` metadata, set last; values may add keys under `atlas`, never
                    set the metadata ones

Per level `.sops.yaml` < `.yaml` < `.yaml.gotmpl`; maps deep-merge, lists are replaced.

Two passes, as ATLAS's values loader makes them: the *environment* (levels 6–9 alone) first,
then the *final* values in the order above. Go templates see, as `.Values.x` and `.x`, plus
`atlas` (with the users' keys under it):
- a level 6–9 gotmpl: the hierarchy before it (rendered once, in the environment pass);
- the template's helmfile.yaml.gotmpl: the environment < the instance's inline values < the
  environment again;
- a level 2 gotmpl: the environment < the template values before it (not the chart's
  defaults) < the instance's inline values < the environment again.

Every file read and every decrypted secret is kept as a `Layer`, so callers can tell which
leaves came from a secret (redaction by origin).
"""

from __future__ import annotations

import base64
import copy
import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.engine import yamldoc
from shared.engine.atlas.files import VALUE_SUFFIXES, join
from shared.engine.errors import FleetError
from shared.engine.helm import gotmpl
from shared.engine.secrets import sops
from shared.engine.tree import Tree
from shared.engine.values import deep_merge

LEVELS = (
    "chart",
    "template",
    "instance",
    "template-secrets",
    "instance-secrets",
    "global",
    "group",
    "cluster",
    "deployment",
    "set",
    "atlas",
)

Decrypt = Callable[[Tree, str], dict[str, Any]]


@dataclass(frozen=True)
class Layer:
    """One source of values of one release, in merge order. `data` is shared: read only."""

    source: str  # repo-relative file, or `file#key.path` for inline values, or "(atlas)"
    level: str  # one of LEVELS
    data: dict[str, Any]
    secret: bool = False


def default_decrypt(tree: Tree, rel: str) -> dict[str, Any]:
    """SOPS decryption through `shared.engine.secrets.sops`."""
    data: dict[str, Any] = sops.decrypt_values(tree, rel)
    return data


def is_secret_file(rel: str) -> bool:
    return rel.endswith(".sops.yaml")


def with_atlas(values: dict[str, Any], atlas: dict[str, Any]) -> dict[str, Any]:
    """A template context: `values` with the `atlas` metadata laid over whatever users put
    under `atlas` (ATLAS seeds its values with the atlas object and merges values over it;
    only the metadata keys are rollwright's, see `check_atlas_keys`)."""
    context = dict(values)
    context["atlas"] = atlas_values(values.get("atlas"), atlas)
    return context


def atlas_values(users: Any, atlas: dict[str, Any]) -> dict[str, Any]:
    """The `atlas` key: the users' keys (`repoURL`, ...) merged with the metadata."""
    merged: dict[str, Any] = clone(users) if isinstance(users, dict) else {}
    merge_into(merged, atlas)
    return merged


def metadata_paths(atlas: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Leaf paths of the atlas metadata (`("deployment", "cluster")`, ...)."""
    out: list[tuple[str, ...]] = []
    for key, value in atlas.items():
        if isinstance(value, dict):
            out.extend(metadata_paths(value, (*prefix, key)))
        else:
            out.append((*prefix, key))
    return out


def check_atlas_keys(layer: Layer, atlas: dict[str, Any]) -> None:
    """A values file may add keys under `atlas` but not set the metadata: rollwright derives
    it from the layout, and a silent override would render another cluster's names."""
    users = layer.data.get("atlas")
    if "atlas" in layer.data and not isinstance(users, dict):
        raise FleetError(
            f"`atlas` must be a mapping (found {yamldoc.type_name(users)}): rollwright sets "
            "its metadata keys and merges yours beside them",
            path=layer.source,
        )
    if not users:
        return
    for path in metadata_paths(atlas):
        node: Any = users
        for key in path:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
        else:
            raise FleetError(
                f"atlas.{'.'.join(path)} is set by rollwright from the fleet's layout (ATLAS "
                "metadata) and cannot be overridden; put your own keys beside it",
                path=layer.source,
            )


def merge_into(target: dict[str, Any], override: dict[str, Any]) -> None:
    """`shared.engine.values.deep_merge(target, override)` done in place on `target`, which the
    caller owns: merging a release's ten levels would otherwise copy the growing result once
    per layer. Values taken from `override` are copied, so `target` never shares them."""
    for key, value in override.items():
        current = target.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merge_into(current, value)
        elif isinstance(value, dict | list):
            target[key] = clone(value)
        else:
            target[key] = value


def clone(value: Any) -> Any:
    """A deep copy of values data (maps, lists, scalars) several times faster than
    `copy.deepcopy`, which it falls back to for anything else. Values trees share no
    containers (`jsonable` builds them afresh), so there is no sharing to preserve."""
    cls = type(value)
    if cls is dict:
        return {k: clone(v) for k, v in value.items()}
    if cls is list:
        return [clone(v) for v in value]
    if cls is str or cls is int or cls is float or cls is bool or value is None:
        return value
    return copy.deepcopy(value)


def jsonable(value: Any) -> Any:
    """YAML data as Helm sees it: timestamps become strings (Helm's YAML reader keeps them as
    text), `!!binary` becomes its base64 text and keys become strings, so values always
    survive the JSON hop into the Go engine."""
    if isinstance(value, dict):
        return {
            k if isinstance(k, str) else str(jsonable(k)): jsonable(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def check_mapping(data: Any, source: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FleetError(
            f"values file must be a mapping at the top level, found {yamldoc.type_name(data)}",
            path=source,
            line=1,
        )
    return data


class ValueFiles:
    """Reads the values files of one tree: listings, texts and parsed YAML cached, so a file
    shared by many releases (global, group) is read and parsed once."""

    def __init__(self, tree: Tree, env: Mapping[str, str] | None = None) -> None:
        self.tree = tree
        self.env = dict(env or {})  # what `env` / `requiredEnv` see (rollwright.yaml atlas.env)
        self._listing: dict[str, frozenset[str]] = {}
        self._exists: dict[str, bool] = {}
        self._levels: dict[tuple[str, str], tuple[str, ...]] = {}
        self._text: dict[str, str] = {}
        self._plain: dict[str, dict[str, Any]] = {}
        self._secret: dict[tuple[int, str], dict[str, Any]] = {}

    def listing(self, directory: str) -> frozenset[str]:
        names = self._listing.get(directory)
        if names is None:
            names = frozenset(self.tree.listdir(directory))
            self._listing[directory] = names
        return names

    def exists(self, rel: str) -> bool:
        found = self._exists.get(rel)
        if found is None:
            directory, _, name = rel.rpartition("/")
            found = self._exists[rel] = name in self.listing(directory) and self.tree.is_file(rel)
        return found

    def level_files(self, directory: str, stem: str) -> tuple[str, ...]:
        """Existing files of one level in `directory`, in merge order."""
        key = (directory, stem)
        found = self._levels.get(key)
        if found is None:
            names = self.listing(directory)
            found = tuple(
                join(directory, stem + suffix)
                for suffix in VALUE_SUFFIXES
                if stem + suffix in names and self.tree.is_file(join(directory, stem + suffix))
            )
            self._levels[key] = found
        return found

    def text(self, rel: str) -> str:
        text = self._text.get(rel)
        if text is None:
            try:
                text = self.tree.read_text(rel)
            except FileNotFoundError:
                raise FleetError("file not found", path=rel) from None
            except UnicodeDecodeError:
                raise FleetError("not valid UTF-8 text", path=rel) from None
            self._text[rel] = text
        return text

    def plain(self, rel: str) -> dict[str, Any]:
        data = self._plain.get(rel)
        if data is None:
            data = jsonable(check_mapping(yamldoc.loads(self.text(rel), rel), rel))
            self._plain[rel] = data
        return data

    def secret(self, rel: str, decrypt: Decrypt) -> dict[str, Any]:
        key = (id(decrypt), rel)
        data = self._secret.get(key)
        if data is None:
            data = jsonable(check_mapping(decrypt(self.tree, rel), rel))
            self._secret[key] = data
        return data

    def decrypted(self, decrypt: Decrypt) -> list[dict[str, Any]]:
        """Every SOPS file decrypted so far with `decrypt`."""
        return [data for (key, _), data in self._secret.items() if key == id(decrypt)]

    def host(self, decrypt: Decrypt) -> gotmpl.Host:
        """What Go templates of this tree may read: its files, the declared environment and,
        through `decrypt`, its SOPS files (`fetchSecretValue`)."""
        return gotmpl.Host(self.tree, self.env, decrypt)

    def rendered(
        self, rel: str, context: dict[str, Any], decrypt: Decrypt
    ) -> tuple[dict[str, Any], bool]:
        """A values template's data, and whether it read secrets (`fetchSecretValue`)."""
        host = self.host(decrypt)
        text = gotmpl.render(self.text(rel), context, source=rel, host=host)
        data: dict[str, Any] = jsonable(check_mapping(yamldoc.loads(text, rel), rel))
        return data, host.secret_reads > 0

    def load(
        self, rel: str, level: str, decrypt: Decrypt, base: dict[str, Any], atlas: dict[str, Any]
    ) -> Layer:
        """One values file as a layer; a Go template sees `base` plus `atlas`."""
        if rel.endswith(".gotmpl"):
            # A template that fetched secrets is secret as a whole: what it derived from them
            # cannot be told apart from the rest (redaction over-covers, never leaks).
            data, secret = self.rendered(rel, with_atlas(base, atlas), decrypt)
            layer = Layer(rel, level, data, secret=secret)
        elif is_secret_file(rel):
            layer = Layer(rel, level, self.secret(rel, decrypt), secret=True)
        else:
            layer = Layer(rel, level, self.plain(rel))
        check_atlas_keys(layer, atlas)
        return layer


@dataclass(frozen=True)
class LevelSource:
    """One of levels 6–9 for one release: the level name and its files in merge order."""

    level: str
    files: tuple[str, ...]


def environment(
    files: ValueFiles, levels: list[LevelSource], atlas: dict[str, Any], decrypt: Decrypt
) -> tuple[dict[str, Any], list[Layer]]:
    """Pass (a): levels 6–9 alone; each gotmpl sees the environment so far plus `atlas`."""
    env: dict[str, Any] = {}
    layers: list[Layer] = []
    for source in levels:
        for rel in source.files:
            layer = files.load(rel, source.level, decrypt, env, atlas)
            merge_into(env, layer.data)
            layers.append(layer)
    return env, layers


@dataclass(frozen=True)
class TemplateValue:
    """An entry of a template release's `values:` list: a file, or an inline mapping."""

    source: str  # the file, or `helmfile#releases[i].values[j]` for inline mappings
    data: dict[str, Any] | None = None  # inline mappings only


def final_layers(
    files: ValueFiles,
    *,
    chart: dict[str, Any] | None,
    chart_source: str,
    template_values: list[TemplateValue],
    instance_values: list[tuple[str, dict[str, Any]]],
    template_secrets: list[str],
    instance_secrets: list[str],
    env: dict[str, Any],
    env_layers: list[Layer],
    overrides: list[Layer],
    atlas: dict[str, Any],
    decrypt: Decrypt,
) -> tuple[list[Layer], dict[str, Any]]:
    """Pass (b): every layer of one release, lowest precedence first, `atlas` last, and the
    merged result."""
    layers: list[Layer] = []
    merged: dict[str, Any] = {}

    def add(layer: Layer) -> None:
        if layer.level != "chart":
            check_atlas_keys(layer, atlas)
        layers.append(layer)
        merge_into(merged, layer.data)

    if chart:
        add(Layer(chart_source, "chart", chart))
    # What a template values file sees, as ATLAS's loader builds it: the hierarchy, the
    # template values so far (not the chart's defaults: Helm adds those later), the
    # instance's inline values, and the hierarchy again, which wins.
    so_far: dict[str, Any] = {}
    inline: dict[str, Any] = {}
    for _, data in instance_values:
        merge_into(inline, data)
    for entry in template_values:
        if entry.data is not None:
            layer = Layer(entry.source, "template", entry.data)
        else:
            base = so_far
            if entry.source.endswith(".gotmpl"):
                base = deep_merge(deep_merge(deep_merge(env, so_far), inline), env)
            layer = files.load(entry.source, "template", decrypt, base, atlas)
        add(layer)
        merge_into(so_far, layer.data)
    for source, data in instance_values:
        add(Layer(source, "instance", data))
    for rel in template_secrets:
        add(Layer(rel, "template-secrets", files.secret(rel, decrypt), secret=True))
    for rel in instance_secrets:
        add(Layer(rel, "instance-secrets", files.secret(rel, decrypt), secret=True))
    for layer in env_layers:
        # As in ATLAS, a hierarchy file sees the hierarchy before it (and `atlas`) only: the
        # environment pass already rendered it.
        add(layer)
    for layer in overrides:
        add(layer)
    layers.append(Layer("(atlas)", "atlas", {"atlas": atlas}))
    merged["atlas"] = atlas_values(merged.get("atlas"), atlas)
    return layers, merged


def merge_layers(layers: list[Layer]) -> dict[str, Any]:
    """The final values: layers deep-merged in order, the `atlas` metadata last (users' keys
    under `atlas` stay beside it)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer.level == "atlas":
            merged["atlas"] = atlas_values(merged.get("atlas"), layer.data["atlas"])
        else:
            merge_into(merged, layer.data)
    return merged

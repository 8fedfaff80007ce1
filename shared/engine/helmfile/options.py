"""kube-renderer's options: the `.kube-renderer` key of helmfile values (kube-renderer v0.1.20).

A release's options are its state's environment values deep-merged with its own values
(release wins, lists replaced), then their `.kube-renderer` map. `helmfile_dir` is read from
the state's environment values alone and `bootstrap_template` from the top-level state's.
kube-renderer ignores what it does not know and treats any flag value but `true` as false;
here an unknown option, an unknown generator or post-renderer and a flag that is not a
boolean are refused, so that a misspelling never changes a render silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shared.engine import suggest

KEY = ".kube-renderer"
GENERATORS = ("helm", "kustomize", "yq", "comment")
KNOWN = frozenset(
    {
        "render_filename_generator",
        "render_filename_pattern",
        "target_dir",
        "target_release",
        "helmfile_dir",
        "flags",
        "remove_labels",
        "helm_postrenderer",
        "bootstrap_template",
    }
)
FLAGS = ("crds", "hooks", "tests")
HELM_PLACEHOLDER = "<HELM>"
_LABEL = re.compile(r"^[^\s*?\[\]]+$")


class OptionError(Exception):
    """An option kube-renderer would misread or ignore; the message names the option."""


@dataclass(frozen=True)
class Options:
    generator: str = ""  # "" (one file per release), or one of GENERATORS
    pattern: str = ""  # render_filename_pattern ("": the generator's built-in one)
    target_dir: str = ""
    target_release: str = ""
    crds: bool = True
    hooks: bool = False
    tests: bool = False
    remove_labels: tuple[str, ...] = ()
    postrender: str | None = None  # a Kustomization text with `<HELM>` in its resources


def section(values: dict[str, Any]) -> dict[str, Any]:
    found = values.get(KEY)
    if found is None:
        return {}
    if not isinstance(found, dict):
        raise OptionError(f"{KEY} must be a map of kube-renderer options")
    return found


def parse(opts: dict[str, Any]) -> Options:
    unknown = sorted(set(opts) - KNOWN)
    if unknown:
        hint = suggest.hint(unknown[0], sorted(KNOWN))
        raise OptionError(f"unknown kube-renderer option {KEY}.{unknown[0]}{hint}")
    generator = _text(opts, "render_filename_generator")
    if generator and generator not in GENERATORS:
        raise OptionError(
            f"{KEY}.render_filename_generator {generator!r} is none of {', '.join(GENERATORS)} "
            "(kube-renderer would write an empty directory)"
        )
    return Options(
        generator=generator,
        pattern=_text(opts, "render_filename_pattern"),
        target_dir=_text(opts, "target_dir"),
        target_release=_text(opts, "target_release"),
        remove_labels=_labels(opts.get("remove_labels")),
        postrender=_postrender(opts.get("helm_postrenderer")),
        **_flags(opts.get("flags")),
    )


def _text(opts: dict[str, Any], key: str) -> str:
    value = opts.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OptionError(f"{KEY}.{key} must be text")
    return value


def _flags(flags: Any) -> dict[str, bool]:
    if flags is None:
        return {}
    if not isinstance(flags, dict):
        raise OptionError(f"{KEY}.flags must be a map (crds, hooks, tests)")
    unknown = sorted(set(flags) - set(FLAGS))
    if unknown:
        hint = suggest.hint(unknown[0], list(FLAGS))
        raise OptionError(f"unknown flag {KEY}.flags.{unknown[0]}{hint}")
    out: dict[str, bool] = {}
    for name in FLAGS:
        value = flags.get(name)
        if value is None:
            continue
        if value in ("true", "false"):
            value = value == "true"  # kube-renderer compares yq's printed text
        if not isinstance(value, bool):
            raise OptionError(f"{KEY}.flags.{name} must be true or false, not {value!r}")
        out[name] = value
    return out


def _labels(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise OptionError(f"{KEY}.remove_labels must be a list of label keys")
    for label in value:
        if not _LABEL.match(label):
            raise OptionError(
                f"{KEY}.remove_labels {label!r}: kube-renderer splits it at spaces and yq "
                "reads * ? [ ] as patterns; not a single label key"
            )
    return tuple(value)


def _postrender(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") != "kustomize":
        raise OptionError(
            f"{KEY}.helm_postrenderer must be {{type: kustomize, data: <kustomization>}} "
            "(kube-renderer ignores any other type)"
        )
    data = value.get("data")
    if not isinstance(data, str) or HELM_PLACEHOLDER not in data:
        raise OptionError(
            f"{KEY}.helm_postrenderer.data must be a Kustomization whose resources list "
            f"{HELM_PLACEHOLDER} (the release's objects)"
        )
    return data

"""rollwright.yaml `helmfile`: how the helmfile layout reads a kube-renderer repository."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from shared.engine.config.parsing import StrictModel

# kube-renderer's helmfile-based releases: 0.1.0 and 0.1.1 predate every behaviour the
# setting chooses between, 0.1.20 is the latest.
FIRST, LAST = 2, 20
_VERSION = re.compile(r"v?0\.1\.(\d+)")


class HelmfileSettings(StrictModel):
    """How the helmfile layout reads a kube-renderer repository (docs/formats/helmfile.md)."""

    kube_renderer: str | None = Field(
        default=None,
        alias="kubeRenderer",
        description="The kube-renderer version whose reading of the repository rollwright "
        f"reproduces (`0.1.{FIRST}` to `0.1.{LAST}`): before 0.1.17 a root `values.yaml` is "
        "the state values and the gomplate pre-render runs (`*.gotmpl` files up to 0.1.10, "
        "`*.tmpl` from 0.1.11). Detected from the repository when absent; needed only when "
        "the repository reads differently in those versions.",
    )

    @field_validator("kube_renderer", mode="before")
    @classmethod
    def _version(cls, value: Any) -> Any:
        if value is None:
            return None
        found = _VERSION.fullmatch(str(value))
        if not isinstance(value, str) or found is None or not FIRST <= int(found[1]) <= LAST:
            raise ValueError(
                f"a kube-renderer version from 0.1.{FIRST} to 0.1.{LAST}, such as 0.1.16"
            )
        return value.lstrip("v")

    def minor(self) -> int | None:
        """The patch number of the pinned 0.1.x version, or None."""
        return None if self.kube_renderer is None else int(self.kube_renderer.rsplit(".", 1)[1])

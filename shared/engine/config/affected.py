"""rollwright.yaml `affected`: files outside the fleet inputs whose change re-renders roots."""

from __future__ import annotations

from pydantic import Field

from shared.engine.config.parsing import StrictModel


class ExtraInput(StrictModel):
    path: str = Field(description="Glob of repo paths (fnmatch, `**` allowed).")
    roots: list[str] = Field(
        default_factory=lambda: ["*"], description="Globs of root ids affected by those paths."
    )


class AffectedSettings(StrictModel):
    extra_inputs: list[ExtraInput] = Field(
        default_factory=list,
        alias="extraInputs",
        description="Files outside the fleet inputs whose change should re-render roots.",
    )

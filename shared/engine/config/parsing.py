"""Strict pydantic models for YAML files, and their validation errors as `path:line: message`
problems: the base of every rollwright.yaml section, and of the layouts' own file models."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from shared.engine import suggest, yamldoc
from shared.engine.errors import FleetErrors, Problem

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Unknown keys are errors (typos do not pass silently); models are frozen."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def parse_model(model: type[M], data: Any, *, text: str, source: str) -> M:
    """Validate `data` with a pydantic model; errors become `path:line: message` problems."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise FleetErrors(validation_problems(err, text=text, source=source, model=model)) from None


def validation_problems(
    err: ValidationError, *, text: str, source: str, model: type[BaseModel] | None = None
) -> list[Problem]:
    problems = []
    for item in err.errors():
        loc = tuple(p for p in item["loc"] if isinstance(p, str | int))
        # pydantic adds the union member / validator name to loc; keep real keys only
        line = yamldoc.key_line(text, loc)
        where = "/".join(str(p) for p in loc) or "(top level)"
        kind = item["type"]
        if kind == "extra_forbidden":
            known = known_keys(model, loc[:-1]) if model is not None and loc else []
            message = f"unknown key {where!r}{suggest.hint(str(loc[-1]), known) if loc else ''}"
        elif kind == "missing":
            message = f"missing required key {where!r}"
        else:
            message = f"{where}: {item['msg']}"
        problems.append(Problem(source, line, message))
    return problems


def known_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The keys a model accepts at `loc` (its JSON Schema's properties there, aliases
    included): what "did you mean" picks from. Best effort: [] where the schema is unclear."""
    try:
        schema = model.model_json_schema(by_alias=True)
    except Exception:  # a schema pydantic cannot express: no suggestion, not an error
        return []
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> list[dict[str, Any]]:
        """The object schemas `node` may be (through $ref, anyOf / oneOf / allOf)."""
        if not isinstance(node, dict):
            return []
        if "$ref" in node:
            return resolve(defs.get(str(node["$ref"]).rsplit("/", 1)[-1]))
        for key in ("anyOf", "oneOf", "allOf"):
            if key in node:
                return [s for option in node[key] for s in resolve(option)]
        return [node]

    nodes = resolve(schema)
    for part in loc:
        step: list[dict[str, Any]] = []
        for node in nodes:
            if isinstance(part, int):
                step += resolve(node.get("items"))
            else:
                step += resolve((node.get("properties") or {}).get(part))
                extra = node.get("additionalProperties")
                if isinstance(extra, dict):
                    step += resolve(extra)
        nodes = step
    return sorted({str(k) for node in nodes for k in (node.get("properties") or {})})
